"""Experiment specs (pure): parsed and validated before anything touches
the network. A run is one flat set of keys, the same in TOML experiment
files and on the command line; bad input raises SpecError naming the key
and the values it accepts.
"""
from __future__ import annotations

import dataclasses
import re
import json
import math
import os
import sys
from dataclasses import dataclass, field

from emulator.routes.routing import POLICIES, policy_record
from emulator.routes.user_policy import FILE_POLICY
from emulator.fabric.captured import captured_links
from emulator.fabric.files import MAX_HOSTS_PER_SWITCH, beside as topology_beside
from emulator.fabric.graph import Fabric
from emulator.fabric.nodes import INTERCONNECTS, LINK_NETWORK, MAX_DELAY_MS, MAX_QUEUE_PACKETS, NODE_KEYS, NodeShape
from emulator.inputs import InputError, as_name, is_name, read_text, shorten, to_float, to_int
from emulator.fabric.mapping import MAPPINGS, hosts_for_ranks, rank_nodes
from emulator.model.sharing import MODELS as SHARING_MODELS
from emulator.inputs import MAX_CALL_BYTES, parse_size, size_sweep
from emulator.fabric.queues import DISCIPLINES, FIFO
from emulator.workloads.algorithms import ALGORITHMS
from emulator.workloads.collectives import COLLECTIVES
from emulator.workloads.job import CONGESTION_CONTROL
from emulator.workloads.schedule import algorithm_need, need_said
from emulator.fabric.topology import MAX_RATE_MBPS, MIN_RATE_MBPS, LinkProfile, build

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


class SpecError(ValueError):
    pass


# Limits of what one run may ask for: a typo must not start a week-long run.
MAX_SIZE_BYTES = MAX_CALL_BYTES     # 4 GiB per call
MAX_SIZES = 64
LINK_ACTIONS = ("down", "up")


@dataclass(frozen=True)
class LinkEvent:
    """Switch-switch link `a`-`b` goes `action` ("down"/"up") `time_s`
    seconds after the run's first counted call starts."""
    time_s: float
    a: str
    b: str
    action: str

    def __str__(self) -> str:
        return f"{self.time_s:g}:{self.a}-{self.b}:{self.action}"

    def pair(self) -> frozenset:
        return frozenset((self.a, self.b))


# What a link override may change: its key in A-B:KEY=VALUE, the Link field
# it sets, and the spec key whose range it shares.
OVERRIDE_SETTINGS = {"rate": ("rate_mbps", "switch_rate_mbps"), "delay": ("delay_ms", "link_delay_ms"),
                     "loss": ("loss_pct", "link_loss_pct")}


@dataclass(frozen=True)
class LinkOverride:
    """Some links at another rate, delay or loss (None: as the rest of the
    spec says). `a`-`b` names one link (both directions), `a` alone a host's
    own link, and two tiers every link between them (e.g. leaf-spine,
    host-leaf: the tiers `bigraph-emu topo` prints; "host" for hosts)."""
    a: str
    b: str
    rate_mbps: float | None = None
    delay_ms: float | None = None
    loss_pct: float | None = None

    def __str__(self) -> str:
        target = f"{self.a}{'-' + self.b if self.b else ''}"
        values = {key: getattr(self, name) for key, (name, _) in OVERRIDE_SETTINGS.items()}
        if values["delay"] is None and values["loss"] is None:   # the short form A-B:MBPS
            return f"{target}:{self.rate_mbps:g}"
        return f"{target}:" + ",".join(f"{k}={v:g}" for k, v in values.items() if v is not None)

    def settings(self) -> dict:
        """Link field -> value, for the settings this override changes."""
        return {name: getattr(self, name) for name, _ in OVERRIDE_SETTINGS.values()
                if getattr(self, name) is not None}

    def is_tier(self, fabric: Fabric) -> bool:
        tiers = {s.tier for s in fabric.switches} | {"host"}
        return self.a in tiers and self.b in tiers

    def matches(self, link, fabric: Fabric) -> bool:
        if self.is_tier(fabric):
            return {self.a, self.b} == {_tier(fabric, link.a), _tier(fabric, link.b)}
        ends = {link.a, link.b}
        return self.a in ends and (self.b in ends if self.b else link.kind == "host")


def _tier(fabric: Fabric, node: str) -> str:
    return fabric.switch(node).tier if fabric.is_switch(node) else "host"


