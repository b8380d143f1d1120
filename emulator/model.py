"""Flow-level model (pure): predicts when every step of a collective ends.

Every send `Transfer` of a rank's step is a flow from that rank's host to the
peer's host along the path the controller installs (`controller.routing.path`).
Flows share links max-min fairly (the steady state TCP converges to, minus
its dynamics); a flow is delivered `alpha_s` after its last byte left. A
rank starts step k+1 once step k's sends and receives are all delivered.

The simulation is event driven: rates change only when a flow starts or
drains, so between two such events every flow moves at a constant rate.
Events closer than REL_TOL of the current time are merged, so thousands of
ranks whose chunks differ by a byte advance together instead of one by one.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from controller.routing import ForwardingTable, path
from emulator.fabric import Fabric
from emulator.schedule import Schedule

# Events within this fraction of the current time count as simultaneous.
REL_TOL = 1e-6

Link = tuple[str, int]   # a directed link: (node, egress port)


@dataclass(frozen=True)
class Prediction:
    time_s: float                                  # the last step of any rank ended
    step_end_s: tuple[tuple[float, ...], ...]      # step_end_s[rank][k]
    link_max_flows: dict[Link, int]                # most flows ever on a link at once
    max_flows_per_step: list[int]                  # busiest link's flows, per step index


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

    @property
    def pad(self) -> int:
        return len(self.links)


def _directed_links(fabric: Fabric) -> tuple[list[Link], np.ndarray]:
    links, rates = [], []
    for link in fabric.links:
        for end in link.ends():
            links.append(end)
            rates.append(link.rate_mbps)
    return links, np.array(rates + [math.inf])


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


def _match_receives(schedule: Schedule, by_pair: dict, nbytes: list, step_base: list) -> list:
    """Receiver step id of every flow: the n-th transfer a sends to b is the
    n-th transfer b receives from a."""
    recv_step = [-1] * len(nbytes)
    seen: dict[tuple[int, int], int] = {}
    for b, steps in enumerate(schedule.steps):
        for k, step in enumerate(steps):
            for t in step.recvs:
                key = (t.peer, b)
                n = seen.get(key, 0)
                seen[key] = n + 1
                sent = by_pair.get(key, ())
                if n >= len(sent):
                    raise ValueError(f"rank {b} step {k} receives a transfer from rank {t.peer} "
                                     f"that rank {t.peer} never sends")
                f = sent[n]
                if nbytes[f] != t.nbytes:
                    raise ValueError(f"rank {b} step {k} expects {t.nbytes} bytes from rank {t.peer}, "
                                     f"which sends {nbytes[f]}")
                recv_step[f] = step_base[b] + k
    for (a, b), sent in by_pair.items():
        if seen.get((a, b), 0) < len(sent):
            raise ValueError(f"rank {a} sends {len(sent)} transfers to rank {b}, "
                             f"which receives only {seen.get((a, b), 0)}")
    return recv_step


def _flows(fabric: Fabric, table: ForwardingTable, schedule: Schedule, hosts) -> _Flows:
    if len(hosts) != schedule.ranks:
        raise ValueError(f"{len(hosts)} hosts given for {schedule.ranks} ranks")
    for name in set(hosts):
        try:
            fabric.host(name)
        except KeyError:
            raise ValueError(f"host {name!r} is not in {fabric.topology}") from None
    links, capacity = _directed_links(fabric)
    step_base, first, step_index, pair_of, nbytes = [0], [], [], [], []
    by_pair: dict[tuple[int, int], list[int]] = {}   # (src rank, dst rank) -> flow ids in order
    pair_id: dict[tuple[int, int], int] = {}
    for a, steps in enumerate(schedule.steps):
        step_base.append(step_base[-1] + len(steps))
        for k, step in enumerate(steps):
            first.append(len(nbytes))
            for t in step.sends:
                key = (a, t.peer)
                by_pair.setdefault(key, []).append(len(nbytes))
                pair_of.append(pair_id.setdefault(key, len(pair_id)))
                step_index.append(k)
                nbytes.append(t.nbytes)
    first.append(len(nbytes))
    recv_step = _match_receives(schedule, by_pair, nbytes, step_base)
    index = {link: i for i, link in enumerate(links)}
    pair_route = _routes(fabric, table, hosts, list(pair_id), index)
    route = pair_route[np.array(pair_of, dtype=np.int64)] if nbytes else np.zeros((0, pair_route.shape[1]), np.int64)
    first_arr = np.array(first, dtype=np.int64)
    nbytes_arr = np.array(nbytes, dtype=np.float64)
    return _Flows(
        links=links, capacity_mbps=capacity,
        step_base=np.array(step_base, dtype=np.int64), first=first_arr,
        step_index=np.array(step_index, dtype=np.int64),
        send_step=np.repeat(np.arange(len(first) - 1), np.diff(first_arr)),
        recv_step=np.array(recv_step, dtype=np.int64), nbytes=nbytes_arr, route=route,
        on_wire=(nbytes_arr > 0) & (route[:, 0] != len(links)) if nbytes else np.zeros(0, bool))


# --- static per-step link loads --------------------------------------------

def _step_link_counts(flows: _Flows):
    """(step index, link, flow count) for every link some step's flows use."""
    route = flows.route[flows.on_wire]
    k = np.repeat(flows.step_index[flows.on_wire], route.shape[1])
    link = route.ravel()
    keep = link != flows.pad
    stride = flows.pad + 1
    keys, counts = np.unique(k[keep] * stride + link[keep], return_counts=True)
    return keys // stride, keys % stride, counts


