"""How fast is the flow model? Prints seconds per prediction (and for
building the schedule) from the sizes we emulate up to thousands of hosts,
and each figure's ratio to the smallest case measured in the same run.

    .venv/bin/python benchmarks/model_speed.py [--quick]
"""
from __future__ import annotations

import argparse
import time

from emulator.routes.routing import forwarding_table
from emulator.fabric.mapping import hosts_for_ranks
from emulator.model.simulation import predict
from emulator.workloads.schedule import build_schedule
from emulator.fabric.topology import build

CASES = [  # topology, algorithm, mapping, policy
    ("bigraph:m=2,n=4", "ring", "naive", "shortest"),
    ("bigraph:m=4,n=8", "ring", "naive", "shortest"),
    ("bigraph:m=4,n=8", "halving-doubling", "naive", "shortest"),
    ("bigraph:m=4,n=8", "halving-doubling", "hdrm", "shortest"),
    ("leafspine:leaves=8,spines=4,hosts=4", "halving-doubling", "naive", "spread"),
    ("bigraph:m=16,n=32", "halving-doubling", "hdrm", "shortest"),
    ("bigraph:m=32,n=64", "halving-doubling", "hdrm", "shortest"),
    ("bigraph:m=32,n=64", "halving-doubling", "naive", "shortest"),
    ("bigraph:m=16,n=64", "ring", "naive", "spread"),
]
QUICK = 6


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help=f"only the first {QUICK} cases")
    p.add_argument("--size", type=int, default=16 << 20)
    args = p.parse_args()
    print(f"{'topology':36} {'algorithm':16} {'mapping':7} {'hosts':>5} {'schedule s':>10} "
          f"{'model s':>8} {'x smallest':>10} {'predicted s':>11}")
    base = None
    for topology, algorithm, mapping, policy in CASES[:QUICK] if args.quick else CASES:
        fabric = build(topology)
        table = forwarding_table(fabric, policy)
        hosts = hosts_for_ranks(fabric, mapping)
        sched, t_sched = timed(lambda: build_schedule("allreduce", algorithm, len(hosts), args.size))
        pred, t_model = timed(lambda: predict(fabric, table, sched, hosts, 5e-4))
        base = base or t_model
        print(f"{topology:36} {algorithm:16} {mapping:7} {len(hosts):5d} {t_sched:10.3f} "
              f"{t_model:8.3f} {t_model / base:10.1f} {pred.time_s:11.2f}")


if __name__ == "__main__":
    main()
