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
    resize = [{at_iteration = 2, ranks = 16}]   # elastic: from iteration 2 on, 16 ranks
    stop_ms = 5000                # it leaves then: the iterations that end by then (model, alone)

    [[background]]                # load between two hosts, beside the jobs; not a job
    from = "bgh0"
    to = "bgh5"
    rate_mbps = 20                # steady (a chunk every 10 ms); or burst = "4M" with every_ms = 200
    on_ms = 100                   # optional, with off_ms: sends only in the first on_ms of every on + off
    off_ms = 300
    start_ms = 0
    duration_ms = 2000
"""
from __future__ import annotations

import dataclasses
import os

from emulator.fabric.mapping import MAPPINGS
from emulator.fabric.topology import MAX_RATE_MBPS
from emulator.inputs import MAX_CALL_BYTES, parse_size, shorten, size_name
from emulator.workloads.importers import import_job
from emulator.workloads.algorithms import ALGORITHMS
from emulator.workloads.templates import check_template
from emulator.workloads.job import (CONGESTION_CONTROL, GROUPS, MAX_BACKGROUND, MAX_CHUNKS, MAX_COMPUTE_MS,
                                    MAX_ITERATIONS, MAX_JOBS, MAX_RANKS, OP_KINDS, PACE_S, Background, Job, Op, Workload, WorkloadError, background_job)


# --- reading ---------------------------------------------------------------------

def parse_workload(doc: dict, source: str = "") -> Workload:
    """A workload from a parsed TOML document (or its `workload` table)."""
    where = source or "workload"
    if not isinstance(doc, dict):
        raise WorkloadError(f"{where}: a workload is a table with [[job]] tables")
    extra = sorted(set(doc) - {"job", "background", "hosts", "share_hosts"})
    if extra:
        raise WorkloadError(f"{where}: unknown key(s) {', '.join(extra)}; a workload has [[job]] tables, "
                            "[[background]] tables, a [hosts] table of speeds and share_hosts")
    jobs, flows = doc.get("job"), doc.get("background", [])
    if not isinstance(flows, list) or not all(isinstance(f, dict) for f in flows):
        raise WorkloadError(f"{where}: background must be [[background]] tables")
    if len(flows) > MAX_BACKGROUND:
        raise WorkloadError(f"{where}: {len(flows)} [[background]] tables; at most {MAX_BACKGROUND}")
    if not isinstance(jobs, list) or not jobs or not all(isinstance(j, dict) for j in jobs):
        raise WorkloadError(f"{where}: give at least one [[job]] table"
                            + (": background traffic is load beside jobs, not a workload by itself" if flows else ""))
    if len(jobs) > MAX_JOBS:
        raise WorkloadError(f"{where}: {len(jobs)} jobs; at most {MAX_JOBS}")
    parsed = tuple(_job(j, i, where) for i, j in enumerate(jobs))
    parsed += tuple(_background(f, i, where) for i, f in enumerate(flows))
    names = [j.name for j in parsed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise WorkloadError(f"{where}: the names of jobs and background flows must differ; "
                            f"{', '.join(map(repr, twice))} is used twice")
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


JOB_KEYS = ("name", "ranks", "placement", "seed", "start_ms", "iterations", "duration_ms", "stop_ms", "resize",
            "tp", "pp", "dp", "template", "params", "ops", "import", "tcp")


def _named(table: dict, index: int, where: str, kind: str, default: str, keys: tuple) -> tuple[str, str]:
    """(name, label for messages) of a [[job]] or [[background]] table, its name and keys checked."""
    name = table.get("name", f"{default}{index + 1}")
    label = f"{where}: {kind} {name!r}" if isinstance(name, str) else f"{where}: {kind} {index + 1}"
    if not isinstance(name, str) or not name.strip() or len(name) > 40 or "," in name:
        raise WorkloadError(f"{label}: name must be a short text without commas")
    extra = sorted(set(table) - set(keys))
    if extra:
        raise WorkloadError(f"{label}: unknown key(s) {', '.join(extra)}; {kind} keys: {', '.join(keys)}")
    return name, label


def _job(table: dict, index: int, where: str) -> Job:
    name, label = _named(table, index, where, "job", "job", JOB_KEYS)
    if "import" in table:
        return _imported(table, name, label, where)
    ranks = _int(table.get("ranks", 0), f"{label}: ranks", 0, MAX_RANKS)   # 0: the run's ranks
    tp = _int(table.get("tp", 1), f"{label}: tp", 1, ranks or MAX_RANKS)
    pp = _int(table.get("pp", 1), f"{label}: pp", 1, ranks or MAX_RANKS)
    if ranks and ranks % (tp * pp):
        raise WorkloadError(f"{label}: tp x pp = {tp * pp} does not divide ranks = {ranks}")
    if "dp" in table:
        dp = _int(table["dp"], f"{label}: dp", 1, MAX_RANKS)
        if ranks and dp * tp * pp != ranks:
            raise WorkloadError(f"{label}: tp x dp x pp = {tp} x {dp} x {pp} is not ranks = {ranks}")
        ranks = dp * tp * pp
    placement = table.get("placement", "")   # "": the run's mapping
    if isinstance(placement, list):
        if not placement:
            raise WorkloadError(f"{label}: placement is an empty list of hosts; list the job's hosts, or name a "
                                f"mapping: {', '.join(MAPPINGS)}")
        placement = tuple(placement)
    elif placement and (not isinstance(placement, str) or placement not in MAPPINGS):
        raise WorkloadError(f"{label}: placement {placement!r} is not one of: {', '.join(MAPPINGS)}, "
                            "or a list of hosts")
    template, ops, params = table.get("template", ""), table.get("ops"), table.get("params", {})
    if bool(template) == (ops is not None):
        raise WorkloadError(f"{label}: give either template = NAME or ops = [...], not {'both' if template else 'neither'}")
    if not isinstance(params, dict):
        raise WorkloadError(f"{label}: params must be a table of the template's keys")
    timing = _timing(table, label)
    job = Job(name, ranks, placement, tp=tp, pp=pp, template=str(template), params=tuple(sorted(params.items())),
              ops=tuple(parse_op(op, f"{label}: op {i + 1}") for i, op in enumerate(ops or [])),
              resize=_resize(table.get("resize"), ranks, tp * pp, timing["iterations"], label),
              tcp=_tcp(table, label), **timing)
    if ops is not None and not ops:
        raise WorkloadError(f"{label}: ops is empty")
    if template:
        for size in sorted({job.ranks_in(i) for i in (0, *(at for at, _ in job.resize))}):
            try:
                check_template(dataclasses.replace(job, ranks=size) if size else job)
            except ValueError as e:
                raise WorkloadError(f"{label}: {e}" + (f" (at {size} ranks)" if job.resize else "")) from None
    check_ops(job.ops, label)
    return job


def _resize(entries, ranks: int, unit: int, iterations: int, label: str) -> tuple:
    """An elastic job's resizes: ((iteration, ranks from it on), ...), each
    changing the rank count, in order, within the job's iterations."""
    if entries is None:
        return ()
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise WorkloadError(f"{label}: resize must be a list of tables like {{at_iteration = 20, ranks = 16}}")
    if not ranks:
        raise WorkloadError(f"{label}: resize needs the job's first rank count: give ranks")
    if iterations < 2:
        raise WorkloadError(f"{label}: resize needs iterations >= 2 (a resize happens between two of them)")
    out, last_at, count = [], 0, ranks
    for i, entry in enumerate(entries):
        where = f"{label}: resize {i + 1}"
        extra = sorted(set(entry) - {"at_iteration", "ranks"})
        if extra or set(entry) != {"at_iteration", "ranks"}:
            raise WorkloadError(f"{where}: give at_iteration and ranks, nothing else"
                                + (f" (not {', '.join(extra)})" if extra else ""))
        at = _int(entry["at_iteration"], f"{where}: at_iteration", last_at + 1, iterations - 1)
        new = _int(entry["ranks"], f"{where}: ranks", 1, MAX_RANKS)
        if new % unit:
            raise WorkloadError(f"{where}: tp x pp = {unit} does not divide ranks = {new}")
        if new == count:
            raise WorkloadError(f"{where}: ranks = {new} is the rank count it already has")
        out.append((at, new))
        last_at, count = at, new
    return tuple(out)


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
    clash = sorted({"template", "ops", "tp", "pp", "dp", "resize"} & set(table))
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
                               tcp=_tcp(table, label), **_timing(table, label))


