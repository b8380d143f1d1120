"""The fabric: switches, hosts and links of one emulated network.

A `Fabric` is plain data. The topology builders create it, the emulator
instantiates it in Mininet, the controller reads the same JSON file to
install routes, and the flow model predicts on it: all of them see the same
switches, ports, addresses and link rates.

A fabric may hold nodes of accelerators (emulator/fabric/nodes.py): then
its hosts are the accelerators, node switches join them to the NICs, and
the records below carry which node they belong to. The fields that say so
are left out of the JSON where they hold their defaults, so a fabric
without nodes reads and writes as before.
"""
from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass, field, fields

from emulator.fabric.nodes import LINK_NETWORK, NodeShape

# RFC 2544 benchmarking range: never collides with a real network.
ADDRESS_BASE = ipaddress.IPv4Address("198.18.0.0")
PREFIX_LEN = 15
HOST_PORT = 0  # a host has one interface; "port 0" is its NIC

# Every kernel object the project creates carries one of these prefixes, so
# cleanup finds exactly its own (bridges, veths) and nothing else.
SWITCH_PREFIX = "bgs"
HOST_PREFIX = "bgh"


@dataclass(frozen=True)
class Switch:
    name: str
    dpid: int
    tier: str      # "upper"/"lower" (BiGraph), "edge"/"agg"/"core", "leaf"/"spine", "rail", "router" (dragonfly),
                   # "torus"; a topology file's roles ("switch" where it gives none: emulator/fabric/files.py); in a node
                   # "pcie", "pcieroot", "nvswitch" (emulator/fabric/nodes.py)
    index: int     # position inside its tier
    node: int = -1   # the node it belongs to; -1: a switch of the network


@dataclass(frozen=True)
class Host:
    name: str
    index: int
    ip: str
    mac: str
    switch: str    # the switch its NIC is cabled to (an accelerator's: its node switch)
    port: int      # that switch's port number
    node: int = -1   # an accelerator's node; -1: a plain host with its own NIC
    local: int = 0   # an accelerator's index in its node


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int
    b: str
    b_port: int
    rate_mbps: float
    queue_packets: int
    kind: str      # "host" (NIC to switch) or "switch" (switch to switch; a node's NIC cable too)
    delay_ms: float = 0.0   # netem, each direction
    loss_pct: float = 0.0
    scope: str = LINK_NETWORK   # "network", or "node": inside a node (nodes.LINK_NODE)
    nic: int = -1   # a node's NIC cable: its endpoint (NIC j of node i: i*K + j); -1 for any other link

    def ends(self):
        return ((self.a, self.a_port), (self.b, self.b_port))


