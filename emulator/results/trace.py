"""trace.json (pure): a results folder's timings as a Chrome trace, the
format Perfetto (ui.perfetto.dev) and chrome://tracing open, as the PyTorch
profiler and SimAI write it.

- A process per run of collectives (per run and job of a workload), a
  thread per rank: each call as a slice, its steps nested in it (a
  workload's ops: compute, its collectives).
- A job's iterations as slices on its own threads ("iterations": a second
  one where iterations overlap, as a pipelined job's do).
- A counter per switch-switch link: its use and queue (kB) over time.

One clock: every table counts seconds from its call's start, and nothing
records when a call started, so the calls follow one another in the order
they ran (links.csv's call index, warm-ups included), without the pauses
between them; the trace's zero is the first call's start. Times are in
microseconds, as the format has them.
"""
from __future__ import annotations

import json
import math
import os

import pandas as pd

from emulator.inputs import size_name
from emulator.records.tables import read_runs, read_table

TRACE = "trace.json"
STEP_SLICES_MAX = 100_000   # beyond it a rank's steps of one phase become one slice: a 1,024-rank ring stays small
ITERATIONS_TID = 1_000_000   # a job's iteration threads, after its ranks


# --- the format -------------------------------------------------------------------------

def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def complete(name: str, start_s: float, end_s: float, pid: int, tid: int, args: dict | None = None) -> dict:
    """A complete slice ("X"); start and end rounded first, so slices that
    touch in seconds still touch (never overlap) in microseconds."""
    ts = _us(start_s)
    event = {"name": name, "ph": "X", "ts": ts, "dur": round(max(0.0, _us(end_s) - ts), 3), "pid": pid, "tid": tid}
    if args:
        event["args"] = args
    return event


def counter(name: str, t_s: float, pid: int, values: dict) -> dict:
    return {"name": name, "ph": "C", "ts": _us(t_s), "pid": pid, "tid": 0, "args": values}


def process(pid: int, name: str, sort: int | None = None) -> list[dict]:
    events = [{"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": name}}]
    if sort is not None:
        events.append({"name": "process_sort_index", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
                       "args": {"sort_index": sort}})
    return events


