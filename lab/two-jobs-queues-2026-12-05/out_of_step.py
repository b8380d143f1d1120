"""Offline: two jobs out of step with a FIFO's standing queue, the model patched. Flows sharing a link get
random unequal shares (weighted max-min, lognormal weights of sigma, a draw per flow), so the jobs' steps end
at different times; a flow that starts while another flow sends on one of its links is delivered D later (the
standing queue a loss-based TCP keeps there). The workload's makespan over plain max-min, 5 draws each.

    .venv/bin/python out_of_step.py ../two-jobs-sharing-2026-12-04/two.toml    # two rings
    .venv/bin/python out_of_step.py halving-doubling/two-hd.toml               # two halving-doublings
"""
import math
import statistics
import sys

import numpy as np

from emulator.model import simulation as S
from emulator.plan.run_plan import plan_run
from emulator.spec.experiment import make_run

SIGMA, D = [0.0], [0.0]
RNG = [np.random.default_rng(0)]
WEIGHTS, RATED = [None], [None]   # a weight per flow; the ids of the flows being rated
Sim = S._Simulation


def weighted_max_min(route, capacity):
    """Progressive filling in proportion to the flows' weights."""
    w = WEIGHTS[0][RATED[0]]
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
        fixed = fs <= fs.min() * (1 + 1e-9)
        rate[todo[fixed]] = fs[fixed] * ww[fixed]
        left -= np.bincount(r[fixed].ravel(), weights=np.repeat(fs[fixed] * ww[fixed], width), minlength=left.size)
        np.maximum(left, 0, out=left)
        n -= np.bincount(r[fixed].ravel(), weights=np.repeat(ww[fixed], width), minlength=left.size)
        todo, r, ww = todo[~fixed], r[~fixed], ww[~fixed]
    return rate


_init, _active, _release = Sim.__init__, Sim._active, Sim._release


def init(self, flows, *args, **kwargs):
    _init(self, flows, *args, **kwargs)
    self.late = np.zeros(len(flows.nbytes), dtype=bool)
    WEIGHTS[0] = np.exp(RNG[0].normal(0, SIGMA[0], len(flows.nbytes)))


def active(self):
    out = _active(self)
    RATED[0] = out[0]
    return out


def rerate(self):   # every rate again: with weights, max-min's shortcuts after a drain do not hold
    if self.buckets:
        return self._rerate_buckets()
    ids, left, _, route, _ = self._active()
    rates = S.max_min_rates(route, self.capacity)
    self._rated(ids, left, rates, route, rates)


def release(self, steps):
    before = len(self.fresh)
    _release(self, steps)
    if D[0] and len(self.fresh) > before:
        new = np.concatenate(self.fresh[before:])
        ids, _, _ = self.sending.still_sending()
        busy = np.zeros(len(self.capacity), dtype=bool)
        busy[self.f.route[ids].ravel()] = True
        busy[-1] = False
        self.late[new[busy[self.f.route[new]].any(axis=1)]] = True


def drain(self, gone, rates):
    self.drained_rate = min(self.drained_rate, float(rates.min()))
    self.stale = True
    late = self.late[gone]
    for i in gone[late]:
        self._at(self.t + self.alpha + float(self.f.delay_s[i]) + D[0], np.array([i]), False)
    if (~late).any():
        self._deliver(gone[~late])


Sim.__init__, Sim._active, Sim._rerate, Sim._release, Sim._drain = init, active, rerate, release, drain
S.max_min_rates = weighted_max_min


def makespans(workload: str, draws: int):
    """The workload's makespan over plain max-min, `draws` times with the patches' settings now."""
    spec = make_run({"topology": "bigraph:m=2,n=4", "workload": workload, "host_rate_mbps": 20,
                     "switch_rate_mbps": 20, "repetitions": 1, "warmup": 0})
    saved = SIGMA[0], D[0]
    SIGMA[0], D[0] = 0.0, 0.0
    base = plan_run(spec).predictions[0].time_s
    SIGMA[0], D[0] = saved
    out = []
    for seed in range(draws):
        RNG[0] = np.random.default_rng(seed)
        out.append(plan_run(spec).predictions[0].time_s / base)
    return out


if __name__ == "__main__":
    for sigma in (0.0, 0.2, 0.4):
        for d in (0.0, 0.05, 0.08, 0.13, 0.18):
            SIGMA[0], D[0] = sigma, d
            out = makespans(sys.argv[1], 5 if sigma else 1)
            print(f"shares lognormal sigma {sigma:.1f}, standing queue {d * 1e3:4.0f} ms: makespan over max-min "
                  f"median {statistics.median(out):.3f} ({min(out):.3f}-{max(out):.3f})")
