"""Jobs' results (pure): iteration times, exposed communication and
slowdown, measured (from the agents' step records) and modelled, as
jobs.csv has them; and every op of every rank (ops.csv). Background flows
are load, not jobs: background.csv has their bytes and rates, and neither
jobs.csv nor the verdict counts them."""
from __future__ import annotations

from emulator.model.iterations import iterations, measured
from emulator.plan.modelled_jobs import modelled_jobs, placement_name
from emulator.records.links import link_label
from emulator.results.verdict import COUNTER_COLUMNS, fidelity

JOB_COLUMNS = ["topology", "policy", "algorithm", "job", "jobs", "background_flows", "ranks", "placement", "repetition",
               "iteration", "start_s", "end_s",
               "time_s", "compute_s", "comm_s", "model_time_s", "model_comm_s", "alone_model_s", "alone_s",
               "slowdown", "slowdown_basis", "fidelity", *COUNTER_COLUMNS, "counters_of", "tcp", "label"]
OP_COLUMNS = ["topology", "policy", "mapping", "workload", "label", "job", "repetition", "iteration", "rank", "host", "op", "kind", "start_s", "end_s",
              "bytes_sent", "bytes_received"]


def job_rows(plan, call, record) -> list[dict]:
    """jobs.csv's rows of one counted call (a CallRecord) of a workload run."""
    if call.repetition < 0:
        return []
    layouts = plan.programs[call.size_bytes].jobs
    flows = sum(1 for layout in layouts if layout.job.background)
    jobs = [(layout, iterations(layout, *measured(record.steps)), model, alone)
            for layout, model, alone in modelled_jobs(plan, call.size_bytes)]
    workload = _ends(got for _, got, _, _ in jobs) / (_ends(model for _, _, model, _ in jobs) or 1.0)
    sharing = sharing_jobs(plan)
    rows = []
    for layout, got, model, alone in jobs:
        for g, m, a in zip(got, model, alone):
            counters, counted = iteration_counters(record, g["start_s"], g["end_s"])
            rows.append({**run_keys(plan), "algorithm": plan.spec.algorithm, "job": layout.job.name,
                         "jobs": len(layouts) - flows, "background_flows": flows,
                         "ranks": layout.job.ranks_in(g["iteration"]),
                         "placement": placement_name(layout.job, plan.spec.mapping), "repetition": call.repetition, **g,
                         "model_time_s": m["time_s"], "model_comm_s": m["comm_s"], "alone_model_s": a["time_s"],
                         "alone_s": "", "slowdown": g["time_s"] / a["time_s"] if a["time_s"] else "",
                         "slowdown_basis": "model alone",
                         "fidelity": fidelity(g["time_s"] / m["time_s"] if m["time_s"] else 1.0, counters,
                                              plan.predictions[call.size_bytes].most_flows_on_a_link,
                                              model_s=m["time_s"],
                                              latency_share=plan.latency_share(call.size_bytes),
                                              workload_over_model=workload if layout.job.name in sharing else None,
                                              bound=plan.bound_of(layout.job.tcp)),
                         **{key: "" if counters.get(key) is None else counters[key] for key in COUNTER_COLUMNS},
                         "counters_of": counted, "tcp": layout.job.tcp or plan.spec.tcp, "label": plan.spec.label})
    return rows


def _ends(jobs_iterations) -> float:
    """When the last iteration of any of the jobs ended (seconds since the call's start)."""
    return max((i["end_s"] for its in jobs_iterations for i in its), default=0.0)


def sharing_jobs(plan) -> set[str]:
    """The jobs whose bytes cross a switch link with another job's
    (link_job_rows: the plan's routes); background flows, paced at the
    rate they ask, do not count."""
    on_link: dict[str, set[str]] = {}
    for row in link_job_rows(plan):
        if row["kind"] == "job":
            on_link.setdefault(row["link"], set()).add(row["job"])
    return {job for jobs in on_link.values() if len(jobs) > 1 for job in jobs}


def iteration_counters(record, start_s: float, end_s: float) -> tuple[dict, str]:
    """(the counters an iteration is judged by, what they were counted
    over): the machine's, the queues' and the links' of the iteration's own
    time, and its hosts' TCP counters where they were sampled; what was not
    sampled, of the whole call. Every job's traffic in that time counts."""
    if record.counters_between is None:
        return record.counters, "call"
    window = record.counters_between(start_s, end_s)
    counted = "iteration" if "tcp_retrans" in window else "iteration (TCP: the whole call)"
    return {**record.counters, **window}, counted


