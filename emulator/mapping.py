"""Rank mappings (pure): which emulated host runs which rank.

- `naive`: rank r on host r, so consecutive ranks share a switch.
- `hdrm`:  EFLOPS' rank mapping for BiGraph: partners of halving-doubling
           always sit in opposite parts, and at every step each directed
           switch-switch link carries at most one flow (when m <= n/2).
- `random`: a seeded random permutation.
"""
from __future__ import annotations

import random as _random

from emulator.fabric import Fabric

MAPPINGS = ("naive", "hdrm", "random")


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
    if mapping == "naive":
        return [h.name for h in fabric.hosts[:ranks]]
    if mapping == "random":
        names = [h.name for h in fabric.hosts]
        _random.Random(seed).shuffle(names)
        return names[:ranks]
    return _hdrm_hosts(fabric, ranks)


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
