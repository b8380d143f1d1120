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

Issue 15 (--issue15; --large adds 131,072 hosts, --every-policy every
routing policy): before and after, the issue's 1024-rank cases through the
reference copy of the model (tests/unit/reference_model.py, main at
5049187) against today's exact simulation and its lock-step default; the
lock-step error against the exact simulation where both run; then ring and
halving-doubling allreduce on BiGraph, fat-tree and leaf-spine at ~16,384
hosts for every mapping, each through `model_sweep` (what `bigraph-emu
model` does) in a child process of its own for its peak memory, against
the same case at ~1024 hosts; all-to-all at 4096 ranks. Children run one
at a time.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)   # measure the checkout this script sits in, not an installed copy

from controller.routing import forwarding_table  # noqa: E402
from emulator.mapping import hosts_for_ranks  # noqa: E402
from emulator.metrics import parse_size  # noqa: E402
from emulator.model import predict  # noqa: E402
from emulator.plan import plan_run  # noqa: E402
from emulator.schedule import build_schedule  # noqa: E402
from emulator.spec import RunSpec  # noqa: E402
from emulator.topology import build  # noqa: E402

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
    ("data-parallel, halving-doubling", ("bigraph:m=64,n=64", 4096), ("bigraph:m=4,n=8", 32), 1,   # issue 15's
     'template = "data-parallel"\nplacement = "hdrm"\nparams = {algorithm = "halving-doubling"}\n', False),
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
    p.add_argument("--issue15", action="store_true", help="only issue 15's figures (see above)")
    p.add_argument("--large", action="store_true", help="with --issue15: also 131,072 hosts")
    p.add_argument("--every-policy", action="store_true", help="with --issue15: every routing policy")
    p.add_argument("--one", nargs=5, metavar=("TOPOLOGY", "COLLECTIVE", "ALGORITHM", "MAPPING", "POLICY"),
                   help=argparse.SUPPRESS)   # a child: one model_sweep, its figures as JSON
    args = p.parse_args()
    size = parse_size(args.size)
    if args.one:
        print(json.dumps(one_sweep(*args.one, size)))
        return
    if args.issue15:
        issue15(size, args.quick, args.large, args.every_policy)
        return
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


# --- issue 15 ---------------------------------------------------------------------

TARGETS_S = {16_384: 5.0, 131_072: 60.0}
MEMORY_GIB = 8.0
A2A_TARGET_S = 30.0
# family, ~1024-host baseline, ~16k, ~131k, its policy in the scale plot
FABRICS = [
    ("BiGraph", "bigraph:m=16,n=64", "bigraph:m=128,n=128", "bigraph:m=256,n=512", "shortest"),
    ("fat-tree", "fattree:k=16", "fattree:k=40", "fattree:k=64", "ecmp"),
    ("leaf-spine", "leafspine:leaves=16,spines=8,hosts=64", "leafspine:leaves=128,spines=64,hosts=128",
     "leafspine:leaves=1024,spines=64,hosts=128", "ecmp"),
]
# the issue's 1024-rank table, run by the reference model and by today's
BEFORE_AFTER = [
    ("bigraph:m=16,n=64", "ring", "naive", "shortest"),
    ("fattree:k=16", "ring", "naive", "spread"),
    ("bigraph:m=16,n=64", "halving-doubling", "hdrm", "shortest"),
    ("bigraph:m=8,n=32", "ring", "random", "shortest"),   # 256 ranks: the reference takes minutes at 1024
]
# where lock-step and the exact simulation both run: lock-step's error
LOCKSTEP_ERROR = [   # exact rings with ranks drifting apart take minutes past 256 ranks
    ("bigraph:m=8,n=32", "ring", "random", "shortest"),
    ("bigraph:m=16,n=64", "halving-doubling", "random", "ecmp"),
    ("bigraph:m=16,n=64", "halving-doubling", "naive", "shortest"),
    ("fattree:k=8", "ring", "random", "ecmp"),
    ("fattree:k=16", "halving-doubling", "random", "ecmp"),
    ("leafspine:leaves=16,spines=8,hosts=64", "halving-doubling", "random", "ecmp"),
]


