"""Samples, every 0.1 s, each agent's and MPICH rank's CPU time and its wait on a run queue
(/proc/PID/schedstat: ns on a CPU, ns runnable but waiting, time slices) until SIGINT/SIGTERM, and writes
them as CSV (t, pid, kind, cpu_s, wait_s, slices). Processes are found by their command line once a second.

    .venv/bin/python schedwait.py OUT.csv &   # then the run; then kill -INT that pid
"""
import csv
import os
import signal
import sys
import time

KINDS = {b"emulator.net.agent": "agent", b"mpi_allreduce.py": "mpich", b"ovs-vswitchd": "ovs"}
stop = []
signal.signal(signal.SIGINT, lambda *_: stop.append(1))
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))


def find() -> dict[int, str]:
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        for key, kind in KINDS.items():
            if key in cmd and (kind == "ovs" or b"python" in cmd.split(b"\0")[0]):   # not mpiexec
                found[int(pid)] = kind
    return found


rows, pids, last_scan, t0 = [], {}, 0.0, time.monotonic()
while not stop:
    now = time.monotonic()
    if now - last_scan >= 1.0:
        pids, last_scan = find(), now
    for pid, kind in pids.items():
        try:
            with open(f"/proc/{pid}/schedstat") as f:
                cpu, wait, slices = f.read().split()
        except OSError:
            continue
        rows.append((round(now - t0, 3), pid, kind, int(cpu) / 1e9, int(wait) / 1e9, int(slices)))
    time.sleep(0.1)
with open(sys.argv[1], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(("t", "pid", "kind", "cpu_s", "wait_s", "slices"))
    w.writerows(rows)
usage = os.times()
print(f"# schedwait: {len(rows)} samples, its own CPU {usage.user + usage.system:.2f} s", file=sys.stderr)
