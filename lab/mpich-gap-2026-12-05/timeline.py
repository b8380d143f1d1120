"""One host's link from T0 to T1 (s after its first data packet): data runs out and in (by peer, merged while
gaps stay under 50 ms) and every message of less than 100 bytes, in time order.

    .venv/bin/python timeline.py PCAP HOST_IP T0 T1
"""
import sys

from scapy.all import IP, TCP, PcapReader

path, ip, t_from, t_to = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
events, runs, t0 = [], {}, None
for p in PcapReader(path):
    if IP not in p or TCP not in p:
        continue
    i, t = p[IP], p[TCP]
    size = i.len - i.ihl * 4 - t.dataofs * 4
    if size <= 0:
        continue
    t0 = t0 if t0 is not None else float(p.time)
    when = float(p.time) - t0
    way = "out" if i.src == ip else "in "
    peer = (i.dst if i.src == ip else i.src).split(".")[-1]
    if size < 100:
        events.append((when, f"{way} .{peer:2} {size:3} B message"))
        continue
    key = (way, peer)
    run = runs.get(key)
    if run and when - run[1] < 0.05:
        run[1], run[2] = when, run[2] + size
    else:
        run = runs[key] = [when, when, size]
        events.append((when, run, way, peer))
for e in sorted(events, key=lambda e: e[0]):
    if not t_from <= e[0] < t_to:
        continue
    if isinstance(e[1], str):
        print(f"{e[0]:8.3f}  {e[1]}")
    else:
        a, b, size = e[1]
        print(f"{a:8.3f}  {e[2]} .{e[3]:2} data {size / 1e3:6.1f} kB until {b:8.3f}")
