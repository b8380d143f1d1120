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
the clearance travels; the model ignores that head start). Given a burst,
every link is a token bucket too (emulator.model.buckets: the emulator's
HTB), which changes rates when a bucket runs out; given a least step time,
no step ends sooner after it started (the emulating machine's agents need
its cores for every step: emulator.model.buckets.EmulatedLinks); given a
switch latency, every switch a flow crosses delays its delivery by it.

The simulation is event driven: rates change only when a flow starts or
drains, so between two such events every flow moves at a constant rate.
Events closer than REL_TOL of the current time are merged, so thousands of
ranks whose chunks differ by a byte advance together instead of one by one.
"""
from __future__ import annotations

import dataclasses
import functools
import heapq
import math
from dataclasses import dataclass

import numpy as np

from emulator.model.buckets import Buckets, Burst
from emulator.routes.routing import ForwardingTable, HopTable, path
from emulator.fabric.graph import HOST_PORT, Fabric
from emulator.fabric.mapping import rank_nodes
from emulator.workloads.flat import Flat, flatten
from emulator.workloads.schedule import flat_schedule, lockstep_rounds
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
    approximation: str = ""                        # what the prediction approximates ("": exact)

    @property
    def most_flows_on_a_link(self) -> int:
        return max(self.link_max_flows.values(), default=0)

    def step_index_end_s(self) -> list[float]:
        """When the last rank ended its k-th step, for every k."""
        if isinstance(self.step_end_s, _EveryRank):
            return list(self.step_end_s[0])
        ends: list[float] = []
        for rank in self.step_end_s:
            ends += [0.0] * (len(rank) - len(ends))
            ends[:len(rank)] = np.maximum(ends[:len(rank)], rank).tolist()
        return ends


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


class _Router:
    """A fabric's directed links (plus a last, infinite pad link) and the
    routes over them as link ids. A next-hop table (HopTable) routes all
    pairs asked for at once, over arrays; other tables look each host
    pair's route up once (`path`)."""

    def __init__(self, fabric: Fabric, table: ForwardingTable, switch_latency_s: float = 0.0):
        """switch_latency_s: what a switch adds to every packet crossing it,
        on the links it sends on (beside their netem delay)."""
        self.fabric, self.table = fabric, table
        self.links: list[Link] = [end for link in fabric.links for end in link.ends()]
        self.capacity = np.array([link.rate_mbps for link in fabric.links for _ in (0, 1)] + [math.inf])
        self.delay_s = np.array([link.delay_ms / 1e3 + switch_latency_s * fabric.is_switch(node)
                                 for link in fabric.links for node, _ in link.ends()] + [0.0])
        self.index = {link: i for i, link in enumerate(self.links)}
        self.known: dict[tuple[str, str], list[int]] = {}
        self.by_hops = isinstance(table, HopTable)
        if self.by_hops:   # switch number * port_width + port -> directed link id
            ends = [(table.number[node], port, i) for i, (node, port) in enumerate(self.links)
                    if node in table.number]
            number, port, link = np.array(ends, dtype=np.int64).reshape(-1, 3).T
            self.port_width = int(port.max(initial=0)) + 1
            # one more entry, the last, for the -1 of hops past a route's end: the pad link
            self.end_link = np.full(len(table.number) * self.port_width + 1, len(self.links), dtype=np.int64)
            self.end_link[number * self.port_width + port] = link

    def route(self, src: str, dst: str) -> list[int]:
        if (src, dst) not in self.known:   # a host to itself: loopback, no link
            self.known[(src, dst)] = [] if src == dst else [self.index[hop] for hop in
                                                             path(self.fabric, self.table, src, dst)]
        return self.known[(src, dst)]

    def routes(self, hosts, src_ranks: np.ndarray, dst_ranks: np.ndarray) -> np.ndarray:
        """Directed link ids of every (src rank, dst rank) pair, padded."""
        if self.by_hops:
            return self._hop_routes(hosts, src_ranks, dst_ranks)
        routes = [self.route(hosts[a], hosts[b]) for a, b in zip(src_ranks.tolist(), dst_ranks.tolist())]
        width = max(map(len, routes), default=1) or 1
        out = np.full((len(routes), width), len(self.links), dtype=np.int64)
        for i, r in enumerate(routes):
            out[i, :len(r)] = r
        return out

    def _hop_routes(self, hosts, src_ranks: np.ndarray, dst_ranks: np.ndarray) -> np.ndarray:
        """routes() through HopTable.paths: the same links `path` gives."""
        if not hasattr(self, "nic"):
            self.position = {h.name: i for i, h in enumerate(self.fabric.hosts)}
            self.nic = np.array([self.index[(h.name, HOST_PORT)] for h in self.fabric.hosts], dtype=np.int64)
        at = np.array([self.position[h] for h in hosts], dtype=np.int64)
        src, dst = at[src_ranks], at[dst_ranks]
        apart = np.flatnonzero(src != dst)   # a host to itself: loopback, no link
        switch, port = self.table.paths(src[apart], dst[apart])
        out = np.full((len(src), 1 + switch.shape[1] if apart.size else 1), len(self.links), dtype=np.int64)
        if apart.size:
            ids = self.end_link[np.where(switch >= 0, switch * self.port_width + port, -1)]
            if apart.size == len(src):   # no host to itself: no rows to pick
                out[:, 0], out[:, 1:] = self.nic[src], ids
            else:
                out[apart, 0], out[apart, 1:] = self.nic[src[apart]], ids
        return out