@dataclass(frozen=True)
class RunSpec:
    topology: str = "bigraph:m=2,n=4"
    collective: str = "allreduce"
    algorithm: str = "ring"
    mapping: str = "naive"
    policy: str = "shortest"           # one of emulator.routes.routing.POLICIES, or file:PATH.py (your own)
    ranks: int = 0                     # 0: one rank on every host
    seed: int = 1                      # for mapping "random"
    sizes: tuple[int, ...] = (1 << 20, 2 << 20, 4 << 20)
    repetitions: int = 2
    warmup: int = 1                    # repetitions run first and not counted
    host_rate_mbps: float = LinkProfile.host_rate_mbps
    switch_rate_mbps: float = LinkProfile.switch_rate_mbps
    host_queue_packets: int = LinkProfile.host_queue_packets
    switch_queue_packets: int = LinkProfile.switch_queue_packets
    mtu: int = 9000                    # jumbo frames: 6x less per-packet work for OVS
    datapath: str = "auto"             # auto, kernel or user
    offload: str = "auto"              # off: hosts send frames; tso: TSO segments up to the HTB burst
                                       # (userspace datapath: needs Open vSwitch's userspace TSO);
                                       # auto: tso where it is on, else off (emulator.net.dataplane)
    connections: int = 1               # TCP connections per peer pair (1..16), NCCL-like:
                                       # a step's bytes split over them, so ECMP can hash several flows
    link_delay_ms: float = 0.0         # netem delay on every link, each direction (0..1000 ms)
    link_loss_pct: float = 0.0         # netem random loss on every link, each direction (0..100 %)
    link_events: tuple[LinkEvent, ...] = ()   # switch-switch links going down/up during the run,
                                       # "T:A-B:down|up", T seconds after the first counted call starts
    workload: str = ""                 # a workload file ([[job]] tables) or FORMAT:FILE: replaces the
                                       # collective and sizes; algorithm, mapping and ranks fill in what
                                       # its jobs leave open (see emulator/workloads/workload.py)
    link_overrides: tuple[LinkOverride, ...] = ()   # "A-B:RATE" or "HOST:RATE": one link at another rate
    monitor_interval_ms: float = 100.0  # link counters sampled this often (10..1000 ms)
    capture: tuple[str, ...] = ()      # links recorded (pcap, headers only) during every counted call:
                                       # "A-B" (two switches) or "HOST" (its own link); see emulator/fabric/captured.py
    model_alpha_us: float = 500.0      # per-message latency the model adds
    sharing: str = "tcp"               # the model's congested links: tcp (TCP's sharing of a queue as
                                       # `calibrate --tcp-sharing` measured it; max-min where not measured)
                                       # or max-min (emulator.model.sharing)
    label: str = ""                    # free text carried into the results
    servers: tuple[str, ...] = ()      # a fabric over several servers: [user@]host names, the first the head
                                       # (this machine, which runs the controller); () for this machine alone
    placement: str = "traffic"         # which server holds which switch: traffic or switch-bin (emulator.plan.servers)
    tcp: str = "cubic"                 # TCP congestion control of every emulated host. Stated, never inherited
                                       # from the machine (a new namespace takes the machine's, bbr on some of
                                       # ours): cubic is Linux's default, the VMs' and most clusters' choice
    queue_discipline: str = "fifo"     # every switch port's queue (emulator.fabric.queues): fifo, red-ecn, fq_codel
    ecn_threshold_packets: int = 0     # red-ecn's marking threshold K in packets (0: a fifth of the queue)
    # nodes of accelerators at the fabric's endpoints (emulator/fabric/nodes.py); None: not given.
    # Without accelerators, plain hosts with a NIC each, as always; in a file also a [node] table
    accelerators: int | None = None    # per node, 1..64
    nics: int | None = None            # per node, dividing the accelerators (None: 1, a shared NIC)
    interconnect: str | None = None    # pcie or nvlink (None: pcie)
    interconnect_mbps: float | None = None   # its links' rate (None: 2x the host-link rate for pcie, 4x for nvlink)
    hosts_per_switch: int = 1          # a GraphML topology file's switches (emulator/fabric/files.py)

    def link_profile(self) -> LinkProfile:
        return LinkProfile(self.host_rate_mbps, self.host_queue_packets,
                           self.switch_rate_mbps, self.switch_queue_packets)

    def node_shape(self) -> NodeShape | None:
        """The nodes' shape these keys give (None: no accelerators, plain
        hosts); ValueError names a bad key."""
        if self.accelerators is None:
            return None
        return NodeShape(self.accelerators, 1 if self.nics is None else self.nics,
                         self.interconnect or "pcie", self.interconnect_mbps)

    def fabric(self) -> Fabric:
        """The topology built at the spec's rates, delay and loss, with its
        link overrides (a later override wins where two set the same thing),
        and its nodes. Delay and loss given for every link are the network's
        (a node's interconnect has none), overrides reach any link."""
        fabric = build(self.topology, self.link_profile(), self.node_shape(), self.hosts_per_switch)
        if not (self.link_overrides or self.link_delay_ms or self.link_loss_pct):
            return fabric
        links = []
        for link in fabric.links:
            # a topology file's own delay on a link wins over the run's
            values = {"delay_ms": link.delay_ms or self.link_delay_ms, "loss_pct": self.link_loss_pct} \
                if link.scope == LINK_NETWORK else {}
            for override in self.link_overrides:
                if override.matches(link, fabric):
                    values.update(override.settings())
            links.append(dataclasses.replace(link, **values))
        return Fabric(fabric.topology, fabric.switches, fabric.hosts, links, fabric.params)

    def fabric_key(self) -> tuple:
        """Runs with equal keys can share one emulated network (link events
        change it too: a run that took a link down does not lend its network)."""
        key = (self.topology, self.policy, self.host_rate_mbps, self.switch_rate_mbps,
               self.host_queue_packets, self.switch_queue_packets, self.mtu, self.datapath,
               self.offload, self.link_delay_ms, self.link_loss_pct, self.link_events, self.link_overrides,
               self.servers, self.placement, self.tcp, self.queue_discipline, self.ecn_threshold_packets,
               self.accelerators, self.nics, self.interconnect, self.interconnect_mbps, self.hosts_per_switch)
        policy = policy_record(self.policy)
        if policy.sees_demands or policy.uses_seed:   # routes depend on the workload or the seed
            key += (self.collective, self.algorithm, self.mapping, self.ranks, self.seed, self.workload)
        return key


