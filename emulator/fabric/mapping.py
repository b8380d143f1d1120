"""Rank mappings (pure): which emulated host runs which rank, one record
each (MAPPINGS), the only place a mapping is named: its help, how it
places, and what rank counts it needs (a fabric it cannot place on makes
its placer raise ValueError, naming why).

A job of a workload is placed by `place` on the hosts earlier jobs left
free, with one of these or an explicit host list.

On a fabric with nodes (emulator/fabric/nodes.py) the hosts are the
accelerators, numbered node by node, and each uses one of its node's K NIC
endpoints. What each mapping does there is in its help: naive fills node
after node; round-robin spreads over the switches the NICs are cabled to;
random ignores nodes; hdrm places on the NIC endpoints as without nodes,
the accelerators of one NIC taking consecutive ranks. `rank_nodes` tells an
algorithm that reads it (hierarchical) the node of every rank.
"""
from __future__ import annotations

import random as _random
from dataclasses import dataclass
from typing import Callable

from emulator.fabric.graph import HOST_PREFIX, Fabric

# Where the ranks of a group run: (node, local index) of every rank, node -1
# for a plain host (a machine of its own, with its own NIC); what algorithms
# that read the nodes take (emulator.workloads.algorithms)
Nodes = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Mapping:
    name: str
    help: str
    place: Callable[[Fabric, list[str], int, int], list[str]]   # (fabric, free hosts, ranks, seed) -> hosts by rank
    power_of_two: str = ""   # why it needs a power-of-two rank count ("": any count)


def _parity(x: int) -> int:
    return bin(x).count("1") & 1


def hdrm_switch_slot(rank: int, n: int) -> tuple[int, int]:
    """(switch index, slot on that switch) of `rank` on BiGraph with n switches.

    With h = n/2, q = rank >> 1, a = q mod h, j = q div h: even-parity ranks
    go to upper switch a, slot j; odd-parity ranks to lower switch
    h + (a + j) mod h, slot j (from docs/eflops.md).
    """
    h = n // 2
    q = rank >> 1
    a, j = q % h, q // h
    if _parity(rank) == 0:
        return a, j
    return h + (a + j) % h, j


def rank_nodes(fabric: Fabric, hosts: list[str]) -> Nodes:
    """(node, local index) of the host of every rank (index = rank): what an
    algorithm that reads the nodes takes; (-1, 0) on a plain host."""
    return tuple((h.node, h.local) for h in map(fabric.host, hosts))