def _check_peers(flat: Flat) -> None:
    ranks = flat.ranks
    for side in (flat.sends, flat.recvs):
        if side.peer.size and not (0 <= side.peer.min() and side.peer.max() < ranks):
            raise ValueError(f"schedule of {ranks} ranks names ranks outside 0..{ranks - 1}")


def _owner(step_base: np.ndarray, first: np.ndarray):
    """Step id and rank of every transfer of a `Transfers` listing."""
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


def _match_receives(flat: Flat, send_key, once: bool, send_bytes) -> np.ndarray:
    """Receiver step id of every flow: the n-th transfer a sends to b is the
    n-th transfer b receives from a (send_key: a * ranks + b; once: every
    pair sends once). A stable sort by (src, dst) keeps each side in step
    order, so equal positions of the two sorts are matches."""
    peer, nbytes = flat.recvs.peer, flat.recvs.nbytes
    recv_step, receiver = _owner(flat.step_base, flat.recvs.first)
    p = flat.ranks
    recv_key = peer * p + receiver
    if once and len(recv_key) == len(send_key) and p * p <= 4 * len(send_key):
        # every pair once (all-to-all): a table by pair is the match, if each receives once
        slot = np.full(p * p, -1, dtype=np.int64)
        slot[recv_key] = np.arange(len(recv_key))
        at = slot[send_key]
        if (at >= 0).all() and np.count_nonzero(slot >= 0) == len(recv_key) and np.array_equal(nbytes[at], send_bytes):
            return recv_step[at]
    by_send = np.argsort(send_key, kind="stable")   # runs of sorted keys: a merge sort is quick
    by_recv = np.argsort(recv_key, kind="stable")
    _check_matching(send_key[by_send], recv_key[by_recv], send_bytes[by_send], nbytes[by_recv], p)
    matched = np.empty(len(send_key), dtype=np.int64)
    matched[by_send] = recv_step[by_recv]
    return matched


