"""Per kind (agent, mpich rank, ovs): each process's CPU and run-queue wait over the time it was seen, summed
over the kind's processes, and the span of time its processes were seen.

    .venv/bin/python schedsum.py SCHED.csv[.gz]
"""
import collections
import csv
import gzip
import sys

first, last, kinds = {}, {}, {}
for r in csv.DictReader((gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt")):
    pid = r["pid"]
    vals = (float(r["t"]), float(r["cpu_s"]), float(r["wait_s"]), int(r["slices"]))
    first.setdefault(pid, vals)
    last[pid], kinds[pid] = vals, r["kind"]
span = collections.defaultdict(lambda: [1e18, 0.0])
tot = collections.defaultdict(lambda: [0.0, 0.0, 0, 0])
for pid, kind in kinds.items():
    a, b = first[pid], last[pid]
    span[kind][0], span[kind][1] = min(span[kind][0], a[0]), max(span[kind][1], b[0])
    t = tot[kind]
    t[0] += b[1] - a[1]
    t[1] += b[2] - a[2]
    t[2] += b[3] - a[3]
    t[3] += 1
for kind in sorted(tot):
    cpu, wait, slices, n = tot[kind]
    s = span[kind][1] - span[kind][0]
    print(f"{kind:6} {n:2} processes over {s:6.1f} s: CPU {cpu:6.2f} s ({cpu / s:.2f} of a core), "
          f"waiting runnable {wait:6.2f} s ({wait / s:.2f} processes on average), {slices} slices, "
          f"{1e3 * wait / max(slices, 1):.2f} ms a slice")

# Open vSwitch's share in each other kind's span: does it wait more beside one kind than beside another?
series = collections.defaultdict(list)
for r in csv.DictReader((gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt")):
    if r["kind"] == "ovs":
        series[r["pid"]].append((float(r["t"]), float(r["cpu_s"]), float(r["wait_s"])))


def at(rows, t):
    return min(rows, key=lambda x: abs(x[0] - t))


for kind in sorted(k for k in span if k != "ovs"):
    a, b = span[kind]
    cpu = sum(at(s, b)[1] - at(s, a)[1] for s in series.values())
    wait = sum(at(s, b)[2] - at(s, a)[2] for s in series.values())
    print(f"ovs beside {kind}: {cpu / (b - a):.2f} of a core, waiting runnable {wait / (b - a):.2f} on average")