FIELDS = {f.name: f for f in dataclasses.fields(RunSpec)}
OFFLOADS = ("off", "tso")   # segmentation offload on the emulated hosts' interfaces (emulator.net.dataplane)
PLACEMENTS = ("switch-bin", "traffic")   # how a fabric is spread over servers (emulator.plan.servers)
SERVER_NAME = re.compile(r"^([A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9._-]*$")
_CHOICES = {"collective": COLLECTIVES, "algorithm": ALGORITHMS, "mapping": MAPPINGS,
            "datapath": ("auto", "kernel", "user"),
            "offload": ("auto", *OFFLOADS), "placement": PLACEMENTS, "queue_discipline": DISCIPLINES,
            "sharing": SHARING_MODELS}
# key -> (lowest, highest) allowed, both inclusive; None: no upper limit
_RANGES = {"repetitions": (1, 1000), "warmup": (0, 100), "ranks": (0, None),
           "host_rate_mbps": (MIN_RATE_MBPS, MAX_RATE_MBPS), "switch_rate_mbps": (MIN_RATE_MBPS, MAX_RATE_MBPS),
           "host_queue_packets": (1, MAX_QUEUE_PACKETS), "switch_queue_packets": (1, MAX_QUEUE_PACKETS),
           "mtu": (576, 9000), "connections": (1, 16), "link_delay_ms": (0, MAX_DELAY_MS), "link_loss_pct": (0, 100),
           "monitor_interval_ms": (10, 1000), "model_alpha_us": (0, 1e6),
           "ecn_threshold_packets": (0, MAX_QUEUE_PACKETS), "hosts_per_switch": (0, MAX_HOSTS_PER_SWITCH)}


def _convert(key: str, value):
    """Coerce one user value to the field's type, or raise naming the key."""
    if key == "sizes":
        return _sizes(value)
    if key == "link_events":
        return _link_events(value)
    if key == "link_overrides":
        return _link_overrides(value)
    if key == "capture":
        return _link_names(key, value)
    if key == "servers":
        return server_names(value)
    if key in NODE_KEYS:
        return _node_key(key, value)
    kind = FIELDS[key].type
    if kind == "str":
        if not isinstance(value, str):   # a TOML list or number is no name
            raise SpecError(f"{key}: expected text, got {shorten(repr(value))}")
        return value
    try:
        return to_int(value) if kind == "int" else to_float(value)
    except ValueError:
        raise SpecError(f"{key}: expected {kind}, got {shorten(repr(value))}") from None


def _node_key(key: str, value):
    """A node key's value (None: not given, as spec.json records it)."""
    if value is None:
        return None
    if key == "interconnect":
        if not isinstance(value, str) or value not in INTERCONNECTS:
            raise SpecError(f"interconnect: {shorten(repr(value))} is not one of: {', '.join(INTERCONNECTS)}")
        return value
    kind = "int" if key in ("accelerators", "nics") else "float"
    try:
        number = to_int(value) if kind == "int" else to_float(value)
    except ValueError:
        raise SpecError(f"{key}: expected {kind}, got {shorten(repr(value))}") from None
    try:   # alone: a whole number or rate in range (nics against the accelerators: validate)
        NodeShape(number if key == "accelerators" else 64, number if key == "nics" else 1,
                  interconnect_mbps=number if key == "interconnect_mbps" else None)
    except ValueError as e:
        if str(e).startswith(f"{key}:") and "do not divide" not in str(e):
            raise SpecError(str(e).replace("the 64 accelerators", "the accelerators")) from None
    return number


def node_table(values: dict, where: str = "node") -> dict:
    """`values` with a `node` table ([node] or node = {...}: accelerators,
    nics, interconnect, interconnect_mbps) made its flat keys; SpecError
    names an unknown key, or a key given both ways."""
    if "node" not in values:
        return values
    table, rest = values["node"], {k: v for k, v in values.items() if k != "node"}
    if not isinstance(table, dict):
        raise SpecError(f"{where}: expected a table of {', '.join(NODE_KEYS)}, got {shorten(repr(table))}")
    unknown = sorted(set(table) - set(NODE_KEYS))
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)}; a node's keys are {', '.join(NODE_KEYS)}")
    twice = sorted(set(table) & set(rest))
    if twice:
        raise SpecError(f"{twice[0]}: given twice, in the {where} table and beside it")
    return {**rest, **table}


