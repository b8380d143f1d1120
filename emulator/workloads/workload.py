"""Workload files (pure): jobs and their ops read from TOML into the types of
emulator.workloads.job, every key checked, templates and importers looked up.

    [hosts]                       # compute speed per host (1: nominal)
    bgh3 = 0.5
    [[job]]
    name = "a"
    ranks = 8
    placement = "round-robin"     # naive, round-robin, random (seed), hdrm, ["bgh0", ...];
                                  # left out: the run's mapping (-m), so that compare can vary it
    iterations = 3
    start_ms = 0                  # it joins later; duration_ms instead of iterations: it leaves
    dp = 8                        # tp * dp * pp = ranks (Megatron order: tp fastest)
    ops = [{op = "compute", ms = 20},
           {op = "allreduce", bytes = "8M", group = "dp", async = true, tag = "g"},
           {op = "compute", ms = 30}, {op = "wait", tag = "g"}]
"""
from __future__ import annotations

import dataclasses
import math
import os

from emulator.fabric.mapping import MAPPINGS
from emulator.inputs import parse_size
from emulator.workloads.importers import import_job
from emulator.workloads.algorithms import ALGORITHMS
from emulator.workloads.templates import check_template
from emulator.workloads.job import GROUPS, MAX_ITERATIONS, MAX_JOBS, OP_KINDS, Job, Op, Workload, WorkloadError


# --- reading ---------------------------------------------------------------------

