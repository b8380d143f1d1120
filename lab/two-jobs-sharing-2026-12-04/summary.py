"""Per setting: the jobs' calls over the model (max-min), their verdicts and the run's counters.
usage: .venv/bin/python summary.py FOLDER   (jobs.csv files named SETTING<N>.csv)"""
import csv
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ratios, verdicts, counters = defaultdict(list), defaultdict(lambda: defaultdict(int)), defaultdict(list)
for path in sorted(Path(sys.argv[1]).glob("*.csv")):
    setting = re.sub(r"\d$", "", path.stem).rstrip("-")
    rows = list(csv.DictReader(path.open()))
    for r in rows:
        ratios[setting].append(float(r["time_s"]) / float(r["model_time_s"]))
        verdicts[setting][r["fidelity"].split(":")[0]] += 1
    first = rows[0]
    counters[setting].append((first["queue_drops"], first["tcp_retrans"], first["tcp_spurious"],
                              f"{float(first['cpu_busy']):.2f}"))
for setting, got in ratios.items():
    print(f"{setting:10} {len(got):2} calls: over max-min median {statistics.median(got):.2f}, "
          f"{min(got):.2f}-{max(got):.2f}; verdicts {dict(verdicts[setting])}")
    print(f"{'':10} per run (queue drops, retransmissions, spurious, cpu busy): {counters[setting]}")
