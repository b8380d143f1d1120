"""Turn agent records into tidy tables: collectives.csv (one row per
counted call, nccl-tests columns plus the model beside the measurement),
steps.csv (every step of every rank) and the printed table."""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from typing import Callable

from emulator.records.captures import CAPTURE_COLUMNS
from emulator.records.links import LINK_COLUMNS, MACHINE_COLUMNS, PORT_COLUMNS
from emulator.records.metrics import algbw_mbps, busbw_mbps
from emulator.results.verdict import COUNTER_COLUMNS, fidelity
from emulator.model.sharing import stretched_time
from emulator.workloads.schedule import chosen_algorithm


@dataclass
class CallRecord:
    """What one call left: the agents' step records and the machine's counters."""
    steps: list[list[dict]]                        # steps[rank] = that rank's step records
    counters: dict = field(default_factory=dict)   # cpu_busy, queue_drops, most_drops_port, tcp_retrans, ...
    links: list[dict] = field(default_factory=list)     # links.csv rows of this call
    machine: list[dict] = field(default_factory=list)   # machine.csv rows of this call
    ports: list[dict] = field(default_factory=list)     # ports.csv rows of this call (the controller's counters)
    captures: list[dict] = field(default_factory=list)  # captures.csv rows of this call (its pcaps)
    model_time_s: float | None = None   # the model on the routes in force, if they differ from the plan's
    counters_between: Callable[[float, float], dict] | None = None   # the counters between two instants of the
                                   # call, seconds since its start (linkstats.window_counters); None: not sampled

# spec keys that tell two runs apart beyond the run keys and rates (so their
# rows never merge in a summary); `run`, the run's place in the experiment,
# joins every table of a folder
SPEC_KEYS = ["connections", "seed", "host_queue_packets", "switch_queue_packets", "link_delay_ms", "link_loss_pct",
             "tcp", "queue_discipline", "ecn_threshold_packets"]
COLLECTIVE_COLUMNS = ["run", "topology", "policy", "collective", "algorithm", "algorithm_used", "mapping", "ranks",
                      "size_bytes", "repetition", "time_s", "algbw_mbps", "busbw_mbps", "model_time_s", "time_over_model",
                      "model", "max_min_time_s", "fidelity", "bytes_ok", *COUNTER_COLUMNS, "host_rate_mbps", "switch_rate_mbps", "mtu",
                      "datapath", "offload", *SPEC_KEYS, "label"]
STEP_COLUMNS = ["run", "topology", "policy", "algorithm", "mapping", "label", "size_bytes", "repetition", "rank",
                "host", "step", "phase", "start_s", "end_s", "bytes_sent", "bytes_received", "model_end_s"]


def call_time(records: list[list[dict]]) -> float:
    """A call ends when its last step ends (on any rank, any channel)."""
    return max((step["end"] for steps in records for step in steps), default=0.0)


def bytes_ok(plan, size: int, records: list[list[dict]]) -> bool:
    """Every rank moved exactly the bytes its schedule says, step by step."""
    sched = plan.schedules[size]
    if len(records) != sched.ranks:
        return False
    for rank, steps in enumerate(records):
        want = sched.steps[rank]
        if len(steps) != len(want):
            return False
        for got, step in zip(steps, want):
            if got["sent"] != sum(t.nbytes for t in step.sends) or \
               got["received"] != sum(t.nbytes for t in step.recvs):
                return False
    return True


def collective_rows(plan, call_records, datapath: str) -> list[dict]:
    """One row per counted call (`call_records`: Emulation.replay's result)."""
    rows = [collective_row(plan, call, rec, datapath) for call, rec in zip(plan.calls, call_records)]
    return [r for r in rows if r is not None]


def collective_row(plan, call, rec: CallRecord, datapath: str) -> dict | None:
    """collectives.csv's row of one call; None for a warm-up call and for
    a workload's (jobs.csv has those)."""
    if call.repetition < 0 or plan.is_workload:
        return None
    s = plan.spec
    t = call_time(rec.steps)
    if t <= 0:
        raise RuntimeError(f"call {call.index} has no step records; the agents reported nothing")
    prediction = plan.predictions[call.size_bytes]
    max_min = rec.model_time_s or prediction.time_s
    # steps stretched by TCP's measured sharing (not on rerouted calls: their steps were not predicted)
    stretched = plan.sharing is not None and not rec.model_time_s
    model = stretched_time(prediction, plan.sharing) if stretched else max_min
    row = {
        **_run_keys(plan), "collective": s.collective, "ranks": plan.ranks,
        # what ran: the algorithm asked for, or the one auto picked for this size
        "algorithm_used": chosen_algorithm(s.collective, s.algorithm, plan.ranks, call.size_bytes),
        "size_bytes": call.size_bytes, "repetition": call.repetition, "time_s": t,
        "algbw_mbps": algbw_mbps(call.size_bytes, t),
        "busbw_mbps": busbw_mbps(s.collective, plan.ranks, call.size_bytes, t),
        "model_time_s": model, "time_over_model": t / model if model else "",
        "model": "tcp" if stretched else "max-min", "max_min_time_s": max_min,
        "fidelity": fidelity(t / model if model else 1.0, rec.counters, prediction.most_flows_on_a_link,
                             "measured TCP sharing" if stretched else "max-min sharing", model,
                             plan.latency_share(call.size_bytes), max_min_s=max_min, bound=plan.bound),
        "bytes_ok": bytes_ok(plan, call.size_bytes, rec.steps),
        **{key: _blank_none(rec.counters.get(key)) for key in COUNTER_COLUMNS},
        "host_rate_mbps": s.host_rate_mbps, "switch_rate_mbps": s.switch_rate_mbps,
        "mtu": s.mtu, "datapath": datapath, "offload": s.offload, **{key: getattr(s, key) for key in SPEC_KEYS}}
    return {key: row[key] for key in COLLECTIVE_COLUMNS}