def _link_names(key: str, value) -> tuple[str, ...]:
    """'bgs0-bgs2,bgh3' or a list of such names -> the names."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise SpecError(f"{key}: expected link names (A-B or HOST), comma-separated or a list, got "
                        f"{shorten(repr(value))}")
    names = tuple(v.strip() for v in items if v.strip())
    if len(names) < len(items):
        raise SpecError(f"{key}: {shorten(repr(value))} has an empty link name")
    return names


def server_names(value) -> tuple[str, ...]:
    """'head,lab2' or a list of names -> the names: [user@]host each, none twice."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise SpecError(f"servers: expected host names, comma-separated or a list, got {shorten(repr(value))}")
    names = tuple(v.strip() for v in items)
    bad = [name for name in names if not SERVER_NAME.match(name)]
    if bad:
        raise SpecError(f"servers: {bad[0]!r} is not a host name or address; give HOST[,HOST...] ([user@]host), "
                        f"the first this machine, e.g. head,lab2")
    if len(set(names)) != len(names):
        raise SpecError(f"servers: {shorten(repr(value))} names a server twice")
    return names


def _sizes(value) -> tuple[int, ...]:
    """A list of sizes, or a sweep 'begin:end:factor' like nccl-tests -b/-e/-f."""
    try:
        if isinstance(value, str) and ":" in value:
            fields = value.split(":")
            if len(fields) > 3:
                raise ValueError(f"sweep {shorten(repr(value))} has more than begin:end:factor")
            begin, end, factor = (fields + ["2"])[:3]
            begin, end = parse_size(begin), parse_size(end)
            if end > MAX_SIZE_BYTES:
                raise ValueError(f"sweep ends at {end} bytes, above the limit of {MAX_SIZE_BYTES} (4G)")
            return tuple(size_sweep(begin, end, to_float(factor), MAX_SIZES))
        items = value if isinstance(value, (list, tuple)) else [value]
        sizes = tuple(parse_size(v) for v in items)
        twice = sorted({n for n in sizes if sizes.count(n) > 1})
        if twice:   # one size is one set of calls: the second would vanish
            raise ValueError(f"{twice[0]} bytes is given twice")
        return sizes
    except ValueError as e:
        raise SpecError(f"sizes: {e}") from None


LINK_EVENT_FORM = "TIME:SWITCH-SWITCH:down|up, e.g. 2.5:bgs1-bgs5:down"


def parse_link_event(value) -> LinkEvent:
    """'2.5:bgs1-bgs5:down' (or a LinkEvent, or its dict from spec.json)."""
    if isinstance(value, LinkEvent):
        return value
    if isinstance(value, dict):   # spec.json's record: exactly these keys, each of its type
        fields = ("time_s", "a", "b", "action")
        try:
            if set(value) != set(fields) or not all(isinstance(value[k], str) for k in fields[1:]):
                raise ValueError
            return LinkEvent(to_float(value["time_s"]), value["a"], value["b"], value["action"])
        except ValueError:
            raise SpecError(f"link_events: {shorten(repr(value))} is not an event record ({', '.join(fields)}: "
                            f"a number of seconds and three names) nor {LINK_EVENT_FORM}") from None
    bad = SpecError(f"link_events: {shorten(repr(value))} is not {LINK_EVENT_FORM}")
    if not isinstance(value, str) or value.count(":") != 2:
        raise bad
    when, link, action = (part.strip() for part in value.split(":"))
    a, dash, b = link.partition("-")
    try:
        time_s = to_float(when)
    except ValueError:
        raise bad from None
    if not dash or not a or not b:
        raise bad
    return LinkEvent(time_s, a.strip(), b.strip(), action)


def _link_events(value) -> tuple[LinkEvent, ...]:
    items = value if isinstance(value, (list, tuple)) else [value]
    return tuple(parse_link_event(v) for v in items)


LINK_OVERRIDE_FORM = ("A-B:MBPS (a link), HOST:MBPS (a host's link), or TARGET:KEY=VALUE,... with keys rate "
                      "(Mbit/s), delay (ms), loss (%) and TARGET a link, a host or two tiers, "
                      "e.g. bgs0-bgs2:5, bgh3:10, leaf-spine:rate=10,delay=20")


def _link_overrides(value) -> tuple[LinkOverride, ...]:
    items = value if isinstance(value, (list, tuple)) else [value]
    return tuple(item if isinstance(item, LinkOverride) else _link_override(item) for item in items)


