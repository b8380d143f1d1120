"""A sweep's table and what it says (pure): sweep.csv's columns, its rows
appended as points finish, the points already in it (to resume), and the
summary: best and worst points, and which factor moves the time most."""
from __future__ import annotations

import collections
import csv
import io
import os
import statistics

from emulator.inputs import MAX_TABLE_BYTES, InputError, read_text, to_float, to_int
from emulator.spec.experiment import SpecError
from emulator.spec.sweep import factor_text
from emulator.results.verdict import trusted

# One row per point and message size (a workload's point: one row, no size).
COLUMNS = ("point", "key", "topology", "policy", "mapping", "algorithm", "collective", "ranks", "seed",
           "size_bytes", "model_time_s", "model_algbw_mbps", "model_busbw_mbps", "approximation", "job_slowdowns",
           "emulated", "emulated_time_s", "emulated_busbw_mbps", "time_over_model", "verdict", "results",
           "worker", "started_s", "ended_s", "wall_s", "version", "model_version", "error")
SPEC_COLUMNS = ("topology", "policy", "mapping", "algorithm", "collective", "ranks", "seed")
FILE = "sweep.csv"


def header(factors: list[str]) -> list[str]:
    """COLUMNS, then every factor the fixed columns do not already hold."""
    return list(COLUMNS) + [f for f in factors if f not in COLUMNS]


def spec_cells(point) -> dict:
    """The cells every row of a point carries: its place, key, spec and factors."""
    cells = {"point": point.index + 1, "key": point.key, **{k: getattr(point.spec, k) for k in SPEC_COLUMNS}}
    return {**cells, **{k: factor_text(v) for k, v in point.factors.items() if k not in cells}}


def model_rows(point, got: dict) -> list[dict]:
    """Rows of the model's prediction of a point (plan.predictions: a sweep's or a workload's)."""
    cells = {**spec_cells(point), "ranks": got["ranks"]}
    if "jobs" in got:   # a workload: one row, its makespan and the slowdown of each job (mean over its iterations)
        by_job = collections.defaultdict(list)
        for row in got["jobs"]:
            by_job[row["job"]].append(row)
        return [{**cells, "model_time_s": max(r["end_s"] for r in got["jobs"]), "approximation": got["approximation"],
                 "job_slowdowns": ";".join(f"{job}:{statistics.fmean(r['slowdown'] for r in rows):.4f}"
                                           for job, rows in by_job.items())}]
    return [{**cells, "size_bytes": s["size_bytes"], "model_time_s": s["time_s"], "model_algbw_mbps": s["algbw_mbps"],
             "model_busbw_mbps": s["busbw_mbps"], "approximation": s["approximation"]} for s in got["sizes"]]


def error_rows(point, error: str) -> list[dict]:
    return [{**spec_cells(point), "error": error}]


class SweepTable:
    """sweep.csv in a folder: rows appended and flushed as points finish."""

    def __init__(self, folder: str, factors: list[str]):
        self.path = os.path.join(folder, FILE)
        self.columns = header(factors)
        if os.path.exists(self.path):
            check_columns(folder, factors)
            self._file = open(self.path, "a", newline="")
            self._writer = csv.DictWriter(self._file, self.columns)
        else:
            self._file = open(self.path, "w", newline="")
            self._writer = csv.DictWriter(self._file, self.columns)
            self._writer.writeheader()
            self._file.flush()

    def add(self, rows: list[dict]) -> None:
        """A point's rows, written together: a point is in the file whole or not at all."""
        self._writer.writerows(rows)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def check_columns(folder: str, factors: list[str]) -> None:
    """SpecError unless the folder's sweep.csv has this sweep's columns."""
    path = os.path.join(folder, FILE)
    found = _read(path)[0]
    if found != header(factors):
        extra = sorted(set(found) ^ set(header(factors)))
        raise SpecError(f"{path} has other columns than this sweep's (differing: {', '.join(extra) or 'their order'}): "
                        "it holds another sweep's points")


def read_rows(folder: str) -> list[dict]:
    path = os.path.join(folder, FILE)
    if not os.path.lexists(path):
        return []
    return _read(path)[1]


# cells a resumed sweep computes with: blank, or a number of this kind
NUMBER_CELLS = {"point": to_int, "size_bytes": to_int, "model_time_s": to_float, "emulated_time_s": to_float}


