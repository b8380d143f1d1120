"""The fabric: switches, hosts and links of one emulated network.

A `Fabric` is plain data. The topology builders create it, the emulator
instantiates it in Mininet, the controller reads the same JSON file to
install routes, and the flow model predicts on it: all of them see the same
switches, ports, addresses and link rates.
"""
from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass, field

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
    tier: str      # "upper"/"lower" (BiGraph), "edge"/"agg"/"core", "leaf"/"spine"
    index: int     # position inside its tier


@dataclass(frozen=True)
class Host:
    name: str
    index: int
    ip: str
    mac: str
    switch: str    # the switch its NIC is cabled to
    port: int      # that switch's port number


@dataclass(frozen=True)
class Link:
    a: str
    a_port: int
    b: str
    b_port: int
    rate_mbps: float
    queue_packets: int
    kind: str      # "host" (NIC to switch) or "switch" (switch to switch)
    delay_ms: float = 0.0   # netem, each direction
    loss_pct: float = 0.0

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

    # --- JSON --------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "topology": self.topology,
            "params": self.params,
            "switches": [asdict(s) for s in self.switches],
            "hosts": [asdict(h) for h in self.hosts],
            "links": [asdict(l) for l in self.links],
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
