"""What a switch crossed costs a message: TCP round trips of one message
each way between hosts 1, 2, 3 or 5 switches apart, on a fabric brought up
as every run brings it up (controller, routes, HTB on every link, the
hosts' TCP settings), one pair at a time on an idle fabric. Needs root.

Per fabric and message size: the median one-way time (half a round trip)
per number of switches crossed, and the least-squares line through them:
the time a switch adds (its slope) and a message's time with no switch
(its intercept); then what a switch adds per switch port of the fabric,
every size pooled (what `bigraph-emu calibrate` measures on fattree:k=4).
A message the links' burst does not cover would be stored and forwarded
at the link rate: S/rate a switch.

    .venv/bin/python benchmarks/hop_latency.py [-t fattree:k=4 -t bigraph:m=2,n=4 ...] [--rate 50]
        [--sizes 64,4096,16384] [--trips 30] [--repeat 2] [--quick]
"""
from __future__ import annotations

import argparse

import benchlib

from emulator import calibration
from emulator.plan.capacity import switch_ports
from emulator.plan.run_plan import plan_run


def table(one_way: dict[int, dict[int, float]], sizes: list[int], rate_mbps: float) -> None:
    print(f"{'size':>8} " + " ".join(f"{n:>2} sw (ms)" for n in one_way) + "  per switch (ms)  no switch (ms)"
          "  S/rate (ms)")
    for s in sizes:
        ys = [one_way[n][s] * 1e3 for n in one_way]
        base, slope = calibration.fit_line(list(one_way), ys)
        print(f"{s:>8} " + " ".join(f"{y:>9.3f}" for y in ys)
              + f"  {slope:>15.3f}  {base:>14.3f}  {s * 8 / (rate_mbps * 1e3):>11.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--topology", action="append", help="default: fattree:k=4")
    ap.add_argument("--rate", type=float, default=calibration.LATENCY_RATE_MBPS, help="every link's rate, Mbit/s")
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument("--sizes", default="64,4096,16384")
    ap.add_argument("--trips", type=int, default=calibration.SWITCH_LATENCY_TRIPS, help="round trips per size and pair")
    ap.add_argument("--gap", type=float, default=calibration.SWITCH_LATENCY_GAP_S, help="seconds between round trips")
    ap.add_argument("--repeat", type=int, default=1, help="times each fabric is brought up and measured")
    ap.add_argument("--quick", action="store_true", help="10 round trips of 64 and 4096 bytes")
    args = ap.parse_args()
    if args.quick:
        args.trips, args.sizes = 10, "64,4096"
    sizes = [int(s) for s in args.sizes.split(",")]
    for topology in args.topology or [calibration.SWITCH_LATENCY_TOPOLOGY]:
        plan = plan_run(calibration.switch_latency_spec(args.mtu, "auto", "auto", topology, args.rate))
        ports = switch_ports(plan.fabric)
        for _ in range(args.repeat):
            benchlib.wait_for_lock()
            one_way = calibration.one_way_times(plan, sizes, args.trips, args.gap)
            per_switch = calibration.per_switch_s(one_way)
            print(f"# {topology} ({ports} switch ports) at {args.rate:g} Mbit/s, MTU {args.mtu}: a switch adds "
                  f"{per_switch * 1e3:.3f} ms, {per_switch / ports * 1e6:.2f} us a port")
            table(one_way, sizes, args.rate)
    benchlib.check_clean("hop latency")


if __name__ == "__main__":
    main()