def _tcp(table: dict, label: str) -> str:
    """The job's own congestion control, if it sets one."""
    tcp = table.get("tcp", "")
    if not isinstance(tcp, str) or (tcp and not CONGESTION_CONTROL.match(tcp)):
        raise WorkloadError(f"{label}: tcp = {shorten(repr(tcp))} is not a congestion control's name as the kernel "
                            "names them (e.g. cubic, reno, bbr, dctcp)")
    return tcp


def _timing(table: dict, label: str) -> dict:
    """A job's seed, start and length: iterations, or a duration; and a stop time."""
    if "iterations" in table and "duration_ms" in table:
        raise WorkloadError(f"{label}: give iterations or duration_ms, not both")
    if "stop_ms" in table and "duration_ms" in table:
        raise WorkloadError(f"{label}: stop_ms cuts the job's iterations: give iterations, not duration_ms")
    if "resize" in table and "duration_ms" in table:
        raise WorkloadError(f"{label}: resize needs iterations, not duration_ms (its iteration times differ)")
    start = _number(table.get("start_ms", 0), f"{label}: start_ms", 0, 1e8)
    stop = _number(table["stop_ms"], f"{label}: stop_ms", 0, 1e8) if "stop_ms" in table else 0.0
    if "stop_ms" in table and stop <= start:
        raise WorkloadError(f"{label}: stop_ms = {stop:g} must come after start_ms = {start:g}")
    return {"seed": _int(table.get("seed", 1), f"{label}: seed", 0, 1 << 31),
            "start_s": start / 1e3, "stop_s": stop / 1e3,
            "iterations": _int(table.get("iterations", 1), f"{label}: iterations", 1, MAX_ITERATIONS),
            "duration_s": _number(table.get("duration_ms", 0), f"{label}: duration_ms", 0, 1e8) / 1e3}


