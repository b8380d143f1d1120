# A verbatim copy of emulator/model.py (now emulator/model/simulation.py) at commit 5049187 of main, kept as the
# fixed point of the regression corpus (test_model_reference.py): the model must
# still predict what this predicts. Do not edit it to follow the model.
"""Flow-level model (pure): predicts when every step of a collective ends.

Every send `Transfer` of a rank's step is a flow from that rank's host to the
peer's host along the path the controller installs (`emulator.routes.routing.path`).
Flows share links max-min fairly (the steady state TCP converges to, minus
its dynamics); a flow is delivered `alpha_s` plus its path's delay (netem on
the links it crosses) after its last byte left. A
rank starts step k+1 once step k's sends and receives are all delivered.
A flow starts when its sender and its receiver have both entered the steps
it belongs to: the agents use a rendezvous (the receiver sends "clear to
send" when it posts the receive), as MPI and NCCL do for large messages, so
a fast rank never pushes data into a peer still busy with an earlier step
(the agents send their first 64 KiB eagerly, to keep the path full while
the clearance travels; the model ignores that head start).

The simulation is event driven: rates change only when a flow starts or
drains, so between two such events every flow moves at a constant rate.
Events closer than REL_TOL of the current time are merged, so thousands of
ranks whose chunks differ by a byte advance together instead of one by one.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from emulator.routes.routing import ForwardingTable, path
from emulator.fabric.graph import Fabric
from emulator.workloads.steps import Schedule

# Events within this fraction of the current time count as simultaneous.
REL_TOL = 1e-6

Link = tuple[str, int]   # a directed link: (node, egress port)


@dataclass(frozen=True)
class Prediction:
    time_s: float                                  # the last step of any rank ended
    step_end_s: tuple[tuple[float, ...], ...]      # step_end_s[rank][k]
    link_max_flows: dict[Link, int]                # most flows ever on a link at once
    max_flows_per_step: list[int]                  # busiest link's flows, per step index
    peak_switch_mbps: float = 0.0                  # most wire Mbit/s in flight at once, counted once per
                                                   # switch each flow crosses: the forwarding work asked of OVS


# --- flows from a schedule --------------------------------------------------

@dataclass
class _Flows:
    """The schedule flattened into arrays, one entry per send transfer.

    Flows are numbered rank by rank and step by step, so the flows a step
    sends are the contiguous ids first[s] .. first[s+1]-1 of its step id s.
    """
    links: list[Link]            # directed link index -> (node, port)
    capacity_mbps: np.ndarray    # per directed link, plus a last infinite pad link
    step_base: np.ndarray        # step id of rank r's step 0; step_base[-1] = step count
    first: np.ndarray            # first flow id of every step id, plus the total
    step_index: np.ndarray       # k of the sender's step, per flow
    send_step: np.ndarray        # sender's step id, per flow
    recv_step: np.ndarray        # receiver's step id, per flow
    nbytes: np.ndarray
    route: np.ndarray            # (flows, width) directed link ids, padded with the pad link
    on_wire: np.ndarray          # carries bytes between two different hosts
    delay_s: np.ndarray          # one-way delay of every flow's path (netem), s

    @property
    def pad(self) -> int:
        return len(self.links)


def _directed_links(fabric: Fabric) -> tuple[list[Link], np.ndarray, np.ndarray]:
    """Directed links, their rates and delays (s), plus the pad link."""
    links, rates, delays = [], [], []
    for link in fabric.links:
        for end in link.ends():
            links.append(end)
            rates.append(link.rate_mbps)
            delays.append(link.delay_ms / 1e3)
    return links, np.array(rates + [math.inf]), np.array(delays + [0.0])


def _routes(fabric, table, hosts, pairs, index) -> np.ndarray:
    """Directed link ids of every (src rank, dst rank) pair, padded."""
    routes = []
    for a, b in pairs:
        same = hosts[a] == hosts[b]   # stays in the host: loopback, no link
        routes.append([] if same else [index[hop] for hop in path(fabric, table, hosts[a], hosts[b])])
    width = max((len(r) for r in routes), default=1) or 1
    out = np.full((len(routes), width), len(index), dtype=np.int64)
    for i, r in enumerate(routes):
        out[i, :len(r)] = r
    return out


def _transfers(schedule: Schedule, side: str):
    """(step_base, first, peer, nbytes) of every rank's sends or recvs, in
    rank then step order; the transfers of step id s are first[s]..first[s+1]-1."""
    step_base, first, peer, nbytes = [0], [], [], []
    for steps in schedule.steps:
        step_base.append(step_base[-1] + len(steps))
        for step in steps:
            first.append(len(peer))
            for t in getattr(step, side):
                peer.append(t.peer)
                nbytes.append(t.nbytes)
    first.append(len(peer))
    if len(schedule.steps) != schedule.ranks or any(not 0 <= r < schedule.ranks for r in set(peer)):
        raise ValueError(f"schedule of {schedule.ranks} ranks names ranks outside 0..{schedule.ranks - 1}")
    return (np.array(step_base, dtype=np.int64), np.array(first, dtype=np.int64),
            np.array(peer, dtype=np.int64), np.array(nbytes, dtype=np.int64))


def _owner(step_base: np.ndarray, first: np.ndarray):
    """Step id and rank of every transfer of a `_transfers` listing."""
    step = np.repeat(np.arange(len(first) - 1), np.diff(first))
    rank = np.repeat(np.arange(len(step_base) - 1), np.diff(step_base))
    return step, rank[step]


def _check_matching(send_key, recv_key, send_bytes, recv_bytes, ranks) -> None:
    """Raise ValueError naming a pair whose sends and receives disagree."""
    if np.array_equal(send_key, recv_key):
        bad = np.flatnonzero(send_bytes != recv_bytes)
        if bad.size:
            a, b = divmod(int(send_key[bad[0]]), ranks)
            raise ValueError(f"rank {a} sends {send_bytes[bad[0]]} bytes to rank {b}, "
                             f"which expects {recv_bytes[bad[0]]}")
        return
    sent = dict(zip(*np.unique(send_key, return_counts=True)))
    got = dict(zip(*np.unique(recv_key, return_counts=True)))
    key = min(k for k in sent.keys() | got.keys() if sent.get(k, 0) != got.get(k, 0))
    a, b = divmod(int(key), ranks)
    raise ValueError(f"rank {a} sends {sent.get(key, 0)} transfers to rank {b}, "
                     f"which receives {got.get(key, 0)}")


def _match_receives(schedule: Schedule, src, dst, send_bytes) -> np.ndarray:
    """Receiver step id of every flow: the n-th transfer a sends to b is the
    n-th transfer b receives from a. A stable sort by (src, dst) keeps each
    side in step order, so equal positions of the two sorts are matches."""
    step_base, first, peer, nbytes = _transfers(schedule, "recvs")
    recv_step, receiver = _owner(step_base, first)
    p = schedule.ranks
    by_send = np.argsort(src * p + dst, kind="stable")
    by_recv = np.argsort(peer * p + receiver, kind="stable")
    _check_matching((src * p + dst)[by_send], (peer * p + receiver)[by_recv],
                    send_bytes[by_send], nbytes[by_recv], p)
    matched = np.empty(len(src), dtype=np.int64)
    matched[by_send] = recv_step[by_recv]
    return matched


def _flows(fabric: Fabric, table: ForwardingTable, schedule: Schedule, hosts) -> _Flows:
    if len(hosts) != schedule.ranks:
        raise ValueError(f"{len(hosts)} hosts given for {schedule.ranks} ranks")
    for name in set(hosts):
        try:
            fabric.host(name)
        except KeyError:
            raise ValueError(f"host {name!r} is not in {fabric.topology}") from None
    links, capacity, delay = _directed_links(fabric)
    step_base, first, dst, nbytes = _transfers(schedule, "sends")
    send_step, src = _owner(step_base, first)
    recv_step = _match_receives(schedule, src, dst, nbytes)
    pairs, pair_of = np.unique(src * schedule.ranks + dst, return_inverse=True)
    index = {link: i for i, link in enumerate(links)}
    pair_route = _routes(fabric, table, hosts, [divmod(int(k), schedule.ranks) for k in pairs], index)
    route = pair_route[pair_of.ravel()]
    return _Flows(
        links=links, capacity_mbps=capacity, step_base=step_base, first=first,
        step_index=send_step - step_base[src], send_step=send_step, recv_step=recv_step,
        nbytes=nbytes.astype(np.float64), route=route,
        on_wire=(nbytes > 0) & (route[:, 0] != len(links)), delay_s=delay[route].sum(axis=1))


# --- static per-step link loads --------------------------------------------

def _step_count(schedule: Schedule) -> int:
    return max((len(s) for s in schedule.steps), default=0)


def _step_link_counts(flows: _Flows, steps: int):
    """Yield (k, flows of step index k per directed link) for every k."""
    wire = np.flatnonzero(flows.on_wire)
    by_step = wire[np.argsort(flows.step_index[wire], kind="stable")]
    bounds = np.searchsorted(flows.step_index[by_step], np.arange(steps + 1))
    for k in range(steps):
        counts = np.bincount(flows.route[by_step[bounds[k]:bounds[k + 1]]].ravel(), minlength=flows.pad + 1)
        yield k, counts[:flows.pad]


def _max_per_step(flows: _Flows, steps: int) -> list[int]:
    return [int(counts.max(initial=0)) for _, counts in _step_link_counts(flows, steps)]


def link_loads_per_step(fabric: Fabric, table: ForwardingTable, schedule: Schedule, hosts) -> list[dict[Link, int]]:
    """For each step index k, flows of every rank's k-th step per directed link.

    Counts flows that carry bytes between two different hosts; host NIC
    links are included (the source NIC is (host, 0), the last switch's port
    is the destination's downlink)."""
    flows = _flows(fabric, table, schedule, hosts)
    return [{flows.links[i]: int(counts[i]) for i in np.flatnonzero(counts)}
            for _, counts in _step_link_counts(flows, _step_count(schedule))]


def max_flows_per_step(fabric: Fabric, table: ForwardingTable, schedule: Schedule, hosts) -> list[int]:
    """For each step index k, the most flows of step k on any one directed link."""
    return _max_per_step(_flows(fabric, table, schedule, hosts), _step_count(schedule))


# --- max-min fair rates -----------------------------------------------------

def max_min_rates(route: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rate of every flow (row of link ids) on links of `capacity`.

    Progressive filling, many bottlenecks per round: a link whose fair share
    is the smallest among all links its flows cross is a bottleneck of all of
    them, so they are fixed at that share and their rate is taken off the
    other links they cross. The globally smallest share always qualifies."""
    nflows, width = route.shape
    rate = np.empty(nflows)
    left = capacity.astype(float)
    todo = np.arange(nflows)
    while todo.size:
        r = route[todo]
        n = np.bincount(r.ravel(), minlength=left.size)
        share = np.full(left.size, math.inf)
        used = n > 0
        share[used] = left[used] / n[used]
        flow_share = share[r].min(axis=1)
        lowest = np.full(left.size, math.inf)
        np.minimum.at(lowest, r.ravel(), np.repeat(flow_share, width))
        fixed = (share <= lowest)[r].any(axis=1)
        rate[todo[fixed]] = flow_share[fixed]
        left -= np.bincount(r[fixed].ravel(), weights=np.repeat(flow_share[fixed], width), minlength=left.size)
        np.maximum(left, 0.0, out=left)
        todo = todo[~fixed]
    return rate


# --- event-driven simulation ------------------------------------------------

class _Simulation:
    """One run of the event loop over a `_Flows`; step_end holds the result."""

    def __init__(self, flows: _Flows, deps: "_Dependencies", alpha_s: float, efficiency: float):
        self.f = flows
        self.deps = deps
        self.alpha = alpha_s
        self.capacity = flows.capacity_mbps * 1e6 / 8 * efficiency   # bytes/s
        nsteps = len(flows.first) - 1
        self.step_rank = np.repeat(np.arange(len(flows.step_base) - 1), np.diff(flows.step_base))
        # a step ends when it has started and nothing is pending: its transfers and its compute
        self.pending = (np.bincount(flows.send_step, minlength=nsteps)
                        + np.bincount(flows.recv_step, minlength=nsteps) + (deps.compute_s > 0))
        self.waiting = deps.count.copy()             # unfinished steps each step waits for
        self.started = np.zeros(nsteps, dtype=bool)
        # A flow waits for two events: its sender's and its receiver's step starting.
        self.gate = np.full(len(flows.nbytes), 2, dtype=np.int64)
        self.by_recv = np.argsort(flows.recv_step, kind="stable")
        self.recv_first = np.searchsorted(flows.recv_step[self.by_recv], np.arange(nsteps + 1))
        self.step_end = np.full(nsteps, math.nan)
        self.left = flows.nbytes.copy()
        self.active = np.zeros(0, dtype=np.int64)
        self.rates = np.zeros(0)
        self.stale = False
        self.max_flows = np.zeros(len(self.capacity), dtype=np.int64)
        self.switch_hops = (flows.route != flows.pad).sum(axis=1) - 1   # links of a path minus one
        self.wire_mbps = 8 / 1e6 / efficiency
        self.peak_switch_mbps = 0.0
        # Timed events: flows delivered (alpha and their path's delay after their last byte) and
        # compute that ends; (time, sequence, is_compute, ids).
        self.events: list = []
        self.sequence = 0
        self.t = 0.0

    def run(self) -> None:
        self._start(np.flatnonzero(self.waiting == 0))
        while self.active.size or self.events:
            self._advance()

    def _at(self, t: float, ids: np.ndarray, compute: bool) -> None:
        heapq.heappush(self.events, (t, self.sequence, compute, ids))
        self.sequence += 1

    def _deliver(self, ids: np.ndarray) -> None:
        """Flows `ids` arrive alpha plus their path's delay from now."""
        delays = self.f.delay_s[ids]
        if not delays.any():
            self._at(self.t + self.alpha, ids, False)
            return
        for delay in np.unique(delays):
            self._at(self.t + self.alpha + float(delay), ids[delays == delay], False)

    def _advance(self) -> None:
        """Move to the next drain or timed event and handle everything due then."""
        if self.stale:
            self._rerate()
        drain = self.left[self.active] / self.rates if self.active.size else np.zeros(0)
        t_drain = self.t + drain.min() if drain.size else math.inf
        t_next = min(t_drain, self.events[0][0] if self.events else math.inf)
        if math.isinf(t_next):
            raise RuntimeError("flows are stuck at zero rate")
        tol = REL_TOL * t_next
        self.left[self.active] -= self.rates * (t_next - self.t)
        self.t = t_next
        if drain.size:
            done = self.left[self.active] <= self.rates * tol
            if t_drain == t_next:
                done[drain.argmin()] = True   # round-off must not leave the due flow a hair short
            self._drain(done)
        # Handling events may start steps whose empty transfers are due at once when alpha is 0.
        while self.events and self.events[0][0] <= self.t + tol:
            delivered, computed = [], []
            while self.events and self.events[0][0] <= self.t + tol:
                _, _, compute, ids = heapq.heappop(self.events)
                (computed if compute else delivered).append(ids)
            steps = []
            if delivered:
                flows = np.concatenate(delivered)
                np.subtract.at(self.pending, self.f.send_step[flows], 1)
                np.subtract.at(self.pending, self.f.recv_step[flows], 1)
                steps += [self.f.send_step[flows], self.f.recv_step[flows]]
            if computed:
                done = np.concatenate(computed)
                np.subtract.at(self.pending, done, 1)
                steps.append(done)
            self._finish(np.unique(np.concatenate(steps)))

    def _drain(self, done: np.ndarray) -> None:
        """Retire the active flows marked `done`; they arrive later (`_deliver`)."""
        if not done.any():
            return
        gone = self.active[done]
        self.left[gone] = 0.0
        self.active = self.active[~done]
        self.stale = True
        self._deliver(gone)

    def _rerate(self) -> None:
        route = self.f.route[self.active]
        self.rates = max_min_rates(route, self.capacity)
        np.maximum(self.max_flows, np.bincount(route.ravel(), minlength=len(self.capacity)), out=self.max_flows)
        load = float(self.rates @ self.switch_hops[self.active]) * self.wire_mbps
        self.peak_switch_mbps = max(self.peak_switch_mbps, load)
        self.stale = False

    def _finish(self, steps: np.ndarray) -> None:
        """End every started step with nothing pending; start the steps that
        waited only for them, which may themselves be done at once (nothing
        to send, or receives only)."""
        while steps.size:
            done = steps[self.started[steps] & (self.pending[steps] == 0) & np.isnan(self.step_end[steps])]
            if not done.size:
                return
            self.step_end[done] = self.t
            nxt = self.deps.dependents[_ranges(self.deps.first[done], self.deps.first[done + 1])]
            np.subtract.at(self.waiting, nxt, 1)
            steps = self._start(np.unique(nxt[self.waiting[nxt] == 0]))

    def _start(self, steps: np.ndarray) -> np.ndarray:
        """`steps` start now: their compute runs, and the flows they send and
        receive open; returns them (some may be done already)."""
        if not steps.size:
            return steps
        self.started[steps] = True
        computing = steps[self.deps.compute_s[steps] > 0]
        for duration in np.unique(self.deps.compute_s[computing]):
            self._at(self.t + float(duration), computing[self.deps.compute_s[computing] == duration], True)
        self._release(steps)
        return steps

    def _release(self, steps: np.ndarray) -> None:
        """Open the gates of the flows `steps` send and receive, and start the
        flows whose other side is ready too; bytes-free and host-local ones
        only take the per-message latency."""
        sends = _ranges(self.f.first[steps], self.f.first[steps + 1])
        recvs = self.by_recv[_ranges(self.recv_first[steps], self.recv_first[steps + 1])]
        opened = np.concatenate((sends, recvs))
        np.subtract.at(self.gate, opened, 1)
        ids = np.unique(opened[self.gate[opened] == 0])
        if not ids.size:
            return
        wire = self.f.on_wire[ids]
        if wire.any():
            self.active = np.concatenate((self.active, ids[wire]))
            self.stale = True
        if not wire.all():
            self._deliver(ids[~wire])


@dataclass
class _Dependencies:
    """Which steps wait for which, over all ranks' steps numbered as in
    `_Flows` (step ids): a step waits for the step before it on its channel
    and for its `after` steps."""
    count: np.ndarray        # steps each step waits for
    first: np.ndarray        # dependents of step s: dependents[first[s]:first[s+1]]
    dependents: np.ndarray
    compute_s: np.ndarray    # per step


def _dependencies(schedule: Schedule, step_base: np.ndarray) -> _Dependencies:
    nsteps = int(step_base[-1])
    compute = np.array([s.compute_s for steps in schedule.steps for s in steps] or [0.0], dtype=float)[:nsteps]
    simple = all(s.channel == 0 and not s.after for steps in schedule.steps for s in steps)
    if simple:   # one chain per rank (a plain collective): vectorised
        ids = np.arange(nsteps)
        chained = np.ones(nsteps, dtype=bool)
        chained[step_base[:-1][np.diff(step_base) > 0]] = False   # first step of a rank
        src, dst = ids[chained] - 1, ids[chained]
    else:
        src, dst = [], []
        for rank, steps in enumerate(schedule.steps):
            base, last = int(step_base[rank]), {}
            for k, step in enumerate(steps):
                waits = set(step.after) | ({last[step.channel]} if step.channel in last else set())
                if any(not 0 <= j < k for j in waits):
                    raise ValueError(f"rank {rank} step {k} waits for a step that is not before it: {step.after}")
                src += [base + j for j in sorted(waits)]
                dst += [base + k] * len(waits)
                last[step.channel] = k
        src, dst = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    order = np.argsort(src, kind="stable")
    return _Dependencies(count=np.bincount(dst, minlength=nsteps),
                         first=np.searchsorted(src[order], np.arange(nsteps + 1)),
                         dependents=dst[order], compute_s=compute)


def _ranges(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The integers of every [start, stop) range, concatenated."""
    count = stop - start
    return np.repeat(start - np.cumsum(count) + count, count) + np.arange(count.sum())


# --- public entry points ----------------------------------------------------

def predict(fabric: Fabric, table: ForwardingTable, schedule: Schedule, hosts,
            alpha_s: float = 0.0, efficiency: float = 1.0) -> Prediction:
    """Predict every step's end time of `schedule` with rank r on host hosts[r].

    alpha_s: per-message latency (s). efficiency: payload fraction of every
    link's wire rate (0 < efficiency <= 1)."""
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    if not alpha_s >= 0:
        raise ValueError(f"alpha_s must be >= 0, got {alpha_s}")
    flows = _flows(fabric, table, schedule, hosts)
    sim = _Simulation(flows, _dependencies(schedule, flows.step_base), alpha_s, efficiency)
    sim.run()
    if np.isnan(sim.step_end).any():
        stuck = int(sim.step_rank[np.flatnonzero(np.isnan(sim.step_end))[0]])
        raise RuntimeError(f"schedule deadlocks: rank {stuck} never finishes its steps")
    ends = sim.step_end.tolist()
    base = flows.step_base.tolist()
    return Prediction(
        time_s=max(ends, default=0.0),
        step_end_s=tuple(tuple(ends[base[r]:base[r + 1]]) for r in range(schedule.ranks)),
        link_max_flows={flows.links[i]: int(n) for i, n in enumerate(sim.max_flows[:flows.pad]) if n},
        max_flows_per_step=_max_per_step(flows, _step_count(schedule)),
        peak_switch_mbps=sim.peak_switch_mbps)


def alpha_beta_time(collective: str, algorithm: str, ranks: int, size_bytes: float,
                    rate_mbps: float, alpha_s: float) -> float:
    """Closed-form alpha-beta time (docs/eflops.md) of a
    congestion-free collective: allreduce is reduce-scatter plus allgather,
    each `steps` messages and (p-1)/p * S bytes per rank link."""
    p = ranks
    if algorithm == "ring":
        steps = p - 1
    elif algorithm == "halving-doubling":
        if p < 2 or p & (p - 1):
            raise ValueError(f"the halving-doubling formula needs a power-of-two rank count, got {p}")
        steps = p.bit_length() - 1
    else:
        raise ValueError(f"no alpha-beta formula for algorithm {algorithm!r}")
    phases = {"allreduce": 2, "reduce-scatter": 1, "allgather": 1}.get(collective)
    if phases is None:
        raise ValueError(f"no alpha-beta formula for collective {collective!r}")
    beta = 8 / (rate_mbps * 1e6)   # seconds per byte
    return phases * (steps * alpha_s + (p - 1) / p * size_bytes * beta)