def _link_override(item) -> LinkOverride:
    if isinstance(item, dict):   # from spec.json: the record's own fields
        known = {"a", "b"} | {name for name, _ in OVERRIDE_SETTINGS.values()}
        if not set(item) <= known or not item.get("a"):
            raise SpecError(f"link_overrides: {item!r} is not a link override record ({', '.join(sorted(known))})")
        values = {name: _override_value(item, key, item.get(name)) for key, (name, _) in OVERRIDE_SETTINGS.items()
                  if item.get(name) is not None}
        return LinkOverride(str(item["a"]), str(item.get("b") or ""), **values)
    link, colon, rest = str(item).partition(":")
    a, _, b = link.partition("-")
    if not colon or not a.strip() or not rest.strip():
        raise SpecError(f"link_overrides: {item!r} is not {LINK_OVERRIDE_FORM}")
    pairs = [("rate", rest)] if "=" not in rest else [part.partition("=")[::2] for part in rest.split(",")]
    values = {}
    for key, raw in pairs:
        key = key.strip()
        if key not in OVERRIDE_SETTINGS:
            raise SpecError(f"link_overrides: {item!r}: unknown setting {key!r}; settings are "
                            f"{', '.join(OVERRIDE_SETTINGS)}")
        name = OVERRIDE_SETTINGS[key][0]
        if name in values:
            raise SpecError(f"link_overrides: {item!r}: {key} is given twice")
        values[name] = _override_value(item, key, raw)
    return LinkOverride(a.strip(), b.strip(), **values)


def _override_value(item, key: str, raw) -> float:
    low, high = _RANGES[OVERRIDE_SETTINGS[key][1]]
    try:
        number = to_float(raw if not isinstance(raw, str) else raw.strip().removesuffix("ms" if key == "delay" else "%"))
    except ValueError:
        number = math.nan
    if not low <= number <= high:
        unit = {"rate": "Mbit/s", "delay": "ms", "loss": "%"}[key]
        raise SpecError(f"link_overrides: {item!r}: {key} must be a number from {low:g} to {high:g} {unit}, "
                        f"got {raw!r}")
    return number


def check_key(key: str, value) -> None:
    """One key known and its value well formed by itself, before the other
    keys of a run are known (what no other key can make right)."""
    if key == "node":   # a node table: each of its keys
        for k, v in node_table({key: value}).items():
            check_key(k, v)
        return
    if key not in FIELDS:
        raise SpecError(f"unknown key {key}; known keys: {', '.join(FIELDS)}")
    spec = RunSpec(**{key: _convert(key, value)})
    _check_choices(spec)
    _check_ranges(spec)


def make_run(values: dict, has_netem=None) -> RunSpec:
    """A validated RunSpec from user keys (unknown keys are errors).
    `has_netem`: a callable telling whether the kernel has netem, to refuse
    what it cannot emulate (None: not checked; emulator.net.capabilities has it)."""
    values = node_table(values)
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise SpecError(f"unknown key(s) {', '.join(unknown)}; known keys: {', '.join(FIELDS)}")
    spec = RunSpec(**{k: _convert(k, v) for k, v in values.items()})
    validate(spec, has_netem)
    return spec


def validate(spec: RunSpec, has_netem=None) -> Fabric:
    """Raise SpecError naming the first bad key; returns the built fabric.
    `has_netem`: a callable telling whether the kernel has netem (None: not checked)."""
    _check_choices(spec)
    _check_ranges(spec)
    _check_node(spec)
    try:
        fabric = spec.fabric()   # pure and quick: checks every parameter
    except ValueError as e:
        if str(e).split(":")[0] in NODE_KEYS:   # what the fabric's endpoints cannot take (nics)
            raise SpecError(f"{e}") from None
        raise SpecError(f"topology: {str(e).removeprefix('topology ')}") from None
    for override in spec.link_overrides:
        if not any(override.matches(link, fabric) for link in fabric.links):
            tiers = sorted({s.tier for s in fabric.switches})
            raise SpecError(f"link_overrides: {override}: no such link in {fabric.topology} ('bigraph-emu topo' "
                            f"lists the switch links; HOST:MBPS names a host's own link; its tiers are host, "
                            f"{', '.join(tiers)})")
    _check_hosts_per_switch(spec, fabric)
    _check_policy(spec, fabric)
    if spec.workload:
        load_workload(spec.workload, fabric, spec)
    else:
        _check_algorithm(spec)
        _check_placement(spec, fabric)
    check_link_events(spec.link_events, fabric)
    try:
        captured_links(fabric, spec.capture)
    except ValueError as e:
        raise SpecError(f"capture: {e}") from None
    if not CONGESTION_CONTROL.match(spec.tcp):
        raise SpecError(f"tcp: {shorten(repr(spec.tcp))} is not a congestion control's name (e.g. cubic, reno, bbr, "
                        "dctcp)")
    _check_queues(spec, fabric)
    if has_netem is not None:
        _check_netem(spec, fabric, has_netem)
    return fabric


def _check_choices(spec: RunSpec) -> None:
    for key, choices in _CHOICES.items():
        if getattr(spec, key) not in choices:
            raise SpecError(f"{key}: {getattr(spec, key)!r} is not one of: {', '.join(choices)}")
    try:   # ours, or a file: loaded now, so that one that cannot be imported stops here
        policy_record(spec.policy)
    except ValueError as e:
        raise SpecError(f"policy: {e}") from None


