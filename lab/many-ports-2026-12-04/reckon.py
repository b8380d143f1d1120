"""Judge a corpus's rows (capacity_check.py's printed table) again with the
faithful load scaled by (16 / ports) ** e instead of 16 / ports. Usage:
reckon.py CORPUS.txt PROBE_FAITHFUL E [E ...]"""
import re
import sys

PORTS = {"bigraph:m=2,n=4": 16, "bigraph:m=4,n=4": 24, "fattree:k=4": 80, "bigraph:m=4,n=8": 64,
         "bigraph:m=8,n=8": 96, "leafspine:leaves=4,spines=2,hosts=4": 32}
path, faithful = sys.argv[1], float(sys.argv[2])
rows = []
for line in open(path):
    m = re.match(r"(\S+)\s+(.+?)\s+(\S+)\s+(a?[\d.]+) \|\s+(\d+)\s+(\d+)\s+(fits|no)\s+\S+ \|\s+(\d+)/(\d+)", line)
    if m and m.group(1) in PORTS:
        rows.append((m.group(1), m.group(2).strip(), m.group(4), float(m.group(5)), int(m.group(8)), int(m.group(9))))
print(f"# {len(rows)} runs from {path}, {faithful:g} link-Mbit/s at 16 ports")
for e in map(float, sys.argv[3:]):
    said = {True: [0, 0, 0], False: [0, 0, 0]}
    for topo, _what, _rate, asked, ok, calls in rows:
        fits = asked <= faithful * min(1.0, 16 / PORTS[topo]) ** e
        for i, count in enumerate((1, ok, calls)):
            said[fits][i] += count
    f, n = said[True], said[False]
    print(f"e={e:.2f}: fits {f[0]} runs, {f[1]}/{f[2]} calls ok ({f[1] / max(f[2], 1):.0%}); "
          f"does not fit {n[0]} runs, {n[1]}/{n[2]} ok ({n[1] / max(n[2], 1):.0%})")
