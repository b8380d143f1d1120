"""Flow rules (pure): what the controller installs on each switch.

Like FAUCET's valve logic, rules are plain data computed from the fabric and
the routing policy; the os-ken app only turns them into OpenFlow messages.
"""
from __future__ import annotations

from dataclasses import dataclass

from controller.routing import ForwardingTable
from emulator.fabric import Fabric

ETH_TYPE_IPV4 = 0x0800
ROUTE_PRIORITY = 100


@dataclass(frozen=True)
class FlowRule:
    priority: int
    ipv4_dst: str | None   # None: the table-miss rule
    out_port: int | None   # None: drop


def switch_rules(fabric: Fabric, table: ForwardingTable, switch: str) -> list[FlowRule]:
    """One IPv4 destination rule per host, plus an explicit drop for the rest.

    ARP is static on the hosts and BiGraph has loops, so nothing is flooded
    and nothing is sent to the controller."""
    rules = [FlowRule(ROUTE_PRIORITY, fabric.host(dst).ip, port)
             for dst, port in sorted(table[switch].items(), key=lambda kv: fabric.host(kv[0]).index)]
    rules.append(FlowRule(0, None, None))
    return rules
