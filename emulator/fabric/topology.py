"""Pure topology builders: BiGraph, k-ary fat-tree, two-tier leaf-spine,
rail-optimized, and the HPC families dragonfly and torus.

Each builder returns a `Fabric` with explicit port numbers. Users name a
topology as `kind:key=value,...`, e.g. `bigraph:m=4,n=8`, `fattree:k=4`,
`leafspine:leaves=4,spines=2,hosts=4`, `rail:nodes=4,rails=4,spines=2`,
`dragonfly:a=4,p=2,h=1,g=4`, `torus:x=4,y=4,z=1,hosts=2` (see
`parse_topology`), or `file:PATH`, a topology file (emulator/fabric/files.py,
built by `from_file`). `with_nodes` turns a fabric's endpoints into the
NICs of nodes of accelerators (emulator/fabric/nodes.py).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from emulator.fabric import files
from emulator.fabric.graph import HOST_PORT, HOST_PREFIX, SWITCH_PREFIX, Fabric, Host, Link, Switch, host_address
from emulator.fabric.nodes import (LINK_NETWORK, LINK_NODE, MAX_RATE_MBPS, MIN_RATE_MBPS,  # noqa: F401 - link rates
                                   NVSWITCH, PCIE, PCIE_ROOT, NodeShape)
from emulator.inputs import shorten, to_int

MAX_HOSTS = 1 << 17   # 131,072: the flow model's largest case (the emulator stops far below)
MAX_LINKS = 1_000_000


@dataclass(frozen=True)
class LinkProfile:
    """Rate (Mbit/s) and queue depth (packets) per tier of links."""
    host_rate_mbps: float = 50.0
    host_queue_packets: int = 100
    switch_rate_mbps: float = 50.0
    switch_queue_packets: int = 100

    def __post_init__(self):
        for name in ("host_rate_mbps", "switch_rate_mbps"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")
        for name in ("host_queue_packets", "switch_queue_packets"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name} must be an integer >= 1, got {getattr(self, name)}")


class _Builder:
    """Collects switches, hosts and links, numbering ports as they are cabled."""

    def __init__(self, profile: LinkProfile):
        self.profile = profile
        self.switches: list[Switch] = []
        self.hosts: list[Host] = []
        self.links: list[Link] = []
        self._next_port: dict[str, int] = {}

    def add_switch(self, tier: str, index: int, node: int = -1) -> str:
        name = f"{SWITCH_PREFIX}{len(self.switches)}"
        self.switches.append(Switch(name, dpid=len(self.switches) + 1, tier=tier, index=index, node=node))
        self._next_port[name] = 1
        return name

    def _port(self, switch: str) -> int:
        port = self._next_port[switch]
        self._next_port[switch] += 1
        return port

    def add_host(self, switch: str, node: int = -1, local: int = 0, rate_mbps: float | None = None) -> str:
        """A host cabled to `switch`; an accelerator (node >= 0) at the interconnect's `rate_mbps`."""
        index = len(self.hosts)
        name = f"{HOST_PREFIX}{index}"
        ip, mac = host_address(index)
        port = self._port(switch)
        self.hosts.append(Host(name, index, ip, mac, switch, port, node, local))
        p = self.profile
        scope = LINK_NODE if node >= 0 else LINK_NETWORK
        self.links.append(Link(name, HOST_PORT, switch, port, p.host_rate_mbps if rate_mbps is None else rate_mbps,
                               p.host_queue_packets, "host", scope=scope))
        return name

    def connect(self, a: str, b: str, rate_mbps: float | None = None, scope: str = LINK_NETWORK) -> None:
        p = self.profile
        self.links.append(Link(a, self._port(a), b, self._port(b),
                               p.switch_rate_mbps if rate_mbps is None else rate_mbps, p.switch_queue_packets,
                               "switch", scope=scope))

    def cable_nic(self, node_switch: str, endpoint: Host) -> None:
        """NIC `endpoint` of a node: its node switch's next port cabled to the
        fabric switch port the endpoint had, at the host-link rate."""
        p = self.profile
        self.links.append(Link(node_switch, self._port(node_switch), endpoint.switch, endpoint.port,
                               p.host_rate_mbps, p.host_queue_packets, "switch", scope=LINK_NETWORK,
                               nic=endpoint.index))

    def fabric(self, topology: str, params: dict) -> Fabric:
        return Fabric(topology, self.switches, self.hosts, self.links, params)


