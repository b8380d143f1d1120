"""Per run: each call over max-min, the makespan over the model's, and the run's TCP counters.
usage: .venv/bin/python summary.py FOLDER   (jobs.csv files named SETTING<N>.csv)"""
import csv
import sys
from pathlib import Path

print("run        calls over max-min      makespan  drops retrans spurious timeouts cpu")
for path in sorted(Path(sys.argv[1]).glob("*.csv")):
    rows = list(csv.DictReader(path.open()))
    calls = " ".join(f"{float(r['time_s']) / float(r['model_time_s']):.2f}" for r in rows)
    makespan = max(float(r["end_s"]) for r in rows)
    model = max(float(r["model_time_s"]) for r in rows if r["iteration"] == "0") * 2
    r = rows[0]
    print(f"{path.stem:10} {calls:23} {makespan / model:6.2f}x {r['queue_drops']:>6} {r['tcp_retrans']:>7} "
          f"{r['tcp_spurious']:>8} {r['tcp_timeouts']:>8} {float(r['cpu_busy']):.2f}")