def op_rows(plan, call, records) -> list[dict]:
    """ops.csv's rows: every op of every rank, from the steps it took."""
    if call.repetition < 0:
        return []
    from emulator.workloads.templates import job_ops
    program = plan.programs[call.size_bytes]
    rows = []
    for layout in program.jobs:
        if layout.job.background:   # background.csv has them
            continue
        for local, rank in enumerate(layout.ranks):
            steps = program.schedule.steps[rank]
            for i, (first, end) in enumerate(layout.iterations[local]):
                if end == first:   # not in this iteration's group
                    continue
                kinds = [op.kind for op in job_ops(layout.job.at(i), i, local)]
                by_op: dict[int, dict] = {}
                for k in range(first, end):
                    rec, step = records[rank][k], steps[k]
                    row = by_op.setdefault(step.op, {
                        **run_columns(plan), "job": layout.job.name, "repetition": call.repetition, "iteration": i, "rank": local,
                        "host": layout.hosts[local], "op": step.op,
                        "kind": kinds[step.op] if 0 <= step.op < len(kinds) else step.phase,
                        "start_s": rec["start"], "end_s": rec["end"], "bytes_sent": 0, "bytes_received": 0})
                    row["start_s"], row["end_s"] = min(row["start_s"], rec["start"]), max(row["end_s"], rec["end"])
                    row["bytes_sent"] += rec["sent"]
                    row["bytes_received"] += rec["received"]
                rows += [by_op[op] for op in sorted(by_op)]
    return rows


def run_keys(plan) -> dict:
    return {"topology": plan.fabric.topology, "policy": plan.spec.policy}


def run_columns(plan) -> dict:
    """What tells the runs of a folder apart in ops.csv and link_jobs.csv
    (emulator.results.plots.JOB_RUN_COLUMNS picks the last run by them)."""
    return {**run_keys(plan), "mapping": plan.spec.mapping, "workload": plan.spec.workload, "label": plan.spec.label}


LINK_JOB_COLUMNS = ["topology", "policy", "mapping", "workload", "label", "link", "job", "kind", "bytes"]


def link_job_rows(plan) -> list[dict]:
    """Bytes of every job over every directed switch link, per run of the
    workload, from the routes the plan installs (the model's attribution:
    link counters cannot tell whose bytes they counted)."""
    from emulator.routes.routing import path
    program = plan.programs[next(iter(plan.programs))]
    paths: dict = {}
    totals: dict = {}
    for layout in program.jobs:
        for rank in layout.ranks:
            src = program.hosts[rank]
            for step in program.schedule.steps[rank]:
                for t in step.sends:
                    dst = program.hosts[t.peer]
                    if src == dst or not t.nbytes:
                        continue
                    if (src, dst) not in paths:
                        paths[(src, dst)] = [(n, p) for n, p in path(plan.fabric, plan.table, src, dst)
                                             if plan.fabric.is_switch(n)][:-1]   # switch-switch hops only
                    for node, port in paths[(src, dst)]:
                        key = (link_label(node, port, plan.fabric.peer(node, port)[0]), layout.job.name)
                        totals[key] = totals.get(key, 0) + t.nbytes
    keys = run_columns(plan)
    kind = {layout.job.name: "background" if layout.job.background else "job" for layout in program.jobs}
    return [{**keys, "link": link, "job": job, "kind": kind[job], "bytes": n} for (link, job), n in sorted(totals.items())]


BACKGROUND_COLUMNS = ["topology", "policy", "mapping", "workload", "label", "repetition", "background", "from", "to",
                      "asked", "asked_mbps", "start_s", "end_s", "time_s", "bytes", "mbps", "model_time_s", "model_mbps"]


def background_rows(plan, call, records) -> list[dict]:
    """background.csv's rows of one counted call: each background flow's
    bytes, its time (its first chunk to the end of its last chunk's
    period) and its mean rate, asked, measured and modelled."""
    if call.repetition < 0:
        return []
    rows = []
    for layout, model, _ in modelled_jobs(plan, call.size_bytes, background=True):
        got, flow = iterations(layout, *measured(records))[0], layout.job.background
        sent = sum(record["sent"] for record in records[layout.offset])
        scheduled = plan.programs[call.size_bytes].schedule.bytes_sent(layout.offset)
        rows.append({**run_columns(plan), "repetition": call.repetition, "background": layout.job.name,
                     "from": flow.src, "to": flow.dst, "asked": flow.asked, "asked_mbps": flow.mean_mbps,
                     "start_s": got["start_s"], "end_s": got["end_s"], "time_s": got["time_s"], "bytes": sent,
                     "mbps": _mbps(sent, got["time_s"]), "model_time_s": model[0]["time_s"],
                     "model_mbps": _mbps(scheduled, model[0]["time_s"])})
    return rows


def _mbps(nbytes: int, seconds: float):
    return nbytes * 8 / seconds / 1e6 if seconds > 0 else ""
