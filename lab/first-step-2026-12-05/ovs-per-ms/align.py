"""OVS main thread's busy share per 2 ms beside the flows' kB per 2 ms on a capture, from the call's first packet."""
import bisect
import gzip
import os

import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # series.py
from series import data_packets

ovs_file, pcaps = sys.argv[1], sys.argv[2:]
opener = gzip.open if ovs_file.endswith(".gz") else open
ts, ns = zip(*((float(a), int(b)) for a, b in (line.split() for line in opener(ovs_file, "rt"))))
BIN, N = 0.002, 18


def busy(t0, i):
    a, b = t0 + i * BIN, t0 + (i + 1) * BIN
    ia, ib = bisect.bisect_left(ts, a), bisect.bisect_left(ts, b)
    if ib >= len(ts) or ia == 0:
        return float("nan")
    return (ns[ib] - ns[ia - 1]) / 1e9 / (ts[ib] - ts[ia - 1])


for pcap in pcaps:
    pk = data_packets(pcap)
    t0 = min(t for t, _, _ in pk)
    print("==", pcap.split("/")[-1])
    print("  ovs   " + "".join(f"{busy(t0, i):5.2f}" for i in range(N)))
    for flow in sorted({f for _, f, _ in pk}):
        bins = [0] * N
        for t, f, n in pk:
            if f == flow and int((t - t0) / BIN) < N:
                bins[int((t - t0) / BIN)] += n
        print(f"  {flow:5} " + "".join(f"{b // 1000:5d}" for b in bins))
