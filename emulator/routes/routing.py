"""Routing policies (pure): a fabric in, per-switch forwarding tables out.

Forwarding is by destination host. A table entry for (switch, destination)
is one of:

- an output port (int): every source uses it;
- a tuple of equal-cost ports ("ecmp"): a hash of the (source, destination)
  pair picks one, as flow-hashing switches do;
- a dict {source host -> port} (per-pair routing: "bigraph", "valiant",
  "traffic-aware", and "adaptive" once it has moved a pair). Sources it does
  not name use the port under ANY_SOURCE, the one the "shortest" policy
  would use, so a packet is never dropped for lack of a rule.

"shortest", "spread" and "ecmp" only decide which of the equal-cost next hops
a switch uses, so their paths are always shortest; "bigraph" and
"traffic-aware" pick one shortest path per pair; "valiant" detours through a
random switch (on a dragonfly, a router of a random third group).
"minimal" (dragonfly) and "dimension-order" (torus) are the families'
own destination-based rules. The flow model follows the same tables (`path`), so model and
emulation route every flow identically.

On a fabric with nodes of accelerators (emulator/fabric/nodes.py) every
policy routes the network alone (`network_fabric`: the fabric's switches,
with the NICs as endpoints), and its table is lifted onto the accelerators
(`LiftedTable`): a fabric switch's entry for an accelerator is its entry
for that accelerator's NIC (per-source entries given to the accelerators
that send through each source NIC); a node switch forwards traffic for its
own node's accelerators over the interconnect, and traffic for other nodes
towards the NIC the source accelerator sends through: its own, or, with
"pxn", the local NIC on the destination's rail. `forwarding_table` and
`model_table` both lift, so the model, the controller, the verification
and `topo --path` see the same routes.
"""
from __future__ import annotations

import itertools
import random
import zlib
from collections import deque
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Callable

import numpy as np

from emulator.fabric.graph import HOST_PORT, Fabric, Host, Link, Switch, host_address, nic_name
from emulator.fabric.topology import dragonfly_group, torus_coordinates, torus_sizes, torus_switch
from emulator.routes import user_policy
from emulator.workloads.steps import Schedule

@dataclass(frozen=True)
class Policy:
    """A routing policy: the one record the spec, the planner, the
    emulator, the controller and the help texts look up."""
    name: str
    description: str
    build: Callable[[Fabric, "dict | None", int], "ForwardingTable"]   # (fabric, demands, seed) -> table
    needs_demands: bool = False      # routes the workload's host-pair demands, known before it runs
    takes_demands: bool = False      # is given those demands where a workload is known, None elsewhere
    uses_seed: bool = False          # its choices are random (seeded)
    adapts: bool = False             # the controller moves pairs from measured counters while traffic runs
    fabric_kind: str | None = None   # routes only fabrics of this kind
    hops: "HopRule | None" = None    # chooses only among equal-cost next hops, by this rule
    needs_nodes: bool = False        # routes only fabrics with nodes of accelerators
    nic_rule: str = "own"            # on a fabric with nodes, the NIC an accelerator's traffic for another node
                                     # leaves by: "own" (the one it uses, floor(a*K/N)) or "rail" (the local NIC
                                     # with the destination's NIC index: PXN)
    routes_given: bool = False       # the controller installs the routes the emulator computed (a user's
                                     # file runs once, in the emulator's process: fixed_policy)

    @property
    def sees_demands(self) -> bool:
        """Its routes may depend on the workload's demands."""
        return self.needs_demands or self.takes_demands


@dataclass(frozen=True)
class HopRule:
    """How a next-hop policy picks among a switch's equal-cost ports towards
    a destination host: for one destination (`pick`: a port, or every port
    for out_port to hash per pair) and for many (source, destination) pairs
    at once in a HopTable (`pick_many`: the index of each pair's port)."""
    name: str
    pick: Callable[[list[int], int, int], "int | tuple"]   # (ports, dst host index, digit weight)
    pick_many: Callable[["HopTable", np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], "np.ndarray | int"]
    # (table, src hosts, dst hosts, here switches, choice counts, target rows)


