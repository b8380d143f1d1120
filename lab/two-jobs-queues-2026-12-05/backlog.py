"""The standing queue of every busy switch link in a run's links.csv(.gz): its mean backlog while the link
was more than half busy, and how long that takes to drain at the link's rate.
usage: .venv/bin/python backlog.py default-kept-links.csv.gz"""
import csv
import gzip
import statistics
import sys
from collections import defaultdict

opener = gzip.open if sys.argv[1].endswith(".gz") else open
busy = defaultdict(list)
rate = {}
with opener(sys.argv[1], "rt") as f:
    for r in csv.DictReader(f):
        if r["kind"] == "switch" and float(r["util"]) > 0.5:
            busy[r["link"]].append(float(r["backlog_bytes"]))
            rate[r["link"]] = float(r["rate_mbps"])
for link, backlog in sorted(busy.items()):
    mean = statistics.mean(backlog)
    print(f"{link:12} {len(backlog):4} busy samples: backlog mean {mean / 1e3:6.0f} kB "
          f"({mean * 8 / (rate[link] * 1e6) * 1e3:4.0f} ms at {rate[link]:g} Mbit/s), max {max(backlog) / 1e3:4.0f} kB")
