#!/usr/bin/env python3
"""How many servers a BiGraph needs, on paper: `bigraph-emu plan`'s
answer for 128, 512 and 2,048 hosts at 100 Mbit/s and 1 Gbit/s links, on
servers of 16 and 64 cores, for EFLOPS's case (halving-doubling allreduce
with HDRM, 64 MiB). The per-core budget is this machine's calibration (or
the reference figures) over its cores; a server of c cores is assumed to
give c times that.

  .venv/bin/python benchmarks/servers_plan.py [--sizes 128,512,2048] [--rates 100,1000] [--cores 16,64]

No root, no network: the model and the placement only.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from emulator.plan.capacity import MAX_EMULATED_HOSTS  # noqa: E402
from emulator.plan import capacity, servers  # noqa: E402
from emulator.plan.run_plan import plan_run  # noqa: E402
from emulator.spec.experiment import make_run  # noqa: E402

BIGRAPH = {128: "bigraph:m=8,n=16", 512: "bigraph:m=16,n=32", 2048: "bigraph:m=32,n=64"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="128,512,2048")
    ap.add_argument("--rates", default="100,1000")
    ap.add_argument("--cores", default="16,64")
    args = ap.parse_args()
    one = capacity.faithful_budget(capacity.load(), "user", 9000, "off", cores=1)
    print(f"# per-core budget: {one.faithful_mbps:.0f} link-Mbit/s up to {one.ports} switch ports, shrinking "
          f"as ({one.ports}/ports) ** {one.exponent:.2f} past them ({one.basis}); at most {MAX_EMULATED_HOSTS} "
          f"hosts a server")
    print("| hosts | link Mbit/s | cores a server | peak link-Mbit/s | servers | busiest server | "
          "bytes across, traffic / switch-bin | planning s |")
    print("|---|---|---|---|---|---|---|---|")
    for hosts in map(int, args.sizes.split(",")):
        for rate in map(float, args.rates.split(",")):
            t0 = time.perf_counter()
            plan = plan_run(make_run({"topology": BIGRAPH[hosts], "algorithm": "halving-doubling",
                                      "mapping": "hdrm", "sizes": ["64M"], "repetitions": 1, "warmup": 0,
                                      "host_rate_mbps": rate, "switch_rate_mbps": rate}))
            traffic = servers.traffic_of(plan)
            for cores in map(int, args.cores.split(",")):
                budget = servers.Server.of("s", capacity.faithful_budget(capacity.load(), "user", 9000, "off",
                                                                         cores), MAX_EMULATED_HOSTS)
                try:
                    placed = servers.servers_needed(traffic, budget)
                except ValueError as e:
                    print(f"| {hosts} | {rate:g} | {cores} | {traffic.load.sum():.0f} | none | {e} | | |")
                    continue
                binned = servers.switch_bin(traffic, placed.servers)
                busiest = max(placed.load_mbps[s] / placed.budget_mbps(s) for s in range(len(placed.servers)))
                total = traffic.forwarded.sum()
                print(f"| {hosts} | {rate:g} | {cores} | {traffic.load.sum():.0f} | {len(placed.servers)} | "
                      f"{busiest:.0%} | {placed.cross_bytes / total:.1%} / {binned.cross_bytes / total:.1%} "
                      f"of forwarded | {time.perf_counter() - t0:.1f} |")


if __name__ == "__main__":
    main()
