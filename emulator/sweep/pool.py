"""The sweep's executor, on Dask distributed: a pool of this machine's
cores by default, or the cluster of a scheduler the user names. Model
points go to any worker; emulation points ask for the `fabric` resource
(one worker per machine offers it) and a point the machine's lock refuses
goes back to the queue, never recorded as failed."""
from __future__ import annotations

import contextlib
import logging
import os
import time

from emulator.net import processes
from emulator.results import sweeps
from emulator.spec.experiment import SpecError
from emulator.sweep import points

SCHEDULER_ENV = "BIGRAPH_DASK_SCHEDULER"
FABRIC = "fabric"        # the worker resource of a machine that emulates
RETRIES = 3              # runs of a point whose worker was lost
CONNECT_TIMEOUT_S = 10
# Dask's workers sample their threads' stacks every 10 ms: it took the model
# 20% longer in a worker (benchmarks/sweep.py). Off in our pool; a cluster's
# workers take it from the environment (docs/sweeps.md).
NO_PROFILE = {"distributed.worker.profile.enabled": False}


def scheduler_address(flag: str | None) -> str | None:
    return flag or os.environ.get(SCHEDULER_ENV) or None


@contextlib.contextmanager
def open_pool(address: str | None, workers: int | None = None):
    """A Dask client: of the scheduler at `address`, or of a local cluster of
    `workers` processes (default: one per core) on 127.0.0.1."""
    import dask
    from distributed import Client, LocalCluster
    if address:
        try:
            client = Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
        except (OSError, TimeoutError, ValueError) as e:
            raise SpecError(f"--scheduler {address}: no Dask scheduler answers there ({e}); start one with "
                            "`dask scheduler` (docs/sweeps.md)") from None
        with client:
            yield client
        return
    with dask.config.set(NO_PROFILE):   # the workers' nannies pass it on
        cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None, resources={FABRIC: 1},
                               silence_logs=logging.ERROR)
    with cluster, Client(cluster) as client:
        yield client


def model_task(point, stamp: dict):
    return "model", point, points.model_point(point, stamp)


def emulation_task(point, spec, folder: str, stamp: dict):
    from distributed import Reschedule
    try:
        return "emulated", point, points.emulate_point(point, spec, folder, stamp)
    except processes.MachineBusy:   # another emulation holds the machine: back to the queue
        raise Reschedule() from None


def run(client, model: list, emulate: list, folder: str, stamp: dict, on_rows) -> None:
    """Every point of `model` through the model and of `emulate` (pairs of a
    point and the spec to emulate) through an emulation; `on_rows(kind,
    point, rows)` as each finishes. Ctrl-C cancels what has not finished."""
    from distributed import as_completed
    futures = {client.submit(model_task, p, stamp, key=f"model-{p.key}", retries=RETRIES, pure=False):
               ("model", p) for p in model}
    futures.update({client.submit(emulation_task, p, spec, folder, stamp, key=f"emulate-{p.key}",
                                  retries=RETRIES, resources={FABRIC: 1}, pure=False): ("emulated", p)
                    for p, spec in emulate})
    try:
        for future in as_completed(futures):
            if future.status == "finished":
                on_rows(*future.result())
            else:   # lost more often than RETRIES allow: recorded, and the sweep goes on
                kind, point = futures[future]
                on_rows(kind, point, points.stamped(sweeps.error_rows(point, f"lost: {future.exception()!r}"),
                                                    time.time(), stamp))
    finally:
        client.cancel([f for f in futures if not f.done()])
