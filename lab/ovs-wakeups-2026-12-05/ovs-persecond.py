"""While a command runs, every second: Open vSwitch's CPU time (all threads, /proc) and its
coverage totals for poll_create_node (one per port per main-loop wake-up) and
netdev_received (packets). Prints one line a second: t, cpu, poll nodes, packets."""
import os
import re
import subprocess
import sys
import time

pid = open("/var/run/openvswitch/ovs-vswitchd.pid").read().strip()
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    f = open(f"/proc/{pid}/stat").read()
    rest = f[f.rindex(")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / tick
def cov():
    out = subprocess.run(["ovs-appctl", "coverage/show"], capture_output=True, text=True).stdout
    got = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+.*total: (\d+)", out, re.M)}
    return got.get("poll_create_node", 0), got.get("netdev_received", 0)
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
prev = (time.monotonic(), cpu(), *cov())
t0 = prev[0]
while proc.poll() is None:
    time.sleep(1)
    now = (time.monotonic(), cpu(), *cov())
    dt = now[0] - prev[0]
    print(f"{now[0] - t0:.1f} {(now[1] - prev[1]) / dt:.3f} {(now[2] - prev[2]) / dt:.0f} {(now[3] - prev[3]) / dt:.0f}", flush=True)
    prev = now
sys.exit(proc.returncode)
