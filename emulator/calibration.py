"""`bigraph-emu calibrate`: measure how much this machine emulates
faithfully, per MTU and offload setting, and keep it for the check every
run makes (emulator/plan/capacity.py).

Per setting, these capacity figures, measured in the same session:
- raw: iperf3, one TCP flow, through one unshaped OVS switch (wire Mbit/s);
- faithful: the largest load, in link-Mbit/s summed over switch traversals,
  at which a ring allreduce on bigraph:m=2,n=4 (naive mapping, shortest
  routes: no two flows share a link, so every flow runs at the link rate R
  through 14 switch traversals in all) keeps every counted call's fidelity
  verdict "ok" (within 15% of the model, CPU not exhausted) and its
  saturated links within 5% of their rate (where the monitor saw no queue:
  the call within 5% of the model, which runs every flow at its link
  rate). R is found by bisection between 0 and the raw capacity; a failing
  rate is tried once more, as the machine may be busy for a moment;
- faithful at many ports (userspace datapath): the same on the k=4
  fat-tree (16 hosts, no link shared either, 80 switch ports to the
  probe's 16), by bisection up to twice the rate at which the load would
  shrink in proportion to the ports: how fast the faithful load falls
  with the ports on this machine.
Then what a run's model adds for the emulated links: what a switch crossed
adds to a message, per switch port of the fabric (measure_switch_latency),
and the least time a step takes (measure_step_latency).
"""
from __future__ import annotations

import math
import shutil
import statistics
import tempfile
import time

from emulator.model.buckets import Burst, EmulatedLinks
from emulator.model.sharing import RTO_MIN_S, SharingPoint
from emulator.fabric.topology import build
from emulator.plan.capacity import (MANY_PORTS_TOPOLOGY, PROBE_TOPOLOGY, Calibration, Point, calibration_ports, link_burst,
                                    switch_ports)
from emulator.records.metrics import payload_efficiency
from emulator.results.verdict import machine_failed

CALL_SECONDS = 1.5          # each counted call lasts about this long
SATURATED_MIN = 0.95        # saturated links must send at >= 95% of their rate
# Every probe flow has its path to itself, so the model runs it at the link
# rate: where no queue told whether links ran at their rate, a call within
# 5% of the model did.
TIME_OVER_MODEL_MAX = 1 / SATURATED_MIN
IPERF_SECONDS = 5
# TCP's sharing of a queue: N senders into one host, all through one switch
SHARING_MOST_FLOWS = 16
SHARING_TOPOLOGY = f"leafspine:leaves=1,spines=1,hosts={SHARING_MOST_FLOWS + 1}"
SHARING_RATE_MBPS = 50.0
SHARING_CALL_SECONDS = 0.5   # about a collective step's length: a timeout shows
# A step's latency (the least time a step takes: the agents' turn on the cores): a ring
# (no link shared) of calls whose steps of 2-32 KiB would take under a millisecond on the
# wire with the links' burst, so the latency is most of a step, at a rate every machine
# keeps up with; the larger sizes keep the fit from overshooting where it hides
LATENCY_SIZES = tuple(k << 10 for k in (32, 64, 128, 256))
LATENCY_RATE_MBPS = 50.0
LATENCY_GRID_S = [i * 5e-5 for i in range(201)]   # 0 to 10 ms
# What a switch crossed adds to a message: one message at a time each way between hosts 1, 3 and 5
# switches apart, on a fabric of many ports (the userspace datapath's loop turns over every port of every
# switch: 0.1 ms a switch at the probe's 16 ports is within the noise, 0.4-1.0 ms at 80 is not), in sizes
# the links' burst sends at once, each round trip after the buckets refilled
SWITCH_LATENCY_TOPOLOGY = MANY_PORTS_TOPOLOGY
SWITCH_LATENCY_SIZES = (64, 4096)
SWITCH_LATENCY_TRIPS = 30
SWITCH_LATENCY_GAP_S = 0.02


# --- pure: what a rate is tried with, and whether it passed --------------------------

def size_for(rate_mbps: float, mtu: int, ranks: int = 8) -> int:
    """Bytes per rank of a ring allreduce call lasting about CALL_SECONDS."""
    per_byte = 2 * (ranks - 1) / ranks * 8 / (rate_mbps * 1e6 * payload_efficiency(mtu))
    return max(1, round(CALL_SECONDS / per_byte / (1 << 20))) << 20