def thread(pid: int, tid: int, name: str) -> dict:
    return {"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {"name": name}}


def write_events(path: str, events: list[dict]) -> str:
    """The trace file (compact JSON: a large trace stays small), replaced whole."""
    tmp = path + ".partial"
    with open(tmp, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f, separators=(",", ":"))
    os.replace(tmp, path)
    return path


# --- a results folder ---------------------------------------------------------------------

def write_trace(out_dir: str) -> str:
    """trace.json of a results folder (its tables checked as the report
    reads them); returns its path."""
    tables = {name: read_table(os.path.join(out_dir, name)) for name in ("steps.csv", "links.csv", "ops.csv",
                                                                          "jobs.csv")}
    runs = read_runs(out_dir) if os.path.exists(os.path.join(out_dir, "spec.json")) else []
    return write_events(os.path.join(out_dir, TRACE), folder_events(tables, runs))


def folder_events(tables: dict, runs: list[dict]) -> list[dict]:
    """The trace's events from steps.csv, links.csv, ops.csv and jobs.csv
    (each a DataFrame or None) and spec.json's runs (to tell which run a
    workload's ops belong to; [] without it)."""
    steps, links = _keyed(tables.get("steps.csv")), _keyed(tables.get("links.csv"))
    ops = _keyed(_with_run(tables.get("ops.csv"), runs))
    jobs = _keyed(_with_run(tables.get("jobs.csv"), runs, ops))
    if steps is not None and ops is not None:   # a workload's steps: its ops say them per job
        steps = steps[steps.size_bytes != 0]
    offsets = call_offsets([steps, links, ops, jobs])
    events = []
    if steps is not None and not steps.empty:
        events += step_events(steps, offsets)
    if ops is not None and not ops.empty:
        events += op_events(ops, jobs, offsets)
    if links is not None and not links.empty:
        events += link_events(links, offsets)
    return in_order(events)


def in_order(events: list[dict]) -> list[dict]:
    """Names first, then by time (stable: a call before the steps it holds)."""
    return sorted(events, key=lambda e: (e["ph"] != "M", e["ts"]))


def _with_run(d: pd.DataFrame | None, runs: list[dict], ops: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """ops.csv or jobs.csv (no run column) with the run each row belongs to:
    the first of spec.json's runs with its topology, policy, mapping,
    workload and label (those the table has; run 0 if none has them). An
    iteration of jobs.csv, which says too little of its run, takes that of
    its ops instead: the k-th row of a job's iteration of one topology,
    policy, label and repetition is the k-th such iteration in ops.csv
    (both list the calls in the order they ran)."""
    if d is None or "run" in d:
        return d
    said = [k for k in ("topology", "policy", "mapping", "workload", "label") if k in d]
    d = d.assign(**{k: d[k].fillna("") for k in said})

    def spec_run(row) -> int:
        return next((i for i, run in enumerate(runs)
                     if all(str(run.get(k) or "") == str(row[k]) for k in said)), 0)
    in_spec = [spec_run(row) for row in d[said].to_dict("records")]
    if ops is None or ops.empty:
        return d.assign(run=in_spec)
    named = ["topology", "policy", "label", "job", "repetition", "iteration"]
    iterations = _iterations(ops)
    ops_runs: dict = {}
    for name, key in zip(iterations[named].itertuples(index=False, name=None), iterations.key):
        ops_runs.setdefault(name, []).append(key[0])
    seen: dict = {}
    found = []
    for name, fallback in zip(pd.DataFrame(d[named]).assign(iteration=pd.to_numeric(d.iteration)).itertuples(
            index=False, name=None), in_spec):
        k = seen[name] = seen.get(name, -1) + 1
        found.append(ops_runs[name][k] if k < len(ops_runs.get(name, [])) else fallback)
    return d.assign(run=found)


def _iterations(ops: pd.DataFrame) -> pd.DataFrame:
    """A job's iterations from its ops: first rank's start to last rank's end."""
    keys = [k for k in ("key", "topology", "policy", "label", "job", "repetition", "iteration") if k in ops]
    return ops.groupby(keys, sort=False).agg(start_s=("start_s", "min"), end_s=("end_s", "max")).reset_index()


def _keyed(d: pd.DataFrame | None) -> pd.DataFrame | None:
    """The table with a call key on every row, (run, size_bytes,
    repetition); older folders without a run column are run 0, a workload's
    tables size 0 (its one program)."""
    if d is None:
        return None
    d = d if "run" in d else d.assign(run=0)
    d = d if "size_bytes" in d else d.assign(size_bytes=0)
    if "label" in d:
        d = d.assign(label=d.label.fillna(""))
    d = d.assign(**{c: pd.to_numeric(d[c], errors="coerce") for c in ("start_s", "end_s", "t_s", "iteration") if c in d})
    return d.assign(key=list(zip(d.run.astype(int), d.size_bytes.astype(int), d.repetition.astype(int))))


def call_offsets(tables: list) -> dict:
    """{call key: seconds to add to its times}: the calls end to end, in the
    order they ran (links.csv's call index where every call has one, else
    as the tables list them), each from its earliest time to its latest."""
    first, last, index = {}, {}, {}
    for d in tables:
        if d is None or d.empty:
            continue
        begins = d.start_s if "start_s" in d else d.t_s
        ends = d.end_s if "end_s" in d else d.t_s
        for key, b, e in zip(d.key, begins, ends):
            first[key] = min(first.get(key, 0.0), b)
            last[key] = max(last.get(key, 0.0), e)
        if "call" in d:
            index.update(zip(d.key, d.call))
    order = sorted(first, key=index.get) if set(first) <= set(index) else list(first)
    offsets, clock = {}, 0.0
    for key in order:
        offsets[key] = clock - first[key]
        clock = offsets[key] + last[key]
    return offsets


def step_events(steps: pd.DataFrame, offsets: dict) -> list[dict]:
    """A process per run, a thread per rank: each call a slice, its steps
    in it (merged per phase beyond STEP_SLICES_MAX)."""
    events = []
    merge = len(steps) > STEP_SLICES_MAX
    for run, rows in steps.groupby("run", sort=True):
        pid = int(run) + 1
        first = rows.iloc[0]
        events += process(pid, f"run {run}: " + " ".join(str(first.get(k, "")) for k in
                                                           ("topology", "algorithm", "mapping", "policy", "label")
                                                           if str(first.get(k, ""))), int(run))
        hosts = rows.drop_duplicates("rank").set_index("rank").get("host")
        events += [thread(pid, int(rank), f"rank {rank}" + (f" ({hosts[rank]})" if hosts is not None else ""))
                   for rank in sorted(rows["rank"].unique())]
        for key, call in rows.groupby("key", sort=False):
            shift, end = offsets[key], call.end_s.max()
            name = f"{size_name(key[1])} rep {key[2]}"
            for rank, ranked in call.groupby("rank", sort=True):
                events.append(complete(name, shift + min(0.0, ranked.start_s.min()), shift + end, pid, int(rank),
                                       {"size_bytes": key[1], "repetition": key[2], "call_ms": round(end * 1e3, 3)}))
                events += _rank_steps(ranked.sort_values("step"), shift, pid, int(rank), merge)
    return events


def _rank_steps(steps: pd.DataFrame, shift: float, pid: int, tid: int, merge: bool) -> list[dict]:
    if merge:   # a slice per run of steps of one phase
        runs = (steps.phase != steps.phase.shift()).cumsum()
        return [complete(str(part.phase.iloc[0]), shift + part.start_s.iloc[0], shift + part.end_s.iloc[-1], pid, tid,
                         {"steps": f"{part.step.iloc[0]}-{part.step.iloc[-1]}"})
                for _, part in steps.groupby(runs, sort=True)]
    events = []
    for s in steps.to_dict("records"):
        args = {"step": s["step"], **{k: s[k] for k in ("bytes_sent", "bytes_received") if k in s}}
        if _number(s.get("model_end_s")):
            args["model_end_ms"] = round(s["model_end_s"] * 1e3, 3)
        events.append(complete(f"step {s['step']} {s['phase']}", shift + s["start_s"], shift + s["end_s"], pid, tid,
                               args))
    return events


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def op_events(ops: pd.DataFrame, jobs: pd.DataFrame | None, offsets: dict) -> list[dict]:
    """A process per run and job, a thread per rank of the job with its
    ops, and its iterations (jobs.csv's, else from the ops) on threads of
    their own."""
    events = []
    for n, ((run, job), rows) in enumerate(ops.groupby(["run", "job"], sort=True)):
        pid = 1000 + n
        events += process(pid, f"run {run} job {job}", 1000 + n)
        events += [thread(pid, int(rank), f"rank {rank} ({host})")
                   for rank, host in rows.drop_duplicates("rank").sort_values("rank")[["rank", "host"]].itertuples(
                       index=False)]
        for o in rows.sort_values(["rank", "key", "start_s"]).to_dict("records"):
            events.append(complete(str(o["kind"]), offsets[o["key"]] + o["start_s"], offsets[o["key"]] + o["end_s"],
                                   pid, int(o["rank"]), {"iteration": o["iteration"], "op": o["op"]}))
        mine = jobs[(jobs.run == run) & (jobs.job == job)] if jobs is not None else None
        events += _iteration_events(mine if mine is not None and not mine.empty else _iterations(rows), offsets, pid)
    return events


def _iteration_events(iterations: pd.DataFrame, offsets: dict, pid: int) -> list[dict]:
    """Each iteration a slice on the first "iterations" thread free at its
    start: overlapping iterations go on separate threads, so slices nest."""
    lanes, events = [], []
    spans = sorted((offsets[i["key"]] + i["start_s"], offsets[i["key"]] + i["end_s"], i)
                   for i in iterations.to_dict("records"))
    for start, end, i in spans:
        lane = next((n for n, free in enumerate(lanes) if free <= _us(start)), len(lanes))
        if lane == len(lanes):
            lanes.append(0.0)
            events.append(thread(pid, ITERATIONS_TID + lane, "iterations" + (f" {lane + 1}" if lane else "")))
        lanes[lane] = _us(end)
        args = {k: i[k] for k in ("time_s", "model_time_s", "fidelity") if k in i and i[k] == i[k]}
        events.append(complete(f"iteration {i['iteration']}", start, end, pid, ITERATIONS_TID + lane,
                               {"repetition": i["repetition"], **args}))
    return events


def link_events(links: pd.DataFrame, offsets: dict) -> list[dict]:
    """A counter per switch-switch link in its run's process: use (0..1)
    and queue (kB) over each sample interval, from the interval's start; a
    sample only where they changed, back to 0 after each call."""
    switch = links[links.kind == "switch"]
    events = []
    for (run, link), rows in switch.groupby(["run", "link"], sort=True):
        pid, said = int(run) + 1, None
        for key, call in rows.groupby("key", sort=False):
            times = call.t_s.to_list()
            starts = [times[0] - (times[1] - times[0]) if len(times) > 1 else 0.0] + times[:-1]
            queue = call.backlog_bytes if "backlog_bytes" in call else pd.Series([0.0] * len(call))
            samples = [(max(0.0, start) if n == 0 else start, _value(use), _value(q) / 1e3)
                       for n, (start, use, q) in enumerate(zip(starts, call.util, queue))]
            samples.append((times[-1], 0.0, 0.0))
            for t, use, kb in samples:
                if (use, kb) != said:
                    events.append(counter(f"link {link}", offsets[key] + t, pid, {"use": use, "queue_kB": kb}))
                    said = (use, kb)
    return events


def _value(x) -> float:
    return 0.0 if x != x else round(float(x), 4)   # a blank (not sampled): 0


# --- the model's prediction ---------------------------------------------------------------

def write_model_trace(folder: str, runs: list[dict]) -> str:
    """trace.json of `bigraph-emu model --out` (model_events' runs); returns its path."""
    os.makedirs(folder, exist_ok=True)
    return write_events(os.path.join(folder, TRACE), model_events(runs))


def model_events(runs: list[dict]) -> list[dict]:
    """The trace of `bigraph-emu model`: per run (`name`; a collective's
    `sizes` and `steps` rows, a workload's `jobs` rows, as the model returns
    them) a process. The model gives each step's end over all ranks, not
    per rank: one thread holds each size as a slice (one after another),
    step k in it from the end of step k-1 to when the last rank ended it;
    a workload's iterations go on threads per job."""
    events = []
    for n, run in enumerate(runs):
        pid = n + 1
        events += process(pid, f"run {n}: {run['name']} (model)", n)
        if run.get("jobs"):
            events += _model_jobs(run["jobs"], pid)
            continue
        events.append(thread(pid, 0, "all ranks: each step until its last rank ended it"))
        clock = 0.0
        for size in run["sizes"]:
            ends = [s["end_s"] for s in run["steps"] if s["size_bytes"] == size["size_bytes"]]
            events.append(complete(size_name(size["size_bytes"]), clock, clock + size["time_s"], pid, 0,
                                   {"time_ms": round(size["time_s"] * 1e3, 3),
                                    "busbw_mbps": round(size["busbw_mbps"], 3)}))
            begin = 0.0
            for k, end in enumerate(ends):
                end = min(max(begin, end), size["time_s"])   # in the size's slice, one after another
                events.append(complete(f"step {k}", clock + begin, clock + end, pid, 0))
                begin = end
            clock += size["time_s"]
    return in_order(events)


def _model_jobs(rows: list[dict], pid: int) -> list[dict]:
    events, names = [], list(dict.fromkeys(r["job"] for r in rows))
    for j, job in enumerate(names):
        mine = pd.DataFrame([r for r in rows if r["job"] == job]).assign(key=0, repetition=0)
        got = _iteration_events(mine, {0: 0.0}, pid)
        for e in got:   # each job's threads apart from the others'
            e["tid"] += j * 100 - ITERATIONS_TID
            if e["ph"] == "M":
                e["args"] = {"name": f"{job} " + e["args"]["name"]}
        events += got
    return events
