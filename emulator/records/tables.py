"""A results folder's files as the report reads them (pure): what each
table must hold, in one place. `read_table` checks a file against it and
returns it typed; `read_fabric` and `read_runs` check fabric.json and
spec.json. Anything else raises TableError (bad input: exit code 2) naming
the file, and the line and column where it can, before the report writes
anything.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from emulator.fabric.graph import Fabric
from emulator.inputs import MAX_TABLE_BYTES, InputError, read_bytes, shorten
from emulator.workloads.collectives import COLLECTIVES
from emulator.spec.experiment import SpecError

# Column kinds: text; bool (True or False); int (a whole number); count (a whole number >= 1);
# number (finite); positive (finite, > 0: something divides by it);
# "number?" (a number or blank: counters a run may not have measured);
# a tuple: one of these words.
RUN_TEXT = {"topology": "text", "policy": "text", "algorithm": "text", "mapping": "text"}


@dataclass(frozen=True)
class Table:
    needs: dict                                    # column -> kind: what the report reads
    may: dict = field(default_factory=dict)        # read if there (older folders lack them)
    needs_rows: bool = False                       # a header alone is an error: the run measured nothing


TABLES = {
    "collectives.csv": Table(
        {**RUN_TEXT, "collective": tuple(COLLECTIVES), "ranks": "count", "size_bytes": "count", "time_s": "positive",
         "model_time_s": "positive", "bytes_ok": "bool", "host_rate_mbps": "positive",
         "switch_rate_mbps": "positive", "mtu": "count", "label": "text"},
        {"run": "int", "repetition": "int", "fidelity": "text", "max_link_util": "number?",
         "mean_link_util": "number?", "queue_drops": "number?", "queue_marks": "number?", "tcp_retrans": "number?",
         "connections": "count",
         "seed": "int", "host_queue_packets": "count", "switch_queue_packets": "count", "link_delay_ms": "number",
         "link_loss_pct": "number"}, needs_rows=True),
    "jobs.csv": Table(
        {"topology": "text", "policy": "text", "job": "text", "ranks": "count", "placement": "text",
         "iteration": "int", "time_s": "number", "compute_s": "number", "comm_s": "number",
         "model_time_s": "number", "model_comm_s": "number", "alone_model_s": "number", "fidelity": "text"},
        {"algorithm": "text", "jobs": "int", "background_flows": "int", "label": "text", "repetition": "int",
         "alone_s": "number?", "slowdown": "number?", "slowdown_basis": "text", "counters_of": "text"}, needs_rows=True),
    "background.csv": Table(
        {"background": "text", "from": "text", "to": "text", "asked_mbps": "number", "time_s": "number",
         "bytes": "number", "mbps": "number?", "model_mbps": "number?"},
        {"topology": "text", "policy": "text", "mapping": "text", "workload": "text", "label": "text",
         "repetition": "int", "asked": "text"}),
    "steps.csv": Table(
        {"size_bytes": "int", "repetition": "int", "rank": "int", "step": "int", "phase": "text",   # 0: a workload
         "start_s": "number", "end_s": "number", "model_end_s": "number?"},
        {**RUN_TEXT, "run": "int", "label": "text", "host": "text"}),
    "links.csv": Table(
        {"call": "int", "t_s": "number", "link": "text", "kind": "text", "util": "number?"},
        {**RUN_TEXT, "run": "int", "label": "text", "size_bytes": "int", "repetition": "int",
         "node": "text", "port": "int", "peer": "text", "backlog_bytes": "number?", "drops": "number?",
         "marks": "number?", "scope": "text"}),
    "captures.csv": Table(
        {"call": "int", "link": "text", "file": "text", "start_unix_s": "number"},
        {**RUN_TEXT, "run": "int", "label": "text", "size_bytes": "int", "repetition": "int", "rate_mbps": "number?"}),
    "ops.csv": Table(
        {"job": "text", "repetition": "int", "rank": "int", "kind": "text", "start_s": "number", "end_s": "number"},
        {"topology": "text", "policy": "text", "mapping": "text", "workload": "text", "label": "text"}),
    "link_loads.csv": Table({"mapping": "text", "max_flows_per_link": "int"},   # written by the report, read by the demo
                            {"topology": "text", "policy": "text", "algorithm": "text", "step": "int",
                             "phase": "text", "busiest_link": "text", "links_with_2plus_flows": "int"}),
    "link_jobs.csv": Table({"link": "text", "job": "text", "bytes": "number"},
                           {"topology": "text", "policy": "text", "mapping": "text", "workload": "text",
                            "label": "text", "kind": ("job", "background")}),
}


class TableError(SpecError):
    pass


def read_table(path: str) -> pd.DataFrame | None:
    """The table at `path` (TABLES by its file name), checked and typed;
    None if the file is missing, or has no rows where rows may be missing."""
    table = TABLES[os.path.basename(path)]
    if not os.path.lexists(path):
        return None
    try:
        data = read_bytes(path, MAX_TABLE_BYTES)
    except InputError as e:
        raise TableError(str(e)) from None
    if not data and not table.needs_rows:
        return None
    header, rows = _parse(path, data)
    missing = [c for c in table.needs if c not in header]
    if missing:   # before the rows: a wrong header makes every row look wrong
        raise TableError(f"{path}: no column {', '.join(missing)} in its header (it has "
                         f"{shorten(', '.join(header), 200)})")
    for line, row in rows:
        if len(row) != len(header):
            more = "more" if len(row) > len(header) else "fewer"
            raise TableError(f"{path}: line {line}: {len(row)} fields, {more} than the header's {len(header)}")
    if not rows:
        if table.needs_rows:
            raise TableError(f"{path}: a header and no rows: the run measured nothing")
        return None
    raw = pd.DataFrame([row for _, row in rows], columns=header, dtype=str)
    lines = np.array([line for line, _ in rows])
    kinds = {**{c: k for c, k in table.may.items() if c in header}, **table.needs}
    return raw.assign(**{column: _typed(raw[column], column, kind, path, lines) for column, kind in kinds.items()})


def _parse(path: str, data: bytes) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and every non-blank row (with its line number), as text."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise TableError(f"{path}: line {line}: not UTF-8 text") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        rows = [(reader.line_num, row) for row in reader if row]
    except csv.Error as e:   # a NUL byte, an unclosed quote
        raise TableError(f"{path}: line {reader.line_num}: not a CSV row ({e})") from None
    if not header or header == [""]:
        raise TableError(f"{path}: the file is empty (not even a header)")
    if len(set(header)) != len(header) or "" in header:
        raise TableError(f"{path}: its header has blank or repeated column names")
    return header, rows


def _typed(values: pd.Series, column: str, kind, path: str, lines) -> pd.Series:
    """The column converted to its kind; TableError names the first bad cell."""
    if kind == "text":
        return values
    if kind == "bool":
        words = values.str.strip().str.lower()
        _refuse(values, ~words.isin(("true", "false")), path, column, "True or False", lines)
        return words == "true"
    if isinstance(kind, tuple):
        bad = ~values.isin(kind)
        _refuse(values, bad, path, column, f"one of: {', '.join(kind)}", lines)
        return values
    text = values.str.strip()
    numbers = pd.to_numeric(text.where(text != "", "nan") if kind == "number?" else text, errors="coerce")
    ok = np.isfinite(numbers) | (kind == "number?") & (text == "")
    if kind in ("int", "count"):
        ok &= (numbers == np.round(numbers)) & (numbers.abs() < 2 ** 53)
    if kind in ("count", "positive"):
        ok &= numbers >= (1 if kind == "count" else np.finfo(float).tiny)
    need = {"int": "a whole number", "count": "a whole number >= 1", "number": "a number",
            "positive": "a number > 0", "number?": "a number or blank"}[kind]
    _refuse(values, ~ok, path, column, need, lines)
    return numbers.astype("int64") if kind in ("int", "count") else numbers.astype(float)


def _refuse(values: pd.Series, bad: pd.Series, path: str, column: str, need: str, lines) -> None:
    """TableError naming the first bad cell's line (`lines`: each row's line in the file)."""
    if bad.any():
        first = int(np.flatnonzero(bad.to_numpy())[0])
        raise TableError(f"{path}: line {lines[first]}: {column}: {shorten(repr(values.iloc[first]), 80)} "
                         f"is not {need}")


# --- the JSON files ------------------------------------------------------------------------

def read_runs(folder: str) -> list[dict]:
    """spec.json's runs: a non-empty list of tables of spec keys."""
    path = os.path.join(folder, "spec.json")
    doc = _json(path)
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        raise TableError(f"{path}: not a results folder's spec.json: it needs \"runs\", a list of run tables")
    return runs


