import sys
from scapy.all import PcapReader, IP, TCP
IPS = {"bgh0": "198.18.0.1", "bgh4": "198.18.0.5", "bgh6": "198.18.0.7"}
ev = []; T0 = None
for host, ip in IPS.items():
    runs = []
    for p in PcapReader(f"{sys.argv[1]}/captures/program-{host}.pcap"):
        if IP not in p or TCP not in p: continue
        i, t = p[IP], p[TCP]; n = i.len - i.ihl*4 - t.dataofs*4
        if n < 1000 or i.src != ip: continue   # what this host sends
        tt = float(p.time); peer = i.dst.split(".")[-1]
        if runs and runs[-1][0] == peer and tt - runs[-1][2] < 0.02: runs[-1][2] = tt; runs[-1][3] += n
        else: runs.append([peer, tt, tt, n])
    ev += [(r[1], host, r) for r in runs]
T0 = min(e[0] for e in ev)
lo, hi = float(sys.argv[2]), float(sys.argv[3])
for t, host, r in sorted(ev):
    if lo <= t - T0 <= hi:
        print(f"{host}(.{IPS[host].split('.')[-1]}) -> .{r[0]}  {r[1]-T0:.3f}-{r[2]-T0:.3f}  {r[3]/1e3:.0f} kB")
