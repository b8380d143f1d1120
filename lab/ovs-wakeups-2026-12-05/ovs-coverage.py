"""While a command runs, snapshot Open vSwitch's coverage counters every 5 s; print, for
the 15 s with the most packets received, each event's count per second and per packet."""
import re
import subprocess
import sys
import time


def snap():
    out = subprocess.run(["ovs-appctl", "coverage/show"], capture_output=True, text=True).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+.*total: (\d+)", out, re.M)}
proc = subprocess.Popen(sys.argv[1:])
snaps = []
while proc.poll() is None:
    snaps.append((time.monotonic(), snap()))
    time.sleep(5)
key = "netdev_received"
best = max(range(len(snaps) - 3), key=lambda i: snaps[i + 3][1].get(key, 0) - snaps[i][1].get(key, 0))
(t0, a), (t1, b) = snaps[best], snaps[best + 3]
dt, pk = t1 - t0, max(1, b.get(key, 0) - a.get(key, 0))
print(f"window {dt:.1f} s from snapshot {best}, {pk / dt:.0f} {key}/s")
for ev in sorted(b, key=lambda e: -(b[e] - a.get(e, 0))):
    d = b[ev] - a.get(ev, 0)
    if d > 0:
        print(f"{ev:32} {d / dt:12.0f}/s {d / pk:10.3f}/packet")
sys.exit(proc.returncode)