def read_workload_copies(folder: str) -> dict[str, str]:
    """spec.json's workload_copies: {a run's workload as spec.json names it:
    the copy the folder keeps, its path joined to the folder}; older folders have none."""
    from emulator.spec.experiment import workload_file
    return _copies(folder, "workload_copies", "workload = the copy's path", workload_file)


def read_file_copies(folder: str) -> dict[str, str]:
    """spec.json's file_copies: {a topology or policy as spec.json names it
    (file:PATH): file:COPY, joined to the folder}; older folders have none."""
    from emulator.fabric.files import PREFIX, is_file, path_of
    return _copies(folder, "file_copies", "file:PATH = file:COPY",
                   lambda copy: (PREFIX, path_of(copy)) if is_file(copy) else None)


def _copies(folder: str, key: str, form: str, split) -> dict[str, str]:
    """spec.json's table `key` of copies the folder keeps, each copy's path
    joined to the folder; `split` parts a copy into (prefix, path), None if
    it is not one."""
    path = os.path.join(folder, "spec.json")
    copies = _json(path).get(key, {})
    if not isinstance(copies, dict) or not all(isinstance(copy, str) and split(copy) for copy in copies.values()):
        raise TableError(f"{path}: {key} must be a table of {form}")
    return {name: prefix + os.path.join(folder, file) for name, copy in copies.items() for prefix, file in [split(copy)]}


