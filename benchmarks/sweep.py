#!/usr/bin/env python3
"""Sweeps on the local Dask pool, against baselines measured in the same run:

1. per-point overhead: a pool of one worker over the first --overhead-points
   points, its wall time beyond the model's own time (the rows' wall_s),
   per point (target: at most 10 ms);
2. speed-up: the same points on --workers workers against one (target: at
   least 1.8x on 2 cores);
3. a grid of about --points points of --ranks-rank cases (3 topologies,
   every placement and the policies chosen, ring and halving-doubling,
   switch rates to make up the count): `bigraph-emu sweep` against
   `bigraph-emu model --experiment` running the same runs in one process
   (targets: at most half its wall time, and under 5 minutes on 2 cores).

Beside 2., the ceiling this machine's cores set: the same points split
evenly over plain processes (no Dask), against one.

  .venv/bin/python benchmarks/sweep.py [--ranks 1024] [--points 1000] [--workers 2]
                                       [--policies shortest,ecmp,...] [--no-grid]

No root; the machine should be otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from emulator.routes.routing import POLICIES  # noqa: E402
from emulator.spec.experiment import experiment_toml  # noqa: E402
from emulator.spec.sweep import load_sweep  # noqa: E402
from emulator.sweep import pool  # noqa: E402

BIN = os.path.join(os.path.dirname(sys.executable), "bigraph-emu")
TOPOLOGIES = {1024: ["bigraph:m=32,n=32", "fattree:k=16", "leafspine:leaves=32,spines=16,hosts=32"],
              256: ["bigraph:m=16,n=16", "fattree:k=10", "leafspine:leaves=16,spines=8,hosts=16"],
              32: ["bigraph:m=4,n=8", "fattree:k=6", "leafspine:leaves=4,spines=2,hosts=8"]}


def grid_text(ranks: int, policies: list[str], rates: list[float]) -> str:
    quoted = json.dumps   # a list of strings or numbers is a TOML array too
    return (f'name = "bench"\n[defaults]\nranks = {ranks}\nsizes = ["64M"]\n[grid]\n'
            f"topology = {quoted(TOPOLOGIES[ranks])}\npolicy = {quoted(policies)}\n"
            f'mapping = ["naive", "round-robin", "random", "hdrm"]\nalgorithm = ["ring", "halving-doubling"]\n'
            f"switch_rate_mbps = {quoted(rates)}\n")


def grid(folder: str, ranks: int, policies: list[str], points: int) -> str:
    """A sweep file of about `points` points: as many switch rates as it takes."""
    path = os.path.join(folder, "grid.toml")
    with open(path, "w") as f:
        f.write(grid_text(ranks, policies, [50]))
    per_rate = len(load_sweep(path).points)
    rates = [50 * 1.25 ** i for i in range(math.ceil(points / per_rate))]
    with open(path, "w") as f:
        f.write(grid_text(ranks, policies, rates))
    return path


def pool_run(points: list, workers: int) -> tuple[float, float]:
    """(wall time of the run on a fresh local pool, the model's own time summed over the points)."""
    rows = []
    with pool.open_pool(None, workers) as client:
        client.run(lambda: None)   # every worker up
        t0 = time.perf_counter()
        pool.run(client, points, [], "", {}, lambda kind, point, got: rows.extend(got))
        wall = time.perf_counter() - t0
    own = sum(float(r["wall_s"]) for r in {r["key"]: r for r in rows}.values())
    return wall, own


def _model_all(points: list) -> None:
    from emulator.sweep.points import model_point
    for point in points:
        model_point(point, {})


def plain_processes(points: list, workers: int) -> float:
    """Wall time of `workers` plain processes, each modelling its share of
    the points alone (no Dask): what this machine's cores allow."""
    shares = [points[i::workers] for i in range(workers)]
    with multiprocessing.get_context("spawn").Pool(workers) as processes:
        processes.map(_model_all, [[] for _ in shares])   # started and imported before the clock
        t0 = time.perf_counter()
        processes.map(_model_all, shares, chunksize=1)
        return time.perf_counter() - t0


def experiment_file(folder: str, sweep) -> str:
    """The sweep's points as the [[runs]] of one experiment file."""
    path = os.path.join(folder, "runs.toml")
    with open(path, "w") as f:
        f.write('name = "bench-runs"\n')
        for point in sweep.points:
            f.write("\n[[runs]]\n" + experiment_toml(point.spec, "x").split("[defaults]\n", 1)[1])
    return path


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=1024, choices=sorted(TOPOLOGIES))
    ap.add_argument("--points", type=int, default=1000, help="about this many points in the grid (3.)")
    ap.add_argument("--overhead-points", type=int, default=200, help="points of 1. and 2.")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--policies", default=",".join(POLICIES), help="the grid's policies (default: all)")
    ap.add_argument("--no-grid", action="store_true", help="stop after 2. (3. takes the longest)")
    args = ap.parse_args()
    policies = args.policies.split(",")
    with tempfile.TemporaryDirectory() as folder:
        sweep = load_sweep(grid(folder, args.ranks, policies, args.points))
        print(f"# grid: {len(sweep.points)} points of {args.ranks} ranks, policies {', '.join(policies)}; "
              f"{os.cpu_count()} cores", flush=True)
        few = sweep.points[:args.overhead_points]
        one, own = pool_run(few, 1)
        print(f"1. per-point overhead, one worker, {len(few)} points: {one:.2f} s wall, {own:.2f} s in the model: "
              f"{(one - own) / len(few) * 1e3:.1f} ms per point (target <= 10 ms)", flush=True)
        many, _ = pool_run(few, args.workers)
        print(f"2. {args.workers} workers: {many:.2f} s against one worker's {one:.2f} s: {one / many:.2f}x "
              "(target >= 1.8x on 2 cores)", flush=True)
        alone, together = plain_processes(few, 1), plain_processes(few, args.workers)
        print(f"   this machine's own ceiling: {args.workers} plain processes (no Dask, the points split evenly) "
              f"{together:.2f} s against one's {alone:.2f} s: {alone / together:.2f}x", flush=True)
        if args.no_grid:
            return 0
        runs = experiment_file(folder, sweep)
        baseline = timed([BIN, "model", "--experiment", runs, "--json"])
        swept = timed([BIN, "sweep", os.path.join(folder, "grid.toml"), "--out", os.path.join(folder, "out"),
                       "--workers", str(args.workers)])
        print(f"3. {len(sweep.points)} points: bigraph-emu sweep {swept:.1f} s, bigraph-emu model --experiment "
              f"(one process) {baseline:.1f} s: {swept / baseline:.2f} of its time (target <= 0.5); "
              f"{'under' if swept < 300 else 'over'} 5 minutes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
