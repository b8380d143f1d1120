"""Nodes of accelerators inside the fabric (pure): what a node is.

A **node** is an emulated machine of accelerators (NCCL's and SLURM's
word; a "server" in this project is a real machine running part of an
emulation, `--servers`). `NodeShape` says what every node of a fabric is:
its accelerators, its NICs, the interconnect between them and its rate.
`emulator.fabric.topology.with_nodes` expands a fabric into nodes of this
shape; without a shape a fabric is as it always was, one host per NIC.

The fabric's endpoints become NIC ports, taken in the fabric's endpoint
order (host order of the fabric without nodes): NIC j of node i is
endpoint i*K + j, so the fabric must have a multiple of K endpoints.
Accelerator a of a node (a = 0..N-1) uses NIC floor(a*K/N), to and from
other nodes; traffic between accelerators of one node stays on the
interconnect.

The shapes (R: the interconnect's rate, `interconnect_mbps`):

- ``pcie`` (EFLOPS's baseline node): one PCIe switch per NIC (tier
  "pcie"), holding the N/K accelerators that use that NIC, each on a link
  at R, and the NIC's cable to the fabric switch at the fabric's host-link
  rate. With K > 1, a PCIe root switch (tier "pcieroot") joins the PCIe
  switches, each by an uplink at R: traffic between accelerators under
  different PCIe switches crosses it. So a NIC shared by N/K accelerators
  and a PCIe uplink shared by a PCIe switch's accelerators both congest.
- ``nvlink`` (today's node): one NVSwitch (tier "nvswitch") among the
  node's accelerators, each on a link at R, with the node's K NIC cables
  on it (NIC j on the NVSwitch's port N+1+j). Real NICs sit on PCIe, but
  the PCIe hop is no bottleneck at these rates (PCIe Gen5 x16 is about
  1.3x a 400 Gbit/s NIC), so it is left out: a bridge less per packet.

Default R (`default_interconnect_mbps`): PCIE_RATE_FACTOR (2) and
NVLINK_RATE_FACTOR (4) times the fabric's host-link rate. Real NVLink is
18-36 times a NIC and PCIe Gen5 x16 about 1.3 times a 400 Gbit/s NIC, but
an emulation's whole datapath budget is about 2-4 Gbit/s summed over the
switch traversals of every packet (emulator/plan/capacity.py): a ratio of
18 would spend it on one node's interconnect. 2x and 4x keep the order
(the NIC is the bottleneck of a node's traffic to the network, the
interconnect is faster, NVLink faster than PCIe) at a cost the datapath
can carry; `--interconnect-mbps` sets R.

Records (emulator/fabric/graph.py): node switches are `Switch` records
with the project's prefix, their tier, and `node` (the node's index); the
accelerators are `Host` records numbered node by node (accelerator a of
node i is host index i*N + a) with `node` and `local` (a); every `Link`
has its `scope` (LINK_NODE inside a node, LINK_NETWORK for the network,
NIC cables included) and a NIC cable its endpoint in `nic`. The fabric's
`params["node"]` holds the shape (`NodeShape.to_dict`).

Contract (what routes, mappings and algorithms may rely on):

- `Host.node`: index of the host's node, -1 for a plain host with its own
  NIC; `Host.local`: its accelerator index in the node (0 for a plain host).
- `Fabric.node_shape()`: this module's NodeShape (its interconnect_mbps
  resolved), or None for a fabric without nodes.
- `Fabric.nodes()`: the accelerators' host names node by node (a list of
  lists; for a fabric without nodes, each host alone).
- `Fabric.nic_of(host)`: the name of the NIC endpoint an accelerator uses
  ("nic<e>", e = i*K + floor(a*K/N); a plain host's is "nic<its index>").
- Routes are computed by the policies on the network alone (the fabric's
  switches with the NICs as endpoints) and lifted onto the accelerators
  (emulator.routes.routing.forwarding_table).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

INTERCONNECTS = ("pcie", "nvlink")
# Interconnect rate, as a multiple of the fabric's host-link rate, when none is given (see above).
PCIE_RATE_FACTOR = 2.0      # real PCIe Gen5 x16: about 1.3x a 400 Gbit/s NIC; kept above the NIC, cheap to emulate
NVLINK_RATE_FACTOR = 4.0    # real NVLink 4: about 18x; 4x is what a 2-4 Gbit/s datapath budget carries
RATE_FACTORS = {"pcie": PCIE_RATE_FACTOR, "nvlink": NVLINK_RATE_FACTOR}
MAX_ACCELERATORS = 64       # per node: beyond any machine's
# The rates a run may ask of any link, the interconnect's too (100 Gbit/s: beyond every emulation).
# Here, the fabric package's lowest module, so that every builder and NodeShape share them.
MIN_RATE_MBPS, MAX_RATE_MBPS = 1.0, 100_000.0
MAX_QUEUE_PACKETS = 100_000   # a link's queue, packets
MAX_DELAY_MS = 1000.0         # a link's netem delay, each direction

# the tiers of node switches
PCIE, PCIE_ROOT, NVSWITCH = "pcie", "pcieroot", "nvswitch"   # no '-' in a tier: overrides name tier-tier
NODE_TIERS = (PCIE, PCIE_ROOT, NVSWITCH)
# a link's scope
LINK_NODE, LINK_NETWORK = "node", "network"
NODE_KEYS = ("accelerators", "nics", "interconnect", "interconnect_mbps")


def default_interconnect_mbps(interconnect: str, host_rate_mbps: float) -> float:
    """R when none is given: RATE_FACTORS times the host-link rate, at most a link's highest rate."""
    return min(RATE_FACTORS[interconnect] * host_rate_mbps, MAX_RATE_MBPS)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class NodeShape:
    """Every node of a fabric: N accelerators, K NICs (K divides N), the
    interconnect and its rate (None: default_interconnect_mbps). Raises
    ValueError naming the key (accelerators, nics, interconnect,
    interconnect_mbps) of a bad value."""
    accelerators: int
    nics: int = 1
    interconnect: str = "pcie"
    interconnect_mbps: float | None = None

    def __post_init__(self):
        n, k = self.accelerators, self.nics
        if not _whole(n) or not 1 <= n <= MAX_ACCELERATORS:
            raise ValueError(f"accelerators: must be a whole number from 1 to {MAX_ACCELERATORS} per node, got {n!r}")
        if not _whole(k) or not 1 <= k <= n:
            raise ValueError(f"nics: must be a whole number from 1 to the {n} accelerators of a node, got {k!r}")
        if n % k:
            raise ValueError(f"nics: {k} NICs do not divide the {n} accelerators of a node (each NIC serves "
                             f"the same number); choose one of {', '.join(str(d) for d in range(1, n + 1) if n % d == 0)}")
        if self.interconnect not in INTERCONNECTS:
            raise ValueError(f"interconnect: {self.interconnect!r} is not one of: {', '.join(INTERCONNECTS)}")
        rate = self.interconnect_mbps
        if rate is not None and not (isinstance(rate, (int, float)) and not isinstance(rate, bool)
                                     and math.isfinite(rate) and MIN_RATE_MBPS <= rate <= MAX_RATE_MBPS):
            raise ValueError(f"interconnect_mbps: must be between {MIN_RATE_MBPS:g} and {MAX_RATE_MBPS:g} Mbit/s, "
                             f"got {rate!r}")

    def resolved(self, host_rate_mbps: float) -> "NodeShape":
        """This shape with its interconnect rate filled in."""
        if self.interconnect_mbps is not None:
            return self
        return NodeShape(self.accelerators, self.nics, self.interconnect,
                         default_interconnect_mbps(self.interconnect, host_rate_mbps))

    def nic_index(self, local: int) -> int:
        """The NIC accelerator `local` of a node uses: floor(a*K/N)."""
        return local * self.nics // self.accelerators

    def users(self, nic: int) -> range:
        """The local accelerators that use NIC `nic`."""
        per = self.accelerators // self.nics
        return range(nic * per, (nic + 1) * per)

    def describe(self) -> str:
        """What a node is, in words: "4 accelerators and one NIC shared by
        them, under one PCIe switch at 100 Mbit/s"."""
        n, k = self.accelerators, self.nics
        if k == n:
            nics = f"{n} accelerator{'s' if n > 1 else ''} with a NIC each"
        elif k == 1:
            nics = f"{n} accelerators and one NIC shared by them"
        else:
            nics = f"{n} accelerators and {k} NICs, each shared by {n // k}"
        how = {"nvlink": "on one NVSwitch",
               "pcie": "under one PCIe switch" if k == 1 else "under a PCIe switch per NIC and a PCIe root switch"}
        rate = "" if self.interconnect_mbps is None else f" at {self.interconnect_mbps:g} Mbit/s"
        return f"{nics}, {how[self.interconnect]}{rate}"

    def to_dict(self) -> dict:
        return {"accelerators": self.accelerators, "nics": self.nics, "interconnect": self.interconnect,
                "interconnect_mbps": self.interconnect_mbps}

    @classmethod
    def from_dict(cls, d: dict) -> "NodeShape":
        return cls(**{key: d[key] for key in NODE_KEYS if key in d})
