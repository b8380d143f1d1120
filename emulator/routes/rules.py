"""Flow rules (pure): what the controller installs on each switch.

Like FAUCET's valve logic, rules are plain data computed from the fabric and
the routing policy; the os-ken app only turns them into OpenFlow messages.
"""
from __future__ import annotations

from dataclasses import dataclass

from emulator.routes.routing import ANY_SOURCE, ForwardingTable, out_port
from emulator.fabric.graph import Fabric

ETH_TYPE_IPV4 = 0x0800
ROUTE_PRIORITY = 100
PAIR_PRIORITY = ROUTE_PRIORITY + 1   # a pinned pair's rule wins over its destination's rule


@dataclass(frozen=True)
class FlowRule:
    priority: int
    ipv4_dst: str | None   # None: the table-miss rule
    out_port: int | None   # None: drop
    ipv4_src: str | None = None   # set for ECMP's and pinned pairs' per-pair rules


def switch_rules(fabric: Fabric, table: ForwardingTable, switch: str) -> list[FlowRule]:
    """One IPv4 destination rule per host (with "ecmp", one per source and
    destination where there is a choice), plus an explicit drop for the rest.

    A per-source entry (a dict) gives a destination rule with the port of
    unnamed sources, and above it one rule per source that leaves another way.

    ARP is static on the hosts and BiGraph has loops, so nothing is flooded
    and nothing is sent to the controller."""
    rules = []
    for dst in sorted(table[switch], key=lambda name: fabric.host(name).index):
        ip = fabric.host(dst).ip
        entry = table[switch][dst]
        if isinstance(entry, int):
            rules.append(FlowRule(ROUTE_PRIORITY, ip, entry))
        elif isinstance(entry, dict):
            rules += _pinned_rules(fabric, entry, ip, dst)
        else:
            rules += [FlowRule(ROUTE_PRIORITY, ip, out_port(table, switch, src.name, dst), src.ip)
                      for src in fabric.hosts if src.name != dst]
    rules.append(FlowRule(0, None, None))
    return rules


def _pinned_rules(fabric: Fabric, entry: dict[str, int], ip: str, dst: str) -> list[FlowRule]:
    default = entry[ANY_SOURCE]
    pinned = sorted((fabric.host(src) for src, port in entry.items()
                     if src not in (ANY_SOURCE, dst) and port != default), key=lambda h: h.index)
    return [FlowRule(ROUTE_PRIORITY, ip, default)] + \
        [FlowRule(PAIR_PRIORITY, ip, entry[h.name], h.ip) for h in pinned]