def _step_count(schedule: Schedule) -> int:
    return max((len(s) for s in schedule.steps), default=0)


def _max_per_step(flows: _Flows, steps: int) -> list[int]:
    k, _, counts = _step_link_counts(flows)
    best = np.zeros(steps, dtype=np.int64)
    np.maximum.at(best, k, counts)
    return best.tolist()


def link_loads_per_step(fabric: Fabric, table: ForwardingTable, schedule: Schedule, hosts) -> list[dict[Link, int]]:
    """For each step index k, flows of every rank's k-th step per directed link.

    Counts flows that carry bytes between two different hosts; host NIC
    links are included (the source NIC is (host, 0), the last switch's port
    is the destination's downlink)."""
    flows = _flows(fabric, table, schedule, hosts)
    loads: list[dict[Link, int]] = [{} for _ in range(_step_count(schedule))]
    for k, link, n in zip(*_step_link_counts(flows)):
        loads[k][flows.links[link]] = int(n)
    return loads


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
    def __init__(self, flows: _Flows, alpha_s: float, efficiency: float):
        self.f = flows
        self.alpha = alpha_s
        self.capacity = flows.capacity_mbps * 1e6 / 8 * efficiency   # bytes/s
        nsteps = len(flows.first) - 1
        self.step_rank = np.repeat(np.arange(len(flows.step_base) - 1), np.diff(flows.step_base))
        self.pending = (np.bincount(flows.send_step, minlength=nsteps)
                        + np.bincount(flows.recv_step, minlength=nsteps))
        self.current = flows.step_base[:-1].copy()   # step id each rank is in
        self.step_end = np.full(nsteps, math.nan)
        self.left = flows.nbytes.copy()
        self.active = np.zeros(0, dtype=np.int64)
        self.rates = np.zeros(0)
        self.stale = False
        self.max_flows = np.zeros(len(self.capacity), dtype=np.int64)
        # Deliveries come alpha after "now", and now never goes back, so a FIFO is time-ordered.
        self.deliveries: deque[tuple[float, np.ndarray]] = deque()
        self.t = 0.0

    def run(self) -> None:
        ranks = np.flatnonzero(np.diff(self.f.step_base) > 0)
        self._enter(self.f.step_base[ranks])
        while self.active.size or self.deliveries:
            self._advance()

    def _advance(self) -> None:
        """Move to the next drain or delivery and handle everything due then."""
        if self.stale:
            self._rerate()
        drain = self.left[self.active] / self.rates if self.active.size else np.zeros(0)
        t_drain = self.t + drain.min() if drain.size else math.inf
        t_next = min(t_drain, self.deliveries[0][0] if self.deliveries else math.inf)
        if math.isinf(t_next):
            raise RuntimeError("flows are stuck at zero rate")
        tol = REL_TOL * t_next
        self.left[self.active] -= self.rates * (t_next - self.t)
        self.t = t_next
        if drain.size:
            self._drain(self.left[self.active] <= self.rates * tol, t_drain == t_next, drain)
        while self.deliveries and self.deliveries[0][0] <= self.t + tol:
            batch = [self.deliveries.popleft()[1]]
            while self.deliveries and self.deliveries[0][0] <= self.t + tol:
                batch.append(self.deliveries.popleft()[1])
            self._deliver(np.concatenate(batch))

    def _drain(self, done: np.ndarray, drain_due: bool, drain: np.ndarray) -> None:
        if drain_due:
            done[drain.argmin()] = True   # round-off must not leave the due flow a hair short
        if not done.any():
            return
        gone = self.active[done]
        self.left[gone] = 0.0
        self.active = self.active[~done]
        self.stale = True
        self.deliveries.append((self.t + self.alpha, gone))

    def _rerate(self) -> None:
        route = self.f.route[self.active]
        self.rates = max_min_rates(route, self.capacity)
        np.maximum(self.max_flows, np.bincount(route.ravel(), minlength=len(self.capacity)), out=self.max_flows)
        self.stale = False

    def _deliver(self, flows: np.ndarray) -> None:
        np.subtract.at(self.pending, self.f.send_step[flows], 1)
        np.subtract.at(self.pending, self.f.recv_step[flows], 1)
        self._finish(np.unique(np.concatenate((self.f.send_step[flows], self.f.recv_step[flows]))))

    def _finish(self, steps: np.ndarray) -> None:
        """End every step that is running and has nothing pending; start the
        rank's next one, which may itself be done already (receives only,
        all arrived early)."""
        while steps.size:
            ranks = self.step_rank[steps]
            done = steps[(self.pending[steps] == 0) & (self.current[ranks] == steps)]
            if not done.size:
                return
            self.step_end[done] = self.t
            ranks = self.step_rank[done]
            self.current[ranks] += 1
            nxt = self.current[ranks]
            nxt = nxt[nxt < self.f.step_base[ranks + 1]]
            self._release(nxt)
            steps = nxt

    def _enter(self, steps: np.ndarray) -> None:
        self._release(steps)
        self._finish(steps)

    def _release(self, steps: np.ndarray) -> None:
        """Start the send flows of `steps`; bytes-free and host-local ones
        only take the per-message latency."""
        if not steps.size:
            return
        start, stop = self.f.first[steps], self.f.first[steps + 1]
        count = stop - start
        ids = np.repeat(start - np.cumsum(count) + count, count) + np.arange(count.sum())
        wire = self.f.on_wire[ids]
        if wire.any():
            self.active = np.concatenate((self.active, ids[wire]))
            self.stale = True
        if not wire.all():
            self.deliveries.append((self.t + self.alpha, ids[~wire]))


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
    sim = _Simulation(flows, alpha_s, efficiency)
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
        max_flows_per_step=_max_per_step(flows, _step_count(schedule)))


def alpha_beta_time(collective: str, algorithm: str, ranks: int, size_bytes: float,
                    rate_mbps: float, alpha_s: float) -> float:
    """Closed-form alpha-beta time (../shared/design/eflops.md) of a
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