def _check_ranges(spec: RunSpec) -> None:
    for key, (lo, hi) in _RANGES.items():
        value = getattr(spec, key)
        if not (lo <= value and (hi is None or value <= hi)):   # also refuses NaN
            need = f"between {lo:g} and {hi:g}" if hi is not None else f"{lo:g} or more"
            raise SpecError(f"{key}: must be {need}, got {value!r}")
    if not 1 <= len(spec.sizes) <= MAX_SIZES:
        raise SpecError(f"sizes: must be 1 to {MAX_SIZES} sizes, got {len(spec.sizes)}")
    if max(spec.sizes) > MAX_SIZE_BYTES:
        raise SpecError(f"sizes: {max(spec.sizes)} bytes is above the limit of {MAX_SIZE_BYTES} (4G)")


def _check_node(spec: RunSpec) -> None:
    """The node keys together: a shape NodeShape takes, and no node key
    without accelerators."""
    if spec.accelerators is None:
        given = [key for key in NODE_KEYS[1:] if getattr(spec, key) is not None]
        if given:
            raise SpecError(f"{given[0]}: describes a node of accelerators; give accelerators too (without them, "
                            "every endpoint is a plain host with its own NIC)")
        return
    try:
        spec.node_shape()
    except ValueError as e:
        raise SpecError(str(e)) from None


def _check_hosts_per_switch(spec: RunSpec, fabric: Fabric) -> None:
    """Refused where it would change nothing: only a GraphML file's switches take it."""
    if spec.hosts_per_switch != RunSpec.hosts_per_switch and fabric.params.get("format") != "graphml":
        raise SpecError(f"hosts_per_switch: only a GraphML topology file (file:PATH.graphml) takes it, not "
                        f"{fabric.topology}; leave it out")


def _check_policy(spec: RunSpec, fabric: Fabric) -> None:
    kind = fabric.params.get("kind")
    record = policy_record(spec.policy)
    wanted = record.fabric_kind
    if wanted and kind != wanted:
        fits = [p.name for p in POLICIES.values() if p.fabric_kind in (None, kind)]
        raise SpecError(f"policy: {spec.policy!r} routes {wanted} fabrics only, not {fabric.topology}; "
                        f"choose one of: {', '.join(fits)}")
    if record.needs_nodes and fabric.node_shape() is None:
        raise SpecError(f"policy: {spec.policy!r} routes fabrics with nodes of accelerators only; give "
                        "accelerators and nics (or choose another policy)")


def _check_algorithm(spec: RunSpec) -> None:
    """Refused, not warned: the results would carry an algorithm that
    played no part (a compare over it would show two equal runs)."""
    if not COLLECTIVES[spec.collective].uses_algorithm and spec.algorithm != RunSpec.algorithm:
        uses = [c.name for c in COLLECTIVES.values() if c.uses_algorithm]
        raise SpecError(f"algorithm: {spec.collective} has one algorithm of its own, so {spec.algorithm} means "
                        f"nothing here; leave it out (algorithms matter for {', '.join(uses)})")


def _check_placement(spec: RunSpec, fabric: Fabric) -> None:
    hosts = len(fabric.hosts)
    ranks = spec.ranks or hosts
    if not 2 <= ranks <= hosts:
        raise SpecError(f"ranks: {fabric.topology} has {hosts} hosts, so ranks must be 2 to {hosts} "
                        f"(or 0 for all), got {spec.ranks}")
    mapping = MAPPINGS[spec.mapping]
    if mapping.power_of_two and ranks & (ranks - 1):
        raise SpecError(f"mapping: {mapping.name!r} needs a power-of-two rank count ({mapping.power_of_two}), "
                        f"got {ranks} ranks on {fabric.topology}; use naive or random")
    try:
        placed = hosts_for_ranks(fabric, spec.mapping, ranks, spec.seed)
    except ValueError as e:
        raise SpecError(f"mapping: {e}") from None
    need = algorithm_need(spec.collective, spec.algorithm, ranks, rank_nodes(fabric, placed))
    if need:
        raise SpecError(f"algorithm: {spec.algorithm} {spec.collective} needs {need_said(need, ranks)}")


def switch_links(fabric: Fabric) -> list[str]:
    """Switch-switch links as 'a-b', once each (parallel links once): those
    of the network's switches (a node's links and NIC cables have no detour)."""
    return list(dict.fromkeys(f"{link.a}-{link.b}" for link in fabric.links
                              if link.kind == "switch" and link.scope == LINK_NETWORK and link.nic < 0))


