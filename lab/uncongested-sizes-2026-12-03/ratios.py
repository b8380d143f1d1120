"""Median call over the model, before (alpha alone) and with the emulated
links (the reference calibration's burst and step latency), of every run
folder's collectives.csv given: python3 ratios.py links-*-collectives.csv"""
import csv
import statistics
import sys

from emulator.plan import capacity
from emulator.plan.run_plan import plan_run
from emulator.spec.experiment import make_run

KEYS = ("topology", "algorithm", "mapping", "policy", "host_rate_mbps", "switch_rate_mbps")

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    times: dict[int, list[float]] = {}
    for r in rows:
        times.setdefault(int(r["size_bytes"]), []).append(float(r["time_s"]))
    spec = make_run({**{k: rows[0][k] for k in KEYS}, "sizes": sorted(times)})
    links = capacity.emulated_links(capacity.REFERENCE, "user", 9000, "tso", len(spec.fabric().hosts))
    for name, plan in (("before", plan_run(spec)), ("links", plan_run(spec, links=links))):
        ratios = [statistics.median(times[s]) / plan.predictions[s].time_s for s in sorted(times)]
        print(f"{path}: {name}", " ".join(f"{r:.2f}" for r in ratios))
