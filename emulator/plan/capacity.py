"""How much this machine can emulate faithfully (pure): the calibration's
figures, looked up for a run's dataplane settings, and the check every run
makes before it starts.

The budget is in link-Mbit/s summed over switch traversals: every switch a
packet crosses costs Open vSwitch forwarding work again, so a flow at R
Mbit/s through three switches asks for 3R. `bigraph-emu calibrate` measures,
per datapath, MTU and offload setting, the largest such load at which
saturated links still ran within 5% of their rate (emulator/calibration.py);
a run asks for the model's peak load (Prediction.peak_switch_mbps).

A node's switches (PCIe switches, their root, an NVSwitch:
emulator/fabric/nodes.py) are Open vSwitch bridges like the fabric's, and
count the same: the model's routes cross them, so a packet between two
nodes asks for two traversals more than between two plain hosts (one
bridge in each node; three or four where a PCIe root is crossed), a packet
inside a node for the bridges of its node, and their ports are switch
ports (switch_ports), their bridges switches (MAX_EMULATED_SWITCHES).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from emulator.fabric.queues import BURST_MS
from emulator.fabric.topology import build
from emulator.inputs import read_text
from emulator.model.buckets import Burst, EmulatedLinks
from emulator.model.sharing import NetworkBound, Sharing, SharingPoint, for_setting, nearest_setting
from emulator.spec.experiment import CONGESTION_CONTROL, check_key

CALIBRATION_FILE = "/var/lib/bigraph-emu/calibration.json"
ENV_FILE = "BIGRAPH_EMU_CALIBRATION"   # another calibration file (tests, several machines)
# Mininet on one machine (or one server of several): beyond these, use `bigraph-emu model`.
MAX_EMULATED_HOSTS = 256
MAX_EMULATED_SWITCHES = 128
PROBE_TOPOLOGY = "bigraph:m=2,n=4"        # the fabric `bigraph-emu calibrate` measures on
MANY_PORTS_TOPOLOGY = "fattree:k=4"       # and the one of many switch ports (80, five times the probe's)
AUTO_MARGIN = 0.8                      # --bw auto aims at this fraction of the faithful load


@dataclass(frozen=True)
class Point:
    """One dataplane setting's figures on one machine."""
    datapath: str            # "user" or "kernel"
    mtu: int
    offload: str             # "off" or "tso"
    raw_mbps: float          # iperf3 through one unshaped switch, wire Mbit/s
    faithful_mbps: float     # largest link-Mbit/s load that kept saturated links within 5% of their rate
    link_rate_mbps: float    # the link rate that load was measured at
    tcp: str = ""            # the hosts' congestion control it was measured with ("": not recorded then)
    step_latency_us: float = 0.0   # the least time a step takes on the calibration's hosts (0: not measured)
    port_latency_us: float = 0.0   # what a switch crossed adds to a message, per switch port of the fabric
                                   # (0: not measured; calibration.measure_switch_latency)
    many_ports_faithful_mbps: float | None = None   # the faithful load on MANY_PORTS_TOPOLOGY (None: not measured)

    def key(self) -> tuple:
        return self.datapath, self.mtu, self.offload


@dataclass
class Calibration:
    machine: str             # host name and CPU count, as calibrate saw them
    measured: str            # date of the newest point
    points: list[Point] = field(default_factory=list)
    source: str = ""         # the file it came from, or "reference"
    sharing: list[SharingPoint] = field(default_factory=list)   # TCP's sharing of a queue (calibrate --tcp-sharing)

    @property
    def cpus(self) -> int:
        """The cores the figures were measured on, as `machine` names them
        ("host, 4 CPUs", "2-core ...", "2 vCPUs"); 0 if it does not say."""
        found = re.search(r"(\d+)(?: |-)(?:v?CPUs|core)", self.machine)
        return int(found.group(1)) if found else 0

    def merged(self, newer: "Calibration") -> "Calibration":
        """These points, with those `newer` measured again replaced."""
        keys = {p.key() for p in newer.points}
        points = [p for p in self.points if p.key() not in keys] + newer.points
        shared = {p.key() for p in newer.sharing}
        sharing = [p for p in self.sharing if p.key() not in shared] + newer.sharing
        return Calibration(newer.machine, newer.measured, sorted(points, key=Point.key), newer.source,
                           sorted(sharing, key=SharingPoint.key))


