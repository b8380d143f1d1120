"""Sample each ovs-vswitchd thread's CPU time every second while a command runs;
print each thread's share of a core over the run's busiest window."""
import collections
import os
import subprocess
import sys
import time

pid = open("/var/run/openvswitch/ovs-vswitchd.pid").read().strip()
tick = os.sysconf("SC_CLK_TCK")
def sample():
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            f = open(f"/proc/{pid}/task/{tid}/stat").read()
        except OSError:
            continue
        comm = f[f.index("(") + 1:f.rindex(")")]
        rest = f[f.rindex(")") + 2:].split()
        out[(tid, comm)] = (int(rest[11]) + int(rest[12])) / tick
    return out
proc = subprocess.Popen(sys.argv[1:])
rows = []
while proc.poll() is None:
    rows.append((time.monotonic(), sample()))
    time.sleep(1)
by = collections.defaultdict(list)
for (_t0, a), (t1, b) in zip(rows, rows[1:]):
    for k in b:
        by[k[1]].append((t1, b[k] - a.get(k, b[k])))
# per second, per thread name (summed over threads of a name)
secs = collections.defaultdict(lambda: collections.defaultdict(float))
for name, vals in by.items():
    for t, v in vals:
        secs[round(t)][name] += v
names = sorted(by)
print("t_s " + " ".join(names))
t_first = min(secs) if secs else 0
for t in sorted(secs):
    print(f"{t - t_first:4d} " + " ".join(f"{secs[t][n]:.2f}" for n in names))
sys.exit(proc.returncode)
