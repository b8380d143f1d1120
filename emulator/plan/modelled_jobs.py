"""The model's iterations of a workload's jobs (pure): per job, the
model's iterations with every job running and with the job alone, and the
rows jobs.csv gives them before anything is measured (`model`, and a run's
prediction); the results set the measured iterations beside them."""
from __future__ import annotations

import re

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


PLACEMENT_WIDTH = 20   # the placement column of the jobs tables


def placement_cell(placement: str, width: int = PLACEMENT_WIDTH) -> str:
    """A placement as the jobs tables show it: whole where it fits, a list
    of hosts too long for the column as its range and count ("bgh0..bgh7
    (8 hosts)", hosts numbered one after another) or its count (jobs.csv
    keeps the list), never a name cut in two."""
    if len(placement) <= width:
        return placement
    hosts = placement.split()[1:] if placement.startswith("hosts ") else []
    if not hosts:
        return placement[:width - 1] + "~"
    first, last = _host_range(hosts)
    said = f"{first}..{last} ({len(hosts)} hosts)" if first else ""
    return said if said and len(said) <= width else f"{len(hosts)} hosts"


def _host_range(hosts: list[str]) -> tuple[str, str]:
    """(first, last) of hosts named one prefix and numbers one after another; ("", "") otherwise."""
    parts = [re.fullmatch(r"(.*?)(\d+)", h) for h in hosts]
    if not all(parts) or len({m.group(1) for m in parts}) != 1:
        return "", ""
    numbers = [int(m.group(2)) for m in parts]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return "", ""
    return hosts[0], hosts[-1]