def _read(path: str) -> tuple[list[str], list[dict]]:
    """sweep.csv's header and rows (dicts of text), every row with the
    header's fields and the cells NUMBER_CELLS names blank or numbers;
    SpecError names the line otherwise."""
    try:
        reader = csv.reader(io.StringIO(read_text(path, MAX_TABLE_BYTES), newline=""))
        columns = next(reader, [])
        rows = [(reader.line_num, row) for row in reader if row]
    except InputError as e:
        raise SpecError(str(e)) from None
    except csv.Error as e:   # a NUL byte, an unclosed quote
        raise SpecError(f"{path}: line {reader.line_num}: not a CSV row ({e})") from None
    table = []
    for line, row in rows:
        if len(row) != len(columns):
            raise SpecError(f"{path}: line {line}: {len(row)} fields; its header has {len(columns)}")
        cells = dict(zip(columns, row))
        for column, number in NUMBER_CELLS.items():
            try:
                if cells.get(column):
                    number(cells[column])
            except ValueError as e:
                raise SpecError(f"{path}: line {line}: {column}: {e}") from None
        table.append(cells)
    return columns, table


def done_keys(rows: list[dict]) -> dict[str, set[str]]:
    """The points the table holds without an error: {"model": keys, "emulated": keys}."""
    done = {"model": set(), "emulated": set()}
    for row in rows:
        if not row["error"]:
            done["emulated" if row["emulated"] == "yes" else "model"].add(row["key"])
    return done


# --- what the table says ---------------------------------------------------------------

def _time(row: dict) -> float | None:
    """The point's time: measured where emulated, else the model's; None for a failed point."""
    for key in ("emulated_time_s", "model_time_s"):
        if row.get(key) not in (None, ""):
            return float(row[key])
    return None


def best_and_worst(rows: list[dict], n: int) -> dict:
    """Per size: the n fastest and the n slowest points (rows), by the model's time."""
    by_size = collections.defaultdict(list)
    for row in rows:
        if row.get("model_time_s") not in (None, ""):
            by_size[row.get("size_bytes", "")].append(row)
    ranked = {size: sorted(group, key=lambda r: (float(r["model_time_s"]), int(r["point"])))
              for size, group in by_size.items()}
    return {size: (group[:n], group[-n:][::-1]) for size, group in ranked.items()}


def factor_effects(rows: list[dict], factors: list[str]) -> list[tuple[str, float, int]]:
    """(factor, its effect, comparisons), largest effect first. A factor's
    effect: the median, over every set of points that differ in it alone
    (same size, every other factor equal), of the slowest point's time
    over the fastest one's."""
    effects = []
    for factor in factors:
        groups = collections.defaultdict(dict)
        for row in rows:
            t = _time(row)
            if t is None or t <= 0:
                continue
            context = (row.get("size_bytes"),) + tuple(row.get(f) for f in factors if f != factor)
            groups[context][row.get(factor)] = t
        ratios = [max(g.values()) / min(g.values()) for g in groups.values() if len(g) > 1]
        if ratios:
            effects.append((factor, statistics.median(ratios), len(ratios)))
    return sorted(effects, key=lambda e: -e[1])


def order_agreement(pairs: list[tuple[float, float]]) -> tuple[int, int]:
    """(pairs of points in the same order by the model as measured, pairs
    compared): Kendall's concordance, ties in either counted as agreeing."""
    same = total = 0
    for i in range(len(pairs)):
        for j in range(i + 1, len(pairs)):
            (m1, e1), (m2, e2) = pairs[i], pairs[j]
            total += 1
            same += (m1 - m2) * (e1 - e2) >= 0
    return same, total


def emulated_rows(point, run_folder: str) -> list[dict]:
    """Rows of a point emulated into `run_folder`: per size the median
    counted call's time and busbw, the model's time on the emulated fabric,
    and the verdict ("ok", or how many calls failed it)."""
    calls = collections.defaultdict(list)
    path = os.path.join(run_folder, "collectives.csv")
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            calls[int(row["size_bytes"])].append(row)
    rows = []
    for size, group in calls.items():
        failed = sum(not trusted(r["fidelity"]) or r["bytes_ok"] != "True" for r in group)
        time_s = statistics.median(float(r["time_s"]) for r in group)
        model_s = statistics.median(float(r["model_time_s"]) for r in group)
        rows.append({**spec_cells(point), "topology": group[0]["topology"], "ranks": group[0]["ranks"],
                     "size_bytes": size, "model_time_s": model_s, "emulated": "yes", "emulated_time_s": time_s,
                     "emulated_busbw_mbps": statistics.median(float(r["busbw_mbps"]) for r in group),
                     "time_over_model": time_s / model_s, "results": run_folder,
                     "verdict": "ok" if not failed else f"FAIL: {failed} of {len(group)} calls"})
    return rows