# Measured with `bigraph-emu calibrate --quick` on the reference machine (2
# cores, Debian 12, userspace datapath, Open vSwitch 3.1, HTB burst 10 ms,
# TSO segments at most an eighth of a queue; lab/
# capacity-2026-12-03). Used, and said to be used, on a machine that has not
# been calibrated.
REFERENCE = Calibration("reference machine (2-core Debian 12 VM)", "2026-12-03", [
    Point("user", 1500, "off", 1177.0, 1030.0, 73.6),
    Point("user", 1500, "tso", 8305.0, 3374.0, 241.0),
    Point("user", 9000, "off", 3325.0, 3118.0, 222.7),
    # step latency, the least time of a step on 8 hosts: calibration.fit_step_latency on the ring calls of
    # 32-256 KiB measured there with the agents' pooled threads (lab/
    # uncongested-sizes-2026-12-03/links-ring-collectives.csv; 0.65 ms on the faster machine of 2026-12-04)
    # switch latency a port: calibration.measure_switch_latency on a machine of the same kind, 2026-12-04 (5.5-6.9 us
    # in four measurements, lab/switch-latency-2026-12-04/), not on the reference machine itself
    Point("user", 9000, "tso", 8821.0, 7994.0, 571.0, step_latency_us=1300.0, port_latency_us=5.8),
], "reference", [
    # `calibrate --tcp-sharing 2,4,8,16` (lab/sharing-2026-12-03): congestion control, MTU,
    # queue packets, flows, time over max-min (over one flow's), drops per call, link rate, timeouts per call
    SharingPoint("bbr", 1500, 100, 2, 1.003, 31.8, 50.0, 0.0),
    SharingPoint("bbr", 1500, 100, 4, 1.046, 50.8, 50.0, 0.2),
    SharingPoint("bbr", 1500, 100, 8, 1.184, 70.6, 50.0, 0.2),
    SharingPoint("bbr", 1500, 100, 16, 1.161, 107.4, 50.0, 0.1),
    SharingPoint("bbr", 9000, 100, 2, 0.998, 0.0, 50.0, 0.0),
    SharingPoint("bbr", 9000, 100, 4, 0.998, 2.6, 50.0, 0.1),
    SharingPoint("bbr", 9000, 100, 8, 0.997, 13.3, 50.0, 0.0),
    SharingPoint("bbr", 9000, 100, 16, 1.001, 30.8, 50.0, 0.0),
    SharingPoint("cubic", 1500, 100, 2, 1.002, 2.5, 50.0, 0.0),
    SharingPoint("cubic", 1500, 100, 4, 1.003, 8.4, 50.0, 0.0),
    SharingPoint("cubic", 1500, 100, 8, 1.008, 18.9, 50.0, 0.0),
    SharingPoint("cubic", 1500, 100, 16, 1.012, 40.9, 50.0, 0.1),
    SharingPoint("cubic", 9000, 20, 2, 1.001, 8.4, 50.0, 0.0),
    SharingPoint("cubic", 9000, 20, 4, 1.0, 23.1, 50.0, 0.0),
    SharingPoint("cubic", 9000, 20, 8, 1.004, 33.3, 50.0, 0.4),
    SharingPoint("cubic", 9000, 20, 16, 1.014, 43.1, 50.0, 0.1),
    SharingPoint("cubic", 9000, 100, 2, 0.997, 0.5, 50.0, 0.0),
    SharingPoint("cubic", 9000, 100, 4, 0.999, 2.1, 50.0, 0.0),
    SharingPoint("cubic", 9000, 100, 8, 1.002, 9.1, 50.0, 0.0),
    SharingPoint("cubic", 9000, 100, 16, 1.004, 14.4, 50.0, 0.0),
])


# Measured with `bigraph-emu calibrate` in the VM stage's Debian 12 VM
# (vm/stage.py) under qemu software emulation (TCG, 2 vCPUs on a 2-core
# reference machine), kernel datapath, Open vSwitch 3.1. Software emulation
# is several times slower than a VM with hardware virtualisation: for a VM
# user who has not calibrated, a conservative pre-run check.
KERNEL_REFERENCE = Calibration("Debian 12 VM under qemu software emulation (TCG, 2 vCPUs)", "2026-12-01", [
    Point("kernel", 1500, "off", 561.0, 0.0, 0.0),     # no load down to 1.3 Mbit/s links kept the verdict
    Point("kernel", 9000, "off", 1066.0, 99.0, 7.1),
    Point("kernel", 1500, "tso", 1095.0, 0.0, 0.0),    # packet losses at every load down to 2.4 Mbit/s links (12-02)
], "reference")
REFERENCES = (REFERENCE, KERNEL_REFERENCE)