def _flows(router: _Router, flat: Flat, hosts) -> _Flows:
    if len(hosts) != flat.ranks:
        raise ValueError(f"{len(hosts)} hosts given for {flat.ranks} ranks")
    for name in set(hosts):
        try:
            router.fabric.host(name)
        except KeyError:
            raise ValueError(f"host {name!r} is not in {router.fabric.topology}") from None
    _check_peers(flat)
    step_base, first, dst, nbytes = flat.step_base, flat.sends.first, flat.sends.peer, flat.sends.nbytes
    send_step, src = _owner(step_base, first)
    key = src * flat.ranks + dst
    once = _increasing(key)   # every pair once, in order (all-to-all)
    recv_step = _match_receives(flat, key, once, nbytes)
    if once:   # no routes to share between flows
        route = router.routes(hosts, src, dst)
    else:
        pairs, pair_of = np.unique(key, return_inverse=True)
        route = router.routes(hosts, pairs // flat.ranks, pairs % flat.ranks)[pair_of.ravel()]
    return _Flows(
        links=router.links, capacity_mbps=router.capacity, step_base=step_base, first=first,
        step_index=send_step - step_base[src], send_step=send_step, recv_step=recv_step,
        nbytes=nbytes.astype(np.float64), route=route,
        on_wire=(nbytes > 0) & (route[:, 0] != len(router.links)), delay_s=router.delay_s[route].sum(axis=1))


# --- static per-step link loads --------------------------------------------

def _step_count(flat: Flat) -> int:
    return int(np.diff(flat.step_base).max(initial=0))


def _step_link_counts(flows: _Flows, steps: int):
    """Yield (k, flows of step index k per directed link) for every k."""
    wire = np.flatnonzero(flows.on_wire)
    index = flows.step_index[wire]
    if wire.size == len(flows.route) and np.all(index[1:] >= index[:-1]):   # in step order: no copy
        route = flows.route
    else:
        by_step = wire[_stable_order(index, steps)]
        route, index = flows.route[by_step], flows.step_index[by_step]
    bounds = np.searchsorted(index, np.arange(steps + 1))
    for k in range(steps):
        counts = np.bincount(route[bounds[k]:bounds[k + 1]].ravel(), minlength=flows.pad + 1)
        yield k, counts[:flows.pad]


def _max_per_step(flows: _Flows, steps: int) -> list[int]:
    return [int(counts.max(initial=0)) for _, counts in _step_link_counts(flows, steps)]


def link_loads_per_step(fabric: Fabric, table: ForwardingTable, schedule: Schedule, hosts) -> list[dict[Link, int]]:
    """For each step index k, flows of every rank's k-th step per directed link.

    Counts flows that carry bytes between two different hosts; host NIC
    links are included (the source NIC is (host, 0), the last switch's port
    is the destination's downlink)."""
    flat = as_flat(schedule)
    flows = _flows(_Router(fabric, table), flat, hosts)
    return [{flows.links[i]: int(counts[i]) for i in np.flatnonzero(counts)}
            for _, counts in _step_link_counts(flows, _step_count(flat))]


def link_bytes(fabric: Fabric, table: ForwardingTable, schedule: Schedule | Flat, hosts) -> dict[Link, float]:
    """Bytes every directed link (node, egress port) carries over the whole
    schedule, host NICs included; links that carry nothing are left out."""
    flows = _flows(_Router(fabric, table), as_flat(schedule), hosts)
    wire = flows.on_wire
    total = np.bincount(flows.route[wire].ravel(), weights=np.repeat(flows.nbytes[wire], flows.route.shape[1]),
                        minlength=flows.pad + 1)
    return {flows.links[i]: float(total[i]) for i in np.flatnonzero(total[:flows.pad])}


def max_flows_per_step(fabric: Fabric, table: ForwardingTable, schedule: Schedule, hosts) -> list[int]:
    """For each step index k, the most flows of step k on any one directed link."""
    flat = as_flat(schedule)
    return _max_per_step(_flows(_Router(fabric, table), flat, hosts), _step_count(flat))


# --- max-min fair rates -----------------------------------------------------

# From this many route entries (flows x links per route) on, progressive
# filling goes link by link: the flow-by-flow rounds cost a pass over every
# flow not yet fixed, and congested fabrics have hundreds of rate levels.
LINKWISE_ENTRIES = 1 << 21


def max_min_rates(route: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rate of every flow (row of link ids) on links of `capacity`."""
    if route.size >= LINKWISE_ENTRIES:
        return _filling_by_link(route, capacity)
    return _filling_by_flow(route, capacity)


def _filling_by_flow(route: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Progressive filling, many bottlenecks per round: a link whose fair share
    is the smallest among all links its flows cross is a bottleneck of all of
    them, so they are fixed at that share and their rate is taken off the
    other links they cross. The globally smallest share always qualifies."""
    nflows, width = route.shape
    rate = np.empty(nflows)
    left = capacity.astype(float)
    todo, r = np.arange(nflows), route
    n = np.bincount(route.ravel(), minlength=left.size)   # flows not fixed, per link
    while todo.size:
        share = np.full(left.size, math.inf)
        used = n > 0
        share[used] = left[used] / n[used]
        flow_share, fixed = _bottlenecked(share, r)
        rate[todo[fixed]] = flow_share[fixed]
        left -= np.bincount(r[fixed].ravel(), weights=np.repeat(flow_share[fixed], width), minlength=left.size)
        np.maximum(left, 0.0, out=left)
        n -= np.bincount(r[fixed].ravel(), minlength=left.size)
        todo, r = todo[~fixed], r[~fixed]
    return rate


def _filling_by_link(route: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Progressive filling, one level per round: the links of the smallest
    fair share are the bottleneck of every flow still free on them, which
    are fixed at that share. A round touches the links and the flows it
    fixes only (flows listed per link once), so all rounds together cost
    about one pass over the routes, however many levels there are."""
    nflows, width = route.shape
    entries = route.ravel()
    by_link = _stable_order(entries, capacity.size)
    n = np.bincount(entries, minlength=capacity.size)   # flows not fixed, per link
    start = np.concatenate(([0], np.cumsum(n)))
    left = capacity.astype(float)
    rate = np.full(nflows, math.inf)                     # flows on pad links only stay unbounded
    free = np.ones(nflows, dtype=bool)
    slot = np.empty(nflows, dtype=np.int64)
    share = np.empty(capacity.size)
    while True:
        share.fill(math.inf)
        used = n > 0
        np.divide(left, n, out=share, where=used)
        level = share.min()
        if math.isinf(level):
            return rate
        links = np.flatnonzero(share == level)
        flows = by_link[_ranges(start[links], start[links + 1])] // width
        flows = flows[free[flows]]
        slot[flows] = np.arange(flows.size)              # a flow on two of the links: keep it once
        flows = flows[slot[flows] == np.arange(flows.size)]
        free[flows], rate[flows] = False, level
        crossed = np.bincount(route[flows].ravel(), minlength=capacity.size)
        left -= crossed * level
        np.maximum(left, 0.0, out=left)
        n -= crossed


def _stable_order(keys: np.ndarray, bound: int) -> np.ndarray:
    """np.argsort(keys, kind="stable") of keys in 0..bound-1. Many keys are
    sorted by 16-bit digits, each a counting sort (numpy's stable sort of
    uint16): a comparison sort of 10^7 keys takes seconds."""
    if keys.size < 1 << 16:
        return np.argsort(keys, kind="stable")
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    for shift in range(16, max(bound - 1, 1).bit_length(), 16):
        order = order[np.argsort(((keys[order] >> shift) & 0xFFFF).astype(np.uint16), kind="stable")]
    return order


# From this many flows on, routes are read column by column (every flow's j-th
# link): numpy is slow across rows of a few links, but a column costs calls.
COLUMN_FLOWS = 1 << 12


def _bottlenecked(share: np.ndarray, route: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every flow's smallest link share, and whether one of its links is a
    bottleneck (no flow crossing it has a smaller share elsewhere)."""
    if len(route) < COLUMN_FLOWS:
        shares = share[route]
        flow_share = shares.min(axis=1)
        beaten = np.zeros(share.size, dtype=bool)
        beaten[route[shares > flow_share[:, None]]] = True
        return flow_share, (~beaten)[route].any(axis=1)
    shares = [share[link] for link in route.T]
    flow_share = functools.reduce(np.minimum, shares)
    beaten = np.zeros(share.size, dtype=bool)
    for link, s in zip(route.T, shares):
        beaten[link[s > flow_share]] = True
    qualifies = ~beaten
    return flow_share, functools.reduce(np.logical_or, [qualifies[link] for link in route.T])


def _rerate_after_drains(route: np.ndarray, rates: np.ndarray, capacity: np.ndarray, drained: float) -> np.ndarray:
    """Max-min rates once flows of rates >= `drained` have left (and none
    came): the flows slower than `drained` keep theirs, only the others
    are filled again, on what the slower ones leave of every link.

    Exact: progressive filling freezes flows in rising order of rate, and
    every link a drained flow crosses fills at its rate or later; without
    it those links fill later still, the others at the same level, so
    every flow frozen below `drained` is frozen as before."""
    keep = rates < drained * (1 - 1e-9)   # ties at `drained` are filled again, to be safe
    if keep.all():
        return rates
    left = capacity - np.bincount(route[keep].ravel(), weights=np.repeat(rates[keep], route.shape[1]),
                                  minlength=capacity.size)
    out = rates.copy()
    out[~keep] = max_min_rates(route[~keep], np.maximum(left, 0.0))
    return out


# --- event-driven simulation ------------------------------------------------

# Below this many flows, classes and the finish order cost more than they save.
ALIKE_FLOWS = 1 << 12


def _sending(t: float, ids: np.ndarray, left: np.ndarray, rates: np.ndarray) -> "_Sending":
    return (_Sending if len(ids) >= ALIKE_FLOWS else _FewSending)(t, ids, left, rates)


class _Sending:
    """The flows sending since the last re-rating (in the order they
    started), grouped in classes of equal bytes left and equal rate.

    Every event takes the time elapsed off the bytes left, as it always has
    (the arithmetic the predictions are pinned to), but once per class: the
    flows of a class see the same numbers, so they keep equal bytes to the
    bit and drain together. Only the classes that may drain next are looked
    at: those whose finish time at the re-rating's rates lies within
    2 REL_TOL of the earliest, an order found once per re-rating. That
    estimate is off by round-off only (1e-16 per event), far inside the
    margin, so they hold the next flow due and every flow due with it: the
    result is the same to the bit as looking at every flow."""

    def __init__(self, t: float, ids: np.ndarray, left: np.ndarray, rates: np.ndarray):
        self._flows(ids, left, rates)
        self.left, self.rates, self.class_of = _classes(left, rates)
        self.members = _stable_order(self.class_of, len(self.left))      # by class, in start order
        self.member_first = np.searchsorted(self.class_of[self.members], np.arange(len(self.left) + 1))
        self.alive = np.diff(self.member_first)                          # flows of a class still sending
        with np.errstate(divide="ignore"):
            finish = t + self.left / self.rates
        self.order = np.argsort(finish, kind="stable")
        self.finish_in_order = finish[self.order]
        self.fastest_from = np.maximum.accumulate(self.rates[self.order][::-1])[::-1]   # of order[i:]
        self.head = 0                                   # the classes order[:head] have drained

    def _flows(self, ids: np.ndarray, left: np.ndarray, rates: np.ndarray) -> None:
        self.ids, self.flow_rates = ids, rates
        self.gone = np.zeros(len(ids), dtype=bool)
        self.count = len(ids)

    def _skip_drained(self) -> None:
        while self.count:
            window = self.alive[self.order[self.head:self.head + 1024]] == 0
            if not window.all():
                self.head += int(window.argmin())
                return
            self.head += len(window)

    def candidates(self) -> np.ndarray:
        """The classes that may drain next."""
        if not self.count:
            return self.order[:0]
        stop = np.searchsorted(self.finish_in_order, self.finish_in_order[self.head] * (1 + 2 * REL_TOL), "right")
        near = self.order[self.head:stop]
        return near[self.alive[near] > 0]

    def elapse(self, seconds: float) -> None:
        self.left -= self.rates * seconds

    def _positions(self, classes: np.ndarray) -> np.ndarray:
        """The flows of `classes` still sending, in start order."""
        positions = self.members[_ranges(self.member_first[classes], self.member_first[classes + 1])]
        return np.sort(positions[~self.gone[positions]])

    def retire(self, classes: np.ndarray, due: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The flows of `classes` drained, and the first of the classes `due`
        (the next to finish, whatever round-off left it): their ids and rates."""
        positions = self._positions(classes)
        first_due = self._positions(due)[:1]
        self.gone[positions] = True
        if first_due.size and not self.gone[first_due[0]]:
            positions = np.sort(np.concatenate((positions, first_due)))
        self.gone[positions] = True
        self.count -= len(positions)
        np.subtract.at(self.alive, self.class_of[positions], 1)
        self._skip_drained()
        return self.ids[positions], self.flow_rates[positions]

    def all_slower_than(self, rate: float) -> bool:
        if self.count == 0 or self.fastest_from[self.head] < rate:
            return True
        return bool((self.rates[self.alive > 0] < rate).all())

    def still_sending(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ids, bytes left and rates of the flows not drained, in start order."""
        keep = ~self.gone
        return self.ids[keep], self.left[self.class_of[keep]], self.flow_rates[keep]


def _classes(left: np.ndarray, rates: np.ndarray):
    """The distinct (bytes left, rate) pairs in sorted order, and each
    flow's: bytes left and rate of every class, and the class of every flow."""
    if left.size and left.min() == left.max():   # flows that all start now: the rates alone
        alike, class_of = np.unique(rates, return_inverse=True)
        return np.full(alike.size, left[0]), alike, class_of.ravel()
    pair = np.empty(len(left), dtype=complex)   # (bytes left, rate) as one number: one sort finds the classes
    pair.real, pair.imag = left, rates
    alike, class_of = np.unique(pair, return_inverse=True)
    return alike.real.copy(), alike.imag.copy(), class_of.ravel()


class _FewSending(_Sending):
    """_Sending for a few flows: every flow its own class, every one looked
    at in every event (as the simulation always did; cheaper than sorting)."""

    def __init__(self, t: float, ids: np.ndarray, left: np.ndarray, rates: np.ndarray):
        self._flows(ids, left, rates)
        self.left, self.rates, self.class_of = left.copy(), rates, np.arange(len(ids))
        self.alive = np.ones(len(ids), dtype=np.int64)

    def _skip_drained(self) -> None:
        pass

    def candidates(self) -> np.ndarray:
        return np.flatnonzero(~self.gone)

    def _positions(self, classes: np.ndarray) -> np.ndarray:
        return np.sort(classes[~self.gone[classes]])

    def all_slower_than(self, rate: float) -> bool:
        return bool((self.rates[~self.gone] < rate).all())


class _Simulation:
    """One run of the event loop over a `_Flows`; step_end holds the result."""

    def __init__(self, flows: _Flows, deps: "_Dependencies", alpha_s: float, efficiency: float,
                 burst: Burst | None = None, level: np.ndarray | None = None, min_step_s: float = 0.0):
        self.f = flows
        if min_step_s:   # every step runs "compute" of at least that long beside its transfers
            deps = dataclasses.replace(deps, compute_s=np.maximum(deps.compute_s, min_step_s))
        self.deps = deps
        self.alpha = alpha_s
        self.capacity = flows.capacity_mbps * 1e6 / 8 * efficiency   # bytes/s
        self.buckets = burst and Buckets(self.capacity, burst, efficiency, level)
        nsteps = len(flows.first) - 1
        self.step_rank = np.repeat(np.arange(len(flows.step_base) - 1), np.diff(flows.step_base))
        # a step ends when it has started and nothing is pending: its transfers and its compute
        self.pending = (np.bincount(flows.send_step, minlength=nsteps)
                        + np.bincount(flows.recv_step, minlength=nsteps) + (deps.compute_s > 0))
        self.waiting = deps.count.copy()             # unfinished steps each step waits for
        self.started = np.zeros(nsteps, dtype=bool)
        # A flow waits for two events: its sender's and its receiver's step starting.
        self.gate = np.full(len(flows.nbytes), 2, dtype=np.int64)
        self.by_recv = _stable_order(flows.recv_step, nsteps)
        self.recv_first = np.searchsorted(flows.recv_step[self.by_recv], np.arange(nsteps + 1))
        self.step_end = np.full(nsteps, math.nan)
        self.sending = _sending(0.0, np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0))
        self.stale = False
        # Since the last re-rating: the flows that started, and the lowest rate of the flows that drained.
        self.fresh: list[np.ndarray] = []
        self.drained_rate = math.inf
        self.max_flows = np.zeros(len(self.capacity), dtype=np.int64)
        self.switch_hops = (flows.route != flows.pad).sum(axis=1) - 1   # links of a path minus one
        self.wire_mbps = 8 / 1e6 / efficiency
        self.peak_switch_mbps = 0.0
        # Timed events: flows delivered (alpha and their path's delay after their last byte) and
        # compute that ends; (time, sequence, is_compute, ids).
        self.events: list = []
        self.sequence = 0
        self.t = 0.0

    def run(self, progress=None) -> None:
        self._finish(self._start(np.flatnonzero(self.waiting == 0)))   # empty first steps end at once
        rounds = 0
        while self.sending.count or self.fresh or self.events:
            self._advance()
            rounds += 1
            if progress and rounds % 256 == 0:
                progress(np.count_nonzero(self.started) / self.started.size)

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
        near = self.sending.candidates()
        drain = self.sending.left[near] / self.sending.rates[near]
        t_drain = self.t + drain.min() if drain.size else math.inf
        t_next = min(t_drain, self.events[0][0] if self.events else math.inf,
                     self.t + self.buckets.empty_in() if self.buckets else math.inf)
        if math.isinf(t_next):
            raise RuntimeError("flows are stuck at zero rate")
        tol = REL_TOL * t_next
        self.sending.elapse(t_next - self.t)
        if self.buckets and self.buckets.elapse(t_next - self.t, tol):
            self.stale = True   # links out of tokens: every rate again
        self.t = t_next
        if drain.size:
            done = self.sending.left[near] <= self.sending.rates[near] * tol
            # round-off must not leave the due flow a hair short
            due = near[drain == drain.min()] if t_drain == t_next else near[:0]
            if done.any() or due.size:
                self._drain(*self.sending.retire(near[done], due))
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
            self._finish(_sorted_once(np.concatenate(steps), len(self.pending)))

    def _drain(self, gone: np.ndarray, rates: np.ndarray) -> None:
        """The flows `gone` (at `rates`) sent their last byte; they arrive later (`_deliver`)."""
        self.drained_rate = min(self.drained_rate, float(rates.min()))
        self.stale = True
        self._deliver(gone)

    def _rerate(self) -> None:
        if self.buckets:
            self._rerate_buckets()
            return
        if not self.fresh and self.sending.all_slower_than(self.drained_rate * (1 - 1e-9)):
            # Only flows at least as fast as every one left have drained: no rate changes
            # (_rerate_after_drains), and a subset of the flows at the same rates neither
            # raises a link's most flows nor the load in flight. Nothing to do.
            self.drained_rate, self.stale = math.inf, False
            return
        active, left, rates, route, new = self._active()
        if new.size:
            rates = max_min_rates(route, self.capacity)
        else:
            rates = _rerate_after_drains(route, rates, self.capacity, self.drained_rate)
        self._rated(active, left, rates, route, rates)

    def _rerate_buckets(self) -> None:
        """Every rate again, on the links' rates now (their peak while they
        spend tokens): a link's bucket changes rates without a flow coming
        or going. The load in flight counts each flow at most at its rate."""
        self.buckets.resume()
        active, left, _, route, _ = self._active()
        rates = max_min_rates(route, self.buckets.capacity())
        self.buckets.carry(route, rates)
        self._rated(active, left, rates, route, _within_rates(rates, route, self.capacity))

    def _active(self):
        """The flows sending and the ones that start now: ids, bytes left,
        rates (of those sending), routes, and the ids that start."""
        active, left, rates = self.sending.still_sending()
        new = np.concatenate(self.fresh) if self.fresh else active[:0]
        active, left = np.concatenate((active, new)), np.concatenate((left, self.f.nbytes[new]))
        every = len(active) == len(self.f.route) and _increasing(active)   # every flow, in order
        return active, left, rates, self.f.route if every else self.f.route[active], new

    def _rated(self, active, left, rates, route, shaped) -> None:
        """The flows `active` send at `rates` from now (`shaped`: within their links' rates)."""
        self.fresh, self.drained_rate = [], math.inf
        self.sending = _sending(self.t, active, left, rates)
        np.maximum(self.max_flows, np.bincount(route.ravel(), minlength=len(self.capacity)), out=self.max_flows)
        load = float(shaped @ self.switch_hops[active]) * self.wire_mbps
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
        ids = _sorted_once(opened[self.gate[opened] == 0], len(self.gate))
        if not ids.size:
            return
        wire = self.f.on_wire[ids]
        if wire.any():
            self.fresh.append(ids[wire])
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


def _dependencies(flat: Flat) -> _Dependencies:
    nsteps, step_base = flat.steps, flat.step_base
    if flat.waits is None:   # one chain per rank (a plain collective)
        ids = np.arange(nsteps)
        chained = np.ones(nsteps, dtype=bool)
        chained[step_base[:-1][np.diff(step_base) > 0]] = False   # first step of a rank
        src, dst = ids[chained] - 1, ids[chained]
    else:
        src, dst = flat.waits
    order = _stable_order(src, nsteps)
    return _Dependencies(count=np.bincount(dst, minlength=nsteps),
                         first=np.searchsorted(src[order], np.arange(nsteps + 1)),
                         dependents=dst[order], compute_s=flat.compute_s)


def _within_rates(rates: np.ndarray, route: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Flow rates scaled down so that no link carries more than its rate:
    a burst spends a link's tokens for milliseconds, which is no sustained
    forwarding work, so the load in flight counts every link at its rate."""
    carried = np.bincount(route.ravel(), weights=np.repeat(rates, route.shape[1]), minlength=len(capacity))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(carried > capacity, capacity / carried, 1.0)
    return rates * scale[route].min(axis=1)


def _increasing(values: np.ndarray) -> bool:
    """Strictly increasing: distinct and in order (indices that need no sort or copy)."""
    return bool(np.all(values[1:] > values[:-1]))


def _sorted_once(ids: np.ndarray, bound: int) -> np.ndarray:
    """np.unique of ids in 0..bound-1; past bound/8 of them, through a mask
    (one pass) rather than a sort."""
    if ids.size * 8 < bound:
        return np.unique(ids)
    seen = np.zeros(bound, dtype=bool)
    seen[ids] = True
    return np.flatnonzero(seen)


def _ranges(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The integers of every [start, stop) range, concatenated."""
    count = stop - start
    return np.repeat(start - np.cumsum(count) + count, count) + np.arange(count.sum())


# --- public entry points ----------------------------------------------------

def as_flat(schedule: Schedule | Flat) -> Flat:
    return schedule if isinstance(schedule, Flat) else flatten(schedule)


def predict(fabric: Fabric, table: ForwardingTable, schedule: Schedule | Flat, hosts,
            alpha_s: float = 0.0, efficiency: float = 1.0, progress=None, burst: Burst | None = None,
            min_step_s: float = 0.0, switch_latency_s: float = 0.0) -> Prediction:
    """Predict every step's end time of `schedule` with rank r on host hosts[r].

    alpha_s: per-message latency (s). efficiency: payload fraction of every
    link's wire rate (0 < efficiency <= 1). progress: called now and then
    with the fraction of steps started. burst: the links' token buckets
    (emulator.model.buckets; None: every link at its rate). min_step_s:
    the least time of any step, however little it moves (0: none).
    switch_latency_s: every switch a message crosses delays it so much."""
    _check_model(alpha_s, efficiency, min_step_s, switch_latency_s)
    return _predict(_Router(fabric, table, switch_latency_s), as_flat(schedule), hosts, alpha_s, efficiency,
                    progress, burst, min_step_s)


def _check_model(alpha_s: float, efficiency: float, min_step_s: float = 0.0, switch_latency_s: float = 0.0) -> None:
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    if not alpha_s >= 0:
        raise ValueError(f"alpha_s must be >= 0, got {alpha_s}")
    if not min_step_s >= 0:
        raise ValueError(f"min_step_s must be >= 0, got {min_step_s}")
    if not switch_latency_s >= 0:
        raise ValueError(f"switch_latency_s must be >= 0, got {switch_latency_s}")


def _predict(router: _Router, flat: Flat, hosts, alpha_s: float, efficiency: float, progress,
             burst: Burst | None, min_step_s: float = 0.0) -> Prediction:
    flows, sim = _simulate(router, flat, hosts, alpha_s, efficiency, progress, burst, min_step_s=min_step_s)
    ends = sim.step_end.tolist()
    base = flows.step_base.tolist()
    return Prediction(
        time_s=max(ends, default=0.0),
        step_end_s=tuple(tuple(ends[base[r]:base[r + 1]]) for r in range(flat.ranks)),
        link_max_flows=_link_max_flows(router, sim.max_flows),
        max_flows_per_step=_max_per_step(flows, _step_count(flat)),
        peak_switch_mbps=sim.peak_switch_mbps)


def _simulate(router: _Router, flat: Flat, hosts, alpha_s: float, efficiency: float, progress,
              burst: Burst | None = None, level: np.ndarray | None = None, min_step_s: float = 0.0):
    flows = _flows(router, flat, hosts)
    sim = _Simulation(flows, _dependencies(flat), alpha_s, efficiency, burst, level, min_step_s)
    sim.run(progress)
    if np.isnan(sim.step_end).any():
        stuck = int(sim.step_rank[np.flatnonzero(np.isnan(sim.step_end))[0]])
        raise RuntimeError(f"schedule deadlocks: rank {stuck} never finishes its steps")
    return flows, sim


def _link_max_flows(router: _Router, max_flows: np.ndarray) -> dict[Link, int]:
    used = np.flatnonzero(max_flows[:len(router.links)])
    return {router.links[i]: n for i, n in zip(used.tolist(), max_flows[used].tolist())}


# --- lock-step: a collective round by round --------------------------------------

LOCKSTEP = "lock-step: every rank starts step k when all have ended step k-1"


class _EveryRank(tuple):
    """step_end_s of a lock-step prediction: every rank's step ends are the
    rounds' ends (one tuple shared, not one per rank)."""

    def __new__(cls, ends: tuple, ranks: int):
        return super().__new__(cls, (ends,) * ranks)


def predict_lockstep(fabric: Fabric, table: ForwardingTable, rounds, hosts,
                     alpha_s: float = 0.0, efficiency: float = 1.0, note: str = "", progress=None,
                     burst: Burst | None = None, min_step_s: float = 0.0,
                     switch_latency_s: float = 0.0) -> Prediction:
    """Predict a collective given as lock-step rounds (flat.lockstep_rounds):
    each distinct round is simulated exactly once, by itself, and rounds
    follow each other. Ranks that drift apart in the exact simulation are
    held together here; where they stay together (uncongested, symmetric)
    this is the exact prediction at the cost of one round per pattern.
    With a burst, every round starts with the tokens the one before left
    (so repeated rounds are simulated until their buckets repeat)."""
    _check_model(alpha_s, efficiency, min_step_s, switch_latency_s)
    router = _Router(fabric, table, switch_latency_s)   # shared: rounds often reuse pairs (halving, then doubling)
    t, ends, per_step, peak = 0.0, [], [], 0.0
    link_max = np.zeros(len(router.capacity), dtype=np.int64)
    # A round equal to an earlier one (halving-doubling's doubling round k sends what halving round k
    # received, to the same partner) is the same simulation: its figures are taken, not simulated again.
    done: dict[tuple, tuple] = {}
    level = None   # with a burst: every bucket's bytes, carried from round to round (None: full)
    for i, (flat, repeats) in enumerate(rounds):
        if progress:
            progress(i / len(rounds))
        for times in ([1] * repeats if burst else [repeats]):
            key = (_round_key(flat), None if level is None else level.tobytes())
            if key not in done:
                flows, sim = _simulate(router, flat, hosts, alpha_s, efficiency, None, burst, level, min_step_s)
                done[key] = (float(sim.step_end.max(initial=0.0)), _max_per_step(flows, 1), sim.max_flows,
                             sim.peak_switch_mbps, sim.buckets and sim.buckets.level)
            took, busiest, max_flows, round_peak, level = done[key]
            ends += [t + took * (k + 1) for k in range(times)]
            t = ends[-1]
            per_step += busiest * times
            np.maximum(link_max, max_flows, out=link_max)
            peak = max(peak, round_peak)
    return Prediction(time_s=t, step_end_s=_EveryRank(tuple(ends), len(hosts)),
                      link_max_flows=_link_max_flows(router, link_max), max_flows_per_step=per_step,
                      peak_switch_mbps=peak,
                      approximation="; ".join(filter(None, (LOCKSTEP, note))))


def _round_key(flat: Flat) -> bytes:
    """What a lock-step round's simulation depends on besides the routes:
    every rank's sends and receives (peers and bytes) and compute."""
    parts = [np.array([flat.ranks]), flat.step_base]
    for side in (flat.sends, flat.recvs):
        parts += [side.first, side.peer, side.nbytes]
    return b"".join(np.ascontiguousarray(a, dtype=np.int64).tobytes() for a in parts) + flat.compute_s.tobytes()


# Past this many flows (sends) the exact simulation takes seconds, and far
# longer where ranks drift apart: "auto" predicts in lock-step rounds there.
EXACT_FLOWS = 1 << 15
METHODS = ("auto", "exact", "lockstep")


def predict_collective(fabric: Fabric, table: ForwardingTable, collective: str, algorithm: str, hosts,
                       size_bytes: int, alpha_s: float = 0.0, efficiency: float = 1.0, method: str = "auto",
                       progress=None, burst: Burst | None = None, min_step_s: float = 0.0,
                       switch_latency_s: float = 0.0) -> Prediction:
    """One collective call, built as arrays. method "exact": the event
    simulation; "lockstep": round by round (predict_lockstep) where the
    collective has rounds (ring, power-of-two halving-doubling), else exact;
    "auto": lock-step past EXACT_FLOWS flows."""
    if method not in METHODS:
        raise ValueError(f"unknown model method {method!r}; choose one of: {', '.join(METHODS)}")
    nodes = rank_nodes(fabric, hosts)   # for an algorithm that reads them (hierarchical)
    rounds = None if method == "exact" else lockstep_rounds(collective, algorithm, len(hosts), size_bytes, nodes)
    if rounds and (method == "lockstep" or sum(r.sends.peer.size * n for r, n in rounds[0]) > EXACT_FLOWS):
        return predict_lockstep(fabric, table, rounds[0], hosts, alpha_s, efficiency, rounds[1], progress, burst,
                                min_step_s, switch_latency_s)
    return predict(fabric, table, flat_schedule(collective, algorithm, len(hosts), size_bytes, nodes), hosts,
                   alpha_s, efficiency, progress, burst, min_step_s, switch_latency_s)
