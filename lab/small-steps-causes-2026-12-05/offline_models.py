"""Offline: variants of the run's model against this folder's calls (ring-collectives.csv, hd-collectives.csv),
each row the median call over the model per size, with this folder's calibration.json:

    alpha       the per-message latency (the constant --alpha-us is 0.5 ms)
    overdraw    every link's bucket larger by BYTES (HTB sends a packet while its tokens are not negative:
                htb_overdraw.txt)
    cores       every step, once ready, takes CPU_US of one of the machine's 2 cores before its messages go
                (the agents' turn), and every message a random delay (exponential, mean JITTER_US; median of
                9 draws)

    /work/main/.venv/bin/python offline_models.py > offline_models.txt
"""
import collections
import csv
import dataclasses
import heapq
import math
import os
import statistics

import numpy as np

from emulator.model import buckets as B
from emulator.model import simulation as S
from emulator.plan import capacity
from emulator.plan.run_plan import model_for, plan_run
from emulator.spec.experiment import make_run

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = ("topology", "algorithm", "mapping", "policy", "host_rate_mbps", "switch_rate_mbps")
CORES = 2
VARIANT = {"overdraw": 0.0, "cpu": 0.0, "jitter": 0.0}
CPU = "cpu"
RNG = [np.random.default_rng(0)]

_buckets_init, _start = B.Buckets.__init__, S._Simulation._start


def buckets_init(self, rate, burst, efficiency, level=None):
    _buckets_init(self, rate, burst, efficiency, level)
    self.size = np.where(np.isfinite(rate), self.size + VARIANT["overdraw"] * efficiency, 0.0)
    if level is None:
        self.level = self.size.copy()
    self.spending = self.level > 0


def deliver(self, ids):
    late = self.alpha + self.f.delay_s[ids]
    if VARIANT["jitter"]:
        late = late + RNG[0].exponential(VARIANT["jitter"], len(ids))
    for i, t in zip(ids, np.broadcast_to(late, ids.shape)):
        self._at(self.t + float(t), np.array([i]), False)


def start(self, steps):
    """Ready steps queue for a core; they start (S._Simulation._start) once they had it for VARIANT["cpu"]."""
    if not steps.size or not VARIANT["cpu"]:
        return _start(self, steps)
    free = self.__dict__.setdefault("core_free", [0.0] * CORES)
    for s in steps:
        i = min(range(CORES), key=free.__getitem__)
        free[i] = max(self.t, free[i]) + VARIANT["cpu"]
        self._at(free[i], np.array([s]), CPU)
    return steps[:0]


def advance(self):
    """S._Simulation._advance, with the events of steps that had their core."""
    if self.stale:
        self._rerate()
    near = self.sending.candidates()
    drain = self.sending.left[near] / self.sending.rates[near]
    t_drain = self.t + drain.min() if drain.size else math.inf
    t_next = min(t_drain, self.events[0][0] if self.events else math.inf,
                 self.t + self.buckets.empty_in() if self.buckets else math.inf)
    tol = S.REL_TOL * t_next
    self.sending.elapse(t_next - self.t)
    if self.buckets and self.buckets.elapse(t_next - self.t, tol):
        self.stale = True
    self.t = t_next
    if drain.size:
        done = self.sending.left[near] <= self.sending.rates[near] * tol
        due = near[drain == drain.min()] if t_drain == t_next else near[:0]
        if done.any() or due.size:
            self._drain(*self.sending.retire(near[done], due))
    while self.events and self.events[0][0] <= self.t + tol:
        delivered, computed, ready = [], [], []
        while self.events and self.events[0][0] <= self.t + tol:
            _, _, kind, ids = heapq.heappop(self.events)
            (ready if kind is CPU else computed if kind else delivered).append(ids)
        steps = [_start(self, np.concatenate(ready))] if ready else []
        if delivered:
            flows = np.concatenate(delivered)
            np.subtract.at(self.pending, self.f.send_step[flows], 1)
            np.subtract.at(self.pending, self.f.recv_step[flows], 1)
            steps += [self.f.send_step[flows], self.f.recv_step[flows]]
        if computed:
            done = np.concatenate(computed)
            np.subtract.at(self.pending, done, 1)
            steps.append(done)
        self._finish(S._sorted_once(np.concatenate(steps), len(self.pending)))


B.Buckets.__init__ = buckets_init
S._Simulation._deliver, S._Simulation._start, S._Simulation._advance = deliver, start, advance


def load(path):
    rows = list(csv.DictReader(open(path)))
    times = collections.defaultdict(list)
    for r in rows:
        times[int(r["size_bytes"])].append(float(r["time_s"]))
    spec = make_run({**{k: rows[0][k] for k in KEYS}, "sizes": sorted(times)})
    return plan_run(spec), {s: statistics.median(v) for s, v in times.items()}


calibration = capacity.load(os.path.join(HERE, "calibration.json"))
runs = [load(os.path.join(HERE, f"{name}-collectives.csv")) for name in ("ring", "hd")]


def row(alpha_us=500.0, overdraw=0.0, cpu_us=0.0, jitter_us=0.0) -> str:
    VARIANT.update(overdraw=overdraw, cpu=cpu_us * 1e-6, jitter=jitter_us * 1e-6)
    out = []
    for plan, medians in runs:
        links = capacity.emulated_links(calibration, "user", 9000, "tso", len(plan.hosts),
                                        capacity.switch_ports(plan.fabric))
        model = model_for(plan.fabric, plan.table, dataclasses.replace(plan.spec, model_alpha_us=alpha_us), links)
        ratios = []
        for size, measured in sorted(medians.items()):
            times = []
            for seed in range(9 if jitter_us else 1):
                RNG[0] = np.random.default_rng(seed)
                times.append(model(plan.schedules[size], plan.hosts).time_s)
            ratios.append(f"{size >> 10}K {measured / statistics.median(times):.2f}")
        out.append(f"{plan.spec.algorithm[:4]} " + " ".join(ratios))
    return (f"alpha {alpha_us:3.0f} us, overdraw {overdraw:5.0f} B, a step's CPU {cpu_us:3.0f} us, jitter "
            f"{jitter_us:3.0f} us:  " + "   ".join(out))


print("# the runs' model, then each variant alone, then the cores with jitter")
print(row())
for alpha in (300, 150, 100):
    print(row(alpha_us=alpha))
for overdraw in (9014, 27000, 62500):
    print(row(overdraw=overdraw))
for alpha in (500, 150):
    for cpu in (50, 100, 200):
        print(row(alpha_us=alpha, cpu_us=cpu))
for alpha, jitter, cpu in ((100, 100, 0), (0, 100, 50), (100, 50, 50), (0, 200, 0)):
    print(row(alpha_us=alpha, cpu_us=cpu, jitter_us=jitter))
