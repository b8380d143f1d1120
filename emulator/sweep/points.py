"""What a sweep's worker does with one point: the model's prediction (in
the worker's process, with the fabrics and routes it built for earlier
points), or an emulation (`bigraph-emu run` of the point, in its own
process: a whole machine, one at a time)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

from emulator.net import processes
from emulator.plan import capacity, predictions
from emulator.plan.run_plan import SharedRoutes
from emulator.results import sweeps
from emulator.spec.experiment import RunSpec, experiment_toml

ROUTES = SharedRoutes()   # this worker's: kept from point to point
BUSY_WAIT_S = 2.0         # before a point the machine's lock refused goes back to the queue


def model_point(point, stamp: dict) -> list[dict]:
    """The model's rows of a point; a point that raises gives a row with its error."""
    t0 = time.time()
    try:
        spec = point.spec
        # the model the point's emulation compares with: this machine's measured TCP sharing
        got = (predictions.workload_prediction(spec) if spec.workload
               else predictions.sweep_prediction(spec, shared=ROUTES, steps=False,
                                                 sharing=capacity.sharing_of(spec, capacity.load())[0]))
        rows = sweeps.model_rows(point, got)
    except Exception as e:   # recorded, and the sweep goes on
        rows = sweeps.error_rows(point, f"{type(e).__name__}: {e}")
    return stamped(rows, t0, stamp)


def emulate_point(point, spec: RunSpec, folder: str, stamp: dict) -> list[dict]:
    """Emulate `spec` (the point, or what stands in for it) into
    folder/points/KEY/run; MachineBusy if another emulation holds the machine."""
    where = os.path.join(folder, "points", point.key)
    out = os.path.join(where, "run")
    for old in (out, out + ".partial"):   # an earlier attempt's, lost with its worker
        shutil.rmtree(old, ignore_errors=True)
    os.makedirs(where, exist_ok=True)
    experiment = os.path.join(where, "point.toml")
    with open(experiment, "w") as f:
        f.write(experiment_toml(spec, f"point-{point.key}"))
    lock = processes.RunLock(out)
    try:
        lock.__enter__()
    except processes.MachineBusy:
        time.sleep(BUSY_WAIT_S)   # before the point goes back to the queue
        raise
    try:   # held from before the run starts to after it has ended: the times recorded are the lock's
        t0 = time.time()
        with open(os.path.join(where, "run.log"), "w") as log:
            code = subprocess.run([sys.executable, "-m", "emulator.cli", "run", "--experiment", experiment,
                                   "--out", out], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  **lock.lend()).returncode
        return stamped(_emulated(point, out, code, log.name), t0, stamp)
    finally:
        lock.__exit__(None, None, None)


def _emulated(point, out: str, code: int, log: str) -> list[dict]:
    if not os.path.exists(os.path.join(out, "collectives.csv")):
        return sweeps.error_rows(point, f"emulation exited with {code}: {_tail(log)}")
    return sweeps.emulated_rows(point, out)


def stamped(rows: list[dict], t0: float, stamp: dict) -> list[dict]:
    """Where and when the rows were made, and by which version."""
    t1 = time.time()
    cells = {"worker": socket.gethostname(), "started_s": f"{t0:.3f}", "ended_s": f"{t1:.3f}",
             "wall_s": f"{t1 - t0:.4f}", **stamp}
    return [{**row, **cells} for row in rows]


def _tail(path: str, lines: int = 3) -> str:
    with open(path, errors="replace") as f:
        return " | ".join(line.strip() for line in f.readlines()[-lines:])
