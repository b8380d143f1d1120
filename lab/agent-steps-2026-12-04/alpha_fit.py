"""A per-message latency (alpha) and the least step time, both scaled by
hosts, fitted at once on the 8-host rows' calls of 32-256 KiB here (new
agents), with the burst of calibration.json and its switch latency scaled
to PORT_US a port; every row's median call over that model.

    /work/main/.venv/bin/python alpha_fit.py 12.94   # alpha fitted at 0: the ring 0.68x, halving-doubling 1.40x
"""
import csv
import statistics
import math
import dataclasses
import collections
import glob
import sys
from emulator.plan import capacity
from emulator.plan.run_plan import plan_run, model_for
from emulator.spec.experiment import make_run
KEYS = ("topology", "algorithm", "mapping", "policy", "host_rate_mbps", "switch_rate_mbps")
cal = capacity.load("calibration.json")
def load(path):
    rows = list(csv.DictReader(open(path)))
    times = collections.defaultdict(list)
    for r in rows:
        times[int(r["size_bytes"])].append(float(r["time_s"]))
    return make_run({**{k: rows[0][k] for k in KEYS}, "sizes": sorted(times)}), {s: statistics.median(v) for s, v in times.items()}
data = {f[10:-16]: load(f) for f in sorted(glob.glob("sizes-new-*-collectives.csv"))}
plans = {n: plan_run(sp) for n, (sp, _) in data.items()}
port_us = float(sys.argv[1])
def ratios(name, floor8, alpha8):
    spec, med = data[name]
    plan = plans[name]
    h = len(plan.hosts)
    links = capacity.emulated_links(cal, "user", 9000, "tso", h, capacity.switch_ports(plan.fabric))
    links = dataclasses.replace(links, step_floor_s=floor8 * h / 8, switch_latency_s=links.switch_latency_s * port_us / 12.94)
    spec2 = dataclasses.replace(plan.spec, model_alpha_us=alpha8 * 1e6 * h / 8)
    model = model_for(plan.fabric, plan.table, spec2, links)
    return {s: med[s] / model(plan.schedules[s], plan.hosts).time_s for s in sorted(med)}
fit = [n for n in data if n.startswith("bigraph")]
best = None
for floor in [i * 1e-4 for i in range(0, 21)]:
    for alpha in [i * 1e-4 for i in range(0, 16)]:
        w = max(abs(math.log(r)) for n in fit for s, r in ratios(n, floor, alpha).items() if s <= 256 << 10)
        if best is None or w < best[0]:
            best = (w, floor, alpha)
w, floor, alpha = best
print(f"# port {port_us} us: floor {floor*1e3:.2f} ms, alpha {alpha*1e3:.2f} ms on 8 hosts (both by hosts), fitted on the 8-host rows")
for n in data:
    print(f"  {n:55}", " ".join(f"{s>>10}K:{v:.2f}" for s, v in ratios(n, floor, alpha).items()))
