"""Dataplane capacity used with fidelity, as a fraction of the raw capacity,
both measured in the same run on this machine. Needs root.

For each setting (MTU and offload), what `bigraph-emu calibrate` measures
(emulator/calibration.py), without writing the calibration file:
- raw: iperf3, one TCP flow, through one unshaped OVS switch, in wire
  Mbit/s (Ethernet frames, what HTB shapes); with --flows N also N flows;
- used with fidelity: the largest load, in link-Mbit/s summed over switch
  traversals, at which a ring allreduce on bigraph:m=2,n=4 (every flow
  alone on its path at the link rate, 14 switch traversals) keeps its
  fidelity verdict "ok" and its saturated links within 5% of their rate;
  found by bisection between 0 and the raw capacity, a failing rate tried
  twice.

Unless --quick or --no-diagnose, two raw variants show where the gap
between raw and emulated capacity comes from: one switch with the
emulator's HTB + FIFO on every port (at a rate that never limits), and a
chain of three unshaped switches (does the budget divide by switch
traversals?).

    .venv/bin/python benchmarks/dataplane.py [--quick] [--settings 9000:off,1500:off,9000:tso]

Target: at least 80% of the raw capacity usable with fidelity.
"""
from __future__ import annotations

import argparse
import os

import benchlib

from emulator import calibration
from emulator.records.metrics import payload_efficiency
from emulator.net import interrupts, shaping
from emulator.net.dataplane import detect
from emulator.net.network import TSQ_FRAMES
from emulator.measure.rawpath import raw_capacity
from emulator.fabric.topology import LinkProfile

TARGET = 0.80


def parse_settings(text: str) -> list[tuple[int, str]]:
    """'9000:off,1500:tso' -> [(9000, 'off'), (1500, 'tso')]."""
    out = []
    for item in text.split(","):
        mtu, _, offload = item.partition(":")
        out.append((int(mtu), offload or "off"))
    return out


def diagnose(mtu: int, offload: str, seconds: int) -> None:
    dataplane = detect("auto", offload)
    eff = payload_efficiency(mtu)
    base = benchlib.with_lock_retry(lambda: raw_capacity(dataplane, mtu, seconds, [1]))[1]
    variants = (("one switch, every port shaped (HTB+FIFO at 20 Gbit/s, emulator's TSQ)",
                 {"shaped": True, "queue_packets": LinkProfile.host_queue_packets,
                  "tsq_bytes": TSQ_FRAMES * (mtu + 14)}),
                ("chain of 3 switches, unshaped", {"switches": 3}))
    for label, kw in variants:
        mbps, cores = benchlib.with_lock_retry(lambda: raw_capacity(dataplane, mtu, seconds, [1], **kw))[1]
        benchlib.check_clean("raw iperf3 variant")
        links = mbps * kw.get("switches", 1) / eff
        print(f"# raw variant, {label}: {links:.0f} wire link-Mbit/s ({links / (base[0] / eff):.0%} of one "
              f"switch unshaped); ovs-vswitchd {cores:.2f} cores ({links / max(cores, 1e-3):.0f} per ovs core)",
              flush=True)


SHAPED_PORT_MBPS = 100.0   # the port-type check: a switch port shaped at this rate