def reference_for(datapath: str, offload: str) -> Calibration:
    """The reference figures that cover a dataplane setting (REFERENCE if none does)."""
    return next((c for c in REFERENCES if any((p.datapath, p.offload) == (datapath, offload) for p in c.points)),
                REFERENCE)


def calibration_path() -> str:
    return os.environ.get(ENV_FILE) or CALIBRATION_FILE


def load(path: str | None = None) -> Calibration:
    """The machine's calibration, or REFERENCE when there is none; a file
    that cannot be read raises ValueError naming it."""
    path = path or calibration_path()
    if not os.path.lexists(path):
        return REFERENCE
    try:
        doc = json.loads(read_text(path))
        points = [_point(p) for p in doc["points"]]
        sharing = [_sharing_point(p) for p in doc.get("sharing", [])]
        return Calibration(str(doc["machine"]), str(doc["measured"]), points, path, sharing)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ValueError(f"calibration file {path} is unreadable ({e}); run `bigraph-emu calibrate` again "
                         f"or remove it") from None


def _point(record: dict) -> Point:
    """A Point from its JSON record; ValueError if a figure is not a
    finite number > 0 (the faithful loads >= 0: a calibration may find no
    load it emulates faithfully; latencies >= 0: not measured)."""
    point = Point(**record)
    for name in ("raw_mbps", "faithful_mbps", "link_rate_mbps", "step_latency_us", "port_latency_us",
                 "many_ports_faithful_mbps"):
        value, zero_ok = getattr(point, name), name not in ("raw_mbps", "link_rate_mbps")
        if value is None and name == "many_ports_faithful_mbps":   # not measured
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf
        if not number or (value == 0 and not zero_ok):
            raise ValueError(f"{name} of the {point.datapath} MTU {point.mtu} point must be a finite number "
                             f"{'>= 0' if zero_ok else '> 0'}, got {value!r}")
    if isinstance(point.mtu, bool) or not isinstance(point.mtu, int):
        raise ValueError(f"mtu must be a whole number, got {point.mtu!r}")
    if not (isinstance(point.datapath, str) and isinstance(point.offload, str)):
        raise ValueError(f"datapath and offload must be text, got {point.datapath!r}, {point.offload!r}")
    for key in ("mtu", "datapath", "offload"):   # what a run may ask for
        check_key(key, getattr(point, key))
    return point


