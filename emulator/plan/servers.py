"""A fabric spread over several servers (pure): which server holds which
switch and host, what each server carries against its budget, and the
bytes that cross between servers.

A switch and the hosts cabled to it always share a server: a host's link
carries every byte the host sends or receives, so cutting it could never
save bytes. Two placements:

- "switch-bin", Mininet's SwitchBinPlacer: the switches, in order, in
  bins of equal size (the first servers take one more when they do not
  divide), each host with its switch;
- "traffic": starting from switch-bin, switches move (and swap) between
  servers while that lowers the bytes the run's workload sends across
  servers (from its routes and schedule), never past a server's budget.
  A fabric that fits on fewer servers than it is given gets fewer: bytes
  that stay on one server cost no tunnel.

A server's budget is its faithful load in link-Mbit/s (summed over switch
traversals) at the switch ports placed on it, by the rule a run on one
machine is checked with (emulator.plan.capacity.Budget), and the most
emulated hosts it may hold. The run's peak load (the model's) is shared out
over the servers in proportion to the bytes their switches forward.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from emulator.fabric.graph import Fabric
from emulator.inputs import to_int
from emulator.plan.capacity import Assessment, Budget, port_scaled
from emulator.spec.experiment import PLACEMENTS, server_names

# VXLAN over IPv4 wraps every frame in an outer IPv4 header (20 bytes), UDP
# (8), VXLAN (8) and the inner Ethernet header (14): the network between
# servers must carry the fabric's MTU plus this (emulator.net.cluster).
TUNNEL_HEADER_BYTES = 50
ETHERNET_HEADER_BYTES = 14
MAX_PASSES = 50


@dataclass(frozen=True)
class Server:
    name: str
    faithful_mbps: float     # link-Mbit/s it emulates faithfully up to `ports` switch ports (its calibration)
    max_hosts: int           # emulated hosts it may hold
    ports: int = 0           # past this many switch ports its budget shrinks (0: it does not; capacity.Budget)
    exponent: float = 0.0    # as (ports / its switch ports) ** exponent

    @classmethod
    def of(cls, name: str, budget: Budget, max_hosts: int) -> "Server":
        return cls(name, budget.faithful_mbps, max_hosts, budget.ports, budget.exponent)

    def budget_at(self, ports: int) -> float:
        """Its faithful link-Mbit/s holding `ports` switch ports."""
        return port_scaled(self.faithful_mbps, ports, self.ports, self.exponent)


@dataclass
class Placement:
    method: str              # one of PLACEMENTS
    servers: list[Server]
    where: dict[str, int]    # node (switch or host) -> index into servers
    load_mbps: list[float]   # the run's peak link-Mbit/s each server carries
    hosts: list[int]         # emulated hosts on each server
    switches: list[int]      # switches on each server
    crossing: dict[tuple[int, int], float]   # (server i, server j), i < j -> bytes between them, both ways
    ports: list[int] = field(default_factory=list)   # switch ports on each server

    def budget_mbps(self, server: int) -> float:
        """The server's faithful link-Mbit/s at the switch ports placed on it."""
        return self.servers[server].budget_at(self.ports[server] if self.ports else 0)

    def on_head_only(self) -> bool:
        return all(s == 0 for s in self.where.values())

    @property
    def cross_bytes(self) -> float:
        return sum(self.crossing.values())

    def overloaded(self) -> list[str]:
        """What is past its budget on each server that is, in words."""
        out = []
        for s, server in enumerate(self.servers):
            budget = self.budget_mbps(s)
            if self.load_mbps[s] > budget * (1 + 1e-6):
                out.append(f"{server.name} carries {self.load_mbps[s]:.0f} link-Mbit/s, faithful up to "
                           f"{budget:.0f} at its {self.ports[s] if self.ports else 0} switch ports")
            if self.hosts[s] > server.max_hosts:
                out.append(f"{server.name} holds {self.hosts[s]} hosts, at most {server.max_hosts}")
        return out

    def nodes_on(self, server: int) -> list[str]:
        return [node for node, s in self.where.items() if s == server]


