"""Results folders (pure): whether a folder given as --out can be made
there; and the runs of one: the specs its spec.json holds, each workload
read from the copy the folder keeps, and their plans again, so that a
report is rebuilt from what ran."""
from __future__ import annotations

import dataclasses
import os
from emulator.inputs import shorten
from emulator.spec.experiment import RunSpec, SpecError, make_run


LONGEST_INSIDE = "/captures/" + "x" * 80 + ".pcap"   # about the longest path a run writes below its folder
PARTIAL = ".partial"                                   # a run writes OUT.partial/ first, then renames it


def check_out_folder(path: str, flag: str = "--out") -> None:
    """SpecError unless a folder can be made at `path` and hold a run's
    files: it names the flag and the part of the path in the way, before
    anything is created (not the file system's error halfway through a run)."""
    if not path.strip():
        raise SpecError(f"{flag}: the folder name is empty; give a folder, or leave {flag} out")
    full = os.path.abspath(path)
    if "\0" in full:
        raise SpecError(f"{flag}: {shorten(repr(path))} holds a NUL character")
    if os.path.lexists(full) and not os.path.isdir(full):
        raise SpecError(f"{flag} {shorten(path)} is a file, not a folder; choose a new folder")
    parent = os.path.dirname(full)   # the folder OUT.partial is made in, or the nearest that is there
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise SpecError(f"{flag} {shorten(path)}: {shorten(parent)} is a file, so no folder can be made below it")
    name_max = os.pathconf(parent, "PC_NAME_MAX")
    parts = os.path.relpath(full, parent).split(os.sep)
    for part in parts[:-1] + [parts[-1] + PARTIAL]:
        if len(os.fsencode(part)) > name_max:
            raise SpecError(f"{flag}: the name {shorten(part.removesuffix(PARTIAL), 80)!r} is too long: this file "
                            f"system takes names of up to {name_max} bytes, and a run adds {PARTIAL} to the folder's")
    path_max = os.pathconf(parent, "PC_PATH_MAX")
    if len(os.fsencode(full + PARTIAL + LONGEST_INSIDE)) > path_max:
        raise SpecError(f"{flag}: {shorten(path, 80)} is too long a path: a run's files below it would pass this "
                        f"file system's {path_max} bytes")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SpecError(f"{flag} {shorten(path)}: cannot create a folder in {parent} (no permission)")


def folder_specs(folder: str) -> list[RunSpec]:
    """The runs of a results folder's spec.json, each workload read from
    the copy the folder keeps of it (older folders: from where spec.json
    says); SpecError if it is not one."""
    from emulator.records.tables import read_file_copies, read_runs, read_workload_copies
    if not os.path.isdir(folder):
        raise SpecError(f"{folder}: no such results folder")
    runs = read_runs(folder)
    if not any(os.path.exists(os.path.join(folder, name)) for name in ("collectives.csv", "jobs.csv", "ranks.csv")):
        raise SpecError(f"{folder} has no collectives.csv, jobs.csv or ranks.csv: its run measured nothing")
    copies, files = read_workload_copies(folder), read_file_copies(folder)
    specs = []
    for i, run in enumerate(runs):
        kept = copies.get(run["workload"]) if isinstance(run.get("workload"), str) else None
        run = {**run, **({"workload": kept} if kept else {}), **_kept_files(run, files)}
        try:
            specs.append(make_run(run))
        except SpecError as e:
            raise SpecError(f"{os.path.join(folder, 'spec.json')}: run {i + 1}: {e}") from None
    return specs


def _kept_files(run: dict, files: dict[str, str]) -> dict:
    """The run's topology and policy files that the folder keeps, read from its copies."""
    return {key: files[run[key]] for key in ("topology", "policy") if isinstance(run.get(key), str) and run[key] in files}


def folder_plans(folder: str, specs: list[RunSpec]) -> list:
    """The plans of a folder's runs, each in its place, its workload,
    topology and policy files named as when it ran (the tables say those
    names, not the copies')."""
    from emulator.plan.run_plan import plan_run
    from emulator.records.tables import read_runs
    plans = []
    for i, (spec, run) in enumerate(zip(specs, read_runs(folder))):
        plan = dataclasses.replace(plan_run(spec), run=i)
        named = {key: run.get(key, getattr(spec, key)) for key in ("topology", "policy")}
        plan.spec = dataclasses.replace(spec, workload=run.get("workload", ""), **named)
        if named["topology"] != spec.topology:   # read from the copy
            plan.fabric = dataclasses.replace(plan.fabric, topology=named["topology"].strip())
        plans.append(plan)
    return plans


def is_program_folder(folder: str) -> bool:
    """A folder `exec` wrote: a program's ranks, no collectives or jobs."""
    return os.path.exists(os.path.join(folder, "ranks.csv")) and not any(
        os.path.exists(os.path.join(folder, name)) for name in ("collectives.csv", "jobs.csv"))