def _sharing_point(record: dict) -> SharingPoint:
    """A SharingPoint from its JSON record; ValueError naming a bad figure."""
    point = SharingPoint(**record)
    for name in ("mtu", "queue_packets", "flows"):
        value = getattr(point, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"sharing: {name} must be a whole number >= 1, got {value!r}")
    for name in ("over_max_min", "rate_mbps", "drops_per_call"):
        value = getattr(point, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf \
                or (value == 0 and name != "drops_per_call"):
            raise ValueError(f"sharing: {name} of {point.flows} flows must be a finite number > 0, got {value!r}")
    share = point.timeouts_per_call
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        raise ValueError(f"sharing: timeouts_per_call of {point.flows} flows must be a share from 0 to 1, got {share!r}")
    standing = point.standing_queue_ms
    if standing is not None and (isinstance(standing, bool) or not isinstance(standing, (int, float))
                                 or not 0 <= standing < math.inf):
        raise ValueError(f"sharing: standing_queue_ms of {point.flows} flows must be a finite number >= 0, "
                         f"got {standing!r}")
    if not isinstance(point.tcp, str) or not CONGESTION_CONTROL.match(point.tcp):
        raise ValueError(f"sharing: tcp must be a congestion control's name, got {point.tcp!r}")
    check_key("mtu", point.mtu)
    return point


def sharing_for(calibration: Calibration, tcp: str, mtu: int, queue_packets: int) -> tuple[Sharing | None, str]:
    """This machine's measured TCP sharing for a setting, else the reference
    machine's; (None, why) where neither measured it."""
    for source in (calibration, REFERENCE):
        found = for_setting(source.sharing, tcp, mtu, queue_packets)
        if found:
            where = "the reference machine" if source.source == "reference" else source.source
            return found, f"{found.describe()} (on {where})"
    return None, (f"no TCP-sharing calibration for {tcp}, MTU {mtu}, a {queue_packets}-packet queue "
                  f"(`bigraph-emu calibrate --tcp-sharing 2,4,8,16 --tcp {tcp} --mtu {mtu}`)")


def sharing_of(spec, calibration: Calibration) -> tuple[Sharing | None, str]:
    """The TCP sharing a run's model stretches congested steps by (None:
    plain max-min), and which model runs, said. TCP's sharing is looked up
    for the shallower tier's queue."""
    if spec.sharing == "max-min":
        return None, "max-min sharing (asked for)"
    found, basis = sharing_for(calibration, spec.tcp, spec.mtu, min(spec.host_queue_packets, spec.switch_queue_packets))
    return found, basis if found else f"max-min sharing ({basis})"


def network_bound(spec, calibration: Calibration) -> NetworkBound:
    """The TCP-sharing factors the verdict holds a run's network verdicts to
    (whatever model the run compares with): this machine's, else the
    reference machine's, for the run's congestion control, MTU and shallower
    queue; where neither measured that setting, the nearest calibrated one, said."""
    tcp, mtu, queue = spec.tcp, spec.mtu, min(spec.host_queue_packets, spec.switch_queue_packets)
    drain_s = max(packets * mtu * 8 / (rate * 1e6) for packets, rate in
                  ((spec.host_queue_packets, spec.host_rate_mbps), (spec.switch_queue_packets, spec.switch_rate_mbps)))
    found, _ = sharing_for(calibration, tcp, mtu, queue)
    if found:
        return NetworkBound(found, drain_s=drain_s)
    mine = {p.setting() for p in calibration.sharing}
    near = nearest_setting(calibration.sharing + [p for p in REFERENCE.sharing if p.setting() not in mine],
                           tcp, mtu, queue)
    return NetworkBound(near, f"the nearest calibrated point to this run's {tcp} MTU {mtu} {queue}-packet queue "
                              f"(`bigraph-emu calibrate --tcp-sharing 2,4,8,16 --tcp {tcp} --mtu {mtu} "
                              f"--queue {queue}`)", drain_s)


def with_bounds(plan, calibration: Calibration):
    """The plan with the bounds its network verdicts are held to: the run's
    (network_bound), and one for each congestion control of its jobs' own
    (a job's `tcp`), by its name."""
    own = set(plan.congestion_controls()) - {"", plan.spec.tcp}
    return dataclasses.replace(plan, bound=network_bound(plan.spec, calibration), job_bounds={
        tcp: network_bound(dataclasses.replace(plan.spec, tcp=tcp), calibration) for tcp in sorted(own)})


def save(calibration: Calibration, path: str | None = None) -> str:
    """Write `calibration` merged into what `path` already holds; returns the path."""
    path = path or calibration_path()
    old = load(path)
    merged = old.merged(calibration) if old.source == path else calibration
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    doc = {"machine": merged.machine, "measured": merged.measured,
           "points": [dataclasses.asdict(p) for p in merged.points],
           "sharing": [dataclasses.asdict(p) for p in merged.sharing]}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)
    return path


def lookup(calibration: Calibration, datapath: str, mtu: int, offload: str) -> tuple[float, str]:
    """(faithful link-Mbit/s, how it was found) for a dataplane setting.
    Per-packet work dominates, so between calibrated MTUs the figure is
    interpolated, and below the smallest it shrinks with the MTU."""
    if calibration.source == "reference" or not calibration.points:   # a file may hold TCP sharing alone
        calibration = reference_for(datapath, offload)
    same = sorted((p for p in calibration.points if (p.datapath, p.offload) == (datapath, offload)),
                  key=lambda p: p.mtu)
    if calibration.source == "reference":
        where = (f"the {calibration.machine}'s figures of {calibration.measured}: "
                 f"`bigraph-emu calibrate` measures this machine's")
    else:
        where = f"{calibration.source}, measured {calibration.measured} on {calibration.machine}"
    if not same:
        raise LookupError(f"not calibrated for the {datapath} datapath with offload {offload} "
                          f"(`bigraph-emu calibrate --offload {offload}` measures it)")
    for p in same:
        if p.mtu == mtu:
            return p.faithful_mbps, f"calibrated at MTU {mtu} in {where}"
    below = [p for p in same if p.mtu < mtu]
    above = [p for p in same if p.mtu > mtu]
    if below and above:
        lo, hi = below[-1], above[0]
        share = (mtu - lo.mtu) / (hi.mtu - lo.mtu)
        value = lo.faithful_mbps + share * (hi.faithful_mbps - lo.faithful_mbps)
        how = f"interpolated between MTU {lo.mtu} and {hi.mtu}"
    elif above:
        value, how = above[0].faithful_mbps * mtu / above[0].mtu, f"scaled down from MTU {above[0].mtu}"
    else:
        value, how = below[-1].faithful_mbps, f"taken from MTU {below[-1].mtu}"
    return value, f"{how} in {where}"


