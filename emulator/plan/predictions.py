"""What `bigraph-emu model` predicts (pure), as data: per size of a sweep
its time, bandwidths, busiest links and, asked for, how it reacts to
jittered flows; per job of a workload its iterations. The CLI prints it."""
from __future__ import annotations

import collections
import functools
import hashlib
import os

from emulator.fabric.graph import Fabric
from emulator.model.buckets import EmulatedLinks
from emulator.model.sharing import Sharing, stretched_time
from emulator.plan.run_plan import SharedRoutes, model_for, model_sweep, model_workload, plan_run
from emulator.records.links import directed_links
from emulator.records.metrics import algbw_mbps, busbw_mbps
from emulator.spec.experiment import RunSpec, SpecError
from emulator.workloads.schedule import chosen_algorithm, jittered

MAX_JITTER = 10   # of a flow's time


def sweep_prediction(spec: RunSpec, method: str = "auto", jitter: float = 0.0, progress=None,
                     shared: SharedRoutes | None = None, steps: bool = True, sharing: Sharing | None = None,
                     links: EmulatedLinks | None = None, per_link: bool = False) -> dict:
    """{"ranks", "sizes": [one row per size], "steps": [every step's end and
    busiest link], unless not asked for; "links": [per size, every directed
    link's most flows at once], if `per_link`}. `shared`: routes kept from
    earlier specs (run_plan.SharedRoutes); `sharing`: TCP's measured sharing,
    which stretches congested steps (None: max-min); `links`: as this machine
    emulates them (None: the network alone)."""
    if not 0 <= jitter <= MAX_JITTER:
        raise SpecError(f"--jitter: must be between 0 and {MAX_JITTER} (a fraction of each flow), got {jitter}")
    if jitter:   # step objects: flows to jitter
        plan = plan_run(spec, links=links)
        hosts, predictions = plan.hosts, plan.predictions
    else:
        hosts, predictions = model_sweep(spec, method, progress, shared, links)
    sizes, step_rows = [], []
    for size in spec.sizes:
        pred = predictions[size]
        t = stretched_time(pred, sharing) if sharing else pred.time_s
        row = {"size_bytes": size, "algorithm_used": chosen_algorithm(spec.collective, spec.algorithm, len(hosts), size),
               "time_s": t, "max_min_time_s": pred.time_s,
               "model": "tcp" if sharing else "max-min", "algbw_mbps": algbw_mbps(size, t),
               "busbw_mbps": busbw_mbps(spec.collective, len(hosts), size, t),
               "approximation": pred.approximation,
               "max_flows_per_step": dict(sorted(collections.Counter(pred.max_flows_per_step).items()))}
        if jitter:
            row["jitter_ratios"] = jitter_ratios(plan, size, jitter)
        sizes.append(row)
        if steps:
            step_rows += [{"size_bytes": size, "step": k, "end_s": end, "max_flows": flows} for k, (end, flows)
                          in enumerate(zip(pred.step_index_end_s(), pred.max_flows_per_step))]
    got = {"ranks": len(hosts), "sizes": sizes, "steps": step_rows, "flows_per_step":
           {size: predictions[size].max_flows_per_step for size in spec.sizes}}
    if per_link:
        got["links"] = link_rows(spec.fabric(), predictions)
    return got


def link_rows(fabric: Fabric, predictions: dict) -> list[dict]:
    """Per size, every directed link (named as links.csv names it) with the
    most flows the model put on it at once; links that carried none are left out."""
    named = {(l.node, l.port): l for l in directed_links(fabric)}
    return [{"size_bytes": size, "link": named[hop].label, "node": hop[0], "port": hop[1], "peer": named[hop].peer,
             "kind": named[hop].kind, "scope": named[hop].scope, "rate_mbps": named[hop].rate_mbps,
             "max_flows": flows}
            for size, pred in predictions.items() for hop, flows in sorted(pred.link_max_flows.items())
            if hop in named and flows]


def jitter_ratios(plan, size: int, amplitude: float, seeds: int = 3) -> list[float]:
    """Predicted time with jittered flows over the plain prediction, per seed."""
    plain = plan.predictions[size].time_s
    model = model_for(plan.fabric, plan.table, plan.spec, plan.links)
    return [model(jittered(plan.schedules[size], amplitude, seed), plan.hosts).time_s / plain for seed in range(seeds)]


def workload_prediction(spec: RunSpec, method: str = "auto", jitter: float = 0.0,
                        links: EmulatedLinks | None = None) -> dict:
    """{"ranks", "jobs": per-job iteration rows, "approximation", "exact_because"}."""
    if jitter:
        raise SpecError("--jitter: jitters a collective's flows; a workload takes none")
    ranks, rows, approximation, why_exact = model_workload(spec, method, links)
    return {"ranks": ranks, "jobs": rows, "approximation": approximation, "exact_because": why_exact}


# What a prediction reads: rows of two versions of these are not mixed.
MODEL_SOURCES = ("fabric", "routes", "workloads", "model", "plan/run_plan.py", "plan/predictions.py",
                 "plan/modelled_jobs.py", "records/metrics.py", "inputs.py")


@functools.lru_cache(maxsize=1)
def model_version() -> str:
    """A hash of the model's source files."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for source in MODEL_SOURCES:
        path = os.path.join(root, source)
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".py")) \
            if os.path.isdir(path) else [path]
        for file in files:
            with open(file, "rb") as f:
                digest.update(os.path.relpath(file, root).encode() + b"\0" + f.read())
    return digest.hexdigest()[:12]