def check_link_events(events, fabric: Fabric) -> None:
    """Times >= 0, actions down/up, existing switch-switch links, and per
    link alternating down, up, down... in time order."""
    if not events:
        return
    valid = {frozenset(name.split("-")) for name in switch_links(fabric)}
    down = set()
    for event in sorted(events, key=lambda e: e.time_s):
        if not (math.isfinite(event.time_s) and event.time_s >= 0):
            raise SpecError(f"link_events: {event}: time must be >= 0 seconds")
        if event.action not in LINK_ACTIONS:
            raise SpecError(f"link_events: {event}: action must be one of: {', '.join(LINK_ACTIONS)}")
        if event.pair() not in valid:
            examples = ", ".join(switch_links(fabric)[:4])
            raise SpecError(f"link_events: {event}: {event.a}-{event.b} is not a switch-switch link of "
                            f"{fabric.topology}; links are e.g. {examples} ('bigraph-emu topo' lists them)")
        if (event.action == "down") == (event.pair() in down):
            state = "already down" if event.action == "down" else "not down"
            raise SpecError(f"link_events: {event}: the link is {state} at {event.time_s:g} s")
        down ^= {event.pair()}


def netem_asked(spec: RunSpec, fabric: Fabric) -> list[str]:
    """What asks for netem (delay or loss), each named as its key: the
    spec's keys, its overrides, a topology file's delayed links."""
    asked = [key for key in ("link_delay_ms", "link_loss_pct") if getattr(spec, key)]
    asked += [f"link_overrides: {o}" for o in spec.link_overrides if o.delay_ms or o.loss_pct]
    if not asked:   # the spec's delay reaches every link: only the file's own delays are left
        asked += [f"topology: link {l.a}-{l.b} of {fabric.topology} (delay_ms {l.delay_ms:g})"
                  for l in fabric.links if l.delay_ms][:1]
    return asked


def _check_queues(spec: RunSpec, fabric: Fabric) -> None:
    """A marking threshold belongs to a discipline that marks, inside the
    queue; netem's queue (delay, loss) takes the discipline's place."""
    chosen = DISCIPLINES[spec.queue_discipline]
    if spec.ecn_threshold_packets and not chosen.threshold:
        takes = ", ".join(d.name for d in DISCIPLINES.values() if d.threshold)
        raise SpecError(f"ecn_threshold_packets: only queue_discipline {takes} has a marking threshold, "
                        f"not {chosen.name}")
    if spec.ecn_threshold_packets >= spec.switch_queue_packets:
        raise SpecError(f"ecn_threshold_packets: {spec.ecn_threshold_packets} must be below the switch queue's "
                        f"depth ({spec.switch_queue_packets} packets), or nothing is marked before drops")
    netem = netem_asked(spec, fabric)
    if chosen is not FIFO and netem:
        raise SpecError(f"queue_discipline: {chosen.name} cannot be combined with {netem[0]} (netem's queue "
                        "replaces the switch port's); use fifo, or leave delay and loss out")


def _check_netem(spec: RunSpec, fabric: Fabric, has_netem) -> None:
    asked = netem_asked(spec, fabric)
    if asked and not has_netem():
        raise SpecError(f"{asked[0]}: delay and loss need netem (sch_netem), which this kernel does not have; "
                        "drop them or use a kernel with sch_netem (a stock Debian or Ubuntu VM has it)")


def load_workload(path: str, fabric: Fabric | None = None, spec: RunSpec | None = None):
    """The workload of a file (a TOML of [[job]] tables, or FORMAT:FILE of
    an importer), checked and, given a fabric, placed on it; SpecError
    names the file and what is wrong."""
    from emulator.workloads.program import compile_workload
    from emulator.workloads.job import WorkloadError
    try:
        workload = _read_workload(path)
        if fabric is not None:
            spec = spec or RunSpec()
            stray = sorted({host for host, _ in workload.speeds} - {h.name for h in fabric.hosts})
            if stray:
                raise WorkloadError(f"{path}: [hosts] {stray[0]}: {fabric.topology} has no such host (its hosts: "
                                    f"{fabric.hosts[0].name} to {fabric.hosts[-1].name})")
            compile_workload(workload, fabric, spec.mapping, spec.algorithm, spec.ranks,
                             block_s=lambda *collective: 0.0)   # checked, not built
    except WorkloadError as e:
        raise SpecError(f"workload: {e}") from None
    return workload


def workload_file(reference: str) -> tuple[str, str]:
    """('simai:', FILE) of an imported workload 'simai:FILE', ('', FILE) of a workload file."""
    from emulator.workloads.importers import IMPORTERS
    fmt, colon, path = reference.partition(":")
    return (fmt + colon, path) if fmt in IMPORTERS else ("", reference)


def workload_files(reference: str) -> list[str]:
    """Every file a workload reads: its own, and those its jobs import."""
    from emulator.workloads.workload import imported_files
    prefix, path = workload_file(reference)
    return [path] if prefix else [path] + imported_files(read_toml(path, "workload file"), path)


def _read_workload(path: str):
    from emulator.workloads.importers import import_job
    from emulator.workloads.workload import parse_workload
    from emulator.workloads.job import Workload, WorkloadError
    if workload_file(path)[0]:
        return Workload((import_job(path),), source=path)
    try:
        doc = read_toml(path, "workload file")
    except SpecError as e:
        raise WorkloadError(str(e)) from None
    return parse_workload(doc, path)