BACKGROUND_KEYS = ("name", "from", "to", "rate_mbps", "burst", "every_ms", "on_ms", "off_ms", "start_ms",
                   "duration_ms")


def _background(table: dict, index: int, where: str) -> Job:
    """A [[background]] table: a flow between two hosts at a steady rate or
    in bursts, on and off if asked, as a paced two-rank job (job.background_job)."""
    name, label = _named(table, index, where, "background", "bg", BACKGROUND_KEYS)
    src, dst = (_host_name(table.get(key), f"{label}: {key}") for key in ("from", "to"))
    if src == dst:
        raise WorkloadError(f"{label}: from and to are the same host {src!r}: the flow would cross no link")
    chunk, period, asked = _pattern(table, label)
    on = off = 0.0
    if "on_ms" in table or "off_ms" in table:
        if not ("on_ms" in table and "off_ms" in table):
            raise WorkloadError(f"{label}: give on_ms and off_ms together")
        on, off = (_number(table[key], f"{label}: {key} (at least one period)", period * 1e3, 1e8) / 1e3
                   for key in ("on_ms", "off_ms"))
    if "duration_ms" not in table:
        raise WorkloadError(f"{label}: duration_ms is missing: how long it sends")
    duration = _number(table["duration_ms"], f"{label}: duration_ms (at least one period)", period * 1e3, 1e8) / 1e3
    if duration / period > MAX_CHUNKS:
        raise WorkloadError(f"{label}: duration_ms = {duration * 1e3:g} is {duration / period:.0f} periods of "
                            f"{period * 1e3:g} ms; at most {MAX_CHUNKS}")
    start = _number(table.get("start_ms", 0), f"{label}: start_ms", 0, 1e8) / 1e3
    return background_job(name, Background(src, dst, chunk, period, duration, on, off, asked), start)


