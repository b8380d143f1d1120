"""What each captured host sent, as runs to one peer (data packets, merged while the peer stays and gaps stay
under GAP ms), per host: each run's start, length, kB, rate, and the idle time before it; then per host the
share of the time from its first to its last data packet during which it sent.

    .venv/bin/python runs.py FOLDER [GAP_MS]   # FOLDER of a run with --capture bghN,...
"""
import glob
import os
import re
import sys

from scapy.all import IP, TCP, PcapReader

GAP = float(sys.argv[2]) / 1e3 if len(sys.argv) > 2 else 0.05


def runs_of(path: str, ip: str) -> list[list]:
    runs = []
    for p in PcapReader(path):
        if IP not in p or TCP not in p:
            continue
        i, t = p[IP], p[TCP]
        size = i.len - i.ihl * 4 - t.dataofs * 4
        if size <= 0 or i.src != ip:
            continue
        when, peer = float(p.time), i.dst.split(".")[-1]
        if runs and runs[-1][0] == peer and when - runs[-1][2] < GAP:
            runs[-1][2] = when
            runs[-1][3] += size
            runs[-1][4] += 1
        else:
            runs.append([peer, when, when, size, 1])
    return runs


t0 = None
for path in sorted(glob.glob(os.path.join(sys.argv[1], "captures", "*-bgh*.pcap"))):
    n = int(re.search(r"bgh(\d+)", path).group(1))
    runs = [r for r in runs_of(path, f"198.18.0.{n + 1}") if r[3] >= 4096]   # data, not a control message
    t0 = t0 if t0 is not None else runs[0][1]
    print(f"# bgh{n} (198.18.0.{n + 1}): {len(runs)} runs of at least 4 KiB")
    prev, busy = None, 0.0
    for peer, a, b, size, pkts in runs:
        idle = a - prev if prev is not None else 0.0
        rate = size * 8 / (b - a) / 1e6 if b > a else float("nan")
        busy += b - a
        print(f"  {a - t0:8.3f} s  to .{peer:3}  {1e3 * (b - a):7.1f} ms  {size / 1e3:7.1f} kB  {pkts:4} packets"
              f"  {rate:5.2f} Mbit/s  idle before {1e3 * idle:6.1f} ms")
        prev = b
    span = runs[-1][2] - runs[0][1]
    print(f"  sent during {busy:.2f} of {span:.2f} s ({busy / span:.0%})")