def _check_size(hosts: int, links: int) -> None:
    """Refuse before building: a typo must not exhaust the memory."""
    if hosts > MAX_HOSTS:
        raise ValueError(f"{hosts} hosts is more than the {MAX_HOSTS} this tool supports")
    if links > MAX_LINKS:
        raise ValueError(f"{links} links is more than the {MAX_LINKS} this tool supports")


def bigraph(m: int, n: int, profile: LinkProfile = LinkProfile()) -> Fabric:
    """EFLOPS BiGraph: `n` switches in two parts of n/2, `m` hosts per switch,
    one link between every upper and every lower switch.

    Ports 1..m of each switch face hosts; ports m+1..m+n/2 face the other part.
    """
    if not isinstance(n, int) or n < 2 or n % 2:
        raise ValueError(f"bigraph needs an even number of switches n >= 2, got n={n}")
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"bigraph needs m >= 1 hosts per switch, got m={m}")
    _check_size(m * n, m * n + n * n // 4)
    b = _Builder(profile)
    half = n // 2
    upper = [b.add_switch("upper", i) for i in range(half)]
    lower = [b.add_switch("lower", i) for i in range(half)]
    for s in upper + lower:
        for _ in range(m):
            b.add_host(s)
    for u in upper:
        for l in lower:
            b.connect(u, l)
    return b.fabric(f"bigraph:m={m},n={n}", {"kind": "bigraph", "m": m, "n": n})


def fattree(k: int, profile: LinkProfile = LinkProfile()) -> Fabric:
    """k-ary three-tier fat-tree (Al-Fares et al.): k pods of k/2 edge and
    k/2 aggregation switches, (k/2)^2 core switches, k^3/4 hosts."""
    if not isinstance(k, int) or k < 2 or k % 2:
        raise ValueError(f"fattree needs an even k >= 2, got k={k}")
    _check_size(k ** 3 // 4, 3 * k ** 3 // 4)
    b = _Builder(profile)
    half = k // 2
    edges = [[b.add_switch("edge", pod * half + i) for i in range(half)] for pod in range(k)]
    aggs = [[b.add_switch("agg", pod * half + i) for i in range(half)] for pod in range(k)]
    cores = [b.add_switch("core", i) for i in range(half * half)]
    for pod in range(k):
        for e in edges[pod]:
            for _ in range(half):
                b.add_host(e)
    for pod in range(k):
        for e in edges[pod]:
            for a in aggs[pod]:
                b.connect(e, a)
    # Aggregation switch i of every pod reaches cores i*k/2 .. i*k/2 + k/2-1.
    for pod in range(k):
        for i, a in enumerate(aggs[pod]):
            for c in cores[i * half:(i + 1) * half]:
                b.connect(a, c)
    return b.fabric(f"fattree:k={k}", {"kind": "fattree", "k": k})


def leafspine(leaves: int, spines: int, hosts: int, uplinks: int = 1,
              profile: LinkProfile = LinkProfile()) -> Fabric:
    """Two-tier leaf-spine Clos: `hosts` per leaf, every leaf cabled to every
    spine by `uplinks` parallel links."""
    for name, value in (("leaves", leaves), ("spines", spines), ("hosts", hosts), ("uplinks", uplinks)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"leafspine needs {name} >= 1, got {name}={value}")
    if leaves * hosts < 2:   # one host has no one to talk to
        raise ValueError(f"leafspine needs at least 2 hosts (leaves x hosts), got leaves={leaves}, hosts={hosts}")
    _check_size(leaves * hosts, leaves * (hosts + spines * uplinks))
    b = _Builder(profile)
    leaf = [b.add_switch("leaf", i) for i in range(leaves)]
    spine = [b.add_switch("spine", i) for i in range(spines)]
    for l in leaf:
        for _ in range(hosts):
            b.add_host(l)
    for l in leaf:
        for s in spine:
            for _ in range(uplinks):
                b.connect(l, s)
    name = f"leafspine:leaves={leaves},spines={spines},hosts={hosts}"
    if uplinks != 1:
        name += f",uplinks={uplinks}"
    return b.fabric(name, {"kind": "leafspine", "leaves": leaves, "spines": spines,
                           "hosts": hosts, "uplinks": uplinks})


def rail(nodes: int, rails: int, spines: int, profile: LinkProfile = LinkProfile()) -> Fabric:
    """Rail-optimized two-tier Clos: `rails` rail (leaf) switches, each
    cabled to every one of `spines` spines; endpoint r of node s (host
    s*rails + r) on rail switch r, at port s+1. With nodes of accelerators
    (`--nics` equal to `rails`), NIC r of every node is on rail r; without,
    the fabric is nodes*rails plain hosts, host s*rails + r on rail r, as
    if each node had one accelerator a NIC and no interconnect."""
    for name, value in (("nodes", nodes), ("rails", rails), ("spines", spines)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"rail needs {name} >= 1, got {name}={value}")
    if nodes * rails < 2:
        raise ValueError(f"rail needs at least 2 endpoints (nodes x rails), got nodes={nodes}, rails={rails}")
    _check_size(nodes * rails, nodes * rails + rails * spines)
    b = _Builder(profile)
    rail_switches = [b.add_switch("rail", r) for r in range(rails)]
    spine = [b.add_switch("spine", i) for i in range(spines)]
    for _ in range(nodes):
        for r in rail_switches:
            b.add_host(r)
    for r in rail_switches:
        for s in spine:
            b.connect(r, s)
    return b.fabric(f"rail:nodes={nodes},rails={rails},spines={spines}",
                    {"kind": "rail", "nodes": nodes, "rails": rails, "spines": spines})


def _check_positive(kind: str, **values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{kind} needs {name} >= 1, got {name}={value}")


def dragonfly(a: int, p: int, h: int, g: int, profile: LinkProfile = LinkProfile()) -> Fabric:
    """Dragonfly (Kim et al.): `g` groups of `a` routers, `p` hosts and `h`
    global links per router, the routers of a group joined all-to-all.

    Global links, absolute arrangement: group pairs (i, t), i < t, are
    cabled in lexicographic order, each end on its group's next free global
    port, port j of a group on router j // h; at g = a*h + 1 (full size)
    port j of group i reaches group j (j < i) or j + 1, so every pair of
    groups has exactly one link. With fewer groups every pair has
    floor(a*h / (g-1)) links, and the a*h mod (g-1) ports left of each group
    join the groups at distances 1, 2, ... (and g/2) round the circle of
    groups: pair counts differ by at most one (an odd remainder with g odd
    leaves one port of each group free). Router index = group * a + router
    in group, tier "router"; `dragonfly_group` gives a router's group."""
    _check_positive("dragonfly", a=a, p=p, h=h, g=g)
    if g > a * h + 1:
        raise ValueError(f"dragonfly needs g <= a*h + 1 = {a * h + 1} groups (one global link per group pair), "
                         f"got g={g}")
    if a * p * g < 2:
        raise ValueError(f"dragonfly needs at least 2 hosts (a x p x g), got a={a}, p={p}, g={g}")
    pairs = _global_pairs(a * h, g)
    _check_size(a * p * g, a * p * g + g * a * (a - 1) // 2 + len(pairs))
    b = _Builder(profile)
    routers = [[b.add_switch("router", group * a + r) for r in range(a)] for group in range(g)]
    for group in routers:
        for r in group:
            for _ in range(p):
                b.add_host(r)
    for group in routers:
        for i, j in _all_pairs(a):
            b.connect(group[i], group[j])
    used = [0] * g   # global ports of each group taken so far
    for i, t in pairs:
        b.connect(routers[i][used[i] // h], routers[t][used[t] // h])
        used[i] += 1
        used[t] += 1
    return b.fabric(f"dragonfly:a={a},p={p},h={h},g={g}", {"kind": "dragonfly", "a": a, "p": p, "h": h, "g": g})


def _all_pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def _global_pairs(ports: int, g: int) -> list[tuple[int, int]]:
    """The group pairs of a dragonfly's global links, one entry per link,
    `ports` global ports per group (dragonfly's docstring says the rule)."""
    if g == 1:
        return []
    rounds, rest = divmod(ports, g - 1)
    pairs = _all_pairs(g) * rounds
    for d in range(1, rest // 2 + 1):    # the circle's chords of length d: every group gains two ends
        pairs += sorted(tuple(sorted((i, (i + d) % g))) for i in range(g))
    if rest % 2 and g % 2 == 0:          # the diameters: every group gains one end
        pairs += [(i, i + g // 2) for i in range(g // 2)]
    return pairs


def dragonfly_group(fabric: Fabric, switch: str) -> int:
    """The group of a dragonfly router."""
    return fabric.switch(switch).index // fabric.params["a"]


def torus(x: int, y: int, z: int, hosts: int, profile: LinkProfile = LinkProfile()) -> Fabric:
    """x*y*z torus (z=1: 2D), `hosts` per switch, each switch cabled to its
    neighbours in every dimension, wrapping round: a dimension of size
    n >= 3 is a ring of n links, of size 2 one link (not two parallel), of
    size 1 none. Switch index = x + X*(y + Y*z), tier "torus";
    `torus_coordinates` gives a switch's (x, y, z)."""
    _check_positive("torus", x=x, y=y, z=z, hosts=hosts)
    if x * y * z * hosts < 2:
        raise ValueError(f"torus needs at least 2 hosts (x*y*z x hosts), got x={x}, y={y}, z={z}, hosts={hosts}")
    sizes = (x, y, z)
    switches = x * y * z
    _check_size(switches * hosts, switches * hosts + sum(switches * _ring_links(n) // n for n in sizes))
    b = _Builder(profile)
    names = [b.add_switch("torus", i) for i in range(switches)]
    for s in names:
        for _ in range(hosts):
            b.add_host(s)
    for dim, n in enumerate(sizes):
        for i in range(switches):
            here = _coordinates(sizes, i)
            if n > 2 or (n == 2 and here[dim] == 0):   # size 2: only the switch at 0 cables its one link
                there = list(here)
                there[dim] = (here[dim] + 1) % n
                b.connect(names[i], names[_index(sizes, there)])
    return b.fabric(f"torus:x={x},y={y},z={z},hosts={hosts}",
                    {"kind": "torus", "x": x, "y": y, "z": z, "hosts": hosts})


def _ring_links(n: int) -> int:
    return n if n > 2 else n - 1


def _coordinates(sizes: tuple[int, ...], index: int) -> tuple[int, ...]:
    out = []
    for n in sizes:
        index, c = divmod(index, n)
        out.append(c)
    return tuple(out)


def _index(sizes: tuple[int, ...], coords) -> int:
    index = 0
    for n, c in zip(reversed(sizes), reversed(list(coords))):
        index = index * n + c
    return index


def torus_sizes(fabric: Fabric) -> tuple[int, int, int]:
    return fabric.params["x"], fabric.params["y"], fabric.params["z"]


def torus_coordinates(fabric: Fabric, switch: str) -> tuple[int, ...]:
    """(x, y, z) of a torus switch."""
    return _coordinates(torus_sizes(fabric), fabric.switch(switch).index)


def torus_switch(fabric: Fabric, coords) -> str:
    """The name of the torus switch at `coords`."""
    return fabric.switches[_index(torus_sizes(fabric), coords)].name


BUILDERS = {
    "bigraph": (bigraph, {"m": 2, "n": 4}),
    "fattree": (fattree, {"k": 4}),
    "leafspine": (leafspine, {"leaves": 4, "spines": 2, "hosts": 2, "uplinks": 1}),
    "rail": (rail, {"nodes": 4, "rails": 4, "spines": 2}),
    "dragonfly": (dragonfly, {"a": 4, "p": 2, "h": 1, "g": 4}),
    "torus": (torus, {"x": 4, "y": 4, "z": 1, "hosts": 2}),
}


def with_nodes(base: Fabric, shape: NodeShape, profile: LinkProfile = LinkProfile()) -> Fabric:
    """`base` with its endpoints turned into the NICs of nodes of `shape`
    (emulator/fabric/nodes.py says the shapes): NIC j of node i is endpoint
    i*K + j, cabled to the same fabric switch port; the fabric's switches
    and switch links keep their names and ports, and the node switches
    follow them, node by node. Raises ValueError naming the node key (nics)
    a base fabric cannot take."""
    n, k = shape.accelerators, shape.nics
    shape = shape.resolved(profile.host_rate_mbps)
    endpoints = len(base.hosts)
    if base.params.get("kind") == "rail" and base.params["rails"] != k:
        raise ValueError(f"nics: {base.topology} has {base.params['rails']} rails, one per NIC of a node, but "
                         f"nics is {k}; give nics = rails")
    if endpoints % k:
        raise ValueError(f"nics: {base.topology} has {endpoints} endpoints, not a multiple of the {k} NICs of a "
                         f"node (NIC j of node i is endpoint i*{k} + j)")
    nodes = endpoints // k
    per_nic = n // k
    pcie_links = k * per_nic + k + (k if k > 1 else 0)
    _check_size(nodes * n, len(base.links) + nodes * (n + k if shape.interconnect == "nvlink" else pcie_links))
    b = _Builder(profile)
    b.switches = list(base.switches)
    rate = shape.interconnect_mbps
    for i in range(nodes):
        nics = base.hosts[i * k:(i + 1) * k]
        if shape.interconnect == "nvlink":
            nvswitch = b.add_switch(NVSWITCH, i, node=i)
            for a in range(n):
                b.add_host(nvswitch, node=i, local=a, rate_mbps=rate)
            for nic in nics:
                b.cable_nic(nvswitch, nic)
            continue
        pcie = [b.add_switch(PCIE, i * k + j, node=i) for j in range(k)]
        root = b.add_switch(PCIE_ROOT, i, node=i) if k > 1 else None
        for j, (switch, nic) in enumerate(zip(pcie, nics)):
            for a in shape.users(j):
                b.add_host(switch, node=i, local=a, rate_mbps=rate)
            b.cable_nic(switch, nic)
            if root:
                b.connect(switch, root, rate_mbps=rate, scope=LINK_NODE)
    b.links += [link for link in base.links if link.kind == "switch"]
    return b.fabric(base.topology, {**base.params, "node": shape.to_dict()})


def parse_topology(text: str) -> tuple[str, dict]:
    """`"bigraph:m=4,n=8"` -> `("bigraph", {"m": 4, "n": 8})`, defaults filled in.

    Raises ValueError naming the bad part."""
    kind, _, rest = text.strip().partition(":")
    if kind not in BUILDERS:
        raise ValueError(f"unknown topology {kind!r}; choose one of: {', '.join(BUILDERS)}, or "
                         f"{files.PREFIX}PATH (a topology file)")
    params, given = dict(BUILDERS[kind][1]), set()
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or key not in params:
            raise ValueError(f"topology {kind}: bad parameter {shorten(repr(item))}; "
                             f"parameters are {', '.join(f'{k}=<int>' for k in params)}")
        if key in given:   # the last one would silently win
            raise ValueError(f"topology {kind}: {key} is given twice")
        given.add(key)
        try:
            params[key] = to_int(value)
        except ValueError:
            raise ValueError(f"topology {kind}: {key} must be an integer in ASCII digits, "
                             f"got {shorten(repr(value))}") from None
    return kind, params


@functools.lru_cache(maxsize=16)
def build(text: str, profile: LinkProfile = LinkProfile(), node: NodeShape | None = None,
          hosts_per_switch: int = 1) -> Fabric:
    """Build a fabric from its user-facing name, with nodes of `node`'s
    shape at its endpoints (None: plain hosts); `hosts_per_switch`: on a
    GraphML file's switches. Built once per name, profile and shape:
    fabrics are never changed after building, and a sweep's points (or an
    experiment's runs) share theirs."""
    if files.is_file(text):
        fabric = from_file(files.read(files.path_of(text), hosts_per_switch), profile)
    else:
        kind, params = parse_topology(text)
        fabric = BUILDERS[kind][0](profile=profile, **params)
    return fabric if node is None else with_nodes(fabric, node, profile)


def from_file(drawing: files.Drawing, profile: LinkProfile = LinkProfile()) -> Fabric:
    """A topology file's fabric: its switches in file order, each with its
    named hosts then its unnamed ones, links at the file's rate, delay and
    queue or the profile's. The user's names are kept in params["labels"]
    (project name -> the file's)."""
    try:
        _check_size(drawing.host_count(), drawing.host_count() + len(drawing.links))
    except ValueError as e:
        raise ValueError(f"{drawing.path}: {e}") from None
    b = _Builder(profile)
    labels, in_tier, names = {}, {}, []
    for s in drawing.switches:
        in_tier[s.role] = in_tier.get(s.role, -1) + 1
        names.append(b.add_switch(s.role, in_tier[s.role]))
        labels[names[-1]] = s.label
        for label in s.hosts:
            labels[b.add_host(names[-1])] = label
        for _ in range(s.count):
            b.add_host(names[-1])
    for link in drawing.links:
        b.connect(names[link.a], names[link.b], rate_mbps=link.rate_mbps)
        queue = link.queue_packets or profile.switch_queue_packets
        b.links[-1] = dataclasses.replace(b.links[-1], delay_ms=link.delay_ms, queue_packets=queue)
    return b.fabric(files.PREFIX + drawing.path, {"kind": files.KIND, "format": drawing.format,
                                                  "path": drawing.path, "labels": labels})
