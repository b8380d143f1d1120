"""Offline: a least step time and a per-message latency (alpha) fitted for each algorithm on its own
8-host row of ../agent-steps-2026-12-04 (its calls of 32-256 KiB, with that folder's calibration.json:
burst and switch latency), then that algorithm's rows on the fabrics it was not fitted on; every row's
median call over the model, beside the runs' model (the calibration's least step time by
hosts and the constant alpha). Neither parameter is scaled by the hosts here (alpha a message, the floor a
step), the grids are 0-2.5 ms (floor) and 0-3 ms (alpha) in 0.2 ms.

    /work/main/.venv/bin/python per_algorithm_fit.py > per_algorithm_fit.txt
"""
import collections
import csv
import dataclasses
import glob
import math
import os
import statistics

from emulator.plan import capacity
from emulator.plan.run_plan import model_for, plan_run
from emulator.spec.experiment import make_run

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent-steps-2026-12-04"))
KEYS = ("topology", "algorithm", "mapping", "policy", "host_rate_mbps", "switch_rate_mbps")
cal = capacity.load("calibration.json")


def load(path):
    rows = list(csv.DictReader(open(path)))
    times = collections.defaultdict(list)
    for r in rows:
        times[int(r["size_bytes"])].append(float(r["time_s"]))
    spec = make_run({**{k: rows[0][k] for k in KEYS}, "sizes": sorted(times)})
    return spec, {s: statistics.median(v) for s, v in times.items()}


data = {f[10:-16]: load(f) for f in sorted(glob.glob("sizes-new-*-collectives.csv"))}
plans = {n: plan_run(spec) for n, (spec, _) in data.items()}


def ratios(name, floor_s=None, alpha_s=5e-4):
    """Median call over the model; floor_s None: the calibration's least step time, by hosts (as runs take it)."""
    plan, medians = plans[name], data[name][1]
    links = capacity.emulated_links(cal, "user", 9000, "tso", len(plan.hosts), capacity.switch_ports(plan.fabric))
    if floor_s is not None:
        links = dataclasses.replace(links, step_floor_s=floor_s)
    model = model_for(plan.fabric, plan.table, dataclasses.replace(plan.spec, model_alpha_us=alpha_s * 1e6), links)
    return {s: medians[s] / model(plan.schedules[s], plan.hosts).time_s for s in sorted(medians)}


print("# the runs' model: the calibration's least step time (1.65 ms on 8 hosts, by hosts), alpha 0.5 ms")
for name in data:
    print(f"  {name:55}", " ".join(f"{s >> 10}K:{v:.2f}" for s, v in ratios(name).items()))
for algorithm in ("ring", "halving-doubling"):
    fitted_on = f"bigraph_m_2_n_4-{algorithm}"
    grid = [(f * 2e-4, a * 2e-4) for f in range(13) for a in range(16)]
    worst, floor, alpha = min((max(abs(math.log(r)) for s, r in ratios(fitted_on, f, a).items() if s <= 256 << 10), f, a)
                              for f, a in grid)
    print(f"# {algorithm}: least step time {floor * 1e3:.1f} ms, alpha {alpha * 1e3:.1f} ms, fitted on {fitted_on} "
          f"(worst {math.exp(worst):.2f}x)")
    for name in data:
        if name.endswith(algorithm):
            print(f"  {name:55}", " ".join(f"{s >> 10}K:{v:.2f}" for s, v in ratios(name, floor, alpha).items()))
