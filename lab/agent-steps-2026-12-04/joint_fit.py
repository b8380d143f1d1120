"""Median call over the model per size, every sizes-AGENT-*.csv here, with
one least step time fitted on both 8-host rows (ring and halving-doubling)
at once, the burst and switch latency of CALIBRATION (or PORT_US a port).

    /work/main/.venv/bin/python joint_fit.py new calibration.json
"""
import csv
import statistics
import math
import sys
import dataclasses
import collections
import glob
from emulator.plan import capacity
from emulator.plan.run_plan import plan_run, model_for
from emulator.spec.experiment import make_run
KEYS = ("topology", "algorithm", "mapping", "policy", "host_rate_mbps", "switch_rate_mbps")
agent, calfile, port_us = sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else None
cal = capacity.load(calfile)
if port_us is not None:
    cal.points = [dataclasses.replace(p, port_latency_us=port_us) for p in cal.points]
def load(path):
    rows = list(csv.DictReader(open(path)))
    times = collections.defaultdict(list)
    for r in rows:
        times[int(r["size_bytes"])].append(float(r["time_s"]))
    spec = make_run({**{k: rows[0][k] for k in KEYS}, "sizes": sorted(times)})
    return spec, {s: statistics.median(v) for s, v in times.items()}
files = sorted(glob.glob(f"sizes-{agent}-*-collectives.csv"))
data = {f[len(f"sizes-{agent}-"):-16]: load(f) for f in files}
plans = {}
def ratios(name, floor8):
    spec, med = data[name]
    f = spec.fabric()
    h = len(f.hosts)
    links = capacity.emulated_links(cal, "user", 9000, "tso", h, capacity.switch_ports(f))
    links = dataclasses.replace(links, step_floor_s=floor8 * h / 8)
    if name not in plans:
        plans[name] = plan_run(spec)
    plan = plans[name]
    model = model_for(plan.fabric, plan.table, plan.spec, links)
    return {s: med[s] / model(plan.schedules[s], plan.hosts).time_s for s in sorted(med)}
fit_on = [n for n in data if n.startswith("bigraph")]
def worst(floor):
    return max(abs(math.log(r)) for n in fit_on for s, r in ratios(n, floor).items() if s <= 256 << 10)
grid = [i * 1e-4 for i in range(0, 31)]
best = min(grid, key=worst)
print(f"# {agent} agents, {calfile}, port latency {cal.points[-1].port_latency_us} us: floor {best*1e3:.2f} ms fitted on ring and HD of 8 hosts jointly")
for n in data:
    print(f"  {n:55}", " ".join(f"{s>>10}K:{v:.2f}" for s, v in ratios(n, best).items()))