def _destination_digit(table: "HopTable", src, dst, here, n, row):
    return (table._host_index[dst] // table._weight[row, table._hops[row, here]]) % n


def _pair_hash(table: "HopTable", src, dst, here, n, row):
    """out_port's hash, where there is a choice."""
    pick = np.zeros(len(here), dtype=np.int64)
    many = np.flatnonzero(n > 1)
    if not hasattr(table, "_hashes"):
        table._hashes = EcmpHashes([h.name for h in table.fabric.hosts], table.names)
    pick[many] = table._hashes(src[many], dst[many], here[many]) % n[many]
    return pick


LOWEST_PORT = HopRule("lowest port", lambda ports, dst_index, weight: ports[0],
                      lambda table, src, dst, here, n, row: 0)
BY_DESTINATION = HopRule("by destination", lambda ports, dst_index, weight: ports[(dst_index // weight) % len(ports)],
                         _destination_digit)
BY_PAIR_HASH = HopRule("by pair hash", lambda ports, dst_index, weight: tuple(ports), _pair_hash)


def _next_hop_policy(name: str, description: str, rule: HopRule, **kwargs) -> Policy:
    """A policy that only chooses among equal-cost next hops, by `rule`."""
    return Policy(name, description, lambda fabric, demands, seed: _hop_table(fabric, rule), hops=rule, **kwargs)


_POLICY_LIST = (
    _next_hop_policy("shortest", "shortest paths; among equal-cost next hops the lowest-numbered port "
                                 "(one fixed middle switch per switch pair)", LOWEST_PORT),
    _next_hop_policy("spread", "shortest paths; equal-cost next hops chosen by destination host "
                               "(dst index mod choices), spreading destinations over middle switches", BY_DESTINATION),
    _next_hop_policy("ecmp", "shortest paths; every (source, destination) pair hashed onto one of the equal-cost "
                             "next hops at every switch, as flow-hashing ECMP does, collisions included", BY_PAIR_HASH),
    Policy("bigraph", "EFLOPS BiGraph routing: the direct link across the parts; same-part pairs spread "
                      "over the other part's switches so every middle and every link carries an equal share",
           lambda fabric, demands, seed: _bigraph_table(fabric), fabric_kind="bigraph"),
    Policy("valiant", "Valiant load balancing: every (source, destination) pair detours through a random "
                      "switch (seeded), shortest paths to it and on to the destination, loops cut; on a dragonfly "
                      "through a random group other than the source's and the destination's, minimal routes "
                      "(as \"minimal\") to it and on",
           lambda fabric, demands, seed: _valiant_table(fabric, seed), uses_seed=True),
    Policy("traffic-aware", "one shortest path per pair, placed greedily from the largest demand down "
                            "to minimise the busiest link (needs the traffic demands)",
           lambda fabric, demands, seed: _traffic_aware_table(fabric, demands), needs_demands=True),
    _next_hop_policy("adaptive", "Hedera-style: starts as ecmp; the controller moves pairs off links above "
                                 "90% load onto the least-loaded shortest path (emulator/routes/adaptive.py)",
                     BY_PAIR_HASH, adapts=True),
    Policy("pxn", "NCCL's PXN on a rail fabric of nodes: an accelerator's traffic for another node crosses its "
                  "node's interconnect to the local NIC on the destination's rail (the NIC with the destination's "
                  "NIC index), then that rail; shortest paths otherwise",
           lambda fabric, demands, seed: _hop_table(fabric, LOWEST_PORT), fabric_kind="rail", needs_nodes=True,
           nic_rule="rail"),
    Policy("minimal", "dragonfly minimal routing: at most one global link, local-global-local (a router "
                      "without a global link to the destination's group first crosses to the lowest router of "
                      "its group that has one; among parallel links the lowest port)",
           lambda fabric, demands, seed: _by_next_router(fabric, "dragonfly", _DragonflyHops(fabric).port),
           fabric_kind="dragonfly"),
    Policy("dimension-order", "torus dimension-order routing: x first, then y, then z, each the shorter way "
                              "round its ring (half-way: the positive direction); deadlock-free only with "
                              "virtual channels, which TCP over OVS (lossy, no credit loops) does not need",
           lambda fabric, demands, seed: _by_next_router(fabric, "torus", _dimension_order_port),
           fabric_kind="torus"),
)
POLICIES: dict[str, Policy] = {p.name: p for p in _POLICY_LIST}

ANY_SOURCE = "*"   # per-pair entries: the port of sources the entry does not name

# ForwardingTable: switch name -> {destination host name -> output port, the
# equal-cost ports an ecmp hash chooses from, or {source host -> port}}
ForwardingTable = dict[str, dict[str, "int | tuple[int, ...] | dict[str, int]"]]

# Route: the directed links a packet crosses, as (node, egress port): the
# source NIC first, then one per switch (what `path` returns).
Route = list[tuple[str, int]]


def policy_record(policy: str) -> Policy:
    """The record of a policy of ours, or of "file:PATH.py" (the file is
    loaded, once: user_policy)."""
    path = user_policy.file_of(policy)
    if path is not None:
        return _file_policy(policy, path)
    if policy not in POLICIES:
        raise ValueError(f"unknown routing policy {policy!r}; choose one of: {', '.join(POLICIES)}, "
                         f"or {user_policy.FILE_POLICY}PATH.py (your own)")
    return POLICIES[policy]


def _file_policy(name: str, path: str) -> Policy:
    """A user's file as a policy: its answer, checked, pinned pair by pair."""
    user_policy.load(path)   # refused now if it cannot be imported or has no routes
    return Policy(name, f"your own routes: routes(fabric, demands) of {path}",
                  lambda fabric, demands, seed: table_from_switch_paths(
                      fabric, user_policy.answer(path, fabric, demands)),
                  takes_demands=True, routes_given=True)


def fixed_policy(name: str, paths: dict[tuple[str, str], list[str]]) -> Policy:
    """Policy `name` as routes computed before (the emulator's answer from a
    user's file, handed to the controller): the user's code does not run
    again, and a link going down that a route needs makes it unroutable."""
    return Policy(name, f"the routes {name} gave",
                  lambda fabric, demands, seed: table_from_switch_paths(
                      fabric, user_policy.check(fabric, paths, name)))


def given_routes(fabric: Fabric, table: ForwardingTable) -> dict[tuple[str, str], list[str]]:
    """The switch paths a file policy's table was made of (what its
    `routes` returned, checked): on a fabric with nodes, the network's."""
    if isinstance(table, LiftedTable):
        return pair_paths(table.nodes.network, table.base)
    return pair_paths(fabric, table)


def forwarding_table(fabric: Fabric, policy: "str | Policy" = "shortest", demands: dict | None = None,
                     seed: int = 1) -> ForwardingTable:
    """Output port of every switch for every destination host.

    policy: a name (policy_record) or a record (fixed_policy). demands:
    {(src host, dst host): bytes}, required by "traffic-aware", given to a
    file policy and ignored by the others. seed: the random choices of
    "valiant". On a fabric with nodes, the policy's table of the network,
    lifted onto the accelerators (LiftedTable)."""
    record = policy if isinstance(policy, Policy) else policy_record(policy)
    if fabric.node_shape() is None:
        _check_nodes(fabric, record)
        return record.build(fabric, demands, seed)
    nodes = NodeRoutes(fabric, record)
    return LiftedTable(nodes, record.build(nodes.network, nodes.network_demands(demands), seed))


def _check_nodes(fabric: Fabric, record: Policy) -> None:
    if record.needs_nodes:
        raise ValueError(f"policy {record.name} routes fabrics with nodes of accelerators (accelerators, nics), "
                         f"not the plain hosts of {fabric.topology}")


# --- next-hop policies: shortest, spread, ecmp --------------------------------------

def _hops_to(fabric: Fabric, target: str) -> dict[str, int]:
    """Switch-to-switch hop count from every switch to `target` (BFS)."""
    dist = {target: 0}
    queue = deque([target])
    while queue:
        s = queue.popleft()
        for _, nb in fabric.switch_neighbours(s):
            if nb not in dist:
                dist[nb] = dist[s] + 1
                queue.append(nb)
    return dist


def _hop_table(fabric: Fabric, rule: HopRule) -> ForwardingTable:
    """The table of a policy that only chooses among equal-cost next hops."""
    table: ForwardingTable = {s.name: {} for s in fabric.switches}
    for target in fabric.switches:
        hops = _hops_to(fabric, target.name)
        closer = {}
        for s in fabric.switches:
            if s.name not in hops:
                raise ValueError(f"{fabric.topology}: switch {s.name} cannot reach {target.name}")
            if s.name != target.name:
                closer[s.name] = [port for port, nb in fabric.switch_neighbours(s.name)
                                  if hops.get(nb) == hops[s.name] - 1]
        weight = _digit_weights(closer, hops)
        for dst in fabric.hosts_on(target.name):
            table[target.name][dst.name] = dst.port
            for name, ports in closer.items():
                table[name][dst.name] = _choose(rule, ports, dst.index, weight[hops[name]])
    return table


def _choose(rule: HopRule, ports: list[int], dst_index: int, weight: int):
    return ports[0] if len(ports) == 1 else rule.pick(ports, dst_index, weight)


def _digit_weights(closer: dict[str, list[int]], hops: dict[str, int]) -> dict[int, int]:
    """For "spread": switches at different distances from the destination
    must use different digits of the destination index, or they all make the
    same choice (a fat-tree would use only its diagonal cores). Switches at
    distance d use digit weight = product of the choice counts farther out."""
    most = {}
    for name, ports in closer.items():
        most[hops[name]] = max(most.get(hops[name], 1), len(ports))
    weight, w = {}, 1
    for d in sorted(most, reverse=True):
        weight[d] = w
        w *= most[d]
    return weight


class HopTable(Mapping):
    """The table `_hop_table` builds, entry for entry, each worked out when
    first asked for: at 16,000 hosts the full table is 32 million entries
    (minutes and gigabytes), while a collective asks for a few per flow.
    Hop counts to a destination switch come from a breadth-first search
    over arrays of the switch-switch ports, done once per switch asked about."""

    def __init__(self, fabric: Fabric, rule: HopRule):
        self.fabric, self.rule = fabric, rule
        self.names = [s.name for s in fabric.switches]
        self.number = {name: i for i, name in enumerate(self.names)}
        edges = np.array([(self.number[s], port, self.number[nb]) for s in self.names
                          for port, nb in fabric.switch_neighbours(s)], dtype=np.int64).reshape(-1, 3)
        self.src, self.port, self.dst = edges.T   # grouped by switch, in port order
        self.first = np.searchsorted(self.src, np.arange(len(self.names) + 1))
        self.targets: dict[int, tuple] = {}
        self.choices: dict[tuple[str, str], tuple[list[int], int]] = {}   # (switch, dst's switch) -> ports, weight

    def __getitem__(self, switch: str) -> "Mapping":
        if switch not in self.number:
            raise KeyError(switch)
        return _HopRow(self, switch)

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def entry(self, switch: str, dst: str):
        host = self.fabric.host(dst)
        if switch == host.switch:
            return host.port
        key = (switch, host.switch)
        if key not in self.choices:
            hops, closer, weight = self._target(self.number[host.switch])
            s = self.number[switch]
            lo, hi = self.first[s], self.first[s + 1]
            self.choices[key] = self.port[lo:hi][closer[lo:hi]].tolist(), weight[int(hops[s])]
        ports, weight = self.choices[key]
        return _choose(self.rule, ports, host.index, weight)

    def _target(self, target: int) -> tuple:
        """Hops of every switch to `target`, which ports lead one hop closer,
        and the digit weights of "spread" (`_digit_weights`)."""
        if target not in self.targets:
            if not hasattr(self, "_into"):   # the edges into every switch
                self._into = np.argsort(self.dst, kind="stable")
                self._into_first = np.searchsorted(self.dst[self._into], np.arange(len(self.names) + 1))
            hops = np.full(len(self.names), -1, dtype=np.int64)
            hops[target], d, frontier = 0, 0, np.array([target])
            while frontier.size:   # the switches with an edge into the last ring, not reached before
                lo, hi = self._into_first[frontier], self._into_first[frontier + 1]
                count = hi - lo
                near = self.src[self._into[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())]]
                ring = np.zeros(len(self.names), dtype=bool)
                ring[near[hops[near] < 0]] = True
                frontier = np.flatnonzero(ring)
                hops[frontier] = d = d + 1
            if (hops < 0).any():
                raise ValueError(f"{self.fabric.topology}: switch {self.names[int(np.argmin(hops))]} cannot reach "
                                 f"{self.names[target]}")
            closer = hops[self.dst] == hops[self.src] - 1
            choices = np.bincount(self.src[closer], minlength=len(self.names))
            weight, w = {}, 1
            for dist in range(int(hops.max()), 0, -1):
                weight[dist] = w
                w *= max(1, int(choices[hops == dist].max()))
            self.targets[target] = hops, closer, weight
        return self.targets[target]

    def paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`path` of many host pairs at once, hop by hop over arrays; hosts
        by their position in fabric.hosts. Returns the switch (its number in
        `names`) and the egress port of every hop after the source NIC, as
        (pairs, hops) arrays padded with -1. Only ecmp's hash is worked out
        pair by pair, and only where a switch has more than one way on."""
        if not hasattr(self, "_host_switch"):
            hosts = self.fabric.hosts
            self._host_switch = np.array([self.number[h.switch] for h in hosts], dtype=np.int64)
            self._host_port = np.array([h.port for h in hosts], dtype=np.int64)
            self._host_index = np.array([h.index for h in hosts], dtype=np.int64)
            self._width = int(self.port.max(initial=0)) + 1   # switch * width + port -> the switch at the far end
            self._next_switch = np.full(len(self.names) * self._width, -1, dtype=np.int64)
            self._next_switch[self.src * self._width + self.port] = self.dst
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        cur, goal = self._host_switch[src], self._host_switch[dst]
        hops = []   # (pairs still on their way, their switch, its egress port), hop by hop
        todo = np.arange(len(src))
        while todo.size:
            if len(hops) > len(self.names):
                a, b = (self.fabric.hosts[int(h[todo[0]])].name for h in (src, dst))
                raise RuntimeError(f"routing loop from {a} to {b}")
            here = cur[todo]
            port = np.empty(todo.size, dtype=np.int64)
            arrived = here == goal[todo]
            port[arrived] = self._host_port[dst[todo[arrived]]]
            on = np.flatnonzero(~arrived)
            go = todo[on]
            port[on] = self._choose_ports(src[go], dst[go], here[on], goal[go])
            hops.append((todo, here, port))
            cur[go] = self._next_switch[here[on] * self._width + port[on]]
            todo = go
        switch, egress = (np.full((len(src), len(hops)), -1, dtype=np.int64) for _ in range(2))
        for k, (pairs, here, port) in enumerate(hops):
            rows = slice(None) if len(pairs) == len(src) else pairs   # every pair: a whole column, no rows to pick
            switch[rows, k], egress[rows, k] = here, port
        return switch, egress

    def _choose_ports(self, src, dst, here, goal) -> np.ndarray:
        """The port `entry` and `out_port` give each pair (src, dst hosts)
        at switch `here` on its way to switch `goal`."""
        if not here.size:
            return np.zeros(0, dtype=np.int64)
        row = self._rows(goal)
        first = self._start[row, here]
        n = self._start[row, here + 1] - first
        pick = self.rule.pick_many(self, src, dst, here, n, row)
        return self.port[self._ways[first + pick]]

    def _rows(self, goal: np.ndarray) -> np.ndarray:
        """Rows of the stacked choices of target switches `goal`, the new
        targets' added (_target): hops (_hops), the edges one hop closer,
        switch by switch in port order (switch s's are
        _ways[_start[row, s]:_start[row, s+1]]), spread's digit weight by
        distance (_weight)."""
        if not hasattr(self, "_row_of"):
            self._row_of = np.full(len(self.names), -1, dtype=np.int64)
            self._stacked: list[tuple] = []
        new = np.unique(goal[self._row_of[goal] < 0])
        if new.size:
            for target in new.tolist():
                hops, closer, weight = self._target(target)
                ways = np.flatnonzero(closer)
                by_distance = np.ones(int(hops.max()) + 1, dtype=np.int64)
                for dist, w in weight.items():
                    by_distance[dist] = w
                self._row_of[target] = len(self._stacked)
                self._stacked.append((hops, ways, np.searchsorted(self.src[ways], np.arange(len(self.names) + 1)),
                                      by_distance))
            offsets = np.cumsum([0] + [len(ways) for _, ways, _, _ in self._stacked])
            self._ways = np.concatenate([ways for _, ways, _, _ in self._stacked])
            self._start = np.stack([start + offset for (_, _, start, _), offset in zip(self._stacked, offsets)])
            self._hops = np.stack([hops for hops, _, _, _ in self._stacked])
            self._weight = np.ones((len(self._stacked), max(len(w) for *_, w in self._stacked)), dtype=np.int64)
            for i, (*_, w) in enumerate(self._stacked):
                self._weight[i, :len(w)] = w
        return self._row_of[goal]


class _HopRow(Mapping):
    """One switch's entries of a HopTable, by destination host."""

    def __init__(self, table: HopTable, switch: str):
        self.table, self.switch = table, switch

    def __getitem__(self, dst: str):
        return self.table.entry(self.switch, dst)

    def __iter__(self):
        return (h.name for h in self.table.fabric.hosts)

    def __len__(self) -> int:
        return len(self.table.fabric.hosts)


def model_table(fabric: Fabric, policy: str = "shortest", seed: int = 1) -> "ForwardingTable":
    """forwarding_table as the flow model reads it: a next-hop policy's
    entries worked out on demand (HopTable), the others' all at once; on a
    fabric with nodes, lifted (LiftedTable, entries worked out on demand)."""
    record = policy_record(policy)
    if fabric.node_shape() is None:
        return HopTable(fabric, record.hops) if record.hops else forwarding_table(fabric, policy, None, seed)
    nodes = NodeRoutes(fabric, record)
    base = HopTable(nodes.network, record.hops) if record.hops else record.build(nodes.network, None, seed)
    return LiftedTable(nodes, base)


# --- nodes: the network's routes lifted onto the accelerators ----------------------

def network_fabric(fabric: Fabric) -> Fabric:
    """The network of a fabric with nodes: its switches (not the nodes'),
    the links between them, and one endpoint per NIC cable (host "nic<e>",
    index e, on the fabric switch port the cable reaches), in endpoint
    order: the fabric the policies route. It keeps the fabric's ports, so
    its tables hold for the fabric with nodes."""
    network = {s.name for s in fabric.switches if s.node < 0}
    hosts, links = [], []
    for link in sorted((l for l in fabric.links if l.nic >= 0), key=lambda l: l.nic):
        (a, a_port), (b, b_port) = link.ends()
        switch, port = (b, b_port) if b in network else (a, a_port)
        name = nic_name(link.nic)
        hosts.append(Host(name, link.nic, *host_address(link.nic), switch, port))
        links.append(Link(name, HOST_PORT, switch, port, link.rate_mbps, link.queue_packets, "host",
                          link.delay_ms, link.loss_pct))
    links += [l for l in fabric.links if l.kind == "switch" and l.a in network and l.b in network]
    return Fabric(fabric.topology, [s for s in fabric.switches if s.name in network], hosts, links,
                  {k: v for k, v in fabric.params.items() if k != "node"})


class NodeRoutes:
    """A fabric with nodes seen from its network (`network_fabric`), and
    how a policy's routes there become the accelerators' (its nic_rule)."""

    def __init__(self, fabric: Fabric, record: Policy):
        self.fabric, self.record = fabric, record
        self.shape = fabric.node_shape()
        self.network = network_fabric(fabric)
        self.members = fabric.nodes()
        self.cable: dict[int, tuple[str, int]] = {}   # NIC endpoint -> (its node switch, that switch's port)
        for link in fabric.links:
            if link.nic >= 0:
                (a, a_port), (b, b_port) = link.ends()
                self.cable[link.nic] = (a, a_port) if fabric.switch(a).node >= 0 else (b, b_port)
        self.toward: dict[str, dict[str, int]] = {}   # node switch -> {switch of its node -> port on the way}
        for s in fabric.switches:
            if s.node >= 0:
                self.toward[s.name] = self._inside_ports(s)

    def _inside_ports(self, start: Switch) -> dict[str, int]:
        """The first port on the way from `start` to every switch of its
        node, over the node's own links (breadth first, lowest port first)."""
        first: dict[str, int] = {}
        queue = deque([(start.name, None)])
        seen = {start.name}
        while queue:
            here, port = queue.popleft()
            for p, nb in self.fabric.switch_neighbours(here):
                if nb not in seen and self.fabric.switch(nb).node == start.node:
                    seen.add(nb)
                    first[nb] = p if port is None else port
                    queue.append((nb, first[nb]))
        return first

    def source_nic(self, src: Host, dst: Host) -> int:
        """The NIC endpoint an accelerator's traffic for an accelerator of
        another node leaves by: its own, or (nic_rule "rail", PXN) its
        node's NIC with the destination's NIC index."""
        local = dst.local if self.record.nic_rule == "rail" else src.local
        return src.node * self.shape.nics + self.shape.nic_index(local)

    def senders(self, nic: int, dst: Host) -> list[str]:
        """The accelerators whose traffic for `dst` leaves by NIC `nic`."""
        node, j = divmod(nic, self.shape.nics)
        if node == dst.node:
            return []
        if self.record.nic_rule == "rail":
            return list(self.members[node]) if j == self.shape.nic_index(dst.local) else []
        return [self.members[node][a] for a in self.shape.users(j)]

    def _inside(self, switch: str, target: str, target_port: int) -> int:
        """The port of `switch` towards port `target_port` of `target`, both of one node."""
        return target_port if switch == target else self.toward[switch][target]

    def entry(self, base: ForwardingTable, switch: str, dst: str):
        """The lifted entry of (`switch`, accelerator `dst`) from the
        network's table `base`."""
        d, here = self.fabric.host(dst), self.fabric.switch(switch)
        k = self.shape.nics
        if here.node < 0:   # a fabric switch: its entry for dst's NIC, per NIC become per accelerator
            entry = base[switch][nic_name(self.fabric.nic_endpoint(dst))]
            if not isinstance(entry, dict):
                return entry
            lifted = {ANY_SOURCE: entry[ANY_SOURCE]}
            for nic, port in entry.items():
                if nic != ANY_SOURCE and port != entry[ANY_SOURCE]:
                    lifted.update((a, port) for a in self.senders(self.network.host(nic).index, d))
            return lifted
        if d.node == here.node:   # inside the node: over the interconnect
            return self._inside(switch, d.switch, d.port)
        # to another node: towards the NIC each local source sends by; others (none) by dst's NIC index
        default = self._inside(switch, *self.cable[here.node * k + self.shape.nic_index(d.local)])
        pins = {}
        for a in self.members[here.node]:
            port = self._inside(switch, *self.cable[self.source_nic(self.fabric.host(a), d)])
            if port != default:
                pins[a] = port
        return {ANY_SOURCE: default, **pins} if pins else default

    def network_demands(self, demands: dict | None) -> dict | None:
        """The accelerators' demands as the network's: bytes between the
        NICs they leave and arrive by (pairs inside a node left out)."""
        if demands is None:
            return None
        _by_demand(self.fabric, demands)   # every host known, every demand >= 0
        out: dict[tuple[str, str], float] = {}
        for (src, dst), nbytes in demands.items():
            s, d = self.fabric.host(src), self.fabric.host(dst)
            if s.node != d.node and nbytes > 0:
                pair = (nic_name(self.source_nic(s, d)), nic_name(self.fabric.nic_endpoint(dst)))
                out[pair] = out.get(pair, 0) + nbytes
        return out

    def inside_hops(self, start: str, target: str, target_port: int) -> Route:
        """The hops (switch, egress port) from node switch `start` to port
        `target_port` of node switch `target`, both of one node."""
        hops, here = [], start
        while here != target:
            port = self.toward[here][target]
            hops.append((here, port))
            here = self.fabric.peer(here, port)[0]
        return hops + [(target, target_port)]


class LiftedTable(Mapping):
    """A network's table (`base`: a dict, or a HopTable) lifted onto a
    fabric with nodes (NodeRoutes.entry), entry by entry as asked for; an
    entry once worked out (or set: set_route) is kept."""

    def __init__(self, nodes: NodeRoutes, base: ForwardingTable):
        self.nodes, self.base = nodes, base
        self.fabric = nodes.fabric
        self._rows: dict[str, _LiftedRow] = {}

    def __getitem__(self, switch: str) -> "_LiftedRow":
        if switch not in self._rows:
            if not self.fabric.is_switch(switch):
                raise KeyError(switch)
            self._rows[switch] = _LiftedRow(self, switch)
        return self._rows[switch]

    def __iter__(self):
        return (s.name for s in self.fabric.switches)

    def __len__(self) -> int:
        return len(self.fabric.switches)


class _LiftedRow(MutableMapping):
    """One switch's entries of a LiftedTable, by destination accelerator."""

    def __init__(self, table: LiftedTable, switch: str):
        self.table, self.switch = table, switch
        self.known: dict = {}

    def __getitem__(self, dst: str):
        if dst not in self.known:
            self.table.fabric.host(dst)   # KeyError for a name that is not a host
            self.known[dst] = self.table.nodes.entry(self.table.base, self.switch, dst)
        return self.known[dst]

    def __setitem__(self, dst: str, entry) -> None:
        self.known[dst] = entry

    def __delitem__(self, dst: str) -> None:
        raise TypeError("a switch keeps an entry for every host")

    def __iter__(self):
        return (h.name for h in self.table.fabric.hosts)

    def __len__(self) -> int:
        return len(self.table.fabric.hosts)


# --- following a table ------------------------------------------------------------

def out_port(table: ForwardingTable, switch: str, src: str, dst: str) -> int:
    """The port `switch` sends a packet from host `src` to host `dst` out of."""
    entry = table[switch][dst]
    if isinstance(entry, int):
        return entry
    if isinstance(entry, dict):
        return entry.get(src, entry[ANY_SOURCE])
    return entry[ecmp_hash(src, dst, switch) % len(entry)]


def ecmp_hash(src: str, dst: str, switch: str) -> int:
    """What ecmp picks one of a switch's equal-cost ports by (modulo their count)."""
    return zlib.crc32(f"{src}>{dst}@{switch}".encode())


class EcmpHashes:
    """ecmp_hash of many (src host, dst host, switch) at once, the names
    given by their index in `hosts` and `switches`.

    CRC-32 is affine in the message: the CRC of a message is that of as many
    zero bytes, XOR one term per part (src, ">", dst, "@", switch), which
    depends only on the part and on how many bytes follow it. A part's term
    is found once with zlib and moved past the bytes after it by the linear
    map a zero byte applies to the CRC register."""

    def __init__(self, hosts: list[str], switches: list[str]):
        names = [n.encode() for n in hosts], [n.encode() for n in switches]
        self.host_len, self.switch_len = (np.array([len(n) for n in part], dtype=np.int64) for part in names)
        tails = int(self.host_len.max(initial=0) + self.switch_len.max(initial=0)) + 3
        self.host_term = self._terms(names[0], tails)            # [host, bytes after it]
        self.switch_term = self._terms(names[1], 1)[:, 0]        # the switch ends the message
        self.gt_term, self.at_term = (self._terms([sep], tails)[0] for sep in (b">", b"@"))
        self.zeros = np.array([zlib.crc32(bytes(n)) for n in range(2 * tails)], dtype=np.int64)

    @staticmethod
    def _terms(parts: list[bytes], tails: int) -> np.ndarray:
        term = np.array([zlib.crc32(p) ^ zlib.crc32(bytes(len(p))) for p in parts], dtype=np.int64)
        out = np.empty((len(parts), tails), dtype=np.int64)
        for tail in range(tails):
            out[:, tail] = term
            term = _CRC_TABLE[term & 0xFF] ^ (term >> 8)   # one zero byte more after the part
        return out

    def __call__(self, src: np.ndarray, dst: np.ndarray, switch: np.ndarray) -> np.ndarray:
        ls, ld, lw = self.host_len[src], self.host_len[dst], self.switch_len[switch]
        return (self.zeros[ls + ld + lw + 2] ^ self.host_term[src, ld + lw + 2] ^ self.gt_term[ld + lw + 1]
                ^ self.host_term[dst, lw + 1] ^ self.at_term[lw] ^ self.switch_term[switch])


def _crc_table() -> np.ndarray:
    """zlib's CRC-32 byte table (reflected polynomial 0xEDB88320)."""
    table = np.arange(256, dtype=np.int64)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ 0xEDB88320, table >> 1)
    return table


_CRC_TABLE = _crc_table()


def path(fabric: Fabric, table: ForwardingTable, src: str, dst: str) -> Route:
    """Directed links a packet from host `src` to host `dst` leaves through,
    as (node, egress port): the source NIC first, then one per switch."""
    hops = [(src, HOST_PORT)]
    node = fabric.host(src).switch
    while True:
        port = out_port(table, node, src, dst)
        hops.append((node, port))
        nxt, _, _ = fabric.peer(node, port)
        if nxt == dst:
            return hops
        if len(hops) > len(fabric.switches) + 1:
            raise RuntimeError(f"routing loop from {src} to {dst}")
        node = nxt


def switch_path(fabric: Fabric, table: ForwardingTable, src: str, dst: str) -> list[str]:
    """The switches a packet from `src` to `dst` crosses, in order."""
    return [node for node, _ in path(fabric, table, src, dst)[1:]]


def pair_paths(fabric: Fabric, table: ForwardingTable) -> dict[tuple[str, str], list[str]]:
    """The switches of every ordered pair of distinct hosts: one look at a
    whole table, e.g. to check that every pair arrives without a loop."""
    return {(src.name, dst.name): switch_path(fabric, table, src.name, dst.name)
            for src in fabric.hosts for dst in fabric.hosts if src.name != dst.name}


# --- per-pair routes -------------------------------------------------------------

def set_route(fabric: Fabric, table: ForwardingTable, src: str, dst: str, route: Route) -> list[str]:
    """Make packets from `src` to `dst` follow `route`, changing no other
    pair's forwarding; returns the switches whose entry changed (their rules
    must be installed again).

    A switch has one port per (source, destination), so the route must not
    cross a switch twice. Entries that must differ for this pair become
    per-source dicts; an ecmp tuple keeps every other source's hashed port."""
    _check_route(fabric, src, dst, route)
    changed = []
    for switch, port in route[1:]:
        if out_port(table, switch, src, dst) == port:
            continue
        entry = table[switch][dst]
        if not isinstance(entry, dict):
            entry = table[switch][dst] = _per_source(fabric, table, switch, dst)
        entry[src] = port
        changed.append(switch)
    return changed


def _per_source(fabric: Fabric, table: ForwardingTable, switch: str, dst: str) -> dict[str, int]:
    """The int or ecmp entry of (switch, dst) as a dict with the same ports."""
    entry = table[switch][dst]
    if isinstance(entry, int):
        return {ANY_SOURCE: entry}
    pinned = {h.name: out_port(table, switch, h.name, dst) for h in fabric.hosts if h.name != dst}
    return {ANY_SOURCE: entry[0], **pinned}


def _check_route(fabric: Fabric, src: str, dst: str, route: Route) -> None:
    switches = [node for node, _ in route[1:]]
    if route[:1] != [(src, HOST_PORT)]:
        raise ValueError(f"a route from {src} starts with ({src!r}, {HOST_PORT}), got {route[:1]}")
    if len(set(switches)) != len(switches):
        raise ValueError(f"route from {src} to {dst} crosses a switch twice: {switches}")
    for (node, port), (nxt, _) in zip(route, route[1:] + [(dst, HOST_PORT)]):
        if fabric.peer(node, port)[0] != nxt:
            raise ValueError(f"route from {src} to {dst}: port {port} of {node} does not lead to {nxt}")


class ShortestRoutes:
    """Every shortest route between two hosts, parallel links included, in
    the order of their ports (the first is the "shortest" policy's route).
    Routes between two switches are computed once and reused."""

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self._hops: dict[str, dict[str, int]] = {}
        self._between: dict[tuple[str, str], list[Route]] = {}
        self._lowest: dict[tuple[str, str], Route] = {}
        self._nodes = NodeRoutes(fabric, POLICIES["shortest"]) if fabric.node_shape() else None
        self._network = ShortestRoutes(self._nodes.network) if self._nodes else None

    def between(self, src: str, dst: str) -> list[Route]:
        if self._nodes:
            return self._lifted(src, dst)
        a, b = self.fabric.host(src).switch, self.fabric.host(dst)
        key = (a, b.switch)
        if key not in self._between:
            self._between[key] = self._switch_routes(a, b.switch)
        return [[(src, HOST_PORT)] + r + [(b.switch, b.port)] for r in self._between[key]]

    def _lifted(self, src: str, dst: str) -> list[Route]:
        """On a fabric with nodes: inside the source's node to its NIC, every
        shortest route of the network to the destination's NIC, inside the
        destination's node to it (one route inside a node)."""
        nodes, s, d = self._nodes, self.fabric.host(src), self.fabric.host(dst)
        start = [(src, HOST_PORT)]
        if s.node == d.node:
            return [start + nodes.inside_hops(s.switch, d.switch, d.port)]
        out_nic, in_nic = nodes.source_nic(s, d), self.fabric.nic_endpoint(dst)
        leave = start + nodes.inside_hops(s.switch, *nodes.cable[out_nic])
        into = nodes.inside_hops(nodes.cable[in_nic][0], d.switch, d.port)
        return [leave + r[1:] + into for r in self._network.between(nic_name(out_nic), nic_name(in_nic))]

    def lowest(self, a: str, b: str) -> Route:
        """Hops (switch, port) from switch a up to, not including, switch b,
        taking the lowest port toward b at every switch, as "shortest" does."""
        if (a, b) not in self._lowest:
            self._lowest[a, b] = self._switch_routes(a, b, first=True)[0]
        return self._lowest[a, b]

    def _switch_routes(self, a: str, b: str, first: bool = False) -> list[Route]:
        """Hops (switch, port) from switch a up to, not including, switch b:
        all shortest ones, or only the first."""
        if b not in self._hops:
            self._hops[b] = _hops_to(self.fabric, b)
        hops = self._hops[b]
        if a == b:
            return [[]]
        closer = [(port, nb) for port, nb in self.fabric.switch_neighbours(a) if hops.get(nb) == hops[a] - 1]
        if first:
            closer = closer[:1]
        return [[(a, port)] + rest for port, nb in closer for rest in self._switch_routes(nb, b, first)]


def table_from_switch_paths(fabric: Fabric, paths: dict[tuple[str, str], list[str]]) -> ForwardingTable:
    """A table that sends every pair through the switches `paths` lists
    (as routes.json records them); between two adjacent switches the
    lowest-numbered of their ports."""
    routes = {}
    for (src, dst), switches in paths.items():
        hops = [(src, HOST_PORT)]
        for here, there in zip(switches, switches[1:]):
            hops.append((here, min(p for p, nb in fabric.switch_neighbours(here) if nb == there)))
        hops.append((switches[-1], fabric.host(dst).port))
        routes[(src, dst)] = hops
    return _table_of_routes(fabric, routes)


def _table_of_routes(fabric: Fabric, routes: dict[tuple[str, str], Route]) -> ForwardingTable:
    """The "shortest" table with every pair of `routes` pinned to its route."""
    table = forwarding_table(fabric, "shortest") if fabric.node_shape() else _hop_table(fabric, LOWEST_PORT)
    for (src, dst), route in routes.items():
        set_route(fabric, table, src, dst, route)
    return table


# --- bigraph ---------------------------------------------------------------------

def _bigraph_table(fabric: Fabric) -> ForwardingTable:
    """EFLOPS routing. Pairs on different parts use the unique direct link,
    pairs on one switch stay there (both as "shortest" has them). A pair on
    two switches s != t of one part goes through middle switch
    (L(s, t) + c) mod h of the other part, h = n/2, where

    - L(s, t) is a Latin square of order h whose diagonal uses every middle
      once (`_middle_square`): from every s, and into every t, the h-1 switch
      pairs use h-1 different middles, and every middle serves h-1 pairs;
    - c = src slot * m + dst slot numbers the m*m host pairs of (s, t).

    The choice is per host pair (one rule per local source at the first
    switch; the middle has one way on). For all-to-all inside a part every
    middle carries the same number of flows and every link between the parts
    within one flow of every other: c takes m*m consecutive values, each
    middle at most one time more than another."""
    if fabric.params.get("kind") != "bigraph" or {s.tier for s in fabric.switches} - {"upper", "lower"}:
        raise ValueError(f"policy bigraph needs a BiGraph fabric, got {fabric.topology}")
    upper = sorted((s for s in fabric.switches if s.tier == "upper"), key=lambda s: s.index)
    lower = sorted((s for s in fabric.switches if s.tier == "lower"), key=lambda s: s.index)
    link = {(s.name, nb): port for s in fabric.switches for port, nb in fabric.switch_neighbours(s.name)}
    routes = {}
    for part, other in ((upper, lower), (lower, upper)):
        for s, t in itertools.permutations(part, 2):
            routes.update(_same_part_routes(fabric, link, s, t, other))
    return _table_of_routes(fabric, routes)


def _same_part_routes(fabric: Fabric, link: dict, s: Switch, t: Switch, other: list[Switch]):
    """Routes of the host pairs from switch s to switch t of one part,
    through middle (L(s, t) + c) mod h of the other part."""
    dsts = fabric.hosts_on(t.name)
    first = _middle_square(len(other), s.index, t.index)
    routes = {}
    for i, src in enumerate(fabric.hosts_on(s.name)):
        for j, dst in enumerate(dsts):
            mid = other[(first + i * len(dsts) + j) % len(other)].name
            routes[src.name, dst.name] = [(src.name, HOST_PORT), (s.name, link[s.name, mid]),
                                          (mid, link[mid, t.name]), (t.name, dst.port)]
    return routes


def _middle_square(h: int, s: int, t: int) -> int:
    """L(s, t), s != t, of a Latin square of order h whose diagonal holds
    every symbol once, so that dropping the diagonal leaves each row and
    column one symbol short and each symbol h-1 times.

    h odd: (s + t) / 2 mod h (its diagonal is s). h even: that square of
    order k = h-1, prolonged along its transversal t = s+1 mod k: those cells
    take the new symbol k, their old symbol moves to column k of their row
    and row k of their column; the diagonal stays 0..k. h = 2 has no such
    square; s alone serves (two pairs, two middles)."""
    if h == 2:
        return s
    if h % 2:
        return (s + t) * (h + 1) // 2 % h
    k = h - 1
    half = (k + 1) // 2          # 1/2 mod k
    if t == k:
        return (2 * s + 1) * half % k
    if s == k:
        return (2 * t - 1) * half % k
    if t == (s + 1) % k:
        return k
    return (s + t) * half % k


# --- dragonfly and torus: destination-based rules ----------------------------------

def _by_next_router(fabric: Fabric, kind: str, next_port: Callable[[Fabric, str, str], int]) -> ForwardingTable:
    """The table of a rule that picks a switch's port by the destination's
    switch alone: `next_port(fabric, here, target switch)`."""
    if fabric.params.get("kind") != kind:
        raise ValueError(f"this policy needs a {kind} fabric, got {fabric.topology}")
    table: ForwardingTable = {s.name: {} for s in fabric.switches}
    for target in fabric.switches:
        dsts = fabric.hosts_on(target.name)
        for here in fabric.switches:
            port = None if here.name == target.name or not dsts else next_port(fabric, here.name, target.name)
            for dst in dsts:
                table[here.name][dst.name] = dst.port if port is None else port
    return table


class _DragonflyHops:
    """Minimal dragonfly routes: inside a group the direct local link; to
    another group its lowest global port if the router has one, else the
    local link to the lowest router of its group that has."""

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.local: dict[str, dict[str, int]] = {}     # router -> {router of its group: port}
        self.to_group: dict[str, dict[int, int]] = {}  # router -> {other group: its lowest port there}
        for s in fabric.switches:
            here = dragonfly_group(fabric, s.name)
            self.local[s.name], self.to_group[s.name] = {}, {}
            for port, nb in fabric.switch_neighbours(s.name):
                there = dragonfly_group(fabric, nb)
                if there == here:
                    self.local[s.name].setdefault(nb, port)
                else:
                    self.to_group[s.name].setdefault(there, port)

    def toward_group(self, here: str, group: int) -> int:
        if group in self.to_group[here]:
            return self.to_group[here][group]
        gate = min((r for r in self.local[here] if group in self.to_group[r]), key=lambda r: self.fabric.switch(r).index)
        return self.local[here][gate]

    def port(self, fabric: Fabric, here: str, target: str) -> int:
        if target in self.local[here]:
            return self.local[here][target]
        return self.toward_group(here, dragonfly_group(fabric, target))

    def hops(self, here: str, target: str) -> Route:
        """(switch, port) from router `here` up to, not including, router `target`."""
        return self._walk(here, lambda at: at == target, lambda at: self.port(self.fabric, at, target))

    def hops_into(self, here: str, group: int) -> Route:
        """(switch, port) from router `here` up to, not including, the
        router of `group` its minimal route enters by."""
        return self._walk(here, lambda at: dragonfly_group(self.fabric, at) == group,
                          lambda at: self.toward_group(at, group))

    def _walk(self, here: str, arrived: Callable[[str], bool], port_at: Callable[[str], int]) -> Route:
        out = []
        while not arrived(here):
            out.append((here, port_at(here)))
            here = self.fabric.peer(*out[-1])[0]
        return out


def _dimension_order_port(fabric: Fabric, here: str, target: str) -> int:
    """The port of torus switch `here` towards switch `target`: the first
    dimension (x, y, z) where they differ, the shorter way round."""
    sizes, a, b = torus_sizes(fabric), torus_coordinates(fabric, here), torus_coordinates(fabric, target)
    dim = next(d for d in range(3) if a[d] != b[d])
    n = sizes[dim]
    step = 1 if (b[dim] - a[dim]) % n <= n // 2 else -1   # half-way (n even): the positive direction
    nxt = list(a)
    nxt[dim] = (a[dim] + step) % n
    neighbour = torus_switch(fabric, nxt)
    return min(port for port, nb in fabric.switch_neighbours(here) if nb == neighbour)


# --- valiant ---------------------------------------------------------------------

def _valiant_table(fabric: Fabric, seed: int) -> ForwardingTable:
    """Every pair of distinct hosts detours through its own random switch
    (on a dragonfly: `_dragonfly_valiant_table`).

    The switches are drawn uniformly from all switches (the pair's own ones
    included: then the detour is the shortest route), pair after pair in
    host order, by a generator seeded with `seed`: the same seed gives the
    same detours on every run."""
    if fabric.params.get("kind") == "dragonfly":
        return _dragonfly_valiant_table(fabric, seed)
    rng = random.Random(seed)
    legs = ShortestRoutes(fabric)
    routes = {}
    for src in fabric.hosts:
        for dst in fabric.hosts:
            if src.name != dst.name:
                via = rng.choice(fabric.switches).name
                routes[src.name, dst.name] = _valiant_route(legs, src.name, dst.name, via)
    return _table_of_routes(fabric, routes)


def _dragonfly_valiant_table(fabric: Fabric, seed: int) -> ForwardingTable:
    """Dragonfly Valiant: every pair of distinct hosts goes minimally to a
    random group other than its source's and its destination's (drawn
    pair after pair in host order, seeded), entering it where the minimal
    route does, then minimally on; a router of the source's or the
    destination's group would be no detour. With no third group (g <= 2),
    minimal routes. Loops (a pair inside one group coming back) are cut."""
    rng = random.Random(seed)
    legs = _DragonflyHops(fabric)
    groups = range(fabric.params["g"])
    routes = {}
    for src in fabric.hosts:
        for dst in fabric.hosts:
            if src.name == dst.name:
                continue
            ends = {dragonfly_group(fabric, src.switch), dragonfly_group(fabric, dst.switch)}
            others = [g for g in groups if g not in ends]
            hops = [(src.name, HOST_PORT)]
            here = src.switch
            if others:
                hops += legs.hops_into(here, rng.choice(others))
                here = fabric.peer(*hops[-1])[0]
            routes[src.name, dst.name] = cut_loops(hops + legs.hops(here, dst.switch) + [(dst.switch, dst.port)])
    return _table_of_routes(fabric, routes)


def valiant_route(fabric: Fabric, src: str, dst: str, via: str) -> Route:
    """Shortest route from host `src` to switch `via`, then shortest on to
    host `dst` (lowest ports, as "shortest"), with every loop cut out."""
    return _valiant_route(ShortestRoutes(fabric), src, dst, via)


def _valiant_route(legs: ShortestRoutes, src: str, dst: str, via: str) -> Route:
    a, d = legs.fabric.host(src).switch, legs.fabric.host(dst)
    return cut_loops([(src, HOST_PORT)] + legs.lowest(a, via) + legs.lowest(via, d.switch) + [(d.switch, d.port)])


def cut_loops(route: Route) -> Route:
    """`route` without its cycles: where a node comes back, everything from
    its first visit up to the return is dropped, and the route carries on
    from the return. A pair can then be forwarded with one port per switch."""
    out: Route = []
    seen: dict[str, int] = {}   # node -> its position in out
    for node, port in route:
        if node in seen:
            start = seen[node]
            for dropped, _ in out[start:]:
                del seen[dropped]
            del out[start:]
        seen[node] = len(out)
        out.append((node, port))
    return out


# --- traffic-aware ---------------------------------------------------------------

def _traffic_aware_table(fabric: Fabric, demands: dict | None) -> ForwardingTable:
    """One shortest route per pair with demand, placed greedily:

    1. take the pairs by demand, largest first (ties: host indices);
    2. for each, among all its shortest routes (parallel links included)
       take the one whose busiest switch-switch link would be least loaded
       once the pair is added; ties: the least total load on the route,
       then the first route (lowest ports);
    3. add its demand to the links of that route.

    Load is demand divided by link rate (seconds of sending), so links of
    different rates compare fairly; host links are left out of the choice,
    since every route of a pair shares them. Only shortest routes are
    candidates: the fabrics here offer all their path diversity at equal
    length (every middle of BiGraph, every core of a fat-tree, every spine),
    and longer detours would add load that the comparison with the other
    policies would have to explain. Pairs without demand keep the
    "shortest" route."""
    if demands is None:
        raise ValueError("policy traffic-aware needs demands: {(src host, dst host): bytes}")
    candidates = ShortestRoutes(fabric)
    load: dict[tuple[str, int], float] = {}   # switch-switch link -> seconds of sending
    routes = {}
    for (src, dst), nbytes in _by_demand(fabric, demands):
        options = candidates.between(src, dst)
        after = [[load.get(link, 0.0) + _seconds(fabric, link, nbytes) for link in _switch_links(fabric, r)]
                 for r in options]
        best = min(range(len(options)), key=lambda i: (max(after[i], default=0.0), sum(after[i]), i))
        for link, seconds in zip(_switch_links(fabric, options[best]), after[best]):
            load[link] = seconds
        routes[src, dst] = options[best]
    return _table_of_routes(fabric, routes)


def _by_demand(fabric: Fabric, demands: dict) -> list[tuple[tuple[str, str], float]]:
    """The pairs of distinct hosts with positive demand, largest first."""
    for (src, dst), nbytes in demands.items():
        for host in (src, dst):
            try:
                fabric.host(host)
            except KeyError:
                raise ValueError(f"demand names host {host!r}, which is not in {fabric.topology}") from None
        if not nbytes >= 0:
            raise ValueError(f"demand from {src} to {dst} must be >= 0 bytes, got {nbytes}")
    pairs = [(pair, n) for pair, n in demands.items() if n > 0 and pair[0] != pair[1]]
    return sorted(pairs, key=lambda item: (-item[1], fabric.host(item[0][0]).index, fabric.host(item[0][1]).index))


def _switch_links(fabric: Fabric, route: Route) -> Route:
    """The switch-switch links of a route (neither NIC nor last downlink)."""
    return [(node, port) for node, port in route if fabric.peer(node, port)[2].kind == "switch"]


def _seconds(fabric: Fabric, link: tuple[str, int], nbytes: float) -> float:
    """Time `link` takes to send `nbytes` at its rate."""
    return nbytes * 8 / (fabric.peer(*link)[2].rate_mbps * 1e6)


def demands_from_schedule(schedule: Schedule, hosts) -> dict[tuple[str, str], int]:
    """Bytes every pair of hosts sends over the whole schedule, rank r on
    hosts[r]: the demands "traffic-aware" places. Ranks sharing a host talk
    over loopback and are left out, as are pairs that send nothing."""
    if len(hosts) != schedule.ranks:
        raise ValueError(f"{len(hosts)} hosts given for {schedule.ranks} ranks")
    demands: dict[tuple[str, str], int] = {}
    for rank, steps in enumerate(schedule.steps):
        for step in steps:
            for t in step.sends:
                pair = (hosts[rank], hosts[t.peer])
                if pair[0] != pair[1] and t.nbytes > 0:
                    demands[pair] = demands.get(pair, 0) + t.nbytes
    return demands
