"""Links a run records (pure): which switch-side interface carries each link the user names
for a packet capture (`capture = ["bgs0-bgs2", "bgh3"]`), checked against the fabric."""
from __future__ import annotations

from dataclasses import dataclass

from emulator.fabric.graph import Fabric, interface_name

MAX_CAPTURED_LINKS = 4   # one tcpdump each, on the machine that also forwards every packet


@dataclass(frozen=True)
class CapturedLink:
    name: str          # as the user named it: "bgs0-bgs2", or "bgh3" for a host's own link
    interface: str     # the switch-side interface that carries it, e.g. "bgs0-eth3"
    rate_mbps: float


def captured_links(fabric: Fabric, names) -> list[CapturedLink]:
    """The links named A-B (two switches, either order) or HOST (its own
    link), each with the switch-side interface to record; ValueError names
    a link the fabric lacks. Parallel links between A and B are all
    recorded, named A-B-1, A-B-2, ..."""
    if len(names) > MAX_CAPTURED_LINKS:
        raise ValueError(f"{len(names)} links; capture at most {MAX_CAPTURED_LINKS} at once (tcpdump runs on "
                         "the machine that forwards every packet)")
    twice = sorted({n for n in names if list(names).count(n) > 1})
    if twice:
        raise ValueError(f"{twice[0]} is given twice")
    captured = []
    for name in names:
        if name in {h.name for h in fabric.hosts}:
            host = fabric.host(name)
            link = fabric.peer(host.switch, host.port)[2]
            captured.append(CapturedLink(name, interface_name(host.switch, host.port), link.rate_mbps))
            continue
        a, _, b = name.partition("-")
        ends = [(l, (l.a, l.a_port) if l.a == a else (l.b, l.b_port)) for l in fabric.links
                if l.kind == "switch" and {l.a, l.b} == {a, b}]
        if not ends:
            raise ValueError(f"{name!r} is not a link of {fabric.topology}: give two switches, e.g. "
                             f"{_example(fabric)} ('bigraph-emu topo' lists the switch links), or a host for its "
                             f"own link, e.g. {fabric.hosts[-1].name}")
        for k, (link, (node, port)) in enumerate(ends, 1):
            captured.append(CapturedLink(name if len(ends) == 1 else f"{name}-{k}", interface_name(node, port),
                                         link.rate_mbps))
    return captured


def _example(fabric: Fabric) -> str:
    link = next((l for l in fabric.links if l.kind == "switch"), None)
    return f"{link.a}-{link.b}" if link else "(this fabric has no switch links)"
