"""Offline patch: flows of at most EAGER bytes start when their sender enters
the step, and the sender's part of them ends when their last byte left."""
import heapq
import math

import numpy as np

from emulator.model import simulation as S
EAGER = [64 << 10]
Sim = S._Simulation
_init = Sim.__init__
def __init__(self, flows, *a, **k):
    _init(self, flows, *a, **k)
    self.eager = flows.nbytes <= EAGER[0]
    self.gate[self.eager] = 1
Sim.__init__ = __init__
def _release(self, steps):
    sends = S._ranges(self.f.first[steps], self.f.first[steps + 1])
    recvs = self.by_recv[S._ranges(self.recv_first[steps], self.recv_first[steps + 1])]
    recvs = recvs[~self.eager[recvs]]
    opened = np.concatenate((sends, recvs))
    np.subtract.at(self.gate, opened, 1)
    ids = S._sorted_once(opened[self.gate[opened] == 0], len(self.gate))
    if not ids.size:
        return
    wire = self.f.on_wire[ids]
    if wire.any():
        self.fresh.append(ids[wire])
        self.stale = True
    if not wire.all():
        self._sent(ids[~wire])
        self._deliver(ids[~wire])
Sim._release = _release
def _sent(self, ids):
    """The eager ones of `ids` left their sender: its step no longer waits for them."""
    e = ids[self.eager[ids]]
    if e.size:
        np.subtract.at(self.pending, self.f.send_step[e], 1)
        self._pending_finish.append(self.f.send_step[e])
Sim._sent = _sent
_drain0 = Sim._drain
def _drain(self, gone, rates):
    self._sent(gone)
    _drain0(self, gone, rates)
Sim._drain = _drain
def _advance(self):
    self._pending_finish = getattr(self, "_pending_finish", [])
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
    steps = []
    if self._pending_finish:
        steps += self._pending_finish
        self._pending_finish = []
    while self.events and self.events[0][0] <= self.t + tol:
        delivered, computed = [], []
        while self.events and self.events[0][0] <= self.t + tol:
            _, _, compute, ids = heapq.heappop(self.events)
            (computed if compute else delivered).append(ids)
        if delivered:
            flows = np.concatenate(delivered)
            w = flows[~self.eager[flows]]
            np.subtract.at(self.pending, self.f.send_step[w], 1)
            np.subtract.at(self.pending, self.f.recv_step[flows], 1)
            steps += [self.f.send_step[w], self.f.recv_step[flows]]
        if computed:
            done = np.concatenate(computed)
            np.subtract.at(self.pending, done, 1)
            steps.append(done)
        self._finish(S._sorted_once(np.concatenate(steps), len(self.pending)))
        steps = []
        for extra in self._pending_finish:
            steps.append(extra)
        self._pending_finish = []
    if steps:
        self._finish(S._sorted_once(np.concatenate(steps), len(self.pending)))
Sim._advance = _advance
_run0 = Sim.run
def run(self, progress=None):
    self._pending_finish = []
    _run0(self, progress)
Sim.run = run
