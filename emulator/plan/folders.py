"""Runs from a results folder (pure): the specs its spec.json holds, each
workload read from the copy the folder keeps, and their plans again, so
that a report is rebuilt from what ran."""
from __future__ import annotations

import dataclasses
import os
from emulator.spec.experiment import RunSpec, SpecError, make_run


def folder_specs(folder: str) -> list[RunSpec]:
    """The runs of a results folder's spec.json, each workload read from
    the copy the folder keeps of it (older folders: from where spec.json
    says); SpecError if it is not one."""
    from emulator.results.tables import read_runs, read_workload_copies
    if not os.path.isdir(folder):
        raise SpecError(f"{folder}: no such results folder")
    runs = read_runs(folder)
    if not any(os.path.exists(os.path.join(folder, name)) for name in ("collectives.csv", "jobs.csv", "ranks.csv")):
        raise SpecError(f"{folder} has no collectives.csv, jobs.csv or ranks.csv: its run measured nothing")
    copies = read_workload_copies(folder)
    specs = []
    for i, run in enumerate(runs):
        kept = copies.get(run["workload"]) if isinstance(run.get("workload"), str) else None
        try:
            specs.append(make_run({**run, "workload": kept} if kept else run))
        except SpecError as e:
            raise SpecError(f"{os.path.join(folder, 'spec.json')}: run {i + 1}: {e}") from None
    return specs


def folder_plans(folder: str, specs: list[RunSpec]) -> list:
    """The plans of a folder's runs, each in its place, its workload named
    as when it ran (the tables say that name, not the copy's)."""
    from emulator.plan.run_plan import plan_run
    from emulator.results.tables import read_runs
    plans = []
    for i, (spec, run) in enumerate(zip(specs, read_runs(folder))):
        plan = dataclasses.replace(plan_run(spec), run=i)
        plan.spec = dataclasses.replace(spec, workload=run.get("workload", ""))
        plans.append(plan)
    return plans


def is_program_folder(folder: str) -> bool:
    """A folder `exec` wrote: a program's ranks, no collectives or jobs."""
    return os.path.exists(os.path.join(folder, "ranks.csv")) and not any(
        os.path.exists(os.path.join(folder, name)) for name in ("collectives.csv", "jobs.csv"))
