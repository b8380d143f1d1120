"""Offline: the two-tenants workload's iterations in the model with the standing queue of
../two-jobs-queues-2026-12-05/out_of_step.py (a flow that starts while another sends on one of its links is
delivered D later; shares equal, sigma 0), against plain max-min and the measured iterations of this folder.

    .venv/bin/python standing_queue.py bbr-jobs.csv cubic-jobs.csv
"""
import csv
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "two-jobs-queues-2026-12-05"))
import out_of_step as O  # noqa: E402  (patches the model's simulation)

from emulator.plan.run_plan import plan_run  # noqa: E402
from emulator.results.jobs import model_rows  # noqa: E402
from emulator.spec.experiment import make_run  # noqa: E402

DELAYS_MS = (0, 40, 59, 73, 80, 100, 110, 120, 160)   # 59, 73: bbr's and cubic's calibrated standing queue
WORKLOAD = os.path.join(HERE, "..", "..", "workloads", "two-tenants.toml")


def modelled(d_s: float) -> dict:
    O.SIGMA[0], O.D[0] = 0.0, d_s
    spec = make_run({"topology": "bigraph:m=2,n=4", "workload": WORKLOAD, "mapping": "round-robin",
                     "host_rate_mbps": 50, "switch_rate_mbps": 50, "repetitions": 1, "warmup": 0})
    return {(r["job"], r["iteration"]): r["time_s"] for r in model_rows(plan_run(spec))}


def measured(files: list[str]) -> dict:
    got: dict = {}
    for name in files:
        for r in csv.DictReader(open(name)):
            got.setdefault((r["job"], int(r["iteration"])), []).append(float(r["time_s"]))
    return {k: statistics.median(v) for k, v in got.items()}


if __name__ == "__main__":
    base, runs = modelled(0.0), measured(sys.argv[1:])
    print("iteration       measured  " + "  ".join(f"D={d:3.0f}ms" for d in DELAYS_MS) + "   (seconds)")
    models = {d: modelled(d / 1e3) for d in DELAYS_MS}
    for key in sorted(base):
        print(f"{key[0]:6} {key[1]}       {runs.get(key, float('nan')):7.2f}  "
              + "  ".join(f"{models[d][key]:7.2f}" for d in models))