def one_sweep(topology, collective, algorithm, mapping, policy, size: int, method: str = "auto") -> dict:
    from emulator.plan import model_sweep
    spec = RunSpec(topology=topology, collective=collective, algorithm=algorithm, mapping=mapping, policy=policy,
                   sizes=(size,), repetitions=1, warmup=0)
    t0 = time.perf_counter()
    hosts, predictions = model_sweep(spec, method)
    seconds = time.perf_counter() - t0
    pred = predictions[size]
    return {"seconds": seconds, "hosts": len(hosts), "predicted_s": pred.time_s,
            "approximated": bool(pred.approximation),
            "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20}


def child(case, size: int) -> dict:
    """one_sweep in a fresh process (its own peak memory); an error as {"error": ...}."""
    run = subprocess.run([sys.executable, __file__, "--one", *case, "--size", str(size)],
                         capture_output=True, text=True)
    if run.returncode:
        return {"error": (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1]}
    return json.loads(run.stdout)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def placed(topology: str, policy: str, mapping: str):
    """A case's fabric, routes and rank hosts."""
    fabric = build(topology)
    return fabric, forwarding_table(fabric, policy), hosts_for_ranks(fabric, mapping)


def before_after(size: int) -> None:
    """The reference model (5049187) against today's, exact and default."""
    sys.path.insert(0, os.path.join(REPO, "tests", "unit"))
    import reference_model
    from emulator.model import predict_collective
    print("\n# before/after: reference = main at 5049187 (object schedule built, then predicted); "
          "'x faster' = reference / today")
    print(f"{'topology':18} {'algorithm':17} {'mapping':7} {'policy':8} {'ranks':>5} {'reference':>9} "
          f"{'exact':>7} {'x':>6} {'auto':>7} {'x':>6}  rel. difference exact, auto")
    for topology, algorithm, mapping, policy in BEFORE_AFTER:
        fabric, table, hosts = placed(topology, policy, mapping)
        ref_s, ref = timed(lambda: reference_model.predict(
            fabric, table, build_schedule("allreduce", algorithm, len(hosts), size), hosts, 5e-4))
        runs = [timed(lambda m=m: predict_collective(fabric, table, "allreduce", algorithm, hosts, size, 5e-4,
                                                     method=m)) for m in ("exact", "auto")]
        (ex_s, ex), (au_s, au) = runs
        print(f"{topology:18} {algorithm:17} {mapping:7} {policy:8} {len(hosts):5d} {ref_s:8.2f}s {ex_s:6.2f}s "
              f"{ref_s / ex_s:6.1f} {au_s:6.2f}s {ref_s / au_s:6.1f}  "
              f"{ex.time_s / ref.time_s - 1:+.1e}, {au.time_s / ref.time_s - 1:+.1e}")


def lockstep_error(size: int) -> None:
    from emulator.model import predict_collective
    print("\n# lock-step against the exact simulation (same routes, alpha 0.5 ms)")
    print(f"{'topology':38} {'algorithm':17} {'mapping':7} {'policy':8} {'exact':>7} {'lockstep':>8} "
          f"{'exact(s)':>9} {'lock(s)':>8} {'error':>9}")
    for topology, algorithm, mapping, policy in LOCKSTEP_ERROR:
        fabric, table, hosts = placed(topology, policy, mapping)
        (ex_s, ex), (lk_s, lk) = (timed(lambda m=m: predict_collective(
            fabric, table, "allreduce", algorithm, hosts, size, 5e-4, method=m)) for m in ("exact", "lockstep"))
        print(f"{topology:38} {algorithm:17} {mapping:7} {policy:8} {ex.time_s:6.2f}s {lk.time_s:7.2f}s "
              f"{ex_s:8.2f}s {lk_s:7.2f}s {lk.time_s / ex.time_s - 1:+9.1e}")


def policies_of(topology: str, plot_policy: str, every: bool) -> list[str]:
    from controller.routing import POLICIES
    if not every:
        return [plot_policy]
    kind = topology.split(":")[0]
    return [name for name, p in POLICIES.items() if p.fabric_kind in (None, kind)]


def scale_row(label: str, case, got: dict, base: dict | None, target_s: float | None) -> None:
    if "error" in got:
        print(f"{label:10} {' '.join(case[2:]):38} {case[0]:42} error: {got['error']}")
        return
    ratio = f"{got['seconds'] / base['seconds']:7.1f}" if base and "error" not in base else f"{'-':>7}"
    verdict = ""
    if target_s:
        ok = got["seconds"] < target_s and got["peak_gib"] < MEMORY_GIB
        verdict = f"{'meets' if ok else 'misses'} {target_s:g} s / {MEMORY_GIB:g} GiB"
    print(f"{label:10} {' '.join(case[2:]):38} {case[0]:42} {got['hosts']:6d} {got['seconds']:8.2f} {ratio} "
          f"{got['peak_gib']:6.2f} {got['predicted_s']:10.2f}s {'lock-step' if got['approximated'] else 'exact':9} "
          f"{verdict}")


def scale(size: int, quick: bool, large: bool, every_policy: bool) -> None:
    print("\n# ring and halving-doubling allreduce through model_sweep, one child process each; "
          "'x base' = this case / the same case at ~1024 hosts")
    print(f"{'fabric':10} {'algorithm mapping policy':38} {'topology':42} {'hosts':>6} {'seconds':>8} {'x base':>7} "
          f"{'GiB':>6} {'predicted':>11} {'method':9} target")
    for family, base_topology, mid, big, plot_policy in FABRICS:
        for algorithm in ("ring", "halving-doubling"):
            for mapping in ("naive", "hdrm", "random"):
                if mapping == "hdrm" and family == "fat-tree":
                    continue   # hdrm is defined for BiGraph and leaf-spine
                for policy in policies_of(mid, plot_policy, every_policy):
                    base = child((base_topology, "allreduce", algorithm, mapping, policy), size)
                    scale_row(family, (base_topology, "allreduce", algorithm, mapping, policy), base, None, None)
                    for topology in [mid] + ([big] if large else []):
                        case = (topology, "allreduce", algorithm, mapping, policy)
                        got = child(case, size)
                        target = TARGETS_S[16_384 if topology == mid else 131_072]
                        scale_row(family, case, got, base, target)
                    if quick:
                        break
    # all-to-all is one step of p(p-1) flows, simulated exactly: 4096 ranks (--large) held 7.8 GB
    # after 189 s when stopped, at the edge of what the shared machine allows
    for topology in ("fattree:k=16",) + (("bigraph:m=64,n=64",) if large else ()):
        got = child((topology, "all-to-all", "ring", "naive", "ecmp"), size)
        scale_row("all-to-all", (topology, "all-to-all", "ring", "naive", "ecmp"), got, None,
                  A2A_TARGET_S if got.get("hosts") == 4096 else None)


def issue15(size: int, quick: bool, large: bool, every_policy: bool) -> None:
    print(f"# issue 15: flow model at scale, {size} bytes per rank")
    if not quick:
        before_after(size)
        lockstep_error(size)
    scale(size, quick, large, every_policy)


if __name__ == "__main__":
    main()
