"""Small messages (payload < 100 B) seen leaving one host's link and arriving
on another's: their time through the fabric, and what else the receiving
link carried meanwhile. Usage: hol.py FOLDER (captures of bgh0, bgh4, bgh6)"""
import sys
from scapy.all import PcapReader, IP, TCP

IPS = {"bgh0": "198.18.0.1", "bgh4": "198.18.0.5", "bgh6": "198.18.0.7"}
seen = {}
for host in IPS:
    pkts = []
    for p in PcapReader(f"{sys.argv[1]}/captures/program-{host}.pcap"):
        if IP in p and TCP in p:
            i, t = p[IP], p[TCP]
            pkts.append((float(p.time), i.src, i.dst, t.sport, t.dport, t.seq, i.len - i.ihl * 4 - t.dataofs * 4))
    seen[host] = pkts
T0 = min(p[0][0] for p in seen.values())
delays = []
for src, sip in IPS.items():
    for dst, dip in IPS.items():
        if src == dst:
            continue
        sent = {(p[3], p[4], p[5]): p[0] for p in seen[src] if p[1] == sip and p[2] == dip and 0 < p[6] < 100}
        for p in seen[dst]:
            key = (p[3], p[4], p[5])
            if p[1] == sip and p[2] == dip and 0 < p[6] < 100 and key in sent:
                # bulk bytes that arrived on dst's link from others while this one was on the way
                other = sum(q[6] for q in seen[dst] if q[2] == dip and q[1] != sip and sent[key] <= q[0] <= p[0])
                delays.append((p[0] - sent[key], sent[key] - T0, src, dst, p[6], other))
delays.sort(reverse=True)
print(f"# {len(delays)} small messages between the three hosts; the slowest:")
for d, t, s, r, n, other in delays[:15]:
    print(f"{1e3 * d:7.1f} ms  sent at {t:6.3f} s  {s}->{r}  {n} B; meanwhile {other / 1e3:6.0f} kB from others reached {r}")
fast = sorted(d for d, *_ in delays)
print(f"# median {1e3 * fast[len(fast) // 2]:.2f} ms; over 20 ms: {sum(d > 0.02 for d in fast)}")
