"""Rank mappings (pure): which emulated host runs which rank, one record
each (MAPPINGS), the only place a mapping is named: its help, how it
places, and what rank counts it needs (a fabric it cannot place on makes
its placer raise ValueError, naming why).

A job of a workload is placed by `place` on the hosts earlier jobs left
free, with one of these or an explicit host list.
"""
from __future__ import annotations

import random as _random
from dataclasses import dataclass
from typing import Callable

from emulator.fabric.graph import HOST_PREFIX, Fabric


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
    and whether their flows collide is left to the spine routing."""
    kind = fabric.params.get("kind")
    if kind == "bigraph":
        m, n = fabric.params["m"], fabric.params["n"]
    elif kind == "leafspine" and fabric.params["leaves"] % 2 == 0:
        m, n = fabric.params["hosts"], fabric.params["leaves"]
    else:
        raise ValueError(f"rank mapping 'hdrm' is defined for BiGraph and leaf-spines with an even "
                         f"number of leaves, not {fabric.topology}")
    if ranks != m * n:
        raise ValueError(f"rank mapping 'hdrm' places one rank on every host: needs {m * n} ranks, got {ranks}")
    # Hosts are numbered switch (leaf) by switch, m per switch.
    return [fabric.hosts[sw * m + slot].name for sw, slot in map(lambda r: hdrm_switch_slot(r, n), range(ranks))]


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
    job spreads over the fabric instead of filling switch after switch."""
    free_set = set(free)
    queues = [[h.name for h in fabric.hosts_on(s.name) if h.name in free_set] for s in fabric.switches]
    queues = [q for q in queues if q]
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
    halving-doubling step."""
    if fabric.params.get("kind") != "bigraph":
        raise ValueError(f"placement 'hdrm' on part of a fabric is defined for BiGraph only, not {fabric.topology}")
    if ranks < 2 or ranks & (ranks - 1):
        raise ValueError(f"placement 'hdrm' needs a power-of-two rank count, got {ranks}")
    free_set = set(free)
    parts = {tier: sorted((s for s in fabric.switches if s.tier == tier),
                          key=lambda s: -sum(h.name in free_set for h in fabric.hosts_on(s.name)))
             for tier in ("upper", "lower")}
    n = fabric.params["n"]
    for n_part in (k for k in range(n, 1, -2) if ranks % k == 0):
        m_part = ranks // n_part
        chosen = parts["upper"][:n_part // 2] + parts["lower"][:n_part // 2]
        slots = [[h.name for h in fabric.hosts_on(s.name) if h.name in free_set] for s in chosen]
        if m_part <= n_part // 2 and all(len(sl) >= m_part for sl in slots):
            return [slots[sw][slot] for sw, slot in (hdrm_switch_slot(r, n_part) for r in range(ranks))]
    raise ValueError(f"placement 'hdrm': {ranks} ranks cannot be placed on the free hosts of {fabric.topology} "
                     "with at most one flow per link and step (it needs n' switches, half in each part, "
                     f"with ranks/n' <= n'/2 free hosts each); use round-robin or a host list")


def _random_hosts(fabric: Fabric, free: list[str], ranks: int, seed: int) -> list[str]:
    names = list(free)
    _random.Random(seed).shuffle(names)
    return names[:ranks]


def _hdrm(fabric: Fabric, free: list[str], ranks: int, seed: int) -> list[str]:
    if len(free) == len(fabric.hosts) and (ranks == len(fabric.hosts) or fabric.params.get("kind") != "bigraph"):
        return _hdrm_hosts(fabric, ranks)
    return _hdrm_part(fabric, free, ranks)


MAPPINGS: dict[str, Mapping] = {m.name: m for m in (   # a job may also name a list of hosts
    Mapping("naive", "rank r on the r-th host, so consecutive ranks share a switch",
            lambda fabric, free, ranks, seed: free[:ranks]),
    Mapping("round-robin", "one host per switch in turn, spreading ranks over the fabric",
            lambda fabric, free, ranks, seed: _round_robin(fabric, free, ranks)),
    Mapping("random", "a seeded random permutation of the hosts", _random_hosts),
    Mapping("hdrm", "EFLOPS' mapping for BiGraph: halving-doubling partners always sit in opposite parts, and at "
                    "every step each directed switch-switch link carries at most one flow (when m <= n/2); on "
                    "every host, or on part of a BiGraph (or a leaf-spine with an even number of leaves)",
            _hdrm, power_of_two="it pairs halving-doubling partners"),
)}