def port_types(mtus: list[int], types: list[str], seconds: int) -> None:
    """Raw capacity of one switch whose ports are each Open vSwitch
    interface type in turn, hosts sending frames (AF_XDP carries no TSO
    segment and no frame beyond about a page), and what crosses the same
    switch with its ports shaped by HTB at SHAPED_PORT_MBPS, as the
    emulator shapes them: a port type that sends past the kernel's queueing
    layer leaves the shaping out."""
    dataplane = detect("auto", "off")
    print(f"\n# port type      MTU  raw wire Mbit/s  ovs-vswitchd cores  wire Mbit/s per ovs core  "
          f"through ports shaped at {SHAPED_PORT_MBPS:g} Mbit/s")
    for mtu in mtus:
        for port_type in types:
            kind = "" if port_type == "system" else port_type
            try:
                mbps, cores = benchlib.with_lock_retry(lambda: raw_capacity(
                    dataplane, mtu, seconds, [1], port_type=kind))[1]
                benchlib.check_clean(f"raw iperf3, {port_type} ports")
                shaped, _ = benchlib.with_lock_retry(lambda: raw_capacity(
                    dataplane, mtu, seconds, [1], port_type=kind, switch_shaped_mbps=SHAPED_PORT_MBPS))[1]
            except RuntimeError as e:
                print(f"  {port_type:13} {mtu:5}  failed: {e}", flush=True)
                continue
            finally:
                benchlib.check_clean(f"raw iperf3, {port_type} ports")
            wire = mbps / payload_efficiency(mtu)
            print(f"  {port_type:13} {mtu:5} {wire:16.0f} {cores:19.2f} {wire / max(cores, 1e-3):25.0f}  "
                  f"{shaped / payload_efficiency(mtu):.0f} Mbit/s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="MTU 9000 only, 3 bisection steps, one counted call")
    p.add_argument("--settings", default="9000:off,1500:off", help="MTU:offload list (default 9000:off,1500:off)")
    p.add_argument("--steps", type=int, default=5, help="bisection steps (default 5)")
    p.add_argument("--flows", type=int, default=4, help="also raw with this many parallel flows (0: no)")
    p.add_argument("--seconds", type=int, default=10, help="iperf3 seconds of the extra raw runs (default 10)")
    p.add_argument("--burst-ms", type=float, default=0.0,
                   help=f"experiment: HTB burst of this many ms at the link rate in this process only "
                        f"(default: the emulator's, {shaping.BURST_MS:g} ms)")
    p.add_argument("--no-diagnose", dest="diagnose", action="store_false", help="skip the raw variants")
    p.add_argument("--port-types", metavar="TYPES",
                   help="only the raw capacity of one switch with its ports as each of these Open vSwitch "
                        "interface types (e.g. system,afxdp-nonpmd), hosts sending frames, at each MTU of "
                        "--mtus")
    p.add_argument("--mtus", default="1500,3000", help="with --port-types: MTUs (default 1500,3000)")
    args = p.parse_args()
    interrupts.unwind_on_signals()   # SIGTERM and a hang-up tear down like Ctrl-C
    if os.geteuid() != 0:
        raise SystemExit("dataplane.py needs root (Mininet and Open vSwitch)")
    if args.port_types:
        port_types([int(m) for m in args.mtus.split(",")], args.port_types.split(","), args.seconds)
        return
    if args.burst_ms:
        shaping.BURST_MS = args.burst_ms
        print(f"# experiment: HTB burst = {args.burst_ms:g} ms of traffic at the link rate", flush=True)
    settings = [(9000, "off")] if args.quick else parse_settings(args.settings)
    steps, reps = (3, 1) if args.quick else (args.steps, 2)
    results = []
    for mtu, offload in settings:
        point = benchlib.with_lock_retry(lambda: calibration.calibrate_point(
            "auto", mtu, offload, steps, reps, lambda line: print(line, flush=True)))
        benchlib.check_clean(f"calibration at MTU {mtu}")
        results.append(point)
        if args.flows > 1 and not args.quick:
            mbps, cores = benchlib.with_lock_retry(lambda: raw_capacity(
                detect("auto", offload), mtu, args.seconds, [args.flows]))[args.flows]
            print(f"# raw with {args.flows} flows: {mbps / payload_efficiency(mtu):.0f} wire Mbit/s, "
                  f"ovs-vswitchd {cores:.2f} cores", flush=True)
        if args.diagnose and not args.quick:
            diagnose(mtu, offload, args.seconds)
    print("\n# MTU  offload  raw wire Mbit/s  used with fidelity (link-Mbit/s)  fraction  at link rate  target")
    for pt in results:
        frac = pt.faithful_mbps / pt.raw_mbps
        print(f"  {pt.mtu:5} {pt.offload:7} {pt.raw_mbps:16.0f} {pt.faithful_mbps:32.0f} {frac:9.0%} "
              f"{pt.link_rate_mbps:10g} Mb/s  >= {TARGET:.0%}: {'met' if frac >= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
