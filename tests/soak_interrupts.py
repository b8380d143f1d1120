"""Interrupt runs at random moments, over and over, and check that each
left nothing behind and that the next run starts (root, one emulation at a
time; about 10 s per run). Not collected by pytest: it is the long form of
tests/emulation/test_faults.py's interruption test.

    .venv/bin/python tests/soak_interrupts.py [--runs 40] [--seed 1]

Each run is a long allreduce on a terminal of its own, interrupted after a
random 0.5 to 14 s by one of: Ctrl-C typed on its terminal, SIGTERM to its
process group, its terminal closed (the kernel's SIGHUP, as when an ssh
connection drops), or kill -9 followed by `bigraph-emu clean`. After each:
no bgs*/bgh* bridge or link and no recorded process may remain. A run
that refuses to start ("run 'bigraph-emu clean' first") counts as a
failure of the run before it. A last run must finish.
"""
from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, os.path.join(HERE, "emulation")]

from emulator.net import processes  # noqa: E402
from terminal import INTERRUPTIONS, Terminal  # noqa: E402

TOPOLOGIES = ["bigraph:m=2,n=4", "fattree:k=4", "leafspine:leaves=2,spines=2,hosts=2"]
SOAKED = ("ctrl-c", "SIGTERM to the group", "terminal closed", "kill -9")   # of terminal.INTERRUPTIONS
CLI = [sys.executable, "-m", "emulator.cli"]
# 130: torn down after the signal; negative: killed by it (kill -9, or a
# signal that came before the handlers were installed, when nothing exists yet)
EXPECTED_CODES = {130, -signal.SIGKILL, -signal.SIGINT, -signal.SIGTERM, -signal.SIGHUP}


def leftovers() -> list[str]:
    return processes.leftover_bridges() + processes.leftover_links() + \
        [f"process {pid}" for pid in processes.leftover_processes()]


def stage(text: str) -> str:
    if "routes '" in text:
        return "traffic"
    if "# dataplane" in text:
        return "bring-up"
    return "planning"


def one(i: int, topology: str, how: str, at_s: float, folder: str) -> dict:
    term = Terminal([*CLI, "run", "-t", topology, "-b", "64M", "-n", "1", "-w", "0", "--bw", "20",
                     "--out", os.path.join(folder, f"run{i}")], cwd=REPO)
    try:
        deadline = time.monotonic() + at_s
        while time.monotonic() < deadline and term.proc.poll() is None:
            time.sleep(0.05)
        seen = term.text()
        refused = "bigraph-emu clean" in seen
        INTERRUPTIONS[how](term)
        code = term.wait(timeout_s=120)
    finally:
        term.close()
    if how == "kill -9":
        subprocess.run([*CLI, "clean"], cwd=REPO, capture_output=True, timeout=120)
    said = [l for l in term.text().splitlines() if l.startswith("bigraph-emu:")]
    return {"code": code, "stage": stage(seen), "refused": refused, "left": leftovers(),
            "said": said[-1] if said else ""}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("soak_interrupts.py needs root (Mininet and Open vSwitch)")
    if leftovers():
        raise SystemExit(f"the machine is not clean before the soak: {leftovers()}")
    rng = random.Random(args.seed)
    combos = itertools.cycle(itertools.product(SOAKED, TOPOLOGIES))
    failures = 0
    print(f"{'run':>3} {'interruption':20} {'topology':38} {'at_s':>5} {'reached':9} {'exit':>5}  result")
    with tempfile.TemporaryDirectory(prefix="bigraph-soak-") as folder:
        for i in range(args.runs):
            how, topology = next(combos)
            at_s = round(rng.uniform(0.5, 14.0), 1)
            r = one(i, topology, how, at_s, folder)
            unexpected = r["code"] not in EXPECTED_CODES
            failures += bool(r["left"] or r["refused"] or unexpected)
            result = (f"LEFT {', '.join(r['left'][:4])}" if r["left"] else
                      "REFUSED: the run before left something" if r["refused"] else
                      f"UNEXPECTED EXIT: {r['said']}" if unexpected else "clean")
            print(f"{i:>3} {how:20} {topology:38} {at_s:>5} {r['stage']:9} {r['code']:>5}  {result}", flush=True)
            if r["left"]:
                subprocess.run([*CLI, "clean"], cwd=REPO, capture_output=True, timeout=120)
        last = subprocess.run([*CLI, "run", "-t", TOPOLOGIES[0], "-b", "1M", "-n", "1", "-w", "0",
                               "--out", os.path.join(folder, "last")], cwd=REPO, capture_output=True, text=True)
    print(f"# last run after the soak: exit code {last.returncode}" +
          ("" if last.returncode == 0 else f"\n{last.stderr[-2000:]}"))
    print(f"# {args.runs - failures} of {args.runs} interrupted runs left nothing and the next run started")
    sys.exit(1 if failures or last.returncode else 0)


if __name__ == "__main__":
    main()