class Traffic:
    """What placement weighs, per switch (with its hosts): the bytes it
    forwards, the bytes between each pair of switches (both ways), and the
    run's peak link-Mbit/s to share out."""

    def __init__(self, fabric: Fabric, link_bytes: dict[tuple[str, int], float], peak_mbps: float):
        self.fabric = fabric
        self.switches = [s.name for s in fabric.switches]
        index = {name: i for i, name in enumerate(self.switches)}
        n = len(self.switches)
        self.forwarded = np.zeros(n)           # bytes leaving the switch, any port
        self.between = np.zeros((n, n))        # bytes on the links between two switches, both ways
        for (node, port), nbytes in link_bytes.items():
            if node not in index:
                continue   # a host's NIC: its switch forwards those bytes again
            self.forwarded[index[node]] += nbytes
            peer = fabric.peer(node, port)[0]
            if peer in index:
                a, b = index[node], index[peer]
                self.between[a, b] += nbytes
                self.between[b, a] += nbytes
        self.hosts = np.array([len(fabric.hosts_on(name)) for name in self.switches])
        self.ports = np.array([len(fabric.ports(name)) for name in self.switches])
        total = self.forwarded.sum()
        self.load = self.forwarded / total * peak_mbps if total else np.zeros(n)


def switch_bin(traffic: Traffic, servers: list[Server]) -> Placement:
    """Mininet's SwitchBinPlacer: switches in order, in equal bins."""
    n, k = len(traffic.switches), len(servers)
    sizes = [n // k + (1 if s < n % k else 0) for s in range(k)]
    owner = np.repeat(np.arange(k), sizes)
    return _placement("switch-bin", traffic, servers, owner)


def by_traffic(traffic: Traffic, servers: list[Server]) -> Placement:
    """The fewest bytes across servers within every server's budget: from
    switch-bin, the best move of one switch or swap of two, while one
    lowers the overload (past budgets) or, at no more overload, the bytes
    that cross; at most MAX_PASSES rounds."""
    owner = _start(traffic, servers)
    for _ in range(MAX_PASSES):
        better = _best_change(traffic, servers, owner)
        if better is None:
            break
        owner = better
    return _placement("traffic", traffic, servers, owner)


def _start(traffic: Traffic, servers: list[Server]) -> np.ndarray:
    """Switch-bin over the fewest servers that can hold the fabric (by
    budgets, in order), so that a fabric that fits on one server stays there."""
    for used in range(1, len(servers) + 1):
        owner = np.asarray([s for s, size in enumerate(_bins(len(traffic.switches), used)) for _ in range(size)])
        if _overload(traffic, servers, owner) == (0.0, 0):
            return owner
    return np.asarray([s for s, size in enumerate(_bins(len(traffic.switches), len(servers)))
                       for _ in range(size)])


def _bins(n: int, k: int) -> list[int]:
    return [n // k + (1 if s < n % k else 0) for s in range(k)]


def _overload(traffic: Traffic, servers: list[Server], owner: np.ndarray) -> tuple[float, int]:
    load, hosts, ports = _sums(traffic, owner, len(servers))
    cap = _capacities(servers)
    limit = np.array([s.max_hosts for s in servers])
    return float(_over(load, cap(np.arange(len(servers)), ports)).sum()), int(np.maximum(hosts - limit, 0).sum())


def _sums(traffic: Traffic, owner: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per server: the load, hosts and switch ports its switches bring."""
    return (np.bincount(owner, weights=traffic.load, minlength=k),
            np.bincount(owner, weights=traffic.hosts, minlength=k),
            np.bincount(owner, weights=traffic.ports, minlength=k))


def _capacities(servers: list[Server]):
    """cap(server indices, their switch ports) -> their budgets: Server.budget_at, over arrays."""
    faithful = np.array([s.faithful_mbps for s in servers], dtype=float)
    calibrated = np.array([s.ports for s in servers], dtype=float)
    exponent = np.array([s.exponent for s in servers], dtype=float)

    return lambda server, ports: port_scaled(faithful[server], ports, calibrated[server], exponent[server])


def _over(load, budget):
    """Load past budget; within a part in a million of it counts as within (float sums)."""
    return np.maximum(load - budget * (1 + 1e-6), 0)


def _best_change(traffic: Traffic, servers: list[Server], owner: np.ndarray) -> np.ndarray | None:
    """The owner array after the best single move or swap, or None if none
    lowers the cost: the overload past budgets (each at the switch ports
    the change leaves on its server) first, then the bytes that cross.
    Every move and swap is weighed at once, from each switch's bytes to
    each server (conn)."""
    k, n = len(servers), len(owner)
    load, hosts, ports = _sums(traffic, owner, k)
    cap = _capacities(servers)
    limit = np.array([s.max_hosts for s in servers])
    fixed = lambda server, _ports: limit[server]   # noqa: E731 -- hosts: a budget that ports do not change
    conn = traffic.between @ np.eye(k)[owner]                    # (n, k) bytes from switch u to server s
    own = conn[np.arange(n), owner]
    # moves: switch u to server s (rows u, columns s)
    a = owner[:, None]
    to = np.arange(k)[None, :]
    move = (_changed(load, ports, cap, a, traffic.load[:, None], traffic.ports[:, None], to, n, k),
            _changed(hosts, ports, fixed, a, traffic.hosts[:, None], traffic.ports[:, None], to, n, k),
            own[:, None] - conn)                                  # cut change: bytes to the old server now cross
    # swaps: switch u with switch v (rows u, columns v), on different servers
    b = owner[None, :]
    shift_ports = traffic.ports[:, None] - traffic.ports[None, :]
    swap = (_changed(load, ports, cap, a, traffic.load[:, None] - traffic.load[None, :], shift_ports, b, n, n),
            _changed(hosts, ports, fixed, a, traffic.hosts[:, None] - traffic.hosts[None, :], shift_ports, b, n, n),
            own[:, None] - conn[:, owner] + own[None, :] - conn[:, owner].T + 2 * traffic.between)
    moves = owner[:, None] != np.arange(k)[None, :]
    swaps = np.triu(owner[:, None] != owner[None, :], 1)
    best = None
    base = (float(_over(load, cap(np.arange(k), ports)).sum()), int(np.maximum(hosts - limit, 0).sum()), 0.0)
    for kind, (dm, dh, dc), allowed in (("move", move, moves), ("swap", swap, swaps)):
        if not allowed.any():
            continue
        keys = [np.where(allowed, base[0] + dm, np.inf).ravel(), np.where(allowed, base[1] + dh, np.inf).ravel(),
                np.where(allowed, dc, np.inf).ravel()]
        i = int(np.lexsort(keys[::-1])[0])
        cost = (keys[0][i], keys[1][i], keys[2][i])
        if best is None or _lower(cost, best[0]):
            best = (cost, kind, divmod(i, dm.shape[1]))
    if best is None or not _lower(best[0], base):
        return None
    _, kind, (u, x) = best
    trial = owner.copy()
    if kind == "move":
        trial[u] = x
    else:
        trial[u], trial[x] = owner[x], owner[u]
    return trial


def _changed(total: np.ndarray, ports: np.ndarray, cap, a: np.ndarray, delta: np.ndarray, d_ports: np.ndarray,
             b: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Change of the overload past the budgets cap(server, ports) when
    `delta` and `d_ports` switch ports leave server a for server b (arrays
    broadcast to rows x cols); a == b changes nothing."""
    a, b = np.broadcast_to(a, (rows, cols)), np.broadcast_to(b, (rows, cols))
    delta, d_ports = np.broadcast_to(delta, (rows, cols)), np.broadcast_to(d_ports, (rows, cols))
    before = _over(total[a], cap(a, ports[a])) + _over(total[b], cap(b, ports[b]))
    after = _over(total[a] - delta, cap(a, ports[a] - d_ports)) + _over(total[b] + delta, cap(b, ports[b] + d_ports))
    return np.where(a == b, 0.0, after - before)


def _lower(a: tuple, b: tuple) -> bool:
    """Cost a below cost b: overload first (to a part in a million), then the
    change of the crossing bytes (at least a byte less)."""
    for x, y in zip(a[:2], b[:2]):
        if not math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9):
            return x < y
    return a[2] < b[2] - 1


def _placement(method: str, traffic: Traffic, servers: list[Server], owner: np.ndarray) -> Placement:
    k = len(servers)
    where = {}
    for i, switch in enumerate(traffic.switches):
        where[switch] = int(owner[i])
        for host in traffic.fabric.hosts_on(switch):
            where[host.name] = int(owner[i])
    crossing = {}
    for a in range(k):
        for b in range(a + 1, k):
            nbytes = traffic.between[np.ix_(owner == a, owner == b)].sum()
            if nbytes:
                crossing[(a, b)] = float(nbytes)
    return Placement(method, servers, where,
                     load_mbps=np.bincount(owner, weights=traffic.load, minlength=k).tolist(),
                     hosts=np.bincount(owner, weights=traffic.hosts, minlength=k).astype(int).tolist(),
                     switches=np.bincount(owner, minlength=k).tolist(), crossing=crossing,
                     ports=np.bincount(owner, weights=traffic.ports, minlength=k).astype(int).tolist())


def place(traffic: Traffic, servers: list[Server], method: str) -> Placement:
    if method not in PLACEMENTS:
        raise ValueError(f"unknown placement {method!r}; choose one of: {', '.join(PLACEMENTS)}")
    return switch_bin(traffic, servers) if method == "switch-bin" else by_traffic(traffic, servers)


def server_of(name: str, facts: dict, max_hosts: int) -> Server:
    """A server's budget from the facts it answered (emulator.net.cluster.facts_of)."""
    return Server(name, facts["faithful_mbps"] or 0.0, max_hosts, facts.get("calibrated_ports", 0),
                  facts.get("port_exponent", 0.0))


def as_one_machine(placement: Placement, basis: str) -> Assessment | None:
    """A placement that puts the whole fabric on the head is a run on one
    machine: the check such a run makes (warned, not refused), in its
    words; None for a placement over several servers."""
    if not placement.on_head_only():
        return None
    return Assessment(placement.load_mbps[0], placement.budget_mbps(0), basis)


def crossing_links(fabric: Fabric, placement: Placement) -> list:
    """The fabric's links whose two ends are on different servers (tunnels)."""
    return [link for link in fabric.links if placement.where[link.a] != placement.where[link.b]]


def tunnel_mbps(fabric: Fabric, placement: Placement, mtu: int) -> dict[tuple[int, int], float]:
    """The most Mbit/s each pair of servers may have to carry between them,
    each way: the rates of the links that cross, with the tunnel's header
    on every frame."""
    wrap = (mtu + ETHERNET_HEADER_BYTES + TUNNEL_HEADER_BYTES) / (mtu + ETHERNET_HEADER_BYTES)
    need: dict[tuple[int, int], float] = {}
    for link in crossing_links(fabric, placement):
        pair = tuple(sorted((placement.where[link.a], placement.where[link.b])))
        need[pair] = need.get(pair, 0.0) + link.rate_mbps * wrap
    return need


def servers_needed(traffic: Traffic, budget: Server, most: int = 4096) -> Placement:
    """The traffic placement over the fewest servers like `budget` that
    hold the run within their budgets. ValueError if even `most` do not
    (one switch alone past a server's budget)."""
    n = len(traffic.switches)
    alone = [budget.budget_at(int(p)) for p in traffic.ports]
    over = [i for i in range(n) if traffic.load[i] > alone[i] * (1 + 1e-6) or traffic.hosts[i] > budget.max_hosts]
    if over:
        i = over[0]
        raise ValueError(f"one switch alone carries {traffic.load[i]:.0f} link-Mbit/s and "
                         f"{traffic.hosts[i]} hosts: more than one server's budget "
                         f"({alone[i]:.0f} link-Mbit/s at its {traffic.ports[i]} switch ports, "
                         f"{budget.max_hosts} hosts)")
    low = max(1, math.ceil(traffic.load.sum() / budget.faithful_mbps),
              math.ceil(traffic.hosts.sum() / budget.max_hosts))
    for count in range(low, min(most, n) + 1):
        servers = [dataclasses.replace(budget, name=f"server{i + 1}") for i in range(count)]
        placement = _fit(traffic, servers)
        if not placement.overloaded():
            return placement
    raise ValueError(f"{min(most, n)} servers of {budget.faithful_mbps:.0f} link-Mbit/s do not hold this run")


def _fit(traffic: Traffic, servers: list[Server]) -> Placement:
    """A placement within budgets if an easy one exists: traffic placement
    where the switch count allows its search, else switch-bin."""
    if len(traffic.switches) <= SEARCH_SWITCHES:
        return by_traffic(traffic, servers)
    return switch_bin(traffic, servers)


SEARCH_SWITCHES = 160   # past this many switches, the search's moves and swaps cost too much in Python


def traffic_of(plan) -> Traffic:
    """The Traffic of a run plan: the bytes of every call (warm-ups too) on
    its routes, and the model's peak load over its sizes."""
    from emulator.model.simulation import link_bytes
    total: dict[tuple[str, int], float] = {}
    calls = {key: sum(1 for call in plan.calls if call.size_bytes == key) for key in plan.schedules}
    for key, schedule in plan.schedules.items():
        for link, nbytes in link_bytes(plan.fabric, plan.table, schedule, plan.hosts).items():
            total[link] = total.get(link, 0.0) + nbytes * calls[key]
    peak = max((p.peak_switch_mbps for p in plan.predictions.values()), default=0.0)
    return Traffic(plan.fabric, total, peak)


def describe(placement: Placement, fabric: Fabric, mtu: int) -> str:
    """Per server: switches, hosts, load against budget; then the bytes
    between each pair of servers and the tunnel rate they may need."""
    title = {"switch-bin": "switch-bin (Mininet's SwitchBinPlacer)",
             "traffic": "by traffic (fewest bytes across servers within budgets)"}[placement.method]
    lines = [f"# placement {title}: {_bytes(placement.cross_bytes)} across servers"]
    for s, server in enumerate(placement.servers):
        budget = placement.budget_mbps(s)
        share = placement.load_mbps[s] / budget if budget else math.inf
        switches = [n for n in placement.nodes_on(s) if fabric.is_switch(n)]
        lines.append(f"  {server.name}{' (head)' if s == 0 else ''}: {placement.switches[s]} switches, "
                     f"{placement.hosts[s]}/{server.max_hosts} hosts, {placement.load_mbps[s]:.0f}/"
                     f"{budget:.0f} link-Mbit/s ({share:.0%})"
                     + (f": {_names(switches)}" if switches else ""))
    need = tunnel_mbps(fabric, placement, mtu)
    for (a, b), nbytes in sorted(placement.crossing.items()):
        lines.append(f"  {placement.servers[a].name} <-> {placement.servers[b].name}: {_bytes(nbytes)}, "
                     f"links up to {need[(a, b)]:.0f} Mbit/s each way with the tunnel's headers")
    lines += [f"  OVER BUDGET: {what}" for what in placement.overloaded()]
    lines += [f"  SPLITS A NODE: {what} (a run refuses it: exit 2)" for what in split_nodes(fabric, placement)]
    return "\n".join(lines)


def split_nodes(fabric: Fabric, placement: Placement) -> list[str]:
    """The nodes of accelerators a placement would put on several servers,
    in words: a node is one machine of accelerators, its interconnect never
    crosses a tunnel between servers."""
    servers_of: dict[int, dict[str, int]] = {}
    for item in (*fabric.switches, *fabric.hosts):
        if item.node >= 0:
            servers_of.setdefault(item.node, {})[item.name] = placement.where[item.name]
    out = []
    for node, where in sorted(servers_of.items()):
        if len(set(where.values())) > 1:
            parts = ", ".join(f"{name} on {placement.servers[s].name}" for name, s in where.items()
                              if fabric.is_switch(name))
            out.append(f"node {node} ({parts})")
    return out


def _names(names: list[str], limit: int = 8) -> str:
    return " ".join(names[:limit]) + (f" ... ({len(names) - limit} more)" if len(names) > limit else "")


def _bytes(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


MAX_SERVERS = 4096


def parse_servers(text: str) -> list[str]:
    """--servers of `plan`: a count N (servers named server1..N) or
    HOST[,HOST...] as a run takes them (the first is the head)."""
    text = str(text).strip()
    if text.isascii() and text.isdigit():   # not '٣': str.isdigit() takes every script's digits
        count = to_int(text)
        if not 1 <= count <= MAX_SERVERS:
            raise ValueError(f"servers: {count} servers; give 1 to {MAX_SERVERS}")
        return [f"server{i + 1}" for i in range(count)]
    return list(server_names(text))


def server_plan(plan, names: list[str] | None, budget: Server, basis: str) -> str:
    """What `bigraph-emu plan` prints: over the servers named, both
    placements; with none named, the fewest servers like `budget` that
    hold the run, placed by traffic."""
    traffic = traffic_of(plan)
    ports = int(traffic.ports.sum())
    past = (f" up to {budget.ports} switch ports, as ({budget.ports}/ports) ** {budget.exponent:.2f} past them,"
            if budget.ports else "")
    lines = [f"# budget per server: {budget.faithful_mbps:.0f} link-Mbit/s{past} and at most {budget.max_hosts} "
             f"hosts ({basis})",
             f"# the run: {len(plan.fabric.switches)} switches ({ports} switch ports), {len(plan.fabric.hosts)} "
             f"hosts, peak {traffic.load.sum():.0f} link-Mbit/s (the model's), {_bytes(traffic.forwarded.sum())} "
             f"forwarded by switches; one server holding it all is faithful up to {budget.budget_at(ports):.0f}"]
    if names:
        servers = [dataclasses.replace(budget, name=name) for name in names]
        lines += [describe(place(traffic, servers, method), plan.fabric, plan.spec.mtu) for method in PLACEMENTS]
        return "\n".join(lines)
    try:
        placement = servers_needed(traffic, budget)
    except ValueError as e:
        return "\n".join(lines + [f"# no number of such servers holds this run: {e}"])
    used = sum(1 for n in placement.hosts if n) or 1
    lines.append(f"# needs {len(placement.servers)} server{'s' if len(placement.servers) > 1 else ''} "
                 f"({used} holding hosts)")
    lines.append(describe(placement, plan.fabric, plan.spec.mtu))
    return "\n".join(lines)


def clock_offset(samples: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(offset, uncertainty) of a server's clock to the head's, from round
    trips (head sent, server's time, head answered): the quickest trip
    bounds the server's reading best, at its midpoint within half its time."""
    if not samples:
        raise ValueError("no clock samples")
    sent, theirs, back = min(samples, key=lambda s: s[2] - s[0])
    return theirs - (sent + back) / 2, (back - sent) / 2


# --- preflight: what every server must agree on -------------------------------------------

SAME = ("mininet", "ovs", "project")   # facts every server must share with the head
CLOCK_SHARE_OF_CALL = 0.01


@dataclass(frozen=True)
class Needs:
    """What a run asks of every server's kernel, and why."""
    congestion_controls: dict[str, str] = field(default_factory=lambda: {"cubic": "tcp"})   # name -> who asks
    qdiscs: dict[str, str] = field(default_factory=dict)   # kernel qdisc module -> who asks


def needs_of(plan) -> Needs:
    """The congestion controls of the run and of its jobs, the queue
    discipline's qdisc and netem for delay or loss: what every server must
    offer (each holds hosts and switch ports of any kind)."""
    from emulator.fabric.queues import DISCIPLINES, FIFO, NETEM
    from emulator.spec.experiment import netem_asked
    spec = plan.spec
    tcp = {spec.tcp: "tcp"}
    for rank, name in enumerate(plan.congestion_controls()):
        if name:
            tcp.setdefault(name, f"a job's tcp (rank {rank})")
    qdiscs = {}
    discipline = DISCIPLINES[spec.queue_discipline]
    if discipline is not FIFO:
        qdiscs[discipline.module] = f"queue_discipline {discipline.name}"
    asked = netem_asked(spec, plan.fabric)
    if asked:
        qdiscs[NETEM] = asked[0]
    return Needs(tcp, qdiscs)


def fact_problems(facts: dict[str, dict], needs: Needs = Needs()) -> list[str]:
    """What keeps these servers (name -> what `cluster.facts_of` answered
    there; the head first) from running one fabric that needs `needs`, in
    words."""
    head, *others = facts
    problems = []
    for name, got in facts.items():
        for tcp, why in needs.congestion_controls.items():
            if tcp not in got.get("congestion_controls", [tcp]):
                problems.append(f"server {name}: its kernel does not offer {tcp!r} for {why} (it offers "
                                f"{', '.join(got['congestion_controls'])})")
        for module, why in needs.qdiscs.items():
            if not got.get("qdiscs", {}).get(module, False):
                problems.append(f"server {name}: its kernel has no {module} for {why}")
        if got["uid"] != 0:
            problems.append(f"server {name}: ssh reaches it as uid {got['uid']}, not root")
        if got["datapath"] is None:
            problems.append(f"server {name}: no datapath: {got['dataplane']}")
    for name in others:
        for key in SAME:
            if facts[name][key] != facts[head][key]:
                problems.append(f"server {name}: {key} {facts[name][key]!r}, the head has {facts[head][key]!r}")
    return problems


def clock_limit_s(predictions) -> float:
    """The largest clock uncertainty a run accepts: 1% of its shortest
    predicted call. A call's time is its last step's end on any server, so
    the clock errs it by the uncertainty at most; a step that crosses
    servers is known within the uncertainty too, which the results record."""
    return CLOCK_SHARE_OF_CALL * min((p.time_s for p in predictions), default=1.0)