@dataclass(frozen=True)
class Assessment:
    """What a run asks of the dataplane against what it can give faithfully."""
    peak_mbps: float         # the model's peak link-Mbit/s over every size of the run
    faithful_mbps: float | None   # None: this setting was never calibrated
    basis: str               # where faithful_mbps comes from, or why there is none

    @property
    def fraction(self) -> float | None:
        if self.faithful_mbps is None:
            return None
        if self.faithful_mbps == 0:   # nothing is faithful: any load is too much
            return math.inf if self.peak_mbps else 0.0
        return self.peak_mbps / self.faithful_mbps

    @property
    def fits(self) -> bool | None:
        return None if self.faithful_mbps is None else self.peak_mbps <= self.faithful_mbps

    def describe(self, host_rate_mbps: float) -> str:
        line = (f"# capacity: the run asks up to {self.peak_mbps:.0f} link-Mbit/s (summed over switch "
                f"traversals)")
        if self.faithful_mbps is None:
            return f"{line}; not checked: {self.basis}"
        line += (f"; this dataplane stays faithful up to {self.faithful_mbps:.0f} "
                 f"({self.fraction:.0%}; {self.basis})")
        if self.fits:
            return line
        return (line + f"\n# WARNING: that is more than this machine can emulate faithfully: expect links "
                f"below their rate and calls that fail the fidelity verdict. Links at about "
                f"{scaled_rate(host_rate_mbps, self.faithful_mbps / self.peak_mbps):g} Mbit/s (--bw), "
                f"fewer hosts, or a larger MTU would fit")

    def to_dict(self) -> dict:
        rounded = None if self.faithful_mbps is None else round(self.faithful_mbps, 1)
        return {"peak_link_mbps": round(self.peak_mbps, 1), "faithful_link_mbps": rounded,
                "fraction": None if rounded is None or math.isinf(self.fraction) else round(self.fraction, 3),
                "fits": self.fits,
                "basis": self.basis}


def emulated_links(calibration: Calibration, datapath: str, mtu: int, offload: str, hosts: int,
                   ports: int | None = None) -> EmulatedLinks:
    """The links a run's model adds on this machine: HTB's burst (BURST_MS
    of every link's rate) spent at the raw capacity shared by the hosts, and
    the setting's calibrated step latency (of the nearest MTU where this one
    was not calibrated; none where nothing was) as the least time of a step,
    in proportion to the hosts: every agent's step takes the machine's cores
    for a while, and a step ends once all have had them (a 16-host ring's
    1 KiB steps took 1.3 ms, an 8-host ring's 2 KiB ones 0.6 ms). A floor,
    not a latency: a 64-host ring's 8 KiB steps at 10 Mbit/s, 6.5 ms on the
    wire, took 0.5 ms more, not the 13.6 ms an added latency gave. And the
    setting's switch latency, in proportion to the fabric's switch `ports`
    (None: the calibration fabric's): the userspace datapath forwards a
    packet on the next turn of its loop over every port (measured per
    fabric in docs/model.md)."""
    point, where = _nearest_point(calibration, datapath, mtu, offload)
    if point is None:
        return EmulatedLinks(None, 0.0, f"links at their rates (their burst's peak unknown), no step latency: {where}")
    probe_hosts = len(build(PROBE_TOPOLOGY).hosts)
    latency_s = point.step_latency_us * 1e-6 * hosts / probe_hosts
    latency = (f"steps take at least {latency_s * 1e3:.2f} ms (the step latency, {point.step_latency_us / 1e3:g} ms "
               f"on the calibration's {probe_hosts} hosts)" if point.step_latency_us else
               "step latency not measured (`bigraph-emu calibrate` measures it)")
    burst = link_burst(point.raw_mbps, hosts)
    ports = calibration_ports()[0] if ports is None else ports
    switch_s = point.port_latency_us * 1e-6 * ports
    switch = (f"every switch crossed adds {switch_s * 1e3:.2f} ms ({point.port_latency_us:g} us per switch port, "
              f"{ports} ports)" if point.port_latency_us else
              "switch latency not measured")
    return EmulatedLinks(burst, latency_s,
                         f"links burst {BURST_MS:g} ms of their rate at up to {burst.peak_mbps:.0f} Mbit/s (the raw "
                         f"{point.raw_mbps:.0f} over {hosts} hosts), {latency}, {switch}: {where}", switch_s)


