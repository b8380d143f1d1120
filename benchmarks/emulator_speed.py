"""The emulator's speed in one run: the flow model at scale (pure), then, as
root and one emulation at a time, bring-up/teardown, dataplane capacity
used with fidelity, and peak memory. Each part prints its own figures and
ratios against a baseline it measures in the same run; see the scripts.

    .venv/bin/python benchmarks/emulator_speed.py [--quick] [--only model,bringup,dataplane,memory]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
PARTS = ["model_scale", "bringup", "dataplane", "memory"]
ALIASES = {"model": "model_scale"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="pass --quick to every part")
    p.add_argument("--only", default="", help="comma-separated parts: model, bringup, dataplane, memory")
    args = p.parse_args()
    benchlib.interrupts.unwind_on_signals()   # a signal reaches the part under way, which tears down
    parts = [ALIASES.get(x, x) for x in args.only.split(",")] if args.only else PARTS
    if os.geteuid() != 0:
        print("# not root: only the flow model runs", flush=True)
        parts = [x for x in parts if x == "model_scale"]
    failed = []
    for part in parts:
        print(f"\n######## {part}{' --quick' if args.quick else ''}", flush=True)
        t0 = time.monotonic()
        rc = benchlib.run_child([sys.executable, os.path.join(HERE, f"{part}.py")] +
                                (["--quick"] if args.quick else [])).returncode
        print(f"######## {part}: {time.monotonic() - t0:.0f} s{'' if rc == 0 else f', exit code {rc}'}", flush=True)
        if rc:
            failed.append(part)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