@dataclass
class Experiment:
    name: str
    runs: list[RunSpec] = field(default_factory=list)
    yes: bool = False                  # run it even if the model predicts more than an hour


def load_experiment(path: str, overrides: dict | None = None, has_netem=None) -> Experiment:
    """An experiment file: `name`, a `[defaults]` table, and `[[runs]]`
    tables; each run is defaults + its own keys (+ command-line overrides)."""
    return experiment_of(read_toml(path, "experiment file"), path, overrides, has_netem)


def experiment_of(doc: dict, path: str, overrides: dict | None = None, has_netem=None) -> Experiment:
    """An experiment file's document (also one built in Python), checked as
    the file is; `path` names it in errors, and a workload file named in it
    is read beside it."""
    if not isinstance(doc, dict):
        raise SpecError(f"{path}: an experiment is a table of name, yes, [defaults], [[runs]] and [node]")
    if not doc:
        raise SpecError(f"{path}: the file is empty; give [defaults] and/or [[runs]] tables")
    extra = sorted(set(doc) - {"name", "defaults", "runs", "yes", "node"})
    if extra:
        raise SpecError(f"{path}: unknown top-level key(s) {', '.join(extra)}; use name, yes, [defaults], [[runs]], "
                        "[node]")
    if not isinstance(doc.get("yes", False), bool):
        raise SpecError(f"{path}: yes must be true or false, got {shorten(repr(doc['yes']))}")
    defaults, runs = doc.get("defaults", {}), doc.get("runs", [{}])
    if not isinstance(defaults, dict):
        raise SpecError(f"{path}: [defaults] must be a table of keys")
    try:   # [node]: the nodes of every run, below [defaults] and each run's own keys
        node = node_table({"node": doc["node"]}, "[node]") if "node" in doc else {}
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise SpecError(f"{path}: runs must be [[runs]] tables")
    if not runs:
        raise SpecError(f"{path}: runs = [] has no run; give [[runs]] tables, or leave runs out for one "
                        "run of the [defaults]")
    experiment = Experiment(_experiment_name(doc, path), yes=doc.get("yes", False))
    for i, run in enumerate(runs):
        try:
            values = {**node, **node_table(defaults, "[defaults] node"), **node_table(run, "node")}
            if isinstance(values.get("workload"), str) and values["workload"]:   # beside the experiment file
                fmt, colon, file = values["workload"].rpartition(":")
                values["workload"] = fmt + colon + os.path.join(os.path.dirname(path), file)
            if "topology" in values:
                values["topology"] = topology_beside(values["topology"], path)
            values = policy_beside(values, path)
            experiment.runs.append(make_run({**values, **(overrides or {})}, has_netem))
        except SpecError as e:
            raise SpecError(f"{path}: run {i + 1}: {e}") from None
    return experiment


def policy_beside(values: dict, path: str) -> dict:
    """`values` with a file policy's relative path made one beside the
    file `path` that names it (an experiment or a sweep file)."""
    policy = values.get("policy")
    if isinstance(policy, str) and policy.startswith(FILE_POLICY):
        values = {**values, "policy": FILE_POLICY + os.path.join(os.path.dirname(path), policy[len(FILE_POLICY):])}
    return values


def _experiment_name(doc: dict, path: str) -> str:
    """`name` becomes part of the results folder's name: no path in it.
    Without one, the file's name, made safe."""
    if "name" not in doc:
        return as_name(os.path.basename(path).removesuffix(".toml"))
    if not is_name(doc["name"]):
        raise SpecError(f"{path}: name: {shorten(repr(doc['name']))} must be up to 64 letters, digits and "
                        "_ . + = - (it names the results folder: no / or leading dot)")
    return doc["name"]


def read_toml(path: str, what: str) -> dict:
    """A TOML file's document; SpecError names the file, and the line of a
    syntax error or of a byte that is not UTF-8."""
    try:
        text = read_text(path)
    except InputError as e:
        raise SpecError(f"{what}: {e}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from None
    except ValueError:   # tomllib converts every integer with int(): Python's limit of 4300 digits
        raise SpecError(f"{path}: not valid TOML here: an integer of more than 4300 digits") from None
    except RecursionError:
        raise SpecError(f"{path}: not valid TOML: arrays or tables nested too deep") from None


def experiment_toml(spec: RunSpec, name: str) -> str:
    """An experiment file of one run: what load_experiment reads back as `spec`."""
    values = {k: v for k, v in dataclasses.asdict(spec).items() if v is not None}   # a node key not given: absent
    values["link_events"] = [str(e) for e in spec.link_events]
    values["link_overrides"] = [str(o) for o in spec.link_overrides]
    return f"name = {_toml_value(name)}\n\n[defaults]\n" + "".join(
        f"{key} = {_toml_value(value)}\n" for key, value in values.items())


def _toml_value(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{value!r} has no TOML form")
    return json.dumps(value)   # strings, numbers and booleans are written alike