def link_burst(raw_mbps: float, hosts: int) -> Burst:
    """HTB's burst on every link, spent at what one switch forwards (raw)
    shared by the hosts, which burst at once in a collective's step."""
    return Burst(BURST_MS / 1e3, raw_mbps / max(hosts, 1))


def _nearest_point(calibration: Calibration, datapath: str, mtu: int, offload: str,
                   measured=lambda p: True) -> tuple[Point | None, str]:
    """This machine's point of the setting nearest in MTU (else the
    reference's), of those `measured` accepts, and where it is from."""
    for source in (calibration, reference_for(datapath, offload)):
        same = [p for p in source.points if (p.datapath, p.offload) == (datapath, offload) and measured(p)]
        if same:
            point = min(same, key=lambda p: (abs(p.mtu - mtu), -p.step_latency_us))
            mtu_said = "" if point.mtu == mtu else f" at MTU {point.mtu}"
            name = f"the {source.machine} (reference figures)" if source.source == "reference" else source.source
            return point, f"measured{mtu_said} on {name}"
    return None, f"not calibrated for the {datapath} datapath with offload {offload}"


def port_exponent(calibration: Calibration, datapath: str, mtu: int, offload: str) -> tuple[float, str]:
    """(e, how it was found): beyond the calibration fabric's switch ports,
    the faithful load shrinks as (its ports / the run's ports) ** e.
    `calibrate` measures e from the faithful loads of two fabrics,
    PROBE_TOPOLOGY and MANY_PORTS_TOPOLOGY; where it did not, e is 1 (in
    proportion to the ports), and it is never less: a fast machine's 0.72
    let in runs of 32-64 hosts that failed, whose cost is their hosts' as
    much as their ports' (docs/capacity.md)."""
    point, where = _nearest_point(calibration, datapath, mtu, offload,
                                  lambda p: p.many_ports_faithful_mbps is not None and p.faithful_mbps > 0)
    if point is None:
        return 1.0, "in proportion: the faithful load at many ports not measured (`bigraph-emu calibrate` measures it)"
    few, many = calibration_ports()
    said = (f"{point.faithful_mbps:.0f} link-Mbit/s at {few} ports, {point.many_ports_faithful_mbps:.0f} "
            f"at {many} on {MANY_PORTS_TOPOLOGY}, {where}")
    if point.many_ports_faithful_mbps == 0:
        return math.inf, said
    measured = math.log(point.faithful_mbps / point.many_ports_faithful_mbps) / math.log(many / few)
    if measured < 1:
        return 1.0, f"measured {measured:.2f}, taken as 1: {said}"
    return measured, said


def switch_ports(fabric) -> int:
    return sum(len(fabric.ports(s.name)) for s in fabric.switches)


def calibration_ports() -> tuple[int, int]:
    """Switch ports of the two fabrics calibrate measures: PROBE_TOPOLOGY's and MANY_PORTS_TOPOLOGY's."""
    return switch_ports(build(PROBE_TOPOLOGY)), switch_ports(build(MANY_PORTS_TOPOLOGY))


