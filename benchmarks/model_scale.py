"""How long the flow model takes for the fabrics one machine cannot emulate:
a 4096-host BiGraph halving-doubling allreduce with the HDRM rank mapping
and a 1024-host fat-tree permutation (Hedera's stride(p/2)). Pure, no root.

Every phase is timed on its own (fabric, routes, rank mapping, schedule,
prediction), then `plan_run` end to end (what `bigraph-emu model` does,
with the header-overhead efficiency), each the median of --repeat runs.
The baseline is the same case at the size we emulate, measured in the same
run (`x base` is the large case's time over it).

    .venv/bin/python benchmarks/model_scale.py [--quick] [--repeat N] [--size 64M]

Target: the model under 5 s for 4096 hosts. Then jobs
(emulator.workloads.workload, --jobs alone; --baseline: only their baseline cases): a
ResNet-50-like data-parallel iteration at 1024 and 4096 ranks (target:
under 10 s) and two tenants sharing a fabric, each timed through
plan.model_workload (what `bigraph-emu model` does: lock-step where the
jobs allow it, else plan_run) against the same workload at 32 ranks.

The quick table (--quick-table; --large adds 131,072 hosts, --every-policy every
routing policy): before and after, the 1024-rank cases through the
reference copy of the model (tests/unit/reference_model.py, main at
5049187) against today's exact simulation and its lock-step default; the
lock-step error against the exact simulation where both run; then ring and
halving-doubling allreduce on BiGraph, fat-tree and leaf-spine at ~16,384
hosts for every mapping, each through `model_sweep` (what `bigraph-emu
model` does) in a child process of its own for its peak memory, against
the same case at ~1024 hosts; all-to-all at 4096 ranks. Children run one
at a time.

Side by side with SimAI (--simai PATH, PATH a SimAI_analytical binary,
built outside this project): a 64 MiB ring and halving-doubling allreduce
over 1,024 and 16,384 ranks on 100 Gbit/s links, each given to both. SimAI's
analytical backend has no switch topology: it takes a NIC busbw and assumes
the network never congests. What both can express is a non-blocking fabric
with one rank per NIC, here a BiGraph with m <= n/2 (every switch has as
much bandwidth across as down); our model at alpha 0 (SimAI adds no
latency to messages of 1 MiB or more) and SimAI given the payload rate our
model gives a link (the wire rate times MTU 9000's header efficiency) as
its NIC busbw. Then the same fabric with the naive rank mapping under
halving-doubling, which congests: a placement SimAI takes no input for.
Both wall-clock times are of a whole process (SimAI's binary, our
`--one` child), with our model_sweep's own time beside.

The scale plot (--scale-plot DIR): halving-doubling and ring allreduce
through model_sweep, one child process per case, from 8 to 131,072 hosts on
BiGraph with HDRM (ring: naive), fat-tree with ECMP and leaf-spine with
ECMP (both naive), non-blocking shapes of switch radix R: BiGraph n=R,
m=R/2 and leaf-spine of R leaves, R/2 spines and R/2 hosts a leaf (R*R/2
hosts each, R = 4..512), fat-trees k = 4..80 (k^3/4 hosts). 100 Gbit/s
links and 5 us per message (a real cluster's, not the emulator's
defaults). It writes model-scale.csv after every case and draws
model-scale.png (busbw, predicted time and the model's own seconds
against hosts); --resume keeps the cases a CSV in DIR holds, so a stopped
sweep goes on where it stopped; a case over --case-timeout seconds is
stopped and recorded as such.
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

from emulator.routes.routing import forwarding_table  # noqa: E402
from emulator.fabric.mapping import hosts_for_ranks  # noqa: E402
from emulator.inputs import parse_size  # noqa: E402
from emulator.model.simulation import predict  # noqa: E402
from emulator.plan.run_plan import model_workload, plan_run  # noqa: E402
from emulator.workloads.schedule import build_schedule  # noqa: E402
from emulator.spec.experiment import RunSpec  # noqa: E402
from emulator.fabric.topology import build  # noqa: E402

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
# TARGET_JOBS_S for the large case. The ring case is the quick table's: every rank's
# 2(p-1) steps per bucket drift apart, so the exact simulation has an event per
# rank and step.
JOB_CASES = [
    ("data-parallel, halving-doubling", ("bigraph:m=16,n=64", 1024), ("bigraph:m=4,n=8", 32), 1,
     'template = "data-parallel"\nplacement = "hdrm"\nparams = {algorithm = "halving-doubling"}\n', True),
    ("two tenants, ring allreduces", ("bigraph:m=16,n=64", 512), ("bigraph:m=4,n=8", 16), 2,
     'placement = "round-robin"\nops = [{op = "compute", ms = 50}, {op = "allreduce", bytes = "64M"}]\n', True),
    ("data-parallel ResNet-50-like, ring", ("bigraph:m=16,n=64", 1024), ("bigraph:m=4,n=8", 32), 1,
     'template = "data-parallel"\nplacement = "naive"\n', False),
    ("data-parallel, halving-doubling", ("bigraph:m=64,n=64", 4096), ("bigraph:m=4,n=8", 32), 1,   # the quick table's
     'template = "data-parallel"\nplacement = "hdrm"\nparams = {algorithm = "halving-doubling"}\n', False),
    ("data-parallel ResNet-50-like, ring", ("bigraph:m=64,n=64", 4096), ("bigraph:m=4,n=8", 32), 1,   # the quick table's
     'template = "data-parallel"\nplacement = "naive"\n', False),
    # several jobs at 4096 ranks; as rings, 2 x 2047 steps per rank and call would be 16.8 million step objects
    ("two tenants, halving-doubling", ("bigraph:m=64,n=64", 2048), ("bigraph:m=4,n=8", 16), 2,
     'placement = "round-robin"\n'
     'ops = [{op = "compute", ms = 50}, {op = "allreduce", bytes = "64M", algorithm = "halving-doubling"}]\n', False),
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
    p.add_argument("--quick-table", action="store_true", help="only the quick table's figures (see above)")
    p.add_argument("--jobs", action="store_true", help="only the jobs (their table, as after the phases)")
    p.add_argument("--baseline", action="store_true", help="with --jobs: only the jobs' baseline cases")
    p.add_argument("--large", action="store_true", help="with --quick-table: also 131,072 hosts")
    p.add_argument("--every-policy", action="store_true", help="with --quick-table: every routing policy")
    p.add_argument("--simai", metavar="PATH", help="a SimAI_analytical binary: only the side by side (see above)")
    p.add_argument("--scale-plot", metavar="DIR", help="only the scale plot, into DIR (see above)")
    p.add_argument("--resume", action="store_true", help="with --scale-plot: keep the cases DIR's CSV holds")
    p.add_argument("--case-timeout", type=float, default=900.0,
                   help="with --scale-plot: stop a case after this many seconds (default 900)")
    p.add_argument("--one", nargs=5, metavar=("TOPOLOGY", "COLLECTIVE", "ALGORITHM", "MAPPING", "POLICY"),
                   help=argparse.SUPPRESS)   # a child: one model_sweep, its figures as JSON
    p.add_argument("--one-spec", default="{}", help=argparse.SUPPRESS)   # the child's other RunSpec fields, JSON
    args = p.parse_args()
    size = parse_size(args.size)
    if args.one:
        print(json.dumps(one_sweep(*args.one, size, **json.loads(args.one_spec))))
        return
    if args.simai:
        simai_side_by_side(args.simai, size)
        return
    if args.scale_plot:
        scale_plot(args.scale_plot, size, args.resume, args.case_timeout, args.quick)
        return
    if args.quick_table:
        quick_table(size, args.quick, args.large, args.every_policy)
        return
    repeat = 1 if args.quick else max(1, args.repeat)
    if args.jobs:
        jobs(repeat, args.quick, args.baseline)
        return
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


def workload_seconds(topology: str, ranks: int, count: int, job: str, repeat: int) -> tuple[float, float, str]:
    """Median model_workload seconds of `count` jobs of `ranks` ranks, the
    predicted time and how (lock-step, or exact)."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write("".join(f'[[job]]\nname = "j{i}"\nranks = {ranks}\n{job}' for i in range(count)))
    try:
        spec = RunSpec(topology=topology, workload=f.name, repetitions=1, warmup=0)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            _, rows, approximation, _ = model_workload(spec)
            times.append(time.perf_counter() - t0)
        return statistics.median(times), max(r["end_s"] for r in rows), "lock-step" if approximation else "exact"
    finally:
        os.unlink(f.name)


