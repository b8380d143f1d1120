# usage: .venv/bin/python standing_queue.py experiments/measured/two-jobs-sharing-2026-12-04/two.toml
"""Offline: a flow whose last byte leaves while another flow still sends on one of its links
is delivered D later (the standing queue a loss-based TCP keeps there): two jobs' makespan."""
import sys
import numpy as np
from emulator.model import simulation as S
from emulator.plan.run_plan import plan_run
from emulator.spec.experiment import make_run
D = [0.0]
Sim = S._Simulation
def _drain(self, gone, rates):
    self.drained_rate = min(self.drained_rate, float(rates.min()))
    self.stale = True
    ids, _, _ = self.sending.still_sending()
    busy = np.zeros(len(self.capacity), dtype=bool)
    busy[self.f.route[ids].ravel()] = True
    busy[-1] = False
    shared = busy[self.f.route[gone]].any(axis=1)
    if D[0] and shared.any():
        self._deliver(gone[~shared])
        for i in gone[shared]:
            self._at(self.t + self.alpha + float(self.f.delay_s[i]) + D[0], np.array([i]), False)
    else:
        self._deliver(gone)
Sim._drain = _drain
spec = make_run({"topology": "bigraph:m=2,n=4", "workload": sys.argv[1], "host_rate_mbps": 20, "switch_rate_mbps": 20,
                 "repetitions": 1, "warmup": 0})
base = None
for d in [0.0, 0.04, 0.08, 0.13, 0.17]:
    D[0] = d
    plan = plan_run(spec)
    t = plan.predictions[0].time_s
    base = base or t
    print(f"standing queue {d*1e3:.0f} ms: makespan {t:.2f} s ({t/base:.3f}x max-min)")
