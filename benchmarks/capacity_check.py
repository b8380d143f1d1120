"""Does the pre-run capacity check foresee the fidelity verdict? A corpus
of runs (8-64 hosts; ring, halving-doubling, all-to-all and a two-job
workload; 5-700 Mbit/s; within and beyond the budget), each emulated with `bigraph-emu run`: per run,
the check's answer (capacity.json: the load asked against the faithful
load, and whether it fits) beside the calls that kept their verdict
(collectives.csv, or jobs.csv for a workload). Needs root; one run at a
time (the CLI waits for nobody: start it on an idle machine).

    .venv/bin/python benchmarks/capacity_check.py [--quick | --many-ports] [--out FOLDER]
    .venv/bin/python benchmarks/capacity_check.py --judge FOLDER   # today's check on runs kept by --out

Prints one row per run (as it ends, with the verdict of every call that
failed) and, at the end, how often calls passed where the check said
"fits" and where it said "does not" (with the rate it named).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import statistics
import tempfile

import benchlib
from emulator.results.verdict import trusted

HD = ["-a", "halving-doubling", "-m", "hdrm"]
HD_NAIVE = ["-a", "halving-doubling", "-m", "naive"]   # HDRM is BiGraph's (and even leaf-spines')
RING = ["-a", "ring", "-m", "naive"]
ALL_TO_ALL = ["-c", "all-to-all", "-m", "naive"]
TWO_JOBS = ["--workload", os.path.join(benchlib.REPO, "experiments", "workloads", "tenants.toml")]
# (topology, what runs, size, link rates in Mbit/s)
CASES = [
    ("bigraph:m=2,n=4", RING, "4M", [50, 300]),
    ("bigraph:m=2,n=4", HD, "4M", [100, 300]),
    ("bigraph:m=2,n=4", ALL_TO_ALL, "1M", [50, 200]),
    ("bigraph:m=4,n=4", HD, "4M", [50, 100]),
    ("bigraph:m=4,n=4", RING, "4M", [50, 100]),
    ("bigraph:m=4,n=4", ALL_TO_ALL, "1M", [20, 50]),
    ("fattree:k=4", RING, "2M", [20, 50]),
    ("fattree:k=4", HD_NAIVE, "2M", [20, 50]),
    ("fattree:k=4", TWO_JOBS, "", [20, 50]),
    ("bigraph:m=4,n=8", HD, "1M", [10, 20, 30]),
    ("bigraph:m=4,n=8", HD, "4M", [40, 50]),
    ("bigraph:m=4,n=8", RING, "2M", [20, 50]),
    ("bigraph:m=4,n=8", ALL_TO_ALL, "1M", [10, 20]),
    ("bigraph:m=8,n=8", HD, "512K", [5, 10]),
    ("bigraph:m=8,n=8", RING, "512K", [5, 10]),
    # beyond the budget, and other shapes: message sizes, more agents, more flows per link
    ("bigraph:m=2,n=4", HD, "4M", [500, 700]),
    ("bigraph:m=4,n=4", HD, "4M", [200, 300]),
    ("bigraph:m=4,n=4", HD, "256K", [50]),
    ("fattree:k=4", RING, "2M", [100]),
    ("bigraph:m=4,n=8", HD, "4M", [70, 100]),
    ("bigraph:m=4,n=8", HD, "256K", [20, 50]),
    ("bigraph:m=4,n=8", HD_NAIVE, "4M", [30]),
    ("bigraph:m=8,n=8", HD, "4M", [10, 20, 30]),
    ("bigraph:m=8,n=8", RING, "2M", [10, 20]),
    ("bigraph:m=8,n=8", ALL_TO_ALL, "256K", [5]),
]
QUICK = [CASES[0], CASES[9]]
# 16-64 hosts beyond the faithful load scaled in proportion to the ports and within the one a fast machine
# measured at many ports (11,252 link-Mbit/s at 16 ports, 3,516 at 80: e = 0.72, which the check does not
# take below 1), and one beyond both
MANY_PORTS = [
    ("bigraph:m=4,n=8", HD, "4M", [50, 70]),
    ("bigraph:m=4,n=8", RING, "2M", [80]),
    ("bigraph:m=8,n=8", HD, "4M", [40]),
    ("bigraph:m=8,n=8", RING, "2M", [30]),
    ("fattree:k=4", HD_NAIVE, "2M", [100]),
    ("fattree:k=4", TWO_JOBS, "", [60]),
]
AUTO = "-auto"   # the folder of a run again at `--bw auto`, after the check refused its rate


def run_case(topology: str, what: list[str], size: str, rate: float | str, out: str, reps: int) -> dict:
    sizes = ["-b", size, "-e", size] if size else []
    argv = [os.path.join(benchlib.REPO, ".venv", "bin", "bigraph-emu"), "run", "-t", topology, *what, *sizes,
            "--bw", str(rate), "-n", str(reps), "-w", "1", "--out", out]
    benchlib.wait_for_lock()
    done = subprocess.run(argv, capture_output=True, text=True)
    if not os.path.exists(os.path.join(out, "spec.json")):
        return {"topology": topology, "what": " ".join(w for w in what if not w.startswith("-")), "size": size,
                "rate": rate, "error": (done.stderr.strip().splitlines() or ["no spec.json"])[-1]}
    return judged(out)


def judged(out: str, again: bool = False) -> dict:
    """A run's row from its results folder: what ran, the check's answer
    (capacity.json as the run wrote it, or with `again` the current
    check's for the same spec) and the calls that kept their verdict."""
    with open(os.path.join(out, "spec.json")) as f:
        doc = json.load(f)
    values = doc["runs"][0]
    if values["workload"] in doc.get("workload_copies", {}):   # the copy the run kept, not today's file
        values = {**values, "workload": os.path.join(out, doc["workload_copies"][values["workload"]])}
    workload = os.path.basename(values["workload"])
    row = {"topology": values["topology"], "size": _size(values["sizes"]) if not workload else "-",
           "what": workload or (f"{values['algorithm']} {values['mapping']}" if values["collective"] == "allreduce"
                                else f"{values['collective']} {values['mapping']}"),
           "rate": values["host_rate_mbps"], "auto": os.path.basename(out).endswith(AUTO)}
    try:
        check = _check_again(out, values) if again else _check_written(out)
    except (OSError, ValueError, IndexError, KeyError) as e:
        return {**row, "error": f"no check: {e}"}
    calls = _calls(out)
    verdicts = [c["fidelity"] for c in calls]
    row.update(asked=check["peak_link_mbps"], faithful=check["faithful_link_mbps"], fits=check["fits"],
               passed=sum(map(trusted, verdicts)), calls=len(verdicts), would_fit=_would_fit(row["rate"], check),
               failed=[v for v in verdicts if not trusted(v)],
               ovs_cpu=_median(calls, "ovs_cpu"), cpu_busy=_median(calls, "cpu_busy"))
    return row


def _check_written(out: str) -> dict:
    with open(os.path.join(out, "capacity.json")) as f:
        return json.load(f)[0]


def _check_again(out: str, values: dict) -> dict:
    from emulator import preflight
    from emulator.spec.experiment import make_run
    return preflight.capacity_checks([preflight.plan_emulated(make_run(values))])[0].to_dict()


def _size(sizes: list[int]) -> str:
    size = sizes[0]
    return f"{size >> 20}M" if size % (1 << 20) == 0 else f"{size >> 10}K"


def _calls(out: str) -> list[dict]:
    for name in ("collectives.csv", "jobs.csv"):
        path = os.path.join(out, name)
        if os.path.exists(path):
            with open(path) as f:
                rows = [r for r in csv.DictReader(f) if r.get("fidelity")]
            if rows:
                return rows
    return []


def _median(calls: list[dict], column: str) -> float | None:
    values = [float(c[column]) for c in calls if c.get(column)]
    return statistics.median(values) if values else None


def _would_fit(rate: float, check: dict) -> float | None:
    """The link rate at which the check would say the run fits."""
    if not check["faithful_link_mbps"] or not check["peak_link_mbps"]:
        return None
    return round(rate * check["faithful_link_mbps"] / check["peak_link_mbps"], 1)


def report(rows: list[dict]) -> None:
    print()
    print(f"{'topology':18} {'runs':24} {'size':>5} {'Mbit/s':>6} | {'asked':>6} {'faithful':>8} {'check':>6} "
          f"{'fits at':>7} | {'calls ok':>8} {'ovs':>4} {'busy':>4} | agrees")
    for r in rows:
        if "error" in r:
            print(f"{r['topology']:18} {r['what']:24} {r['size']:>5} {r['rate']:6g} | ERROR: {r['error']}")
            continue
        ok = r["passed"] == r["calls"]
        agrees = "yes" if r["fits"] == ok else ("no" if r["fits"] is not None else "-")
        rate = f"a{r['rate']:g}" if r.get("auto") else f"{r['rate']:g}"
        print(f"{r['topology']:18} {r['what']:24} {r['size']:>5} {rate:>6} | {r['asked']:6.0f} "
              f"{r['faithful'] or 0:8.0f} {'fits' if r['fits'] else 'no':>6} {r['would_fit'] or '-':>7} | "
              f"{r['passed']:>3}/{r['calls']:<4} {_share(r['ovs_cpu'])} {_share(r['cpu_busy'])} | {agrees}")
    done = [r for r in rows if "error" not in r and r["fits"] is not None]
    for group, said in (([r for r in done if r["fits"] and not r.get("auto")], "said 'fits'"),
                        ([r for r in done if r["fits"] is False], "said 'does not fit'"),
                        ([r for r in done if r.get("auto")], "named a rate (--bw auto, aim 80% of the budget)")):
        calls = sum(r["calls"] for r in group)
        passed = sum(r["passed"] for r in group)
        print(f"# the check {said} for {len(group)} runs: {passed} of {calls} calls kept their verdict"
              + (f" ({passed / calls:.0%})" if calls else ""))
    print("# (a rate 'aN': the run again at --bw auto, which picked N Mbit/s)")


def _said(r: dict) -> None:
    print(f"# {r['topology']} {r['what']} {r['size']} at {r['rate']:g} Mbit/s{' (--bw auto)' if r.get('auto') else ''}: "
          + (r["error"] if "error" in r else
             f"asks {r['asked']:.0f} of {r['faithful'] or 0:.0f}, {r['passed']}/{r['calls']} calls ok"), flush=True)
    for verdict in r.get("failed", []):   # why: the machine's reasons or the model's
        print(f"#   {verdict}", flush=True)


def _share(value: float | None) -> str:
    return "   -" if value is None else f"{value:4.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="two runs only")
    p.add_argument("--many-ports", action="store_true",
                   help="only runs of 16-64 hosts near the budget's scaling by switch ports")
    p.add_argument("--reps", type=int, default=3, help="counted calls per run (default 3)")
    p.add_argument("--out", help="keep every run's folder under this one (default: a temporary folder)")
    p.add_argument("--judge", metavar="FOLDER",
                   help="emulate nothing: judge the runs kept in FOLDER (an earlier --out) by today's check")
    args = p.parse_args()
    if args.judge:
        rows = [judged(os.path.join(args.judge, name), again=True) for name in sorted(os.listdir(args.judge))
                if os.path.exists(os.path.join(args.judge, name, "spec.json"))]
        report(rows)
        return
    if os.geteuid() != 0:
        raise SystemExit("capacity_check.py needs root (it emulates)")
    base = args.out or tempfile.mkdtemp(prefix="bigraph-capacity-")
    rows = []
    try:
        for topology, what, size, rates in (QUICK if args.quick else MANY_PORTS if args.many_ports else CASES):
            for rate in rates:
                out = os.path.join(base, f"{len(rows):02d}-{topology.replace(':', '-')}-{rate:g}")
                rows.append(run_case(topology, what, size, rate, out, args.reps))
                _said(rows[-1])
                if rows[-1].get("fits") is False:   # the rate the check names instead: does it pass?
                    rows.append(run_case(topology, what, size, "auto", out + AUTO, args.reps))
                    _said(rows[-1])
                benchlib.check_clean(f"{topology} at {rate:g}")
    finally:
        if not args.out:
            shutil.rmtree(base, ignore_errors=True)
    report(rows)
    if args.out:
        with open(os.path.join(base, "corpus.json"), "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