def probe_spec(rate_mbps: float, mtu: int, offload: str, datapath: str, reps: int, topology: str = PROBE_TOPOLOGY):
    from emulator.spec.experiment import RunSpec
    size = size_for(rate_mbps, mtu, len(build(topology).hosts))
    return RunSpec(topology=topology, collective="allreduce", algorithm="ring", mapping="naive",
                   policy="shortest", datapath=datapath, mtu=mtu, offload=offload,
                   host_rate_mbps=rate_mbps, switch_rate_mbps=rate_mbps, sizes=(size,),
                   repetitions=reps, warmup=1, label="calibration")


def latency_spec(mtu: int, offload: str, datapath: str, reps: int):
    from emulator.spec.experiment import RunSpec
    return RunSpec(topology=PROBE_TOPOLOGY, collective="allreduce", algorithm="ring", mapping="naive",
                   policy="shortest", datapath=datapath, mtu=mtu, offload=offload, host_rate_mbps=LATENCY_RATE_MBPS,
                   switch_rate_mbps=LATENCY_RATE_MBPS, sizes=LATENCY_SIZES, repetitions=reps, warmup=1,
                   label="step-latency")


def fit_step_latency(plan, burst: Burst, times: dict[int, list[float]],
                     switch_s: float = 0.0) -> tuple[float, dict[int, float]]:
    """The step latency (s) at which the model, with the links' burst and
    the switch latency `switch_s`, comes
    nearest the measured calls of every size (the least worst |log(measured
    median / model)| over the sizes, on LATENCY_GRID_S), and each size's
    measured median over the model there."""
    from emulator.plan.run_plan import model_for
    medians = {size: statistics.median(v) for size, v in times.items() if v}
    if not medians:
        raise ValueError("no measured call to fit a step latency to")

    def over_model(latency_s: float) -> dict[int, float]:
        model = model_for(plan.fabric, plan.table, plan.spec, EmulatedLinks(burst, latency_s, "", switch_s))
        return {size: t / model(plan.schedules[size], plan.hosts).time_s for size, t in medians.items()}
    best = min(LATENCY_GRID_S, key=lambda s: max(abs(math.log(r)) for r in over_model(s).values()))
    return best, over_model(best)


def switch_pairs(fabric, table) -> dict[int, tuple[str, str]]:
    """One host pair per number of switches between them (from the first host)."""
    from emulator.routes.routing import path
    first, out = fabric.hosts[0].name, {}
    for h in fabric.hosts[1:]:
        out.setdefault(len(path(fabric, table, first, h.name)) - 1, (first, h.name))
    return dict(sorted(out.items()))


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys over xs (at least two distinct xs)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def per_switch_s(one_way_s: dict[int, dict[int, float]]) -> float:
    """What a switch crossed adds (s): the slope of the median one-way
    times {switches: {size: s}} over the switches, every size pooled
    (at least 0: a negative slope is noise)."""
    points = [(n, t) for n, by_size in one_way_s.items() for t in by_size.values()]
    return max(0.0, fit_line([n for n, _ in points], [t for _, t in points])[1])


def judge(rows: list[dict]) -> str:
    """"ok" if every counted call kept its verdict and its saturated links
    within 5% of their rate; else the reasons."""
    reasons = []
    for r in rows:
        if not r["bytes_ok"]:
            reasons.append("wrong byte counts")
        elif r["fidelity"] != "ok":
            reasons.append(r["fidelity"])
        elif r["saturated_util"] not in ("", None):
            if float(r["saturated_util"]) < SATURATED_MIN:
                reasons.append(f"saturated links at {float(r['saturated_util']):.0%} of their rate")
        elif r["time_over_model"] > TIME_OVER_MODEL_MAX:   # no queue built up long enough to tell
            reasons.append(f"{r['time_over_model']:.2f}x the model, and no link saturated long enough to tell")
    if not rows:
        return "no counted call"
    return "; ".join(dict.fromkeys(reasons)) or "ok"


def bisect(passes, high: float, steps: int) -> float:
    """The largest rate in (0, high] found to pass in `steps` halvings;
    0.0 if none did. passes(rate) -> bool."""
    low, best = 0.0, 0.0
    for _ in range(steps):
        rate = (low + high) / 2
        if passes(rate):
            low = best = rate
        else:
            high = rate
    return best


# --- measuring ---------------------------------------------------------------------

