"""A damaged results folder, found before anything reads it into a table
(pure): what the typed tables (emulator.records.tables) cannot see alone.
A byte-order mark before a CSV's header, a step or op that ends before it
starts, a rank, call or job the run does not have, a negative utilisation,
count or byte total, a pcap whose records claim more bytes than the file
holds. `check` raises Damaged naming the file and its row; `report` and
the web view call it first, so a damaged folder is refused (exit code 2),
never shown as tables.
"""
from __future__ import annotations

import os
import struct

import numpy as np
import pandas as pd

from emulator.records.tables import TABLES, TableError, read_table

BOM = b"\xef\xbb\xbf"
# columns that count or measure something and are never below zero (blank: not measured)
NOT_NEGATIVE = {
    "collectives.csv": ("max_link_util", "mean_link_util", "queue_drops", "queue_marks", "tcp_retrans"),
    "links.csv": ("util", "backlog_bytes", "drops", "marks"),
    "background.csv": ("bytes",),
    "link_jobs.csv": ("bytes",),
}
TIMED = ("steps.csv", "ops.csv")   # rows with start_s and end_s
PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",      # microsecond timestamps
              b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\x3c\x4d": ">"}      # nanosecond
PCAP_HEADER, RECORD_HEADER = 24, 16


class Damaged(TableError):
    """A results folder's file contradicts itself or its run (bad input: exit code 2)."""


def check(folder: str, plans: list | None = None, tables: dict | None = None) -> None:
    """Damaged naming the first damaged file and row of `folder`. `plans`:
    its runs' plans (None: planned again from spec.json; []: no run to
    hold the tables to; a program's folder has none); `tables`: read_table's
    tables where already read."""
    byte_order_marks(folder)
    if tables is None:
        tables = {name: read_table(os.path.join(folder, name)) for name in TABLES if name != "link_loads.csv"}
    for name, d in tables.items():
        if name in TABLES and d is not None:
            path = os.path.join(folder, name)
            not_negative(path, d, NOT_NEGATIVE.get(name, ()))
            if name in TIMED:
                ends_after_start(path, d)
    if plans is None:
        from emulator.plan.folders import folder_plans, folder_specs, is_program_folder
        plans = [] if is_program_folder(folder) else folder_plans(folder, folder_specs(folder))
    if plans:
        runs_hold(folder, tables, plans)
    if tables.get("captures.csv") is not None:
        for file in tables["captures.csv"]["file"]:
            path = os.path.join(folder, file)
            if os.path.isfile(path):
                pcap_whole(path)


def byte_order_marks(folder: str) -> None:
    """Damaged naming a CSV that starts with a byte-order mark: its first
    column's name would carry it (checked before the tables are read,
    which would miss that column or take the table without it)."""
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.endswith(".csv") and os.path.isfile(path):
            with open(path, "rb") as f:
                if f.read(len(BOM)) == BOM:
                    raise Damaged(f"{path}: line 1: starts with a byte-order mark; save it as UTF-8 without one")


def not_negative(path: str, d: pd.DataFrame, columns) -> None:
    for column in columns:
        if column in d:
            i = _first(d[column] < 0)
            if i is not None:
                raise Damaged(f"{path}: row {i + 1}: {column} {d[column].iloc[i]:g} is negative")


def ends_after_start(path: str, d: pd.DataFrame) -> None:
    i = _first(d["end_s"] < d["start_s"])
    if i is not None:
        raise Damaged(f"{path}: row {i + 1}: ends at {d['end_s'].iloc[i]:g} s, before it starts at "
                      f"{d['start_s'].iloc[i]:g} s")


def runs_hold(folder: str, tables: dict, plans: list) -> None:
    """Every rank, call and job the tables name is one of their run's."""
    for name, column, most in (("steps.csv", "rank", lambda p: p.ranks), ("ops.csv", "rank", lambda p: p.ranks),
                               ("links.csv", "call", lambda p: len(p.calls)),
                               ("captures.csv", "call", lambda p: len(p.calls))):
        d = tables.get(name)
        if d is not None and column in d:
            limit = np.asarray(_per_row(d, plans, most))
            i = _first((d[column] < 0) | (d[column] >= limit))
            if i is not None and "run" in d and int(d["run"].iloc[i]) not in {p.run for p in plans}:
                raise Damaged(f"{os.path.join(folder, name)}: row {i + 1}: run {d['run'].iloc[i]}: spec.json has "
                              f"no such run")
            if i is not None:
                raise Damaged(f"{os.path.join(folder, name)}: row {i + 1}: {column} {d[column].iloc[i]}: its run "
                              f"has {limit[i]} ({column}s 0 to {limit[i] - 1})")
    names = {layout.job.name for plan in plans for program in plan.programs.values() for layout in program.jobs}
    for name in ("jobs.csv", "ops.csv"):
        d = tables.get(name)
        if d is not None and any(plan.is_workload for plan in plans):
            i = _first(~d["job"].isin(names))
            if i is not None:
                raise Damaged(f"{os.path.join(folder, name)}: row {i + 1}: job {d['job'].iloc[i]!r}: the workload "
                              f"has no such job (it has {', '.join(sorted(names))})")


def _per_row(d: pd.DataFrame, plans: list, most) -> list[int]:
    """most(plan) of each row's run (a table without a run column, from an older folder: the largest)."""
    if "run" not in d:
        return [max(most(p) for p in plans)] * len(d)
    by_run = {p.run: most(p) for p in plans}
    return [by_run.get(int(run), 0) for run in d["run"]]


def pcap_whole(path: str) -> None:
    """Damaged if a record's header claims more bytes than the file holds
    after it (a pcap cut short). Other formats are left to the reader."""
    with open(path, "rb") as f:
        data = f.read()
    order = PCAP_MAGIC.get(data[:4])
    if order is None:
        return
    if len(data) < PCAP_HEADER:
        raise Damaged(f"{path}: a pcap header of {len(data)} bytes, short of {PCAP_HEADER}")
    at, record = PCAP_HEADER, 1
    while at < len(data):
        if len(data) - at < RECORD_HEADER:
            raise Damaged(f"{path}: record {record} at byte {at}: its header is cut short "
                          f"({len(data) - at} of {RECORD_HEADER} bytes)")
        claimed = struct.unpack_from(order + "I", data, at + 8)[0]
        held = len(data) - at - RECORD_HEADER
        if claimed > held:
            raise Damaged(f"{path}: record {record} at byte {at}: its header claims {claimed} bytes, the file "
                          f"holds {held} more")
        at += RECORD_HEADER + claimed
        record += 1


def _first(bad) -> int | None:
    """The index of the first bad row (rows numbered from 0 after the header), or None."""
    bad = pd.Series(bad).fillna(False).to_numpy(dtype=bool)
    return int(bad.argmax()) if bad.any() else None
