"""A host link's data in 10 ms bins from T0 to T1 (s after the first packet): out and in kB by peer."""
import sys
from collections import defaultdict
from scapy.all import PcapReader, IP, TCP
path, host, t_from, t_to = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
BIN = 0.01
bins = defaultdict(lambda: defaultdict(int))
t0 = None
for p in PcapReader(path):
    if IP not in p or TCP not in p:
        continue
    t0 = t0 if t0 is not None else float(p.time)
    t = float(p.time) - t0
    if not t_from <= t < t_to:
        continue
    ip, tcp = p[IP], p[TCP]
    n = ip.len - ip.ihl * 4 - tcp.dataofs * 4
    if n <= 0:
        continue
    key = ("out " + ip.dst.split(".")[-1]) if ip.src == host else ("in " + ip.src.split(".")[-1])
    bins[int((t - t_from) / BIN)][key] += n
for b in range(int((t_to - t_from) / BIN)):
    row = bins.get(b, {})
    out = " ".join(f"{k[4:]}:{v / 1e3:4.0f}" for k, v in sorted(row.items()) if k.startswith("out"))
    inn = " ".join(f"{k[3:]}:{v / 1e3:4.0f}" for k, v in sorted(row.items()) if k.startswith("in"))
    print(f"{t_from + b * BIN:7.2f}  out {out:24} | in {inn}")
