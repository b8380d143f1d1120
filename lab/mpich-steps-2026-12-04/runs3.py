"""Each of three hosts' data runs by peer (packets of >= 1000 B it sent,
merged while the peer stays and gaps stay under 20 ms), in time order.
Usage: runs3.py FOLDER FROM_S TO_S (captures of bgh0, bgh4, bgh6)"""
import sys

from scapy.all import IP, TCP, PcapReader

IPS = {"bgh0": "198.18.0.1", "bgh4": "198.18.0.5", "bgh6": "198.18.0.7"}


def runs_of(host: str, ip: str) -> list[list]:
    runs = []
    for p in PcapReader(f"{sys.argv[1]}/captures/program-{host}.pcap"):
        if IP not in p or TCP not in p:
            continue
        i, t = p[IP], p[TCP]
        size = i.len - i.ihl * 4 - t.dataofs * 4
        if size < 1000 or i.src != ip:   # what this host sends
            continue
        when, peer = float(p.time), i.dst.split(".")[-1]
        if runs and runs[-1][0] == peer and when - runs[-1][2] < 0.02:
            runs[-1][2] = when
            runs[-1][3] += size
        else:
            runs.append([peer, when, when, size])
    return runs


events = sorted((r[1], host, r) for host, ip in IPS.items() for r in runs_of(host, ip))
t0 = events[0][0]
low, high = float(sys.argv[2]), float(sys.argv[3])
for t, host, r in events:
    if low <= t - t0 <= high:
        print(f"{host}(.{IPS[host].split('.')[-1]}) -> .{r[0]}  {r[1] - t0:.3f}-{r[2] - t0:.3f}  {r[3] / 1e3:.0f} kB")
