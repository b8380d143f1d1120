"""The link and sample records (pure): how a directed link is named and
read, what one sample of the whole fabric's counters holds, and the columns
of links.csv, machine.csv and ports.csv. The monitors produce them, the
controller writes port readings, the results read them."""
from __future__ import annotations

from dataclasses import dataclass, field

from emulator.fabric.graph import Fabric, interface_name

# `link` names a directed link as node:port>peer; node, port and peer are the same as columns
LINK_COLUMNS = ["call", "t_s", "link", "node", "port", "peer", "kind", "scope", "rate_mbps", "tx_bytes", "tx_packets",
                "util", "backlog_bytes", "drops", "marks"]
MACHINE_COLUMNS = ["call", "t_s", "cpu_busy", "cpu_stolen", "ovs_cpu", "ovs_wait"]
# The controller's port counter readings (OpenFlow port stats, about every
# second): it appends them to CONTROLLER_PORTS with `t` in time.monotonic(),
# the clock every process of the machine shares; each call's ports.csv rows
# are the readings taken while it ran, `t_s` from the call's start as in links.csv.
CONTROLLER_PORTS = "controller-ports.csv"
PORT_READING_COLUMNS = ["t", "switch", "port", "tx_bytes", "rx_bytes", "tx_dropped"]
PORT_COLUMNS = ["call", "t_s", "switch", "port", "peer", "tx_bytes", "rx_bytes", "tx_dropped"]


def link_label(node: str, port: int, peer: str) -> str:
    """The name of a directed link: what leaves `node` by `port` towards `peer`."""
    return f"{node}:{port}>{peer}"


@dataclass(frozen=True)
class DirectedLink:
    node: str          # what it leaves, by `port`, towards `peer`
    port: int
    peer: str
    kind: str          # "host" or "switch"
    rate_mbps: float
    dev: str           # the switch-side interface that carries it
    egress: bool       # True: dev's egress qdisc; False: dev's receive counters
    scope: str = "network"   # or "node": inside a node of accelerators (its interconnect)

    @property
    def label(self) -> str:   # e.g. "bgs1:3>bgs5"
        return link_label(self.node, self.port, self.peer)


def directed_links(fabric: Fabric) -> list[DirectedLink]:
    links = []
    for link in fabric.links:
        for (node, port), (peer, peer_port) in (link.ends(), link.ends()[::-1]):
            switch_side = (node, port) if fabric.is_switch(node) else (peer, peer_port)
            links.append(DirectedLink(node, port, peer, link.kind, link.rate_mbps,
                                      interface_name(*switch_side), fabric.is_switch(node), link.scope))
    return links


@dataclass
class Sample:
    """Counters of the whole fabric at one instant."""
    t: float                                               # time.monotonic()
    sent: dict[str, tuple[int, int, int, int, int]] = field(default_factory=dict)
    # dev -> (bytes, packets, backlog bytes, drops, ECN marks) of its egress queue
    received: dict[str, tuple[int, int]] = field(default_factory=dict)
    # dev -> (bytes, packets) received
    cpu_busy: int = 0       # jiffies, all cores
    cpu_total: int = 0
    ovs_ticks: int = 0      # ovs-vswitchd CPU time, clock ticks
    ovs_wait_s: float = 0.0   # its forwarding thread's time runnable but waiting for a core
    cpu_stolen: int = 0     # jiffies a hypervisor gave to something else, all cores
    tcp: dict[str, int] = field(default_factory=dict)   # the hosts' TCP counters so far ({}: not sampled)