def try_rate(rate_mbps: float, mtu: int, offload: str, datapath: str, reps: int, log=print,
             topology: str = PROBE_TOPOLOGY) -> dict:
    """One fresh emulation at link rate `rate_mbps`: its load and verdict."""
    from emulator.emulation import Emulation
    from emulator.plan.run_plan import plan_run
    from emulator.results.calls import collective_rows
    plan = plan_run(probe_spec(rate_mbps, mtu, offload, datapath, reps, topology))
    work = tempfile.mkdtemp(prefix="bigraph-calibrate-")
    try:
        with Emulation(plan, work, log=lambda line: log(line) if "WARNING" in line else None) as emu:
            records = emu.replay(plan)
            used = emu.dataplane.datapath
        rows = collective_rows(plan, records, used)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sat = [float(r["saturated_util"]) for r in rows if r["saturated_util"] not in ("", None)]
    return {"rate": rate_mbps, "load": plan.predictions[plan.spec.sizes[0]].peak_switch_mbps,
            "time_over_model": max(r["time_over_model"] for r in rows),
            "saturated_util": min(sat) if sat else None, "verdict": judge(rows)}


def calibrate_point(datapath: str, mtu: int, offload: str, steps: int, reps: int, log=print) -> Point:
    """Raw and faithful capacity of one setting on this machine."""
    from emulator.net.dataplane import detect
    from emulator.measure.rawpath import raw_capacity
    dataplane = detect(datapath, offload)
    payload = raw_capacity(dataplane, mtu, IPERF_SECONDS, [1])[1][0]
    raw = payload / payload_efficiency(mtu)
    log(f"# MTU {mtu}, offload {offload}, {dataplane.datapath} datapath: raw {raw:.0f} Mbit/s on the wire "
        f"(iperf3, one flow, one switch)")
    best, faithful = faithful_load(PROBE_TOPOLOGY, raw, raw, mtu, offload, datapath, steps, reps, log)
    many_faithful = None   # the kernel datapath's switches do not poll their ports in one loop
    if dataplane.datapath == "user":
        few, many = calibration_ports()
        log(f"# the same on {MANY_PORTS_TOPOLOGY}, {many} switch ports to the probe's {few}:")
        many_faithful = faithful_load(MANY_PORTS_TOPOLOGY, 2 * faithful * few / many, raw, mtu, offload, datapath,
                                      steps, reps, log)[1] if faithful else 0.0
    port_s = measure_switch_latency(mtu, offload, datapath, log)
    latency = measure_step_latency(raw, mtu, offload, datapath, reps, log, port_s)
    return Point(dataplane.datapath, mtu, offload, round(raw, 1), faithful, best,
                 probe_spec(best or 1.0, mtu, offload, dataplane.datapath, 1).tcp, round(latency * 1e6),
                 round(port_s * 1e6, 2), many_faithful)


def faithful_load(topology: str, most_mbps: float, raw: float, mtu: int, offload: str, datapath: str, steps: int,
                  reps: int, log=print) -> tuple[float, float]:
    """(link rate, link-Mbit/s): the largest load of a ring on `topology`,
    up to `most_mbps`, that keeps the probe's verdict (judge)."""
    from emulator.plan.run_plan import plan_run
    load_at = {}

    def passes(rate: float) -> bool:
        rate = round(rate, 1)
        for attempt in (1, 2):
            r = try_rate(rate, mtu, offload, datapath, reps, log, topology)
            log(f"#   links at {rate:7.1f} Mbit/s: load {r['load']:6.0f} link-Mbit/s ({r['load'] / raw:4.0%} of raw), "
                f"time/model {r['time_over_model']:.2f}, saturated links "
                f"{'-' if r['saturated_util'] is None else format(r['saturated_util'], '.0%')}: {r['verdict']}"
                + ("  (second try)" if attempt == 2 else ""))
            load_at[rate] = r["load"]
            if r["verdict"] == "ok":
                return True
        return False

    # switch traversals of the probe's flows: the bisection spans 0..most_mbps of load
    unit = plan_run(probe_spec(1.0, mtu, offload, datapath, reps, topology))
    traversals = unit.predictions[unit.spec.sizes[0]].peak_switch_mbps
    best = round(bisect(passes, most_mbps / traversals, steps), 1)
    return best, round(load_at.get(best, 0.0), 1)