def _nics(fabric: Fabric) -> list[tuple[str, list[str]]]:
    """Every NIC endpoint in endpoint order (the host order of the fabric
    without nodes): the network switch it is cabled to and the hosts that
    use it, by local index. Without nodes, each host on its own switch."""
    shape = fabric.node_shape()
    if shape is None:
        return [(h.switch, [h.name]) for h in fabric.hosts]
    k, n = shape.nics, shape.accelerators
    users: dict[int, list[str]] = {}
    for h in fabric.hosts:
        users.setdefault(h.node * k + h.local * k // n, []).append(h.name)
    cabled = {link.nic: end for link in fabric.links if link.nic >= 0
              for end in (link.a, link.b) if fabric.is_switch(end) and fabric.switch(end).node < 0}
    return [(cabled[e], users[e]) for e in sorted(users)]


def hosts_for_ranks(fabric: Fabric, mapping: str, ranks: int | None = None, seed: int = 0) -> list[str]:
    """Host name of every rank (index = rank). `ranks` defaults to every host."""
    ranks = len(fabric.hosts) if ranks is None else ranks
    if mapping not in MAPPINGS:
        raise ValueError(f"unknown rank mapping {mapping!r}; choose one of: {', '.join(MAPPINGS)}")
    if not 2 <= ranks <= len(fabric.hosts):
        raise ValueError(f"{ranks} ranks do not fit {fabric.topology} with {len(fabric.hosts)} hosts (need 2..{len(fabric.hosts)})")
    return place(fabric, mapping, ranks, seed)


def _hdrm_hosts(fabric: Fabric, ranks: int) -> list[str]:
    """On BiGraph as in EFLOPS. On a leaf-spine with an even number of
    leaves, the same placement with leaves as switches (n = leaves, m = hosts
    per leaf): each leaf's ranks then talk to distinct leaves at every step,
    and whether their flows collide is left to the spine routing.

    With nodes, the same placement of the NIC endpoints (m per switch), the
    s = N/K accelerators of endpoint q's NIC taking ranks q*s .. q*s+s-1
    (by local index): the first log2(s) halving-doubling steps pair ranks of
    one NIC, inside the node, and every later step pairs NICs as HDRM does
    without nodes, with s flows on each link (one per accelerator of the NIC)."""
    kind = fabric.params.get("kind")
    if kind == "bigraph":
        m, n = fabric.params["m"], fabric.params["n"]
    elif kind == "leafspine" and fabric.params["leaves"] % 2 == 0:
        m, n = fabric.params["hosts"], fabric.params["leaves"]
    else:
        raise ValueError(f"rank mapping 'hdrm' is defined for BiGraph and leaf-spines with an even "
                         f"number of leaves, not {fabric.topology}")
    nics = _nics(fabric)
    per = len(nics[0][1])   # accelerators a NIC (1 without nodes)
    if ranks != m * n * per:
        raise ValueError(f"rank mapping 'hdrm' places one rank on every host: needs {m * n * per} ranks, got {ranks}")
    # NIC endpoints are numbered switch (leaf) by switch, m per switch.
    places = [hdrm_switch_slot(q, n) for q in range(m * n)]
    return [nics[sw * m + slot][1][t] for sw, slot in places for t in range(per)]


def place(fabric: Fabric, placement, ranks: int, seed: int = 0, free: list[str] | None = None) -> list[str]:
    """Hosts of a job's ranks (index = rank) among the `free` hosts (default:
    all). `placement`: a name of MAPPINGS or a list of host names."""
    free = [h.name for h in fabric.hosts] if free is None else free
    if not isinstance(placement, str):
        return _listed(fabric, list(placement), ranks)
    if placement not in MAPPINGS:
        raise ValueError(f"unknown placement {placement!r}; choose one of: {', '.join(MAPPINGS)}, "
                         "or a list of hosts")
    if not 1 <= ranks <= len(free):
        raise ValueError(f"{ranks} ranks do not fit the {len(free)} free hosts of {fabric.topology}")
    return MAPPINGS[placement].place(fabric, free, ranks, seed)


def _listed(fabric: Fabric, names: list, ranks: int) -> list[str]:
    known = {h.name for h in fabric.hosts}
    hosts = [f"{HOST_PREFIX}{n}" if isinstance(n, int) and not isinstance(n, bool) else n for n in names]
    unknown = [h for h in hosts if h not in known]
    if unknown:
        raise ValueError(f"hosts {unknown[:4]} are not in {fabric.topology} "
                         f"({fabric.hosts[0].name}..{fabric.hosts[-1].name})")
    if len(hosts) != ranks:
        raise ValueError(f"the host list names {len(hosts)} hosts for {ranks} ranks")
    return hosts


def _round_robin(fabric: Fabric, free: list[str], ranks: int) -> list[str]:
    """One host per switch in turn (switches in fabric order), so that a
    job spreads over the fabric instead of filling switch after switch.
    With nodes, the switch an accelerator's NIC is cabled to: one
    accelerator per network switch in turn, each switch's in host order."""
    free_set = set(free)
    on: dict[str, list[str]] = {}
    for switch, users in _nics(fabric):
        on.setdefault(switch, []).extend(h for h in users if h in free_set)
    queues = [on[s.name] for s in fabric.switches if on.get(s.name)]
    hosts = []
    while len(hosts) < ranks:
        for q in queues:
            if q and len(hosts) < ranks:
                hosts.append(q.pop(0))
    return hosts


def _hdrm_part(fabric: Fabric, free: list[str], ranks: int) -> list[str]:
    """HDRM on part of a BiGraph: n' switches (n'/2 of each part, those with
    the most free hosts) and m' = ranks/n' ranks on each, with m' <= n'/2 so
    that every directed switch link still carries at most one flow per
    halving-doubling step. With nodes, the same on the NICs whose
    accelerators are all free (as _hdrm_hosts: a NIC's s accelerators take
    s consecutive ranks, so the ranks are a multiple of s)."""
    if fabric.params.get("kind") != "bigraph":
        raise ValueError(f"placement 'hdrm' on part of a fabric is defined for BiGraph only, not {fabric.topology}")
    if ranks < 2 or ranks & (ranks - 1):
        raise ValueError(f"placement 'hdrm' needs a power-of-two rank count, got {ranks}")
    free_set = set(free)
    every = _nics(fabric)
    per = len(every[0][1])   # accelerators a NIC (1 without nodes)
    nics = [(switch, users) for switch, users in every if free_set.issuperset(users)]
    if ranks % per:
        raise ValueError(f"placement 'hdrm' places whole NICs, {per} accelerators each: {ranks} ranks are not "
                         "a multiple; use naive, round-robin or a host list")
    units = ranks // per
    if units == 1 and nics:   # every rank behind one NIC: halving-doubling stays in the node
        return list(nics[0][1])
    on: dict[str, list[list[str]]] = {}
    for switch, users in nics:
        on.setdefault(switch, []).append(users)
    parts = {tier: sorted((s for s in fabric.switches if s.tier == tier), key=lambda s: -len(on.get(s.name, ())))
             for tier in ("upper", "lower")}
    n = fabric.params["n"]
    for n_part in (k for k in range(n, 1, -2) if units % k == 0):
        m_part = units // n_part
        slots = [on.get(s.name, []) for s in parts["upper"][:n_part // 2] + parts["lower"][:n_part // 2]]
        if m_part <= n_part // 2 and all(len(sl) >= m_part for sl in slots):
            return [slots[sw][slot][t] for sw, slot in (hdrm_switch_slot(q, n_part) for q in range(units))
                    for t in range(per)]
    what = "free hosts" if per == 1 else f"NICs with all {per} accelerators free"
    raise ValueError(f"placement 'hdrm': {ranks} ranks cannot be placed on the free hosts of {fabric.topology} "
                     "with at most one flow per link and step (it needs n' switches, half in each part, "
                     f"with ranks/n' <= n'/2 {what} each); use round-robin or a host list")


def _random_hosts(fabric: Fabric, free: list[str], ranks: int, seed: int) -> list[str]:
    names = list(free)
    _random.Random(seed).shuffle(names)
    return names[:ranks]


def _hdrm(fabric: Fabric, free: list[str], ranks: int, seed: int) -> list[str]:
    if len(free) == len(fabric.hosts) and (ranks == len(fabric.hosts) or fabric.params.get("kind") != "bigraph"):
        return _hdrm_hosts(fabric, ranks)
    return _hdrm_part(fabric, free, ranks)


MAPPINGS: dict[str, Mapping] = {m.name: m for m in (   # a job may also name a list of hosts
    Mapping("naive", "rank r on the r-th host, so consecutive ranks share a switch (with nodes: a node, filled "
                     "accelerator by accelerator before the next)",
            lambda fabric, free, ranks, seed: free[:ranks]),
    Mapping("round-robin", "one host per switch in turn, spreading ranks over the fabric (with nodes: one "
                           "accelerator per switch its NIC is cabled to, in turn)",
            lambda fabric, free, ranks, seed: _round_robin(fabric, free, ranks)),
    Mapping("random", "a seeded random permutation of the hosts (with nodes: of the accelerators, nodes ignored)",
            _random_hosts),
    Mapping("hdrm", "EFLOPS' mapping for BiGraph: halving-doubling partners always sit in opposite parts, and at "
                    "every step each directed switch-switch link carries at most one flow (when m <= n/2); on "
                    "every host, or on part of a BiGraph (or a leaf-spine with an even number of leaves). With "
                    "nodes it places the NIC endpoints so, each rank on the accelerator that uses its NIC: with "
                    "a NIC per accelerator the property holds; with K < N NICs a node, the N/K accelerators of a "
                    "NIC take consecutive ranks, the first log2(N/K) steps stay in the node and each later step "
                    "puts N/K flows on each link (the NIC's share, the least its shared NIC allows)",
            _hdrm, power_of_two="it pairs halving-doubling partners"),
)}
