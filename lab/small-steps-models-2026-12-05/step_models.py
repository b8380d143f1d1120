"""Offline: variants of the model's small steps, each fitted on the 8-host rows of
../agent-steps-2026-12-04 (a least step time, and the variant's parameter), checked on the others;
every row's median call over the model, 32-512 KiB.

    .venv/bin/python step_models.py none        # today's model: a least step time
    .venv/bin/python step_models.py deliver 5   # plus a random delay per message (exponential, mean mu; 5 draws)
    .venv/bin/python step_models.py additive    # the least time plus the step's longest path delay
    .venv/bin/python step_models.py work        # the least time plus mu per KiB and switch crossed
    EAGER=1 .venv/bin/python step_models.py none  # flows of at most 64 KiB start with their sender (eager_patch.py)
"""
import collections
import csv
import dataclasses
import glob
import math
import os
import statistics
import sys

import numpy as np

from emulator.plan import capacity
from emulator.plan.run_plan import plan_run, model_for
from emulator.spec.experiment import make_run
from emulator.model import simulation as S

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent-steps-2026-12-04"))
if os.environ.get("EAGER"):
    import eager_patch  # noqa: F401

KEYS = ("topology", "algorithm", "mapping", "policy", "host_rate_mbps", "switch_rate_mbps")
cal = capacity.load("calibration.json")
MODE = sys.argv[1]
SEEDS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
MU = [0.0]
rng = [np.random.default_rng(0)]
orig = S._Simulation._deliver
def deliver(self, ids):
    if not MU[0] or MODE != "deliver":
        return orig(self, ids)
    extra = rng[0].exponential(MU[0], len(ids)) + self.alpha + self.f.delay_s[ids]
    for i, d in zip(ids, extra):
        self._at(self.t + float(d), np.array([i]), False)
S._Simulation._deliver = deliver
_init = S._Simulation.__init__
def init(self, flows, deps, alpha_s, efficiency, burst=None, level=None, min_step_s=0.0):
    if MODE == "work" and min_step_s:
        n = len(flows.first) - 1
        hops = (flows.route != flows.pad).sum(axis=1) - 1
        work = np.bincount(flows.send_step, weights=flows.nbytes * np.maximum(hops, 0) * flows.on_wire, minlength=n)
        deps = dataclasses.replace(deps, compute_s=np.maximum(deps.compute_s, min_step_s + MU[0] * work / 1024))
        min_step_s = 0.0
    if MODE == "additive" and min_step_s:
        # the floor plus the longest path delay of the step's receives
        n = len(flows.first) - 1
        worst = np.zeros(n)
        np.maximum.at(worst, flows.recv_step, flows.delay_s + alpha_s)
        deps = dataclasses.replace(deps, compute_s=np.maximum(deps.compute_s, min_step_s + worst))
        min_step_s = 0.0
    _init(self, flows, deps, alpha_s, efficiency, burst, level, min_step_s)
S._Simulation.__init__ = init
def load(path):
    rows = list(csv.DictReader(open(path)))
    times = collections.defaultdict(list)
    for r in rows:
        times[int(r["size_bytes"])].append(float(r["time_s"]))
    return make_run({**{k: rows[0][k] for k in KEYS}, "sizes": sorted(times)}), {s: statistics.median(v) for s, v in times.items() if s <= 512<<10}
data = {f[10:-16]: load(f) for f in sorted(glob.glob("sizes-new-*-collectives.csv"))}
plans = {n: plan_run(sp) for n, (sp, _) in data.items()}
def ratios(name, floor8, mu8):
    spec, med = data[name]
    plan = plans[name]
    h = len(plan.hosts)
    links = capacity.emulated_links(cal, "user", 9000, "tso", h, capacity.switch_ports(plan.fabric))
    links = dataclasses.replace(links, step_floor_s=floor8 * h / 8)
    model = model_for(plan.fabric, plan.table, plan.spec, links)
    MU[0] = mu8 * h / 8
    out = {}
    for s in sorted(med):
        ts = []
        for seed in range(SEEDS if MU[0] and MODE == "deliver" else 1):
            rng[0] = np.random.default_rng(seed)
            ts.append(model(plan.schedules[s], plan.hosts).time_s)
        out[s] = med[s] / statistics.median(ts)
    return out
fit = [n for n in data if n.startswith("bigraph")]
best = None
floors = [i * 1e-4 for i in range(0, 21, 2)]
mus = ([i * 1e-4 for i in range(0, 16, 1)] if MODE == "deliver" else
       [i * 2e-6 for i in range(0, 30)] if MODE == "work" else [0.0])
for floor in floors:
    for mu in mus:
        w = max(abs(math.log(r)) for n in fit for s, r in ratios(n, floor, mu).items() if s <= 256 << 10)
        if best is None or w < best[0]:
            best = (w, floor, mu)
w, floor, mu = best
print(f"# {MODE}: floor {floor*1e3:.2f} ms, mu {mu*1e6:.1f} us on 8 hosts (both by hosts), fitted on the 8-host rows; worst {math.exp(w):.2f}")
for n in data:
    print(f"  {n:55}", " ".join(f"{s>>10}K:{v:.2f}" for s, v in ratios(n, floor, mu).items()))