def _pattern(table: dict, label: str) -> tuple[int, float, str]:
    """(bytes per period, the period in seconds, what was asked) of a
    steady rate_mbps (a chunk every PACE_S) or a burst every every_ms."""
    if ("rate_mbps" in table) == ("burst" in table):
        raise WorkloadError(f"{label}: give rate_mbps (a steady flow) or burst with every_ms (a storage-like "
                            f"pattern), not {'both' if 'burst' in table else 'neither'}")
    if "rate_mbps" in table:
        if "every_ms" in table:
            raise WorkloadError(f"{label}: every_ms goes with burst; a steady rate_mbps sends every {PACE_S * 1e3:g} ms")
        rate = _number(table["rate_mbps"], f"{label}: rate_mbps", 0, MAX_RATE_MBPS)
        chunk = round(rate * 1e6 * PACE_S / 8)
        if chunk < 1:
            raise WorkloadError(f"{label}: rate_mbps must be above 0 (at least {8 / PACE_S / 1e6:g}: a byte every "
                                f"{PACE_S * 1e3:g} ms), got {table['rate_mbps']!r}")
        return chunk, PACE_S, f"rate_mbps = {rate:g}"
    if "every_ms" not in table:
        raise WorkloadError(f"{label}: burst needs every_ms, the time from one burst to the next")
    try:
        chunk = parse_size(table["burst"])
    except ValueError as e:
        raise WorkloadError(f"{label}: burst: {e}") from None
    period = _number(table["every_ms"], f"{label}: every_ms", 1, 1e8) / 1e3
    asked = f"burst = {size_name(chunk)} every_ms = {period * 1e3:g}"
    if chunk * 8 / period / 1e6 > MAX_RATE_MBPS:
        raise WorkloadError(f"{label}: {asked} is {chunk * 8 / period / 1e6:.0f} Mbit/s; at most {MAX_RATE_MBPS:g}")
    return chunk, period, asked


def _host_name(value, label: str) -> str:
    if value is None:
        raise WorkloadError(f"{label} is missing: a host name like \"bgh0\"")
    if not isinstance(value, str) or not value.strip():
        raise WorkloadError(f"{label} must be a host name like \"bgh0\", got {value!r}")
    return value


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
        return Op(kind, ms=_number(table.get("ms"), f"{label}: compute ms", 0, MAX_COMPUTE_MS))
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
        if peer not in ("next", "prev") and (isinstance(peer, bool) or not isinstance(peer, int)
                                             or not 0 <= peer < MAX_RANKS):
            raise WorkloadError(f"{label}: {kind} peer must be next, prev or a group index (0 to {MAX_RANKS - 1}), "
                                f"got {shorten(repr(peer), 60)}")
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
        nbytes = parse_size(value)
    except ValueError as e:
        raise WorkloadError(f"{label}: bytes: {e}") from None
    if nbytes > MAX_CALL_BYTES:
        raise WorkloadError(f"{label}: bytes: {nbytes} is above the limit of {MAX_CALL_BYTES} (4G) for one op")
    return nbytes


def _int(value, label: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise WorkloadError(f"{label} must be a whole number from {lo} to {hi}, got {value!r}")
    return value


def _number(value, label: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:   # NaN, inf too
        raise WorkloadError(f"{label} must be a number from {lo:g} to {hi:g}, got {value!r}")
    return float(value)


def _text(value, label: str) -> str:
    if not isinstance(value, str):
        raise WorkloadError(f"{label} must be text, got {value!r}")
    return value