def jobs(repeat: int, quick: bool, baseline_only: bool = False) -> None:
    print("\n# jobs: model_workload seconds (as `bigraph-emu model`: lock-step where the jobs allow it, else "
          "plan_run: compile, routes, the model of all jobs and of each alone)")
    print(f"{'case':34} {'topology':18} {'ranks':>6} {'model':>8} {'x base':>7} {'predicted':>9} method")
    for name, (topology, ranks), (base_topology, base_ranks), count, job, in_quick in JOB_CASES:
        if quick and not in_quick:
            continue
        base, base_pred, how = workload_seconds(base_topology, base_ranks, count, job, repeat)
        print(f"{'baseline':34} {base_topology:18} {base_ranks * count:6d} {base:8.3f} {1.0:7.1f} {base_pred:8.2f}s {how}")
        if baseline_only:
            continue
        large, pred, how = workload_seconds(topology, ranks, count, job, repeat)
        print(f"{name:34} {topology:18} {ranks * count:6d} {large:8.3f} {large / base:7.1f} {pred:8.2f}s {how}")
        verdict = "meets" if large < TARGET_JOBS_S else "misses"
        print(f"# {name}, {ranks * count} ranks: {large:.2f} s ({verdict} the {TARGET_JOBS_S:g} s target)")