def parse_workload(doc: dict, source: str = "") -> Workload:
    """A workload from a parsed TOML document (or its `workload` table)."""
    where = source or "workload"
    if not isinstance(doc, dict):
        raise WorkloadError(f"{where}: a workload is a table with [[job]] tables")
    extra = sorted(set(doc) - {"job", "hosts", "share_hosts"})
    if extra:
        raise WorkloadError(f"{where}: unknown key(s) {', '.join(extra)}; a workload has [[job]] tables, "
                            "a [hosts] table of speeds and share_hosts")
    jobs = doc.get("job")
    if not isinstance(jobs, list) or not jobs or not all(isinstance(j, dict) for j in jobs):
        raise WorkloadError(f"{where}: give at least one [[job]] table")
    if len(jobs) > MAX_JOBS:
        raise WorkloadError(f"{where}: {len(jobs)} jobs; at most {MAX_JOBS}")
    parsed = tuple(_job(j, i, where) for i, j in enumerate(jobs))
    names = [j.name for j in parsed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise WorkloadError(f"{where}: job names must differ; {', '.join(map(repr, twice))} is used twice")
    share = doc.get("share_hosts", False)
    if not isinstance(share, bool):
        raise WorkloadError(f"{where}: share_hosts must be true or false, got {share!r}")
    return Workload(parsed, _speeds(doc.get("hosts", {}), where), share, source)


def _speeds(table, where: str) -> tuple:
    if not isinstance(table, dict):
        raise WorkloadError(f"{where}: [hosts] must be a table of host = speed factor")
    out = []
    for host, factor in sorted(table.items()):
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0.01 <= factor <= 100:
            raise WorkloadError(f"{where}: [hosts] {host}: speed must be a number from 0.01 to 100, got {factor!r}")
        out.append((host, float(factor)))
    return tuple(out)


JOB_KEYS = ("name", "ranks", "placement", "seed", "start_ms", "iterations", "duration_ms", "tp", "pp", "dp",
            "template", "params", "ops", "import")


def _job(table: dict, index: int, where: str) -> Job:
    name = table.get("name", f"job{index + 1}")
    label = f"{where}: job {name!r}" if isinstance(name, str) else f"{where}: job {index + 1}"
    if not isinstance(name, str) or not name.strip() or len(name) > 40 or "," in name:
        raise WorkloadError(f"{label}: name must be a short text without commas")
    extra = sorted(set(table) - set(JOB_KEYS))
    if extra:
        raise WorkloadError(f"{label}: unknown key(s) {', '.join(extra)}; job keys: {', '.join(JOB_KEYS)}")
    if "import" in table:
        return _imported(table, name, label, where)
    ranks = _int(table.get("ranks", 0), f"{label}: ranks", 0, 1 << 20)   # 0: the run's ranks
    tp = _int(table.get("tp", 1), f"{label}: tp", 1, ranks or 1 << 20)
    pp = _int(table.get("pp", 1), f"{label}: pp", 1, ranks or 1 << 20)
    if ranks and ranks % (tp * pp):
        raise WorkloadError(f"{label}: tp x pp = {tp * pp} does not divide ranks = {ranks}")
    if "dp" in table:
        dp = _int(table["dp"], f"{label}: dp", 1, 1 << 20)
        if ranks and dp * tp * pp != ranks:
            raise WorkloadError(f"{label}: tp x dp x pp = {tp} x {dp} x {pp} is not ranks = {ranks}")
        ranks = dp * tp * pp
    placement = table.get("placement", "")   # "": the run's mapping
    if isinstance(placement, list):
        placement = tuple(placement)
    elif placement and (not isinstance(placement, str) or placement not in MAPPINGS):
        raise WorkloadError(f"{label}: placement {placement!r} is not one of: {', '.join(MAPPINGS)}, "
                            "or a list of hosts")
    template, ops, params = table.get("template", ""), table.get("ops"), table.get("params", {})
    if bool(template) == (ops is not None):
        raise WorkloadError(f"{label}: give either template = NAME or ops = [...], not {'both' if template else 'neither'}")
    if not isinstance(params, dict):
        raise WorkloadError(f"{label}: params must be a table of the template's keys")
    job = Job(name, ranks, placement, tp=tp, pp=pp, template=str(template), params=tuple(sorted(params.items())),
              ops=tuple(parse_op(op, f"{label}: op {i + 1}") for i, op in enumerate(ops or [])),
              **_timing(table, label))
    if ops is not None and not ops:
        raise WorkloadError(f"{label}: ops is empty")
    if template:
        try:
            check_template(job)
        except ValueError as e:
            raise WorkloadError(f"{label}: {e}") from None
    check_ops(job.ops, label)
    return job


def import_path(reference: str, where: str) -> tuple[str, str]:
    """(format, file) of a job's import = "FORMAT:FILE" in the workload file
    `where`: a relative FILE is taken beside that file."""
    fmt, _, path = reference.partition(":")
    if where.endswith(".toml") and path and not os.path.isabs(path):
        path = os.path.join(os.path.dirname(where), path)
    return fmt, path


def imported_files(doc: dict, where: str) -> list[str]:
    """The files the jobs of a workload document import (its TOML file: `where`)."""
    jobs = doc.get("job", []) if isinstance(doc, dict) else []
    return [import_path(j["import"], where)[1] for j in jobs
            if isinstance(j, dict) and isinstance(j.get("import"), str)]


def _imported(table: dict, name: str, label: str, where: str) -> Job:
    """A job read from another simulator's file (emulator.workloads.importers); its
    path is taken beside the workload file; params are the importer's options."""
    reference = table["import"]
    clash = sorted({"template", "ops", "tp", "pp", "dp"} & set(table))
    if not isinstance(reference, str) or clash:
        raise WorkloadError(f"{label}: import = \"FORMAT:FILE\" takes the job's program and groups from the file; "
                            f"not with {', '.join(clash) or 'a non-text value'}")
    fmt, path = import_path(reference, where)
    options = dict(table.get("params", {}))
    if "ranks" in table:
        options["ranks"] = table["ranks"]
    try:
        job = import_job(f"{fmt}:{path}", name, options)
    except WorkloadError as e:
        raise WorkloadError(f"{label}: {e}") from None
    placement = table.get("placement", "")
    return dataclasses.replace(job, placement=tuple(placement) if isinstance(placement, list) else placement,
                               **_timing(table, label))


def _timing(table: dict, label: str) -> dict:
    """A job's seed, start and length: iterations, or a duration."""
    if "iterations" in table and "duration_ms" in table:
        raise WorkloadError(f"{label}: give iterations or duration_ms, not both")
    return {"seed": _int(table.get("seed", 1), f"{label}: seed", 0, 1 << 31),
            "start_s": _number(table.get("start_ms", 0), f"{label}: start_ms", 0, 1e8) / 1e3,
            "iterations": _int(table.get("iterations", 1), f"{label}: iterations", 1, MAX_ITERATIONS),
            "duration_s": _number(table.get("duration_ms", 0), f"{label}: duration_ms", 0, 1e8) / 1e3}


OP_KEYS = {"compute": ("op", "ms"), "wait": ("op", "tag"),
           "send": ("op", "bytes", "group", "to", "async", "tag"),
           "recv": ("op", "bytes", "group", "from", "async", "tag")}
COLLECTIVE_KEYS = ("op", "bytes", "group", "algorithm", "async", "tag", "matrix")


def parse_op(table, label: str) -> Op:
    """One op table: {op = "compute", ms = 5}, {op = "allreduce", bytes = "25M", async = true, ...}."""
    if not isinstance(table, dict):
        raise WorkloadError(f"{label}: an op is a table like {{op = \"compute\", ms = 5}}, got {table!r}")
    kind = table.get("op")
    if kind not in OP_KINDS:
        raise WorkloadError(f"{label}: op {kind!r} is not one of: {', '.join(OP_KINDS)}")
    allowed = OP_KEYS.get(kind, COLLECTIVE_KEYS)
    extra = sorted(set(table) - set(allowed))
    if extra:
        raise WorkloadError(f"{label}: {kind} takes {', '.join(allowed)}, not {', '.join(extra)}")
    if kind == "compute":
        return Op(kind, ms=_number(table.get("ms"), f"{label}: compute ms", 0, 1e7))
    if kind == "wait":
        return Op(kind, tag=_text(table.get("tag", ""), f"{label}: tag"))
    group = table.get("group", "pp" if kind in ("send", "recv") else "world")
    if group not in GROUPS:
        raise WorkloadError(f"{label}: group {group!r} is not one of: {', '.join(GROUPS)}")
    nonblocking = table.get("async", False)
    if not isinstance(nonblocking, bool):
        raise WorkloadError(f"{label}: async must be true or false, got {nonblocking!r}")
    common = dict(group=group, nonblocking=nonblocking, tag=_text(table.get("tag", ""), f"{label}: tag"))
    if kind in ("send", "recv"):
        peer = table.get("to" if kind == "send" else "from", "next" if kind == "send" else "prev")
        if peer not in ("next", "prev") and (isinstance(peer, bool) or not isinstance(peer, int) or peer < 0):
            raise WorkloadError(f"{label}: {kind} peer must be next, prev or a group index, got {peer!r}")
        return Op(kind, nbytes=_size(table.get("bytes"), label), peer=str(peer), **common)
    algorithm = table.get("algorithm", "")   # "": the run's algorithm
    if algorithm and algorithm not in ALGORITHMS:
        raise WorkloadError(f"{label}: algorithm {algorithm!r} is not one of: {', '.join(ALGORITHMS)}")
    matrix = table.get("matrix")
    if matrix is not None:
        if kind != "all-to-all":
            raise WorkloadError(f"{label}: matrix is for all-to-all only")
        return Op(kind, matrix=_matrix(matrix, label), **common)
    return Op(kind, nbytes=_size(table.get("bytes"), label), algorithm=algorithm, **common)


def check_ops(ops, label: str) -> None:
    """A wait names a tag some earlier async op carries."""
    tags = set()
    for i, op in enumerate(ops):
        if op.kind == "wait" and op.tag and op.tag not in tags:
            raise WorkloadError(f"{label}: op {i + 1}: wait for tag {op.tag!r}, which no earlier async op has")
        if op.nonblocking and op.tag:
            tags.add(op.tag)


def _matrix(rows, label: str) -> tuple:
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) and len(r) == len(rows) for r in rows):
        raise WorkloadError(f"{label}: matrix must be a square list of lists of byte counts")
    try:
        return tuple(tuple(0 if v == 0 else parse_size(v) for v in r) for r in rows)
    except ValueError as e:
        raise WorkloadError(f"{label}: matrix: {e}") from None


def _size(value, label: str) -> int:
    if value is None:
        raise WorkloadError(f"{label}: bytes is missing")
    try:
        return parse_size(value)
    except ValueError as e:
        raise WorkloadError(f"{label}: bytes: {e}") from None


def _int(value, label: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise WorkloadError(f"{label} must be a whole number from {lo} to {hi}, got {value!r}")
    return value


def _number(value, label: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not lo <= value <= hi:
        raise WorkloadError(f"{label} must be a number from {lo:g} to {hi:g}, got {value!r}")
    return float(value)


def _text(value, label: str) -> str:
    if not isinstance(value, str):
        raise WorkloadError(f"{label} must be text, got {value!r}")
    return value