@dataclass(frozen=True)
class Budget:
    """What one machine emulates faithfully: the calibrated load (times
    cores over the calibration's, for a server of other size), which holds
    up to the calibration fabric's switch ports and shrinks past them
    (port_scaled). The one rule a run on one machine, `plan` and the
    placement over servers all check."""
    faithful_mbps: float     # link-Mbit/s at up to `ports` switch ports
    ports: int               # the calibration fabric's switch ports (0: no shrinking, the kernel datapath)
    exponent: float          # how fast past them (port_exponent)
    basis: str               # how it was found
    scaling: str = ""        # how the exponent was found

    def at(self, ports: int) -> float:
        """The faithful link-Mbit/s of this machine holding `ports` switch ports."""
        return port_scaled(self.faithful_mbps, ports, self.ports, self.exponent)

    def said_at(self, ports: int) -> str:
        if not self.ports or ports <= self.ports:
            return self.basis
        return (f"{self.basis}; scaled by ({self.ports}/{ports} switch ports) ** {self.exponent:.2f}, the "
                f"calibration's fabric having {self.ports} ({self.scaling})")


def port_scaled(faithful_mbps, ports, calibrated_ports, exponent):
    """The faithful load at `ports` switch ports: as calibrated up to the
    calibration fabric's (no shrinking where that is 0), then as (its ports
    / these) ** exponent (the userspace datapath polls every port in one
    loop). Numbers, or numpy arrays of them (a placement weighs every move
    at once)."""
    scaled = (np.asarray(calibrated_ports) > 0) & (np.asarray(ports) > calibrated_ports)
    with np.errstate(over="ignore", divide="ignore"):
        factor = np.where(scaled, (np.asarray(calibrated_ports, dtype=float) / np.maximum(ports, 1)) ** exponent, 1.0)
    return float(faithful_mbps * factor) if factor.ndim == 0 else faithful_mbps * factor


def faithful_budget(calibration: Calibration, datapath: str, mtu: int, offload: str,
                    cores: int | None = None) -> Budget:
    """The Budget of a machine for a dataplane setting: this one's
    calibration (cores None), or a server of `cores` cores taken to give
    the calibrated figure per core times its cores (Open vSwitch forwards
    on every core: an assumption, until servers of that size are
    calibrated). LookupError if not calibrated, or the calibration does not
    say its cores."""
    faithful, basis = lookup(calibration, datapath, mtu, offload)
    if cores is not None:
        source = reference_for(datapath, offload) if calibration.source == "reference" or not calibration.points \
            else calibration   # a file may hold TCP sharing alone
        if not source.cpus:
            raise LookupError(f"the calibration does not say how many cores it was measured on ({source.machine!r})")
        basis = f"{cores} cores x {faithful / source.cpus:.0f} per core ({faithful:.0f} over {source.cpus}); {basis}"
        faithful = faithful / source.cpus * cores
    if datapath != "user":   # the kernel's switches do not poll their ports in one loop
        return Budget(faithful, 0, 0.0, basis)
    exponent, how = port_exponent(calibration, datapath, mtu, offload)
    return Budget(faithful, calibration_ports()[0], exponent, basis, how)


def assess(plan, calibration: Calibration, datapath: str, offload: str) -> Assessment:
    """The run's peak load (the model's, at the plan's rates) against the
    faithful load of its datapath, MTU and offload (as the dataplane picked
    them) on this machine, at its fabric's switch ports (Budget). The
    userspace datapath polls every switch port in one thread, so its
    faithful load shrinks with the ports beyond those of the calibration's
    fabric (port_exponent: on the reference machine a 32-host BiGraph, with
    four times the ports, kept its verdict at 1,920 link-Mbit/s and lost it
    at 2,560, against 7,994 calibrated; on a machine whose ports cost twice
    as much, the k=4 fat-tree, with five times the ports, kept it at 800
    and lost it at 1,480, against 9,435 calibrated: docs/capacity.md)."""
    peak = max((p.peak_switch_mbps for p in plan.predictions.values()), default=0.0)
    try:
        budget = faithful_budget(calibration, datapath, plan.spec.mtu, offload)
    except LookupError as e:
        return Assessment(peak, None, str(e))
    ports = switch_ports(plan.fabric)
    return Assessment(peak, budget.at(ports), budget.said_at(ports))


def scaled_rate(rate_mbps: float, factor: float) -> float:
    """rate * factor rounded down to two significant digits (at least 1 Mbit/s)."""
    value = rate_mbps * factor
    if value <= 1:
        return 1.0
    step = 10 ** (math.floor(math.log10(value)) - 1)
    return round(math.floor(value / step + 1e-9) * step, 9)   # 9.7 / 0.1 is 96.99999...