# --- the quick table ---------------------------------------------------------------------

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
# the 1024-rank table, run by the reference model and by today's
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


def one_sweep(topology, collective, algorithm, mapping, policy, size: int, method: str = "auto", **spec_fields) -> dict:
    from emulator.plan.run_plan import model_sweep
    spec = RunSpec(topology=topology, collective=collective, algorithm=algorithm, mapping=mapping, policy=policy,
                   sizes=(size,), repetitions=1, warmup=0, **spec_fields)
    t0 = time.perf_counter()
    hosts, predictions = model_sweep(spec, method)
    seconds = time.perf_counter() - t0
    pred = predictions[size]
    return {"seconds": seconds, "hosts": len(hosts), "predicted_s": pred.time_s,
            "approximated": bool(pred.approximation),
            "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20}


def child(case, size: int, timeout: float | None = None, **spec_fields) -> dict:
    """one_sweep in a fresh process (its own peak memory); an error as {"error": ...}.
    "process_s": the child's whole wall-clock time, imports included."""
    t0 = time.perf_counter()
    try:
        run = subprocess.run([sys.executable, __file__, "--one", *case, "--size", str(size),
                              "--one-spec", json.dumps(spec_fields)], capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {timeout:g} s", "timeout": True, "process_s": time.perf_counter() - t0}
    took = time.perf_counter() - t0
    if run.returncode:
        return {"error": (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1]}
    return {**json.loads(run.stdout), "process_s": took}


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
    from emulator.model.simulation import predict_collective
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
    from emulator.model.simulation import predict_collective
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
    from emulator.routes.routing import POLICIES
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


def quick_table(size: int, quick: bool, large: bool, every_policy: bool) -> None:
    print(f"# the quick table: flow model at scale, {size} bytes per rank")
    if not quick:
        before_after(size)
        lockstep_error(size)
    scale(size, quick, large, every_policy)


# --- the scale plot --------------------------------------------------------------------

SCALE_RATE_MBPS = 100_000.0
SCALE_ALPHA_US = 5.0
RADICES = (4, 8, 16, 32, 64, 128, 256, 512)        # BiGraph and leaf-spine: R*R/2 hosts, 8 .. 131,072
FATTREE_K = (4, 8, 16, 24, 32, 40, 48, 64, 80)    # k^3/4 hosts, 16 .. 128,000
QUICK_HOSTS = 2048                                 # --quick: up to this many hosts
# family, topologies, (algorithm, mapping) per line, policy
SCALE_FAMILIES = [
    ("BiGraph", [f"bigraph:m={r // 2},n={r}" for r in RADICES],
     [("halving-doubling", "hdrm"), ("ring", "naive")], "shortest"),
    ("fat-tree", [f"fattree:k={k}" for k in FATTREE_K],
     [("halving-doubling", "naive"), ("ring", "naive")], "ecmp"),
    ("leaf-spine", [f"leafspine:leaves={r},spines={r // 2},hosts={r // 2}" for r in RADICES],
     [("halving-doubling", "naive"), ("ring", "naive")], "ecmp"),
]
SCALE_COLUMNS = ["family", "algorithm", "mapping", "policy", "topology", "hosts", "size_bytes", "rate_mbps",
                 "alpha_us", "predicted_s", "busbw_gbps", "method", "model_s", "process_s", "peak_gib", "status"]


def topology_hosts(topology: str) -> int:
    from emulator.fabric.topology import parse_topology
    kind, params = parse_topology(topology)
    if kind == "bigraph":
        return params["m"] * params["n"]
    if kind == "fattree":
        return params["k"] ** 3 // 4
    return params["leaves"] * params["hosts"]


def scale_plot(out: str, size: int, resume: bool, timeout: float, quick: bool) -> None:
    import csv
    from emulator.records.metrics import busbw_mbps
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model-scale.csv")
    rows = []
    if resume and os.path.exists(path):
        with open(path) as f:
            rows = [r for r in csv.DictReader(f) if r["status"] == "ok" or r["status"].startswith("stopped")]
    have = {(r["family"], r["algorithm"], r["topology"]) for r in rows}
    spec = {"host_rate_mbps": SCALE_RATE_MBPS, "switch_rate_mbps": SCALE_RATE_MBPS, "model_alpha_us": SCALE_ALPHA_US}
    print(f"# scale plot: allreduce of {size} bytes, {SCALE_RATE_MBPS / 1e3:g} Gbit/s links, "
          f"{SCALE_ALPHA_US:g} us per message; one child process per case -> {path}")
    print(f"{'family':10} {'algorithm':17} {'mapping':7} {'topology':42} {'hosts':>6} {'predicted':>10} "
          f"{'busbw':>11} {'model':>8} {'GiB':>6} method")
    for family, topologies, lines, policy in SCALE_FAMILIES:
        for algorithm, mapping in lines:
            for topology in topologies:
                hosts = topology_hosts(topology)
                if (family, algorithm, topology) in have or (quick and hosts > QUICK_HOSTS):
                    continue
                got = child((topology, "allreduce", algorithm, mapping, policy), size, timeout, **spec)
                row = {"family": family, "algorithm": algorithm, "mapping": mapping, "policy": policy,
                       "topology": topology, "hosts": hosts, "size_bytes": size, "rate_mbps": SCALE_RATE_MBPS,
                       "alpha_us": SCALE_ALPHA_US, "process_s": f"{got['process_s']:.3f}"}
                if "error" in got:
                    row.update(status=got["error"])
                    print(f"{family:10} {algorithm:17} {mapping:7} {topology:42} {hosts:6d} {got['error']}")
                else:
                    busbw = busbw_mbps("allreduce", got["hosts"], size, got["predicted_s"]) / 1e3
                    row.update(predicted_s=f"{got['predicted_s']:.9g}", busbw_gbps=f"{busbw:.6g}",
                               method="lock-step" if got["approximated"] else "exact",
                               model_s=f"{got['seconds']:.3f}", peak_gib=f"{got['peak_gib']:.3f}", status="ok")
                    print(f"{family:10} {algorithm:17} {mapping:7} {topology:42} {hosts:6d} "
                          f"{got['predicted_s'] * 1e3:8.2f}ms {busbw:6.2f} Gb/s {got['seconds']:7.2f}s "
                          f"{got['peak_gib']:6.2f} {row['method']}")
                rows.append(row)
                with open(path + ".tmp", "w", newline="") as f:   # after every case: a stop loses one
                    w = csv.DictWriter(f, SCALE_COLUMNS)
                    w.writeheader()
                    w.writerows(rows)
                os.replace(path + ".tmp", path)
    png = os.path.join(out, "model-scale.png")
    draw_scale_plot(rows, png, size)
    print(f"# wrote {path} and {png}")


def draw_scale_plot(rows: list[dict], path: str, size: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    colours = {"BiGraph": "tab:blue", "fat-tree": "tab:orange", "leaf-spine": "tab:green"}
    done = [r for r in rows if r["status"] == "ok"]
    for family, _, lines, policy in SCALE_FAMILIES:
        for algorithm, mapping in lines:
            mine = sorted((r for r in done if r["family"] == family and r["algorithm"] == algorithm),
                          key=lambda r: int(r["hosts"]))
            if not mine:
                continue
            x = [int(r["hosts"]) for r in mine]
            label = f"{family} {'HDRM' if mapping == 'hdrm' else {'ecmp': 'ECMP'}.get(policy, policy)}, {algorithm}"
            style = dict(color=colours[family], ls="-" if algorithm == "halving-doubling" else "--", marker="o", ms=3)
            axes[0].plot(x, [float(r["busbw_gbps"]) for r in mine], label=label, **style)
            axes[1].plot(x, [float(r["predicted_s"]) * 1e3 for r in mine], label=label, **style)
            axes[2].plot(x, [float(r["model_s"]) for r in mine], label=label, **style)
            lock = [(h, float(r["model_s"])) for h, r in zip(x, mine) if r["method"] == "lock-step"]
            if lock:
                axes[2].plot(*zip(*lock), ls="none", marker="s", mfc="none", color=colours[family], ms=7)
    titles = ("predicted busbw (Gbit/s)", "predicted allreduce time (ms)",
              "model's own time (s; squares: lock-step)")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("hosts (one rank each)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].axhline(SCALE_RATE_MBPS / 1e3, color="grey", lw=0.8, ls=":")
    axes[0].set_ylim(bottom=0)
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"flow model, allreduce of {size / 2 ** 20:g} MiB per rank, {SCALE_RATE_MBPS / 1e3:g} Gbit/s links, "
                 f"{SCALE_ALPHA_US:g} us per message (benchmarks/model_scale.py --scale-plot)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- side by side with SimAI's analytical backend ------------------------------------

SIMAI_RATE_MBPS = 100_000.0   # every link (NICs and switch links), both tools
# ranks, a non-blocking BiGraph of that many hosts (m <= n/2)
SIMAI_FABRICS = [(1024, "bigraph:m=16,n=64"), (16_384, "bigraph:m=64,n=256")]
# algorithm, mapping, policy; the last congests (a placement SimAI has no input for)
SIMAI_CASES = [("ring", "naive", "shortest"), ("halving-doubling", "hdrm", "shortest"),
               ("halving-doubling", "naive", "shortest")]


def simai_workload(ranks: int, size: int) -> str:
    """One allreduce of `size` bytes over `ranks` GPUs in SimAI's workload
    format (as its example/microAllReduce.txt: the forward pass of one layer,
    a tensor-parallel group of every GPU)."""
    return (f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: {ranks} ep: 1 pp: 1 vpp: 1 ga: 1 "
            f"all_gpus: {ranks} checkpoints: 0 checkpoint_initiates: 0\n1\n"
            f"allreduce -1 1 ALLREDUCE {size} 1 NONE 0 1 NONE 0 1\n")


def simai_inputs(binary: str) -> str:
    """The astra-sim-alibabacloud folder of the SimAI checkout the binary was
    built in: it reads inputs/ratio/*.csv relative to its working folder."""
    folder = os.path.dirname(os.path.realpath(binary))
    while folder != os.path.dirname(folder):
        here = os.path.join(folder, "astra-sim-alibabacloud")
        if os.path.isdir(os.path.join(here, "inputs", "ratio")):
            return here
        if os.path.basename(folder) == "astra-sim-alibabacloud" and os.path.isdir(os.path.join(folder, "inputs", "ratio")):
            return folder
        folder = os.path.dirname(folder)
    raise SystemExit(f"no astra-sim-alibabacloud/inputs/ratio above {binary}: pass the binary inside its SimAI checkout")


def simai_run(binary: str, ranks: int, size: int, nic_gib_s: float) -> dict:
    """SimAI_analytical on that workload, one GPU and one NIC per server:
    its wall-clock time and the allreduce's time from its EndToEnd CSV
    ("fwd total comm", microseconds)."""
    import csv
    import glob
    with tempfile.TemporaryDirectory(prefix="simai-") as tmp:
        os.mkdir(os.path.join(tmp, "results"))   # the binary writes ./results/<name>EndToEnd.csv
        os.symlink(simai_inputs(binary), os.path.join(tmp, "astra-sim-alibabacloud"))   # and reads ./astra-sim-...
        with open(os.path.join(tmp, "allreduce.txt"), "w") as f:
            f.write(simai_workload(ranks, size))
        cmd = [os.path.abspath(binary), "-w", "allreduce.txt", "-g", str(ranks), "-g_p_s", "1", "-n_p_s", "1",
               "-nic", f"{nic_gib_s:.9g}", "-nv", "1000", "-g_type", "A100", "-r", "bench-"]
        t0 = time.perf_counter()
        run = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        took = time.perf_counter() - t0
        found = glob.glob(os.path.join(tmp, "results", "*EndToEnd.csv"))
        if run.returncode or not found:
            tail = (run.stderr.strip() or run.stdout.strip()).splitlines()[-1:] or [f"exit {run.returncode}"]
            return {"error": f"exit {run.returncode}: {tail[0]}", "process_s": took}
        with open(found[0]) as f:   # a summary line and its header, then the layers' header and rows
            rows = [[cell.strip() for cell in r] for r in csv.reader(f)]
        header = next(r for r in rows if r and r[0] == "layer_name")
        layer = next(r for r in rows if r and r[0] == "allreduce")
        comm_us = float(layer[header.index("fwd total comm")])
        return {"process_s": took, "predicted_s": comm_us * 1e-6, "command": " ".join(cmd[1:])}


def simai_side_by_side(binary: str, size: int) -> None:
    from emulator.records.metrics import payload_efficiency
    from emulator.workloads.schedule import alpha_beta_time
    efficiency = payload_efficiency(RunSpec().mtu)
    nic_gib_s = SIMAI_RATE_MBPS * 1e6 / 8 * efficiency / 2 ** 30   # SimAI's GBps is 2**30 bytes/s
    ours_spec = {"host_rate_mbps": SIMAI_RATE_MBPS, "switch_rate_mbps": SIMAI_RATE_MBPS, "model_alpha_us": 0.0}
    print(f"# side by side with SimAI's analytical backend ({binary}): allreduce of {size} bytes, "
          f"{SIMAI_RATE_MBPS / 1e3:g} Gbit/s links")
    print(f"# ours: bigraph-emu's model_sweep, alpha 0, payload {efficiency:.5f} of the wire rate; SimAI: "
          f"-nic {nic_gib_s:.6g} (GiB/s, the same payload rate), one GPU per server, busbw model")
    print("# alpha-beta: the closed form at that payload rate; time ratios are ours / SimAI")
    print(f"{'ranks':>6} {'topology':20} {'algorithm':17} {'mapping':7} {'ours(ms)':>9} {'SimAI(ms)':>9} "
          f"{'a-b(ms)':>8} {'pred x':>7} {'ours wall':>9} {'(model)':>8} {'SimAI wall':>10} {'wall x':>7} "
          f"{'ours GiB':>8}")
    for ranks, topology in SIMAI_FABRICS:
        for algorithm, mapping, policy in SIMAI_CASES:
            ours = child((topology, "allreduce", algorithm, mapping, policy), size, **ours_spec)
            theirs = simai_run(binary, ranks, size, nic_gib_s)
            if "error" in ours or "error" in theirs:
                print(f"{ranks:6d} {topology:20} {algorithm:17} {mapping:7} error: "
                      f"{ours.get('error') or theirs.get('error')}")
                continue
            closed = alpha_beta_time("allreduce", algorithm, ranks, size, SIMAI_RATE_MBPS * efficiency, 0.0)
            print(f"{ranks:6d} {topology:20} {algorithm:17} {mapping:7} {ours['predicted_s'] * 1e3:9.3f} "
                  f"{theirs['predicted_s'] * 1e3:9.3f} {closed * 1e3:8.3f} "
                  f"{ours['predicted_s'] / theirs['predicted_s']:7.4f} {ours['process_s']:8.3f}s "
                  f"{ours['seconds']:7.3f}s {theirs['process_s']:9.4f}s {ours['process_s'] / theirs['process_s']:7.1f} "
                  f"{ours['peak_gib']:8.2f}{'  (lock-step)' if ours['approximated'] else ''}")
    print(f"# SimAI's command, in a scratch folder holding the workload: {theirs.get('command', '-')}")


if __name__ == "__main__":
    main()