def read_fabric(path: str) -> Fabric | None:
    """fabric.json, checked as far as the drawing relies on it; None if missing."""
    if not os.path.lexists(path):
        return None
    doc = _json(path)
    try:
        fabric = Fabric.from_dict(doc)
        _check_fabric(fabric)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise TableError(f"{path}: not a fabric ({shorten(f'{type(e).__name__}: {e}', 200)})") from None
    return fabric


def _json(path: str):
    try:
        data = read_bytes(path)
    except InputError as e:
        raise TableError(str(e)) from None
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:   # also an integer of more than 4300 digits; nested too deep
        raise TableError(f"{path}: not JSON: {shorten(str(e), 200)}") from None


_TYPES = {"str": (str,), "int": (int,), "float": (int, float)}


def _check_fabric(fabric: Fabric) -> None:
    """Every field of the right type, names unique, every cable between nodes the fabric has."""
    if not isinstance(fabric.topology, str) or not isinstance(fabric.params, dict):
        raise TypeError("topology must be text and params a table")
    for item in (*fabric.switches, *fabric.hosts, *fabric.links):
        for f in fields(item):
            value = getattr(item, f.name)
            if isinstance(value, bool) or not isinstance(value, _TYPES[f.type]):
                raise TypeError(f"{type(item).__name__} {f.name} = {shorten(repr(value), 60)}")
            least = -1 if f.default == -1 else 0   # -1 where a field defaults to it: not applicable (not in a node)
            if f.type != "str" and not least <= value < math.inf:   # JSON's NaN and Infinity, and 1e999, too
                raise ValueError(f"{type(item).__name__} {f.name} = {shorten(repr(value), 60)}: not a finite "
                                 f"number >= {least}")
    names = [s.name for s in fabric.switches] + [h.name for h in fabric.hosts]
    if len(set(names)) != len(names) or not fabric.hosts:
        raise ValueError("node names repeat, or there are no hosts")
    switches = {s.name for s in fabric.switches}
    stray = sorted({h.switch for h in fabric.hosts} - switches)
    stray += sorted({end for link in fabric.links for end in (link.a, link.b)} - set(names))
    if stray:
        raise ValueError(f"cabled to {stray[0]!r}, which is no switch or node of it")