@dataclass
class Fabric:
    topology: str                      # the name users typed, e.g. "bigraph:m=2,n=4"
    switches: list[Switch]
    hosts: list[Host]
    links: list[Link]
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        self._switch = {s.name: s for s in self.switches}
        self._host = {h.name: h for h in self.hosts}
        self._hosts_on: dict[str, list[Host]] = {}
        for h in self.hosts:
            self._hosts_on.setdefault(h.switch, []).append(h)
        # (node, port) -> (peer node, peer port, link)
        self._wire = {}
        self._ports: dict[str, list[int]] = {}
        for link in self.links:
            (a, ap), (b, bp) = link.ends()
            for end, other in (((a, ap), (b, bp)), ((b, bp), (a, ap))):
                if end in self._wire:
                    raise ValueError(f"port {end[1]} of {end[0]} is cabled twice")
                self._wire[end] = (other[0], other[1], link)
                self._ports.setdefault(end[0], []).append(end[1])
        for ports in self._ports.values():
            ports.sort()
        self._neighbours = {s.name: [(p, self._wire[(s.name, p)][0]) for p in self._ports.get(s.name, [])
                                     if self._wire[(s.name, p)][0] in self._switch]
                            for s in self.switches}

    # --- lookups -----------------------------------------------------------
    def switch(self, name: str) -> Switch:
        return self._switch[name]

    def host(self, name: str) -> Host:
        return self._host[name]

    def is_switch(self, name: str) -> bool:
        return name in self._switch

    def peer(self, node: str, port: int):
        """(peer node, peer port, link) at the far end of `node`'s `port`."""
        return self._wire[(node, port)]

    def ports(self, node: str) -> list[int]:
        return list(self._ports.get(node, []))

    def switch_neighbours(self, switch: str) -> list[tuple[int, str]]:
        """(port, neighbour switch) for every switch-switch port, by port."""
        return self._neighbours[switch]

    def hosts_on(self, switch: str) -> list[Host]:
        return self._hosts_on.get(switch, [])

    # --- nodes (emulator/fabric/nodes.py) -------------------------------------
    def node_shape(self) -> NodeShape | None:
        """What every node is, or None: a fabric without nodes."""
        shape = self.params.get("node")
        return NodeShape.from_dict(shape) if shape else None

    def nodes(self) -> list[list[str]]:
        """The accelerators' host names node by node; without nodes, each host alone."""
        shape = self.node_shape()
        if shape is None:
            return [[h.name] for h in self.hosts]
        n = shape.accelerators
        return [[h.name for h in self.hosts[i:i + n]] for i in range(0, len(self.hosts), n)]

    def nic_endpoint(self, host: str) -> int:
        """The endpoint (NIC) index an accelerator uses, i*K + floor(a*K/N);
        a plain host's own index."""
        h = self._host[host]
        shape = self.node_shape()
        if shape is None or h.node < 0:
            return h.index
        return h.node * shape.nics + shape.nic_index(h.local)

    def nic_of(self, host: str) -> str:
        """The name of the NIC endpoint an accelerator uses ("nic<endpoint>")."""
        return nic_name(self.nic_endpoint(host))

    # --- JSON --------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "topology": self.topology,
            "params": self.params,
            "switches": [_record(s) for s in self.switches],
            "hosts": [_record(h) for h in self.hosts],
            "links": [_record(l) for l in self.links],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Fabric":
        return cls(
            topology=d["topology"],
            params=d.get("params", {}),
            switches=[Switch(**s) for s in d["switches"]],
            hosts=[Host(**h) for h in d["hosts"]],
            links=[Link(**l) for l in d["links"]],
        )

    def save(self, path) -> None:
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)

    @classmethod
    def load(cls, path) -> "Fabric":
        with open(path) as f:
            return cls.from_dict(json.load(f))


# fields records gained with nodes, and their defaults: written only where they differ
_NODE_FIELDS = {cls: {f.name: f.default for f in fields(cls) if f.name in names}
                for cls, names in ((Switch, ("node",)), (Host, ("node", "local")), (Link, ("scope", "nic")))}


def _record(item) -> dict:
    """A record as JSON: every field, but the node fields at their defaults."""
    d = asdict(item)
    for name, default in _NODE_FIELDS[type(item)].items():
        if d[name] == default:
            del d[name]
    return d


def nic_name(endpoint: int) -> str:
    """The name of NIC endpoint `endpoint` (Fabric.nic_of)."""
    return f"nic{endpoint}"


def host_of_address(ip: str) -> str | None:
    """The name of the host a fabric address belongs to (host_address's
    inverse; the builders name host i HOST_PREFIX + i), None for any other address."""
    try:
        index = int(ipaddress.IPv4Address(ip)) - int(ADDRESS_BASE) - 1
    except ValueError:
        return None
    return f"{HOST_PREFIX}{index}" if 0 <= index < (1 << (32 - PREFIX_LEN)) - 2 else None


def host_address(index: int) -> tuple[str, str]:
    """(IPv4, MAC) of host `index`; locally administered MACs."""
    ip = ADDRESS_BASE + index + 1
    n = index + 1
    mac = "02:00:%02x:%02x:%02x:%02x" % ((n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255)
    return str(ip), mac


def interface_name(node: str, port: int) -> str:
    """Mininet names a node's port-p interface node-ethp."""
    return f"{node}-eth{port}"
