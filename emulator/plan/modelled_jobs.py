"""The model's iterations of a workload's jobs (pure): per job, the
model's iterations with every job running and with the job alone, and the
rows jobs.csv gives them before anything is measured (`model`, and a run's
prediction); the results set the measured iterations beside them."""
from __future__ import annotations

from emulator.model.iterations import iterations, modelled


def modelled_jobs(plan, key: int, background: bool = False):
    """(layout, the model's iterations, the model's iterations of the job
    alone) per job (per background flow instead, if `background`)."""
    for j, layout in enumerate(plan.programs[key].jobs):
        if bool(layout.job.background) != background:
            continue
        model = iterations(layout, *modelled(plan.predictions[key]))
        alone = iterations(layout, *modelled(plan.alone[j], layout.offset)) if plan.alone else model
        yield layout, model, alone


def model_rows(plan) -> list[dict]:
    """The model's per-job iterations of a workload plan (no measurement)."""
    return iteration_rows(((layout.job, model, alone) for layout, model, alone
                           in modelled_jobs(plan, next(iter(plan.programs)))), plan.spec.mapping)


def iteration_rows(modelled, mapping: str) -> list[dict]:
    """Rows of (job, the model's iterations, those of the job alone) per job."""
    rows = []
    for job, model, alone in modelled:
        for m, a in zip(model, alone):
            rows.append({"job": job.name, "ranks": job.ranks_in(m["iteration"]), "placement": placement_name(job, mapping),
                         **m, "alone_s": a["time_s"], "slowdown": m["time_s"] / a["time_s"] if a["time_s"] else 1.0})
    return rows


def placement_name(job, mapping: str) -> str:
    if isinstance(job.placement, tuple):
        return "hosts " + " ".join(job.placement)
    return job.placement or mapping
