"""The functions of docs/python.md. Each calls what the command line calls
(emulator.spec for the spec, emulator.pipeline for the model and the
emulation, the report's readers for a folder) and hands the tables back as
DataFrames."""
from __future__ import annotations

import dataclasses
import os

import pandas as pd

from emulator import exit_codes, pipeline, preflight
from emulator.plan.folders import folder_specs
from emulator.results.report import folder_verdict, read_folder
from emulator.spec.experiment import Experiment, SpecError, experiment_of, load_experiment, validate

BadInput = SpecError   # what the command line reports with exit code 2; its message names the key, file or row


class NeedsRoot(PermissionError):
    """emulate() was called without root: nothing was built."""


# the keys of an experiment document (a TOML experiment file's top level); any other dict is one run's keys
DOCUMENT_KEYS = {"name", "yes", "defaults", "runs", "node"}
RUN_COLUMNS = ["run", "topology", "policy", "collective", "algorithm", "mapping", "ranks", "label"]


@dataclasses.dataclass
class Results:
    """One experiment's results. Each table is a DataFrame (empty where the
    experiment has none: `jobs` of a collective, `collectives` of a
    workload). `verdict`: "model" (predicted, nothing measured), "ok" (every
    counted call passed the fidelity verdict), "untrusted" (some did not:
    see the fidelity column) or "none" (a program's folder: no calls)."""
    collectives: pd.DataFrame
    steps: pd.DataFrame
    links: pd.DataFrame
    jobs: pd.DataFrame
    folder: str | None
    verdict: str
    experiment: Experiment | None = None


def spec(source: dict | str | os.PathLike, name: str = "python", **keys) -> Experiment:
    """An experiment, checked as `bigraph-emu run` checks it: from a dict
    of one run's keys ({"topology": "fattree:k=4", "policy": "ecmp"}), a
    dict shaped as an experiment file (defaults, runs), or a TOML
    experiment file's path. `keys` override every run's keys, as flags do.
    Bad input raises BadInput naming the key."""
    if isinstance(source, (str, os.PathLike)):
        return load_experiment(os.fspath(source), keys)
    if not isinstance(source, dict):
        raise BadInput(f"spec: give a dict of keys or a TOML file's path, not {type(source).__name__}")
    is_document = source and set(source) <= DOCUMENT_KEYS and ("runs" in source or "defaults" in source)
    doc = source if is_document else {"runs": [source]}
    return experiment_of({"name": name, **doc}, "spec", keys)


def model(experiment: Experiment, method: str = "auto", emulated: bool = False) -> Results:
    """The flow model's prediction of every run (no root, no network), as
    `bigraph-emu model` prints it: collectives (per run and size), steps
    (every step's end), links (per run and size, every directed link's
    most flows at once), jobs (a workload's iterations)."""
    tables = {"collectives": [], "steps": [], "links": [], "jobs": []}
    for run, predicted in enumerate(pipeline.predict(experiment, method, emulated=emulated, per_link=True)):
        keys = _run_keys(run, predicted.spec, predicted.got["ranks"])
        got = predicted.got
        for table, rows in (("collectives", got.get("sizes", [])), ("steps", got.get("steps", [])),
                            ("links", got.get("links", [])), ("jobs", got.get("jobs", []))):
            tables[table] += [{**keys, **row} for row in rows]
    frames = {name: pd.DataFrame(rows) for name, rows in tables.items()}
    if len(frames["collectives"]):
        frames["collectives"] = frames["collectives"].drop(columns=["max_flows_per_step"])
    return Results(**frames, folder=None, verdict="model", experiment=experiment)


def _run_keys(run: int, spec, ranks: int) -> dict:
    return {"run": run, "topology": spec.fabric().topology, "policy": spec.policy,
            "collective": "" if spec.workload else spec.collective, "algorithm": spec.algorithm,
            "mapping": spec.mapping, "ranks": ranks, "label": spec.label}


def emulate(experiment: Experiment, out: str | None = None) -> Results:
    """Emulate every run as `bigraph-emu run` does (root: Mininet and Open
    vSwitch), into `out` (default results/<time>-<name>), and read the
    folder back. NeedsRoot before anything is built, BadInput as the
    command line's exit code 2."""
    if os.geteuid() != 0:
        raise NeedsRoot("emulate() needs root (Mininet and Open vSwitch); model() and read() run without it")
    from emulator.net import capabilities
    for spec in experiment.runs:   # what only this kernel can refuse (netem)
        validate(spec, capabilities.netem_available)
    plans, folder = preflight.prepare(experiment, out)
    code = pipeline.emulate(experiment, plans, folder)
    if code not in exit_codes.FINISHED:
        raise RuntimeError(f"the emulation failed: {exit_codes.MEANINGS[code]}; see {folder}/")
    return dataclasses.replace(read(folder), experiment=experiment)


def read(folder: str | os.PathLike) -> Results:
    """Any results folder (of run, compare, demo, exec, or emulate()),
    checked as `bigraph-emu report` checks it: BadInput names a missing or
    damaged file and its row."""
    folder = os.fspath(folder)
    folder_specs(folder)   # a results folder at all, its spec.json readable
    tables = read_folder(folder)
    frames = {name: _frame(tables[f"{name}.csv"]) for name in ("collectives", "steps", "links", "jobs")}
    return Results(**frames, folder=folder, verdict=folder_verdict(tables))


def _frame(table: pd.DataFrame | None) -> pd.DataFrame:
    """A table as read, with the columns the report leaves as text (it
    checks only those it reads) as numbers wherever every cell is one."""
    if table is None:
        return pd.DataFrame()
    return table.apply(lambda column: _numbers(column) if pd.api.types.is_string_dtype(column) else column)


def _numbers(column: pd.Series) -> pd.Series:
    numbers = pd.to_numeric(column, errors="coerce")
    return numbers if numbers.notna().all() and len(column) else column
