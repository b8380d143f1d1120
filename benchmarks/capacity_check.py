"""Does the pre-run capacity check foresee the fidelity verdict? A corpus
of runs (8-64 hosts; ring, halving-doubling, all-to-all and a two-job
workload; 5-300 Mbit/s), each emulated with `bigraph-emu run`: per run,
the check's answer (capacity.json: the load asked against the faithful
load, and whether it fits) beside the calls that kept their verdict
(collectives.csv, or jobs.csv for a workload). Needs root; one run at a
time (the CLI waits for nobody: start it on an idle machine).

    .venv/bin/python benchmarks/capacity_check.py [--quick] [--out FOLDER]

Prints one row per run and, at the end, how often calls passed where the
check said "fits" and where it said "does not" (with the rate it named).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
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
]
QUICK = [CASES[0], CASES[9]]


def run_case(topology: str, what: list[str], size: str, rate: float, out: str, reps: int) -> dict:
    sizes = ["-b", size, "-e", size] if size else []
    argv = [os.path.join(benchlib.REPO, ".venv", "bin", "bigraph-emu"), "run", "-t", topology, *what, *sizes,
            "--bw", str(rate), "-n", str(reps), "-w", "1", "--out", out]
    benchlib.wait_for_lock()
    done = subprocess.run(argv, capture_output=True, text=True)
    row = {"topology": topology, "what": " ".join(w for w in what if not w.startswith("-"))
           .replace(os.path.join(benchlib.REPO, "experiments", "workloads") + "/", ""),
           "size": size or "-", "rate": rate, "exit": done.returncode}
    try:
        with open(os.path.join(out, "capacity.json")) as f:
            check = json.load(f)[0]
    except (OSError, ValueError, IndexError):
        row["error"] = (done.stderr.strip().splitlines() or ["no capacity.json"])[-1]
        return row
    verdicts = _verdicts(out)
    row.update(asked=check["peak_link_mbps"], faithful=check["faithful_link_mbps"], fits=check["fits"],
               passed=sum(map(trusted, verdicts)), calls=len(verdicts),
               would_fit=_would_fit(rate, check))
    return row


def _verdicts(out: str) -> list[str]:
    for name in ("collectives.csv", "jobs.csv"):
        path = os.path.join(out, name)
        if os.path.exists(path):
            with open(path) as f:
                rows = [r for r in csv.DictReader(f) if r.get("fidelity")]
            if rows:
                return [r["fidelity"] for r in rows]
    return []


def _would_fit(rate: float, check: dict) -> float | None:
    """The link rate at which the check would say the run fits."""
    if not check["faithful_link_mbps"] or not check["peak_link_mbps"]:
        return None
    return round(rate * check["faithful_link_mbps"] / check["peak_link_mbps"], 1)


def report(rows: list[dict]) -> None:
    print()
    print(f"{'topology':18} {'runs':24} {'size':>5} {'Mbit/s':>6} | {'asked':>6} {'faithful':>8} {'check':>6} "
          f"{'fits at':>7} | {'calls ok':>8} | agrees")
    for r in rows:
        if "error" in r:
            print(f"{r['topology']:18} {r['what']:24} {r['size']:>5} {r['rate']:6g} | ERROR: {r['error']}")
            continue
        ok = r["passed"] == r["calls"]
        agrees = "yes" if r["fits"] == ok else ("no" if r["fits"] is not None else "-")
        print(f"{r['topology']:18} {r['what']:24} {r['size']:>5} {r['rate']:6g} | {r['asked']:6.0f} "
              f"{r['faithful'] or 0:8.0f} {'fits' if r['fits'] else 'no':>6} {r['would_fit'] or '-':>7} | "
              f"{r['passed']:>3}/{r['calls']:<4} | {agrees}")
    done = [r for r in rows if "error" not in r and r["fits"] is not None]
    for fits, said in ((True, "fits"), (False, "does not fit")):
        group = [r for r in done if r["fits"] is fits]
        calls = sum(r["calls"] for r in group)
        passed = sum(r["passed"] for r in group)
        print(f"# the check said '{said}' for {len(group)} runs: {passed} of {calls} calls kept their verdict"
              + (f" ({passed / calls:.0%})" if calls else ""))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="two runs only")
    p.add_argument("--reps", type=int, default=3, help="counted calls per run (default 3)")
    p.add_argument("--out", help="keep every run's folder under this one (default: a temporary folder)")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("capacity_check.py needs root (it emulates)")
    base = args.out or tempfile.mkdtemp(prefix="bigraph-capacity-")
    rows = []
    try:
        for topology, what, size, rates in (QUICK if args.quick else CASES):
            for rate in rates:
                out = os.path.join(base, f"{len(rows):02d}-{topology.replace(':', '-')}-{rate:g}")
                rows.append(run_case(topology, what, size, rate, out, args.reps))
                r = rows[-1]
                print(f"# {topology} {r['what']} {r['size']} at {rate:g} Mbit/s: "
                      + (r["error"] if "error" in r else
                         f"asks {r['asked']:.0f} of {r['faithful'] or 0:.0f}, {r['passed']}/{r['calls']} calls ok"),
                      flush=True)
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
