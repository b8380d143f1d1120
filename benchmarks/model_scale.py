"""How long the flow model takes for the fabrics one machine cannot emulate:
a 4096-host BiGraph halving-doubling allreduce with the HDRM rank mapping
and a 1024-host fat-tree permutation (Hedera's stride(p/2)). Pure, no root.

Every phase is timed on its own (fabric, routes, rank mapping, schedule,
prediction), then `plan_run` end to end (what `bigraph-emu model` does,
with the header-overhead efficiency), each the median of --repeat runs.
The baseline is the same case at the size we emulate, measured in the same
run (`x base` is the large case's time over it).

    .venv/bin/python benchmarks/model_scale.py [--quick] [--repeat N] [--size 64M]

Issue 7's target: the model under 5 s for 4096 hosts. Then jobs
(emulator.workload): a ResNet-50-like data-parallel iteration at 1024 ranks
(issue 12's target: under 10 s) and two tenants sharing a fabric, each timed
through plan_run against the same workload at 32 ranks.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from controller.routing import forwarding_table
from emulator.mapping import hosts_for_ranks
from emulator.metrics import parse_size
from emulator.model import predict
from emulator.plan import plan_run
from emulator.schedule import build_schedule
from emulator.spec import RunSpec
from emulator.topology import build

# name, (large case), (baseline case): topology, collective, algorithm, mapping, policy
CASES = [
    ("BiGraph HDRM allreduce",
     ("bigraph:m=64,n=64", "allreduce", "halving-doubling", "hdrm", "shortest"),
     ("bigraph:m=4,n=8", "allreduce", "halving-doubling", "hdrm", "shortest")),
    ("fat-tree stride permutation",
     ("fattree:k=16", "stride", "ring", "naive", "shortest"),
     ("fattree:k=4", "stride", "ring", "naive", "shortest")),
    ("fat-tree stride permutation, ECMP",
     ("fattree:k=16", "stride", "ring", "naive", "ecmp"),
     ("fattree:k=4", "stride", "ring", "naive", "ecmp")),
]
QUICK = 2
TARGET_S = 5.0
# name, large (topology, ranks per job), baseline, jobs, the job table, in --quick too;
# TARGET_JOBS_S for the large case. The ring case is issue 15's: every rank's
# 2(p-1) steps per bucket drift apart, so the exact simulation has an event per
# rank and step.
JOB_CASES = [
    ("data-parallel, halving-doubling", ("bigraph:m=16,n=64", 1024), ("bigraph:m=4,n=8", 32), 1,
     'template = "data-parallel"\nplacement = "hdrm"\nparams = {algorithm = "halving-doubling"}\n', True),
    ("two tenants, ring allreduces", ("bigraph:m=16,n=64", 512), ("bigraph:m=4,n=8", 16), 2,
     'placement = "round-robin"\nops = [{op = "compute", ms = 50}, {op = "allreduce", bytes = "64M"}]\n', True),
    ("data-parallel ResNet-50-like, ring", ("bigraph:m=16,n=64", 1024), ("bigraph:m=4,n=8", 32), 1,
     'template = "data-parallel"\nplacement = "naive"\n', False),
]
TARGET_JOBS_S = 10.0
PHASES = ("fabric", "routes", "mapping", "schedule", "predict")


def phases(case, size: int) -> tuple[dict[str, float], int, float]:
    """Seconds of every phase, the rank count and the predicted time."""
    topology, collective, algorithm, mapping, policy = case
    t = {}
    t0 = time.perf_counter()
    fabric = build(topology)
    t1 = time.perf_counter()
    table = forwarding_table(fabric, policy)
    t2 = time.perf_counter()
    hosts = hosts_for_ranks(fabric, mapping)
    t3 = time.perf_counter()
    sched = build_schedule(collective, algorithm, len(hosts), size)
    t4 = time.perf_counter()
    pred = predict(fabric, table, sched, hosts, 5e-4)
    t5 = time.perf_counter()
    t.update(fabric=t1 - t0, routes=t2 - t1, mapping=t3 - t2, schedule=t4 - t3, predict=t5 - t4)
    return t, len(hosts), pred.time_s


def plan_seconds(case, size: int) -> float:
    topology, collective, algorithm, mapping, policy = case
    spec = RunSpec(topology=topology, collective=collective, algorithm=algorithm, mapping=mapping,
                   policy=policy, sizes=(size,), repetitions=1, warmup=0)
    t0 = time.perf_counter()
    plan_run(spec)
    return time.perf_counter() - t0


def median_phases(case, size: int, repeat: int):
    runs = [phases(case, size) for _ in range(repeat)]
    med = {k: statistics.median(r[0][k] for r in runs) for k in PHASES}
    plan = statistics.median(plan_seconds(case, size) for _ in range(repeat))
    return med, runs[0][1], runs[0][2], plan


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"only the first {QUICK} cases, one repetition")
    p.add_argument("--repeat", type=int, default=3, help="median of this many runs (default 3)")
    p.add_argument("--size", default="64M", help="bytes per rank (default 64M)")
    args = p.parse_args()
    size = parse_size(args.size)
    repeat = 1 if args.quick else max(1, args.repeat)
    print(f"# flow model speed, median of {repeat}; phases in seconds; 'x base' = large case / baseline case")
    print(f"{'case':34} {'topology':18} {'policy':8} {'hosts':>5} "
          + " ".join(f"{k:>8}" for k in PHASES) + f" {'sum':>7} {'plan_run':>8} {'x base':>7} {'predicted':>9}")
    summary = []
    for name, large, base in CASES[:QUICK] if args.quick else CASES:
        rows = []
        for case in (base, large):
            med, hosts, predicted, plan = median_phases(case, size, repeat)
            total = sum(med.values())
            rows.append((case, med, hosts, predicted, plan, total))
        base_plan = rows[0][4]
        for (case, med, hosts, predicted, plan, total), label in zip(rows, ("baseline", name)):
            print(f"{label:34} {case[0]:18} {case[4]:8} {hosts:5d} "
                  + " ".join(f"{med[k]:8.3f}" for k in PHASES)
                  + f" {total:7.3f} {plan:8.3f} {plan / base_plan:7.1f} {predicted:8.2f}s")
        summary.append((name, rows[1][2], rows[1][4]))
    print()
    for name, hosts, plan in summary:
        verdict = "meets" if plan < TARGET_S else "misses"
        print(f"# {name}, {hosts} hosts: {plan:.2f} s end to end ({verdict} the {TARGET_S:g} s target)")
    jobs(repeat, args.quick)


def workload_seconds(topology: str, ranks: int, count: int, job: str, repeat: int) -> tuple[float, float]:
    """Median plan_run seconds of `count` jobs of `ranks` ranks, and the predicted time."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write("".join(f'[[job]]\nname = "j{i}"\nranks = {ranks}\n{job}' for i in range(count)))
    try:
        spec = RunSpec(topology=topology, workload=f.name, repetitions=1, warmup=0)
        times, plan = [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            plan = plan_run(spec)
            times.append(time.perf_counter() - t0)
        return statistics.median(times), plan.predictions[0].time_s
    finally:
        os.unlink(f.name)


def jobs(repeat: int, quick: bool) -> None:
    print("\n# jobs: plan_run seconds (compile, routes, the model of all jobs and of each alone)")
    print(f"{'case':34} {'topology':18} {'ranks':>6} {'plan_run':>8} {'x base':>7} {'predicted':>9}")
    for name, (topology, ranks), (base_topology, base_ranks), count, job, in_quick in JOB_CASES:
        if quick and not in_quick:
            continue
        base, base_pred = workload_seconds(base_topology, base_ranks, count, job, repeat)
        large, pred = workload_seconds(topology, ranks, count, job, repeat)
        print(f"{'baseline':34} {base_topology:18} {base_ranks * count:6d} {base:8.3f} {1.0:7.1f} {base_pred:8.2f}s")
        print(f"{name:34} {topology:18} {ranks * count:6d} {large:8.3f} {large / base:7.1f} {pred:8.2f}s")
        verdict = "meets" if large < TARGET_JOBS_S else "misses"
        print(f"# {name}, {ranks * count} ranks: {large:.2f} s ({verdict} the {TARGET_JOBS_S:g} s target)")


if __name__ == "__main__":
    main()