def _run_keys(plan) -> dict:
    s = plan.spec
    return {"run": plan.run, "topology": plan.fabric.topology, "policy": s.policy, "algorithm": s.algorithm,
            "mapping": s.mapping, "label": s.label}


def _blank_none(value):
    return "" if value is None else value


def step_rows(plan, call_records) -> list[dict]:
    return [row for call, rec in zip(plan.calls, call_records) for row in call_step_rows(plan, call, rec)]


def call_step_rows(plan, call, rec: CallRecord) -> list[dict]:
    """steps.csv's rows of one counted call: every step of every rank."""
    if call.repetition < 0:
        return []
    sched = plan.schedules[call.size_bytes]
    model_ends = plan.predictions[call.size_bytes].step_end_s
    return [{**_run_keys(plan), "size_bytes": call.size_bytes, "repetition": call.repetition,
             "rank": rank, "host": plan.hosts[rank], "step": k, "phase": sched.steps[rank][k].phase,
             "start_s": step["start"], "end_s": step["end"], "bytes_sent": step["sent"],
             "bytes_received": step["received"], "model_end_s": model_ends[rank][k]}
            for rank, steps in enumerate(rec.steps) for k, step in enumerate(steps)]


SERIES_KEYS = ["run", "topology", "policy", "algorithm", "mapping", "label", "size_bytes", "repetition"]
LINK_SERIES_COLUMNS = SERIES_KEYS + LINK_COLUMNS
MACHINE_SERIES_COLUMNS = SERIES_KEYS + MACHINE_COLUMNS
PORT_SERIES_COLUMNS = SERIES_KEYS + PORT_COLUMNS
CAPTURE_SERIES_COLUMNS = SERIES_KEYS + CAPTURE_COLUMNS


def series_rows(plan, call, rows: list[dict]) -> list[dict]:
    """links.csv, machine.csv, ports.csv or captures.csv rows of a call, with the run and call they belong to."""
    keys = {**_run_keys(plan), "size_bytes": call.size_bytes, "repetition": call.repetition}
    return [{**keys, **r} for r in rows]


def write_call(out_dir: str, plan, call, rec: CallRecord, datapath: str) -> dict | list[dict] | None:
    """Append everything one call measured to the results folder, as soon
    as it ends, so a later failure loses nothing; returns its collectives
    row, or for a workload its jobs.csv rows."""
    from emulator.results import jobs
    row = collective_row(plan, call, rec, datapath)
    if row is not None:
        append_csv(os.path.join(out_dir, "collectives.csv"), COLLECTIVE_COLUMNS, [row])
    if plan.is_workload:
        row = jobs.job_rows(plan, call, rec)
        append_csv(os.path.join(out_dir, "jobs.csv"), jobs.JOB_COLUMNS, row)
        append_csv(os.path.join(out_dir, "ops.csv"), jobs.OP_COLUMNS, jobs.op_rows(plan, call, rec.steps))
        flows = jobs.background_rows(plan, call, rec.steps)
        if flows:
            append_csv(os.path.join(out_dir, "background.csv"), jobs.BACKGROUND_COLUMNS, flows)
        row = row or None
    append_csv(os.path.join(out_dir, "steps.csv"), STEP_COLUMNS, call_step_rows(plan, call, rec))
    append_csv(os.path.join(out_dir, "links.csv"), LINK_SERIES_COLUMNS, series_rows(plan, call, rec.links))
    append_csv(os.path.join(out_dir, "machine.csv"), MACHINE_SERIES_COLUMNS, series_rows(plan, call, rec.machine))
    if rec.ports:
        append_csv(os.path.join(out_dir, "ports.csv"), PORT_SERIES_COLUMNS, series_rows(plan, call, rec.ports))
    if rec.captures:
        append_csv(os.path.join(out_dir, "captures.csv"), CAPTURE_SERIES_COLUMNS, series_rows(plan, call, rec.captures))
    return row


MODEL_STEP_COLUMNS = ["run", "size_bytes", "step", "end_s", "max_flows"]


MODEL_STEPS = "model_steps.csv"


def write_model_steps(folder: str, rows: list[dict]) -> str:
    """model_steps.csv of `bigraph-emu model --out`: every step's end and
    busiest link, per run and size; returns its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, MODEL_STEPS)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, MODEL_STEP_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def append_csv(path: str, columns: list[str], rows: list[dict]) -> None:
    """Append rows, writing the header when the file is new. A failed write
    names the file (a write's own error does not: a full disk's would not say which)."""
    new = not os.path.exists(path)
    try:
        with open(path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns)
            if new:
                w.writeheader()
            w.writerows(rows)
    except OSError as e:
        if e.filename:
            raise
        raise OSError(e.errno, e.strerror, path) from e
