"""Median call in ms per size, old -> new agents (new/old), from the sizes CSVs here."""
import csv
import statistics
import collections
import glob
import os
def med(path):
    by = collections.defaultdict(list)
    for r in csv.DictReader(open(path)):
        by[int(r["size_bytes"])].append(float(r["time_s"]))
    return {s: statistics.median(v) for s, v in sorted(by.items())}
print("| run | 32K | 64K | 128K | 256K | 512K | 1M | 2M |\n|---|---|---|---|---|---|---|---|")
for new in sorted(glob.glob("sizes-new-*-collectives.csv")):
    name = os.path.basename(new)[10:-16]
    a, b = med(new), med(new.replace("sizes-new", "sizes-old"))
    print(f"| {name} | " + " | ".join(f"{b[s]*1e3:.1f} -> {a[s]*1e3:.1f} ({a[s]/b[s]:.2f})" for s in a) + " |")
