"""Offline, on top of out_of_step.py's patches: after a flow ends, the flows left on its links keep their old
rate for a while (HOLD) before taking the freed capacity, as a sender pacing at the bandwidth it estimated does
(bbr). The hold is a free parameter here, not measured. Two rings' makespan over max-min, 5 draws each.

    .venv/bin/python rate_lag.py ../two-jobs-sharing-2026-12-04/two.toml
"""
import math
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import out_of_step as oos  # noqa: E402  (patches the model as it loads)

HOLD = [0.0]
Sim = oos.Sim
_init, _drain, _advance = Sim.__init__, Sim._drain, Sim._advance


def init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.before, self.hold_until = {}, -1.0


def drain(self, gone, rates):
    if HOLD[0]:
        ids, _, r = self.sending.still_sending()
        self.before = dict(zip(ids.tolist(), r.tolist()))
        self.hold_until = self.t + HOLD[0]
        self._at(self.hold_until, np.zeros(0, dtype=np.int64), False)   # rate again when the hold ends
    _drain(self, gone, rates)


def rerate(self):
    ids, left, _, route, _ = self._active()
    rates = oos.S.max_min_rates(route, self.capacity)
    if HOLD[0] and self.t < self.hold_until - 1e-12:
        rates = np.minimum(rates, np.array([self.before.get(i, math.inf) for i in ids.tolist()]))
    self._rated(ids, left, rates, route, rates)


def advance(self):
    if HOLD[0] and self.hold_until >= 0 and self.t >= self.hold_until - 1e-12:
        self.stale, self.hold_until = True, -1.0
    _advance(self)


Sim.__init__, Sim._drain, Sim._rerate, Sim._advance = init, drain, rerate, advance
for d in (0.0, 0.05):
    for hold in (0.0, 0.1, 0.2, 0.4):
        oos.SIGMA[0], oos.D[0], HOLD[0] = 0.3, d, hold
        out = oos.makespans(sys.argv[1], 5)
        print(f"shares lognormal sigma 0.3, standing queue {d * 1e3:3.0f} ms, hold {hold * 1e3:4.0f} ms: makespan over "
              f"max-min median {statistics.median(out):.3f} ({min(out):.3f}-{max(out):.3f})")
