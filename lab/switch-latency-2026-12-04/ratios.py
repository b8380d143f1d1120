"""Median call over the model, per size, of every collectives.csv given,
without and with the switch latency: each with a least step time fitted
(calibration.fit_step_latency) on the first file's calls (a ring),
the burst and the switch latency of the calibration file `--calibration`.

    .venv/bin/python ratios.py --calibration calibration.json sizes-*-ring-*.csv sizes-*.csv
"""
import argparse
import csv
import dataclasses
import statistics

from emulator import calibration
from emulator.plan import capacity
from emulator.plan.run_plan import plan_run
from emulator.spec.experiment import make_run

KEYS = ("topology", "algorithm", "mapping", "policy", "host_rate_mbps", "switch_rate_mbps")


def calls(path):
    rows = list(csv.DictReader(open(path)))
    times: dict[int, list[float]] = {}
    for r in rows:
        times.setdefault(int(r["size_bytes"]), []).append(float(r["time_s"]))
    return make_run({**{k: rows[0][k] for k in KEYS}, "sizes": sorted(times)}), times


def links_of(cal, spec, switch: bool):
    fabric = spec.fabric()
    links = capacity.emulated_links(cal, "user", 9000, "tso", len(fabric.hosts), capacity.switch_ports(fabric))
    return links if switch else dataclasses.replace(links, switch_latency_s=0.0)


ap = argparse.ArgumentParser()
ap.add_argument("--calibration", required=True)
ap.add_argument("files", nargs="+")
args = ap.parse_args()
cal = capacity.load(args.calibration)
point = next(p for p in cal.points if p.key() == ("user", 9000, "tso"))
fit_spec, fit_times = calls(args.files[0])
fit_plan = plan_run(fit_spec)
small = {s: t for s, t in fit_times.items() if s <= calibration.LATENCY_SIZES[-1]}
floors = {}
for switch in (False, True):
    links = links_of(cal, fit_spec, switch)
    floors[switch], fitted = calibration.fit_step_latency(fit_plan, links.burst, small, links.switch_latency_s)
    print(f"# {'with' if switch else 'without'} the switch latency ({point.port_latency_us:g} us a port): "
          f"least step time {floors[switch] * 1e3:.2f} ms on 8 hosts, fitted on {args.files[0]} (32-256 KiB)")
for path in args.files:
    spec, times = calls(path)
    hosts = len(spec.fabric().hosts)
    for switch in (False, True):
        links = dataclasses.replace(links_of(cal, spec, switch), step_floor_s=floors[switch] * hosts / 8)
        plan = plan_run(spec, links=links)
        ratios = [statistics.median(times[s]) / plan.predictions[s].time_s for s in sorted(times)]
        print(f"{path:60} {'switch' if switch else 'before':6}",
              " ".join(f"{s >> 10}K:{r:.2f}" for s, r in zip(sorted(times), ratios)))
