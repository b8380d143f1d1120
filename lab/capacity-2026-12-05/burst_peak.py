"""Offline: every run of a corpus kept by `capacity_check.py --out`, its median call over the model with the
burst's peak as the model has it (the raw capacity over the hosts) and shared among the switches a flow
crosses too (over hosts times the switches a byte crosses on average); that average first.

    .venv/bin/python burst_peak.py CORPUS_FOLDER calibration.json
"""
import csv
import dataclasses
import json
import os
import statistics
import sys

from emulator.model.buckets import Burst
from emulator.plan import capacity
from emulator.plan.run_plan import plan_run
from emulator.routes.routing import demands_from_schedule, path
from emulator.spec.experiment import make_run

cal = capacity.load(sys.argv[2])
for name in sorted(os.listdir(sys.argv[1])):
    folder = os.path.join(sys.argv[1], name)
    calls = os.path.join(folder, "collectives.csv")
    rows = list(csv.DictReader(open(calls))) if os.path.exists(calls) else []
    if not rows or rows[0]["collective"] != "allreduce":
        continue
    spec = make_run(json.load(open(os.path.join(folder, "spec.json")))["runs"][0])
    plan = plan_run(spec)
    demands = demands_from_schedule(plan.schedules[max(plan.schedules)], plan.hosts)
    switches = sum(b * (len(path(plan.fabric, plan.table, a, c)) - 1) for (a, c), b in demands.items()) / sum(
        demands.values())
    links = capacity.emulated_links(cal, rows[0]["datapath"], spec.mtu, rows[0]["offload"], len(plan.hosts),
                                    capacity.switch_ports(plan.fabric))
    shared = dataclasses.replace(links, burst=Burst(links.burst.seconds, links.burst.peak_mbps / switches))
    measured = statistics.median(float(r["time_s"]) for r in rows)
    ratios = [measured / statistics.median(p.time_s for p in plan_run(spec, links=variant).predictions.values())
              for variant in (links, shared)]
    print(f"{name:30} {switches:4.2f} switches a byte  {rows[0]['algorithm']:17} {spec.sizes[0] >> 10:5}K "
          f"{spec.host_rate_mbps:4g} Mbit/s  over the model: {ratios[0]:.2f}, peak shared {ratios[1]:.2f}")
