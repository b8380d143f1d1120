"""A results folder's network verdicts judged again (`bigraph-emu report`):
a folder written before network verdicts were held to what TCP's measured
sharing and the counted timeouts explain (verdict.held_to_bound) has its
`network:` rows of collectives.csv and jobs.csv held to it now, from the
times, the timeouts and the flows on a link its rows and plans hold; the
tables keep every other field as written, and verdict_changes.csv lists
each verdict that changed (call, old verdict, new verdict)."""
from __future__ import annotations

import csv
import os

from emulator.plan.capacity import with_bounds
from emulator.plan.run_plan import WORKLOAD_KEY
from emulator.records.tables import read_table
from emulator.results.report import check_runs, write_csv
from emulator.results.verdict import EXPLAINED, NETWORK, held_to_bound

CHANGES = "verdict_changes.csv"
CHANGE_COLUMNS = ["call", "old_verdict", "new_verdict"]
TABLES = ("collectives.csv", "jobs.csv")


def rejudge_folder(out_dir: str, plans, calibration) -> tuple[int, list[dict]]:
    """(network verdicts judged again, the changes: CHANGE_COLUMNS) of the folder,
    whose plans (folder_plans) give each run's flows on a link and, with
    `calibration`, its TCP-sharing factors. Changed tables are rewritten
    and the changes listed in CHANGES; nothing is written if none changed.
    TableError names a damaged table, before anything is written."""
    tables = {name: read_table(os.path.join(out_dir, name)) for name in TABLES}
    check_runs(out_dir, tables, [plan.spec for plan in plans])
    plans = [with_bounds(plan, calibration) for plan in plans]
    judged, changes, rewritten = 0, [], {}
    for name in TABLES:
        if tables[name] is None or "fidelity" not in tables[name]:
            continue
        columns, rows = _read_rows(os.path.join(out_dir, name))
        for row in rows:
            found = _plan_of(name, row, plans)
            if found is None or not _unheld(row["fidelity"]):
                continue
            judged += 1
            new = _held(name, row, plans[found])
            if new != row["fidelity"]:
                changes.append({"call": _call_name(name, row), "old_verdict": row["fidelity"], "new_verdict": new})
                row["fidelity"] = new
                rewritten[name] = (columns, rows)
    for name, (columns, rows) in rewritten.items():
        write_csv(os.path.join(out_dir, name), columns, rows)
    if changes:
        write_csv(os.path.join(out_dir, CHANGES), CHANGE_COLUMNS, changes)
    return judged, changes


def _unheld(verdict: str) -> bool:
    """A network verdict written before the bound (those after say EXPLAINED, or fail)."""
    return verdict.startswith(NETWORK) and EXPLAINED not in verdict


def _read_rows(path: str) -> tuple[list[str], list[dict]]:
    """A table's header and rows as written (text), to write them back unchanged but the verdicts."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _plan_of(name: str, row: dict, plans) -> int | None:
    """The index of the plan a row belongs to: its run, or (jobs.csv, and
    collectives.csv from before the run column) the first plan of its keys."""
    if row.get("run", "") != "":
        return int(row["run"]) if 0 <= int(row["run"]) < len(plans) else None
    keys = ("topology", "policy", "algorithm", "mapping", "label")
    for i, plan in enumerate(plans):
        mine = {"topology": plan.fabric.topology, "policy": plan.spec.policy, "algorithm": plan.spec.algorithm,
                "mapping": plan.spec.mapping, "label": plan.spec.label}
        if plan.is_workload == (name == "jobs.csv") and all(str(mine[k]) == row[k] for k in keys if k in row):
            return i
    return None


def _held(name: str, row: dict, plan) -> str:
    """The row's verdict held to its plan's bound (a job's own congestion
    control's, by the row's tcp), from its times and timeouts and the most
    flows its run's model put on a link."""
    key = int(row["size_bytes"]) if name == "collectives.csv" else WORKLOAD_KEY
    model_s = _seconds(row.get("model_time_s"))
    max_min_s = _seconds(row.get("max_min_time_s")) or model_s   # jobs.csv, older folders: the model is max-min
    time_s = _seconds(row.get("time_s"))
    if key not in plan.predictions or not (model_s and time_s):
        return row["fidelity"]
    return held_to_bound(row["fidelity"], time_s, model_s, max_min_s, plan.predictions[key].most_flows_on_a_link,
                         _seconds(row.get("tcp_timeouts")), _seconds(row.get("queue_drops")),
                         plan.bound_of(row.get("tcp", "")))


def _seconds(text) -> float | None:
    """A number field as written; None where blank or missing."""
    return float(text) if text not in (None, "") else None


def _call_name(name: str, row: dict) -> str:
    """Which call (or iteration) a row is, in words."""
    if name == "collectives.csv":
        run = f"run {row['run']} " if row.get("run", "") != "" else ""
        what = " ".join(row[k] for k in ("topology", "collective", "algorithm") if row.get(k))
        return f"{run}{what} {row['size_bytes']} B repetition {row['repetition']}"
    return f"{row['topology']} job {row['job']} repetition {row['repetition']} iteration {row['iteration']}"
