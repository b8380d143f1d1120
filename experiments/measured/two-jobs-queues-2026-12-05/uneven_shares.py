# usage: .venv/bin/python uneven_shares.py experiments/measured/two-jobs-sharing-2026-12-04/two.toml 10
"""Offline: two jobs' makespan when flows sharing a link get random unequal shares
(weighted max-min, weights lognormal(0, sigma) per flow, i.e. per step's transfer)."""
import sys
import math
import statistics
import numpy as np
from emulator.model import simulation as S
from emulator.plan.run_plan import plan_run
from emulator.spec.experiment import make_run
SIGMA = [0.0]
RNG = [np.random.default_rng(0)]
W = [None]   # a weight per flow
CUR = [None]   # the ids of the flows being rated


def weighted(route, capacity):
    w = W[0][CUR[0]]
    nflows, width = route.shape
    rate = np.empty(nflows)
    left = capacity.astype(float)
    todo, r, ww = np.arange(nflows), route, w
    n = np.bincount(route.ravel(), weights=np.repeat(w, width), minlength=left.size)
    while todo.size:
        share = np.full(left.size, math.inf)
        used = n > 1e-12
        share[used] = left[used] / n[used]
        fs = share[r].min(axis=1)
        m = fs.min()
        fixed = fs <= m * (1 + 1e-9)
        rate[todo[fixed]] = fs[fixed] * ww[fixed]
        left -= np.bincount(r[fixed].ravel(), weights=np.repeat(fs[fixed] * ww[fixed], width), minlength=left.size)
        np.maximum(left, 0, out=left)
        n -= np.bincount(r[fixed].ravel(), weights=np.repeat(ww[fixed], width), minlength=left.size)
        todo, r, ww = todo[~fixed], r[~fixed], ww[~fixed]
    return rate
Sim = S._Simulation
_a = Sim._active
def active(self):
    out = _a(self)
    if W[0] is None or len(W[0]) != len(self.f.nbytes):
        W[0] = np.exp(RNG[0].normal(0, SIGMA[0], len(self.f.nbytes)))
    CUR[0] = out[0]
    return out
Sim._active = active
def rerate(self):
    if self.buckets:
        return self._rerate_buckets()
    active_, left, rates, route, new = self._active()
    rates = S.max_min_rates(route, self.capacity)
    self._rated(active_, left, rates, route, rates)
Sim._rerate = rerate
S.max_min_rates = weighted
spec = make_run({"topology": "bigraph:m=2,n=4", "workload": sys.argv[1], "host_rate_mbps": 20, "switch_rate_mbps": 20,
                 "repetitions": 1, "warmup": 0})
for sigma in [0.0, 0.1, 0.2, 0.3, 0.5]:
    SIGMA[0] = sigma
    out = []
    for seed in range(int(sys.argv[2]) if sigma else 1):
        RNG[0] = np.random.default_rng(seed)
        W[0] = None
        plan = plan_run(spec)
        out.append(plan.predictions[0].time_s)
    print(f"sigma {sigma}: makespan median {statistics.median(out):.3f} s, range {min(out):.3f}-{max(out):.3f}")