def switch_latency_spec(mtu: int, offload: str, datapath: str, topology: str = SWITCH_LATENCY_TOPOLOGY,
                        rate_mbps: float = LATENCY_RATE_MBPS):
    from emulator.spec.experiment import RunSpec
    return RunSpec(topology=topology, mtu=mtu, offload=offload, datapath=datapath, host_rate_mbps=rate_mbps,
                   switch_rate_mbps=rate_mbps, sizes=(1 << 20,), label="switch-latency")


def one_way_times(plan, sizes=SWITCH_LATENCY_SIZES, trips: int = SWITCH_LATENCY_TRIPS,
                  gap_s: float = SWITCH_LATENCY_GAP_S) -> dict[int, dict[int, float]]:
    """{switches: {size: median one-way s}}: half the round trips of one
    message each way between hosts that many switches apart, one pair at a
    time, on the plan's fabric brought up as a run brings it up."""
    from emulator.emulation import Emulation
    from emulator.measure.pingpong import round_trips
    out, work = {}, tempfile.mkdtemp(prefix="bigraph-calibrate-")
    try:
        with Emulation(plan, work, log=lambda line: None) as emu:
            for switches, (src, dst) in switch_pairs(plan.fabric, plan.table).items():
                trips_s = round_trips(emu.network, plan.fabric, src, dst, list(sizes), trips, gap_s)
                out[switches] = {size: statistics.median(v) / 2 for size, v in trips_s.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def measure_switch_latency(mtu: int, offload: str, datapath: str, log=print) -> float:
    """What a switch crossed adds to a message, per switch port of the
    fabric (s), on this machine."""
    from emulator.plan.run_plan import plan_run
    plan = plan_run(switch_latency_spec(mtu, offload, datapath))
    one_way = one_way_times(plan)
    ports = switch_ports(plan.fabric)
    per_port = per_switch_s(one_way) / ports
    log(f"#   switch latency {per_port * ports * 1e3:.2f} ms a switch crossed on {SWITCH_LATENCY_TOPOLOGY} "
        f"({ports} switch ports: {per_port * 1e6:.2f} us a port); one way "
        + ", ".join(f"{n} switches {statistics.fmean(t.values()) * 1e3:.2f} ms" for n, t in one_way.items()))
    return per_port


def measure_step_latency(raw_mbps: float, mtu: int, offload: str, datapath: str, reps: int, log=print,
                         port_s: float = 0.0) -> float:
    """A step's latency on this machine (s), the least time a step takes:
    small uncongested calls, fitted by the model with the links' burst
    and the switch latency, `port_s` a switch port (fit_step_latency)."""
    from emulator.emulation import Emulation
    from emulator.plan.run_plan import plan_run
    from emulator.results.calls import collective_rows
    plan = plan_run(latency_spec(mtu, offload, datapath, reps))
    work = tempfile.mkdtemp(prefix="bigraph-calibrate-")
    try:
        with Emulation(plan, work, log=lambda line: log(line) if "WARNING" in line else None) as emu:
            rows = collective_rows(plan, emu.replay(plan), emu.dataplane.datapath)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    times = {size: [] for size in plan.spec.sizes}
    for r in rows:
        if r["bytes_ok"]:
            times[int(r["size_bytes"])].append(float(r["time_s"]))
    latency, ratios = fit_step_latency(plan, link_burst(raw_mbps, len(plan.hosts)), times,
                                       port_s * switch_ports(plan.fabric))
    log(f"#   step latency {latency * 1e3:.2f} ms: a ring at {LATENCY_RATE_MBPS:g} Mbit/s, fitted with "
        f"the links' burst; measured/model " + ", ".join(f"{s >> 10} KiB {r:.2f}x" for s, r in ratios.items()))
    return latency


def sharing_spec(flows: int, mtu: int, queue: int, tcp: str, reps: int):
    """An incast of `flows` senders into one host's queue on one switch,
    each call about SHARING_CALL_SECONDS at max-min's fair shares."""
    from emulator.spec.experiment import RunSpec
    per_sender = SHARING_CALL_SECONDS * SHARING_RATE_MBPS * 1e6 * payload_efficiency(mtu) / 8 / flows
    size = max(1, round(per_sender / (64 << 10))) * (64 << 10)
    return RunSpec(topology=SHARING_TOPOLOGY, collective="incast", mapping="naive", ranks=flows + 1, mtu=mtu,
                   host_rate_mbps=SHARING_RATE_MBPS, switch_rate_mbps=SHARING_RATE_MBPS, host_queue_packets=queue,
                   switch_queue_packets=queue, tcp=tcp, sizes=(size,), repetitions=reps, warmup=1,
                   sharing="max-min", label="tcp-sharing")


def sharing_point(flows: int, rows: list[dict], spec, alone: float = 1.0,
                  standing_ms: float | None = None) -> SharingPoint:
    """The measured point of one incast's counted calls (pure): the median
    time over max-min, over that of one flow alone (`alone`: what the model
    misses without any sharing), the mean drops per call, the share of
    calls slower than the median by most of a retransmission timeout, and
    the queue they kept standing (`standing_ms`, standing_queue_ms's)."""
    median = statistics.median(float(r["time_s"]) for r in rows)
    timeouts = sum(float(r["time_s"]) - median >= 0.75 * RTO_MIN_S for r in rows)
    drops = [float(r["queue_drops"] or 0) for r in rows]
    return SharingPoint(spec.tcp, spec.mtu, spec.host_queue_packets, flows,
                        round(_median_ratio(rows) / alone, 3), round(sum(drops) / len(drops), 1),
                        spec.host_rate_mbps, round(timeouts / len(rows), 3),
                        None if standing_ms is None else round(standing_ms, 1))


def standing_queue_ms(links: list[dict], rate_mbps: float) -> float:
    """The deepest queue's mean backlog over links.csv rows of some calls
    (pure), in ms at `rate_mbps`: in an incast, the one queue the flows
    share, and the delay TCP keeps standing in it."""
    depths: dict[str, list[float]] = {}
    for r in links:
        depths.setdefault(r["link"], []).append(float(r["backlog_bytes"] or 0))
    deepest = max((statistics.fmean(d) for d in depths.values()), default=0.0)
    return deepest * 8 / (rate_mbps * 1e6) * 1e3


def _median_ratio(rows: list[dict]) -> float:
    return statistics.median(float(r["time_over_model"]) for r in rows)


def measure_sharing(flows_list: list[int], mtu: int, queue: int, tcp: str, reps: int, log=print) -> list[SharingPoint]:
    """TCP's sharing of one queue by N flows, for each N, in one emulated
    network, against one flow alone through the same queue; calls the
    verdict does not trust for the machine's reasons are left out (they
    measure the machine, not TCP)."""
    from emulator.emulation import Emulation
    from emulator.plan.run_plan import plan_run
    from emulator.results.calls import collective_rows
    counts = [1, *flows_list]
    plans = [plan_run(sharing_spec(n, mtu, queue, tcp, reps)) for n in counts]
    measured, standing, work = {}, {}, tempfile.mkdtemp(prefix="bigraph-calibrate-")
    try:
        with Emulation(plans[-1], work, log=lambda line: log(line) if "WARNING" in line else None) as emu:
            for n, plan in zip(counts, plans):
                records = emu.replay(plan)
                rows = collective_rows(plan, records, emu.dataplane.datapath)   # the counted calls'
                counted = [rec for call, rec in zip(plan.calls, records) if call.repetition >= 0]
                for r, rec in zip(rows, counted):
                    log(f"#   {n:2} flows into one {queue}-packet queue ({tcp}, MTU {mtu}): "
                        f"{float(r['time_over_model']):.2f}x max-min, {r['queue_drops']} drops, "
                        f"{standing_queue_ms(rec.links, plan.spec.switch_rate_mbps):.0f} ms standing queue, {r['fidelity']}")
                kept = [(r, rec) for r, rec in zip(rows, counted) if not machine_failed(r["fidelity"])]
                measured[n] = [r for r, _ in kept]
                standing[n] = standing_queue_ms([row for _, rec in kept for row in rec.links],
                                                plan.spec.switch_rate_mbps)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not measured[1]:
        raise RuntimeError(f"one flow alone (MTU {mtu}): no call the machine kept up with; is it busy?")
    alone = _median_ratio(measured[1])
    log(f"# one flow alone: {alone:.3f}x max-min (the model without sharing; the factors below are over it), "
        f"{standing[1]:.0f} ms standing queue")
    return [sharing_point(n, measured[n], plan.spec, alone, standing[n])
            for n, plan in zip(counts[1:], plans[1:]) if measured[n]]


def calibrate(datapath: str, mtus: list[int], offloads: list[str], steps: int, reps: int,
              machine: str, log=print) -> Calibration:
    points = [calibrate_point(datapath, mtu, offload, steps, reps, log) for offload in offloads for mtu in mtus]
    return Calibration(machine, time.strftime("%Y-%m-%d"), points, "")
