"""Analysis of a results folder (pure, no root): the comparison table of
busbw against size per fabric, algorithm and mapping, the plot, the
per-step link loads of every run, the plots of emulator.results.plots when their
inputs exist, and the comparison of several results folders."""
from __future__ import annotations

import contextlib
import csv
import os

import pandas as pd

from emulator.results.captures import flow_rows, read_segments
from emulator.records.captures import FLOW_COLUMNS
from emulator.records.metrics import busbw_mbps
from emulator.model.simulation import link_loads_per_step
from emulator.results.calls import SERIES_KEYS, SPEC_KEYS
from emulator.results.verdict import trusted
from emulator.spec.experiment import RunSpec
from emulator.plan.modelled_jobs import PLACEMENT_WIDTH, placement_cell
from emulator.results.plots import (RUN_COLUMNS, call_name, call_use, capture_plot, fabric_drawing, fabric_story, heatmap_extent,
                            job_link_bars, job_timeline, one_run, run_name, runs_of, step_timeline, timeline_bars,
                            utilisation_heatmap)
from emulator.records.tables import TABLES, TableError, read_fabric, read_table
from emulator.fabric.files import PREFIX, is_file, path_of
from emulator.results import damage
from emulator.inputs import InputError, as_name, read_text
from emulator.routes.user_policy import label

KEYS = ["topology", "policy", "algorithm", "mapping"]
# runs that differ in any of these are different runs, even on one topology
RUN_KEYS = KEYS + ["collective", "ranks", "host_rate_mbps", "switch_rate_mbps", "mtu", *SPEC_KEYS, "label"]


def summary(collectives_csv: str) -> pd.DataFrame:
    """Median time and busbw per run and size, the model beside them."""
    return summarise(read_table(collectives_csv))


def summarise(d: pd.DataFrame) -> pd.DataFrame:
    """summary() of rows already in memory (collectives.csv's columns):
    medians over repetitions; drops and retransmissions summed; how many
    repetitions passed the fidelity verdict. Folders written before a column
    existed leave it blank."""
    counters = ["max_link_util", "mean_link_util", "queue_drops", "queue_marks", "tcp_retrans"]
    d = d.assign(**{c: pd.to_numeric(d[c], errors="coerce") for c in counters if c in d})   # blanks: NaN
    d = d.assign(**{k: getattr(RunSpec, k) for k in SPEC_KEYS if k not in d})   # older folders: the defaults
    g = d.groupby(RUN_KEYS + ["size_bytes"], sort=False)
    out = g.agg(time_s=("time_s", "median"), model_time_s=("model_time_s", "first"),
                bytes_ok=("bytes_ok", "all"), reps=("time_s", "size")).reset_index()
    for column, how in (("max_link_util", "median"), ("mean_link_util", "median"),
                        ("queue_drops", "sum"), ("queue_marks", "sum"), ("tcp_retrans", "sum")):
        out[column] = g[column].agg(how).to_numpy() if column in d else float("nan")
    out["fidelity_ok"] = (g["fidelity"].agg(lambda v: int(v.map(trusted).sum())).to_numpy()
                          if "fidelity" in d else -1)
    out["busbw_mbps"] = [busbw_mbps(r.collective, r.ranks, r.size_bytes, r.time_s) for r in out.itertuples()]
    out["model_busbw_mbps"] = [busbw_mbps(r.collective, r.ranks, r.size_bytes, r.model_time_s)
                               for r in out.itertuples()]
    out["rate_mbps"] = out.host_rate_mbps
    out["meas_over_model"] = out.time_s / out.model_time_s
    return out


SUMMARY_FIELDS = ["topology", "policy", "collective", "algorithm", "mapping", "ranks", *SPEC_KEYS, "label",
                  "size_bytes", "reps", "time_s", "busbw_mbps", "model_time_s", "model_busbw_mbps", "meas_over_model",
                  "max_link_util", "mean_link_util", "queue_drops", "queue_marks", "tcp_retrans", "fidelity_ok"]
JOB_SUMMARY_FIELDS = ["topology", "policy", "algorithm", "job", "jobs", "background_flows", "ranks", "placement",
                      "label", "iterations",
                      "time_s", "compute_s", "comm_s", "model_time_s", "meas_over_model", "alone_s",
                      "alone_model_s", "measured_slowdown", "slowdown", "ok"]


def summary_records(out_dir: str) -> dict:
    """summary.txt's tables as data: {"collectives": a record per run and
    size, "jobs": a record per run and job}, each empty where the folder has
    no such table; blanks are None."""
    import json
    tables = {"collectives": (read_table(os.path.join(out_dir, "collectives.csv")), summarise, SUMMARY_FIELDS),
              "jobs": (read_table(os.path.join(out_dir, "jobs.csv")), lambda d: job_summary(with_measured_alone(d)),
                       JOB_SUMMARY_FIELDS)}
    return {name: [] if d is None else json.loads(how(d)[fields].to_json(orient="records"))
            for name, (d, how, fields) in tables.items()}


def format_summary(s: pd.DataFrame) -> str:
    """The table people read: per run and size, measured against the model,
    the links' load and losses, and how many repetitions the verdict trusts;
    a units row under the header, as nccl-tests has. Runs that differ in
    keys the columns do not show (the collective, the transport, a label)
    say them at the end of their rows."""
    shown = {"topology", "policy", "algorithm", "mapping"}
    told = [k for k in RUN_KEYS if k not in shown and k in s and s[k].nunique(dropna=False) > 1]
    lines = [f"{'topology':34} {'policy':13} {'algorithm':16} {'mapping':7} {'size':>10} "
             f"{'time':>9} {'busbw':>8} {'model':>8} {'meas/model':>10} {'maxutil':>7} {'meanutil':>8} "
             f"{'drops':>6} {'retx':>6} {'verdict':>8}",
             f"{'':34} {'':13} {'':16} {'':7} {'(B)':>10} {'(ms)':>9} {'(Mb/s)':>8} {'(Mb/s)':>8}"]   # as nccl-tests
    for r in s.itertuples():
        verdict = "" if r.fidelity_ok < 0 else f"{r.fidelity_ok}/{r.reps} ok"
        lines.append(f"{r.topology:34} {r.policy:13} {r.algorithm:16} {r.mapping:7} {r.size_bytes:10d} "
                     f"{r.time_s * 1e3:9.1f} {r.busbw_mbps:8.2f} {r.model_busbw_mbps:8.2f} {r.meas_over_model:10.2f} "
                     f"{_num(r.max_link_util, '7.2f')} {_num(r.mean_link_util, '8.2f')} "
                     f"{_num(r.queue_drops, '6.0f')} {_num(r.tcp_retrans, '6.0f')} {verdict:>8}"
                     + "".join(f"  {k}={getattr(r, k)}" for k in told))
    return "\n".join(lines)


def _num(value, fmt: str) -> str:
    width = int(fmt.split(".")[0])
    try:
        value = float(value)
    except (TypeError, ValueError):
        return " " * width
    return " " * width if value != value else format(value, fmt)


def plot(s: pd.DataFrame, path: str) -> None:
    """busbw against size, one line per run, measured solid, model dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, (key, run) in enumerate(s.groupby(RUN_KEYS, sort=False)):
        color = f"C{i % 10}"
        label = f"{key[0]} {key[2]} {key[3]} ({key[1]})"
        ax.plot(run.size_bytes, run.busbw_mbps, "o-", color=color, label=label)
        ax.plot(run.size_bytes, run.model_busbw_mbps, "--", color=color, alpha=0.6)
    rate = s.rate_mbps.max()
    ax.axhline(rate, color="grey", lw=0.8)
    ax.text(s.size_bytes.min(), rate, " link rate", va="bottom", color="grey")
    _save_busbw_plot(fig, ax, "busbw against size: measured (solid) and flow model (dashed)", path, 8)


def _save_busbw_plot(fig, ax, title: str, path: str, legend_size: int) -> None:
    """Axes, title and legend of a busbw-against-size plot; then save it."""
    import matplotlib.pyplot as plt
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (Mbit/s)")
    ax.set_title(title)
    ax.legend(fontsize=legend_size)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def link_load_rows(plan) -> list[dict]:
    """Per step of the run's schedule: the most flows on one directed link
    and which link that is (static, from the routes)."""
    sched = plan.schedules[max(plan.schedules)]
    rows = []
    for k, loads in enumerate(link_loads_per_step(plan.fabric, plan.table, sched, plan.hosts)):
        if not loads:
            continue
        (node, port), flows = max(loads.items(), key=lambda kv: (kv[1], kv[0]))
        switch_loads = [n for (nd, _), n in loads.items() if plan.fabric.is_switch(nd)]
        _, _, busiest = plan.fabric.peer(node, port)
        rows.append({"topology": plan.fabric.topology, "policy": plan.spec.policy,
                     "algorithm": plan.spec.algorithm, "mapping": plan.spec.mapping, "step": k,
                     "phase": sched.steps[0][k].phase if k < len(sched.steps[0]) else "",
                     "max_flows_per_link": flows, "busiest_link": f"{node}:{port}",
                     "busiest_link_scope": busiest.scope, "links_with_2plus_flows": sum(1 for n in switch_loads if n >= 2)})
    return rows


LINK_LOAD_COLUMNS = ["topology", "policy", "algorithm", "mapping", "step", "phase", "max_flows_per_link",
                     "busiest_link", "busiest_link_scope", "links_with_2plus_flows"]


def write_report(out_dir: str, plans) -> str:
    """Write summary.txt (collectives and jobs), busbw.png and
    link_loads.csv, then the plots whose inputs exist (see write_plots);
    return the summary. Every input is read and checked first (TableError
    names a damaged file), and every output replaces its file whole, so a
    failure leaves the folder as it was."""
    tables = read_folder(out_dir, plans)
    check_outputs(out_dir)
    parts = []
    collectives, jobs = tables["collectives.csv"], tables["jobs.csv"]
    if collectives is not None:
        s = summarise(collectives)
        parts.append(format_summary(s))
        with replacing(os.path.join(out_dir, "busbw.png")) as tmp:
            plot(s, tmp)
    if jobs is not None:
        jobs = with_measured_alone(jobs)
        with replacing(os.path.join(out_dir, "jobs.csv")) as tmp:
            jobs.to_csv(tmp, index=False)
        parts.append(format_jobs(job_summary(jobs)))
        tables["link_jobs.csv"] = write_job_links(out_dir, [plan for plan in plans if plan.is_workload])
    if tables["background.csv"] is not None:
        parts.append(format_background(tables["background.csv"]))
    scopes = bottleneck_scopes(tables["links.csv"])
    if scopes:
        parts.append(scopes)
    text = "\n\n".join(parts)
    with replacing(os.path.join(out_dir, "summary.txt")) as tmp, open(tmp, "w") as f:
        f.write(text + "\n")
    write_capture_flows(out_dir, tables)
    loads = [row for plan in plans if not plan.is_workload for row in link_load_rows(plan)]
    write_csv(os.path.join(out_dir, "link_loads.csv"), LINK_LOAD_COLUMNS, loads)   # a workload's steps differ per job
    write_plots(out_dir, tables, {plan.fabric.topology: plan.fabric for plan in plans})
    return text


def bottleneck_scopes(links: pd.DataFrame | None) -> str:
    """Where each run congested, on fabrics with nodes of accelerators: its
    busiest link inside a node and in the network, by mean use over its
    counted calls ("" where no link is inside a node, or links.csv is older
    than the scope column)."""
    if links is None or not {"scope", "run", "repetition"} <= set(links) or not (links["scope"] == "node").any():
        return ""
    lines = ["# where it congested (links.csv: mean use of each directed link over the run's calls)"]
    for run, rows in links[links["repetition"] >= 0].groupby("run", sort=True):
        use = rows.groupby(["scope", "link"])["util"].mean()
        busiest = {scope: (use[scope].idxmax(), use[scope].max()) for scope in ("node", "network")
                   if scope in use.index.get_level_values(0)}
        said = [f"{'inside a node' if scope == 'node' else 'network'} {link} {u:.0%}"
                for scope, (link, u) in busiest.items()]
        worst = max(busiest, key=lambda scope: busiest[scope][1])
        lines.append(f"#   run {run}: busiest {', '.join(said)}: the bottleneck is "
                     f"{'inside the nodes' if worst == 'node' else 'the network'}")
    return "\n".join(lines)


def write_program_report(out_dir: str) -> str:
    """An `exec` folder's plots and capture_flows.csv; returns its summary
    (the program's own, read before anything is written)."""
    tables = read_folder(out_dir, [])
    try:
        text = read_text(os.path.join(out_dir, "summary.txt"))
    except InputError as e:
        raise TableError(str(e)) from None
    check_outputs(out_dir)
    write_capture_flows(out_dir, tables)
    write_plots(out_dir, tables)
    return text


def check_outputs(out_dir: str) -> None:
    """TableError if something the report would replace with a file (a
    .png, .csv or .txt) is there as a folder, a pipe or a device: found
    before anything is written, not after half the plots."""
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name)
        if name.endswith((".png", ".csv", ".txt")) and not os.path.isfile(path):
            raise TableError(f"{path}: the report writes a file of this name, and this is no file")


def check_runs(out_dir: str, tables: dict, specs: list[RunSpec]) -> None:
    """TableError if a table contradicts spec.json (`specs`, its runs in
    order): a row of a run it does not have, or whose fabric, policy,
    algorithm, mapping, collective or size is not that run's (a file copied
    in from another folder). Tables without a run column (older folders)
    must name one of the runs."""
    runs = pd.DataFrame([{"topology": _file_named(s.topology) if is_file(s.topology) else s.fabric().topology,
                          "policy": _file_named(s.policy), "algorithm": s.algorithm,
                          "mapping": s.mapping, "collective": s.collective} for s in specs])
    for name, d in tables.items():
        if name not in TABLES or d is None:
            continue
        path = os.path.join(out_dir, name)
        keys = [k for k in runs.columns if k in d and (k != "collective" or name == "collectives.csv")]
        d = d.assign(**{k: d[k].map(_file_named) for k in ("topology", "policy") if k in d})
        if "run" not in d:
            _check_some_run(path, d, runs[keys])
            continue
        _check_its_run(path, d, runs[keys])
        if "size_bytes" in d and name in ("collectives.csv", "steps.csv"):
            _check_sizes(path, d, [set() if s.workload else set(s.sizes) for s in specs])


def _file_named(value):
    """A topology or policy file by its file name: the folder's copy of it
    ran, and the tables name the original (file:PATH) wherever it was."""
    return PREFIX + os.path.basename(path_of(value)) if isinstance(value, str) and is_file(value) else value


def _check_some_run(path: str, d: pd.DataFrame, runs: pd.DataFrame) -> None:
    wanted = set(runs.itertuples(index=False, name=None))
    for i, row in enumerate(d[runs.columns].itertuples(index=False, name=None)):
        if runs.columns.size and row not in wanted:
            named = ", ".join(f"{k} {v!r}" for k, v in zip(runs.columns, row))
            raise TableError(f"{path}: row {i + 1}: {named}: spec.json has no such run")


def _check_its_run(path: str, d: pd.DataFrame, runs: pd.DataFrame) -> None:
    index = d.run.to_numpy()
    out = (index < 0) | (index >= len(runs))
    if out.any():
        i = out.argmax()
        raise TableError(f"{path}: row {i + 1}: run {index[i]}: spec.json has {len(runs)} run(s), 0 to {len(runs) - 1}")
    for key in runs.columns:
        differ = d[key].to_numpy() != runs[key].to_numpy()[index]
        if differ.any():
            i = differ.argmax()
            raise TableError(f"{path}: row {i + 1}: {key} {d[key].iloc[i]!r}, but run {index[i]} of spec.json has "
                             f"{runs[key].iloc[index[i]]!r}")


def _check_sizes(path: str, d: pd.DataFrame, sizes: list[set]) -> None:
    """Every row's size one its run sweeps (a workload's runs: any)."""
    for i, (run, size) in enumerate(zip(d.run, d.size_bytes)):
        if sizes[run] and size not in sizes[run]:
            raise TableError(f"{path}: row {i + 1}: size_bytes {size}: run {run} of spec.json has sizes "
                             f"{', '.join(map(str, sorted(sizes[run])))}")


def write_capture_flows(out_dir: str, tables: dict) -> None:
    """capture_flows.csv, if the folder has captures (read_folder reads them)."""
    if tables["capture_flows.csv"] is not None:
        with replacing(os.path.join(out_dir, "capture_flows.csv")) as tmp:
            tables["capture_flows.csv"].to_csv(tmp, index=False)


WRITTEN_ONLY = ("link_loads.csv",)   # tables the report writes afresh: not its input


def read_folder(out_dir: str, plans: list | None = None) -> dict:
    """Every table and fabric.json the report reads, checked, by file name
    (None where missing), the tables against the runs' `plans` (check_runs,
    then damage.check: None plans them again); and the flows of the pcaps
    captures.csv lists."""
    damage.byte_order_marks(out_dir)
    tables = {name: read_table(os.path.join(out_dir, name)) for name in TABLES if name not in WRITTEN_ONLY}
    if plans:
        check_runs(out_dir, tables, [plan.spec for plan in plans])
    damage.check(out_dir, plans, tables)
    tables["fabric.json"] = read_fabric(os.path.join(out_dir, "fabric.json"))
    tables["capture_flows.csv"] = capture_flows(out_dir, tables["captures.csv"])
    return tables


def folder_verdict(tables: dict) -> str:
    """A folder's verdict from read_folder's tables: "ok" (every counted
    call, or job iteration, passed the fidelity verdict), "untrusted" (some
    did not: exit code 3 when it ran) or "none" (no calls: a program's)."""
    verdicts = [v for name in ("collectives.csv", "jobs.csv") if tables.get(name) is not None
                for v in _counted(tables[name]).get("fidelity", pd.Series(dtype=str))]
    if not verdicts:
        return "none"
    return "ok" if all(trusted(v) for v in verdicts) else "untrusted"


def _counted(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["repetition"] >= 0] if "repetition" in d else d


CAPTURE_FLOW_COLUMNS = SERIES_KEYS + FLOW_COLUMNS


def capture_flows(out_dir: str, captures: pd.DataFrame | None) -> pd.DataFrame | None:
    """capture_flows.csv: every pcap of captures.csv read with scapy into
    each flow's throughput and retransmissions per bin, with its run, call
    and link (None: no captures). TableError names a pcap that is missing or
    not one."""
    if captures is None:
        return None
    rows = []
    for capture in captures.to_dict("records"):
        path = os.path.join(out_dir, capture["file"])
        if not os.path.isfile(path):
            raise TableError(f"{os.path.join(out_dir, 'captures.csv')} names {capture['file']}, which is missing")
        try:
            segments = read_segments(path, capture["start_unix_s"])
        except ValueError as e:
            raise TableError(str(e)) from None
        keys = {k: capture[k] for k in SERIES_KEYS if k in capture}
        rows += [{**keys, "call": capture["call"], "link": capture["link"], "rate_mbps": capture.get("rate_mbps", ""),
                  **row} for row in flow_rows(segments)]
    return pd.DataFrame(rows, columns=[c for c in CAPTURE_FLOW_COLUMNS if c not in SERIES_KEYS or c in captures])


@contextlib.contextmanager
def replacing(path: str):
    """A temporary name beside `path` (with its extension: plots take their
    format from it), renamed over `path` when the block succeeds."""
    root, ext = os.path.splitext(path)
    tmp = f"{root}.partial{ext}"
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_csv(path: str, columns: list[str], rows: list[dict]) -> None:
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


JOB_KEYS = ["topology", "policy", "algorithm", "job", "ranks", "placement", "label"]


ALONE_KEYS = ["topology", "policy", "algorithm", "job", "placement", "iteration"]


def with_measured_alone(d: pd.DataFrame) -> pd.DataFrame:
    """jobs.csv with alone_s filled where the folder also ran the job by
    itself (same topology, policy, placement; median per iteration), and
    the slowdown taken over it ("measured alone") instead of the model's."""
    if "jobs" not in d or "algorithm" not in d:
        return d
    crowd = _sharing(d)
    by_itself = d[crowd == 1].groupby(ALONE_KEYS).time_s.median()
    alone = [by_itself.get(tuple(getattr(r, k) for k in ALONE_KEYS), float("nan")) if n > 1
             else float("nan") for r, n in zip(d.itertuples(), crowd)]
    d = d.assign(alone_s=alone)
    measured = d.alone_s.notna()
    d.loc[measured, "slowdown"] = d.time_s[measured] / d.alone_s[measured]
    d.loc[measured, "slowdown_basis"] = "measured alone"
    return d


def _sharing(d: pd.DataFrame) -> pd.Series:
    """How many jobs and background flows shared the fabric in each row's run (1: the job by itself)."""
    return d.jobs + d.background_flows.fillna(0) if "background_flows" in d else d.jobs


def job_summary(d: pd.DataFrame) -> pd.DataFrame:
    """Per run and job: medians over repetitions and iterations, measured
    and modelled, how many iterations the verdict trusts, and, where the
    folder also ran the job by itself (same topology, policy, placement),
    its measured time alone and the measured slowdown."""
    d = d.assign(label=d.label.fillna("")) if "label" in d else d.assign(label="")
    d = d if "jobs" in d else d.assign(jobs=0)
    d = d if "algorithm" in d else d.assign(algorithm="")   # folders written before the column existed
    d = d if "background_flows" in d else d.assign(background_flows=0)
    g = d.groupby(JOB_KEYS + ["jobs", "background_flows"], sort=False)
    out = g.agg(time_s=("time_s", "median"), compute_s=("compute_s", "median"), comm_s=("comm_s", "median"),
                model_time_s=("model_time_s", "median"), model_comm_s=("model_comm_s", "median"),
                alone_model_s=("alone_model_s", "median"), iterations=("time_s", "size"),
                ok=("fidelity", lambda v: int(v.map(trusted).sum()))).reset_index()
    out["meas_over_model"] = out.time_s / out.model_time_s
    out["slowdown"] = out.time_s / out.alone_model_s   # over the model's time of the job alone
    crowd = _sharing(out)
    by_itself = out[crowd == 1].groupby(["topology", "policy", "algorithm", "job", "placement"]).time_s.median()
    out["alone_s"] = [by_itself.get((r.topology, r.policy, r.algorithm, r.job, r.placement), float("nan")) if n > 1
                      else float("nan") for r, n in zip(out.itertuples(), crowd)]
    out["measured_slowdown"] = out.time_s / out.alone_s
    return out


def format_jobs(s: pd.DataFrame) -> str:
    lines = [f"{'topology':26} {'policy':13} {'algorithm':16} {'job':12} {'jobs':>4} {'ranks':>5} "
             f"{'placement':{PLACEMENT_WIDTH}} "
             f"{'iter(ms)':>9} {'compute':>8} {'exposed':>8} {'model':>8} {'model exp':>9} {'meas/model':>10} "
             f"{'alone':>8} {'alone(model)':>12} {'slowdown':>8} {'(model)':>7} {'verdict':>8}  label"]
    for r in s.itertuples():
        jobs = f"{r.jobs}+{r.background_flows}" if r.background_flows else str(r.jobs)   # +: background flows
        lines.append(f"{r.topology:26} {r.policy:13} {str(r.algorithm):16} {r.job[:12]:12} {jobs:>4} {r.ranks:5d} "
                     f"{placement_cell(str(r.placement)):{PLACEMENT_WIDTH}} {r.time_s * 1e3:9.1f} "
                     f"{r.compute_s * 1e3:8.1f} {r.comm_s * 1e3:8.1f} "
                     f"{r.model_time_s * 1e3:8.1f} {r.model_comm_s * 1e3:9.1f} {r.meas_over_model:10.2f} "
                     f"{_num(r.alone_s * 1e3, '8.1f')} {r.alone_model_s * 1e3:12.1f} "
                     f"{_num(r.measured_slowdown, '8.2f')} {r.slowdown:7.2f} {f'{r.ok}/{r.iterations} ok':>8}  {r.label}")
    return "\n".join(lines)


def format_background(d: pd.DataFrame) -> str:
    """A line per run and background flow: its mean rate asked, measured
    and modelled (medians over repetitions): load beside the jobs, not judged."""
    runs = [k for k in ("topology", "policy", "mapping", "label") if k in d]
    out = d.fillna({k: "" for k in runs}).groupby(runs + ["background", "from", "to"], sort=False).agg(
        asked=("asked_mbps", "median"), mbps=("mbps", "median"), model=("model_mbps", "median")).reset_index()
    lines = [f"{'background (load beside the jobs, not judged)':60} {'from':>8} {'to':>8} "
             f"{'asked':>8} {'measured':>8} {'model':>8}  (Mbit/s)"]
    for r in out.to_dict("records"):
        name = " ".join(str(r[k]) for k in runs + ["background"] if str(r[k]))
        lines.append(f"{name[-60:]:60} {r['from']:>8} {r['to']:>8} {r['asked']:8.2f} {_num(r['mbps'], '8.2f')} "
                     f"{_num(r['model'], '8.2f')}")
    return "\n".join(lines)


def write_job_links(out_dir: str, plans) -> pd.DataFrame | None:
    """link_jobs.csv: every workload run's bytes per switch link and job
    (from its routes); returns its rows (None: no rows)."""
    from emulator.results.jobs import LINK_JOB_COLUMNS, link_job_rows
    rows = [row for plan in plans for row in link_job_rows(plan)]
    write_csv(os.path.join(out_dir, "link_jobs.csv"), LINK_JOB_COLUMNS, rows)
    return pd.DataFrame(rows, columns=LINK_JOB_COLUMNS) if rows else None


def write_plots(out_dir: str, tables: dict | None = None, fabrics: dict | None = None) -> list[str]:
    """heatmap.png (links.csv), fabric.png (fabric.json; coloured from
    links.csv when there is one) and timeline.png (steps.csv), each of the
    last run; a missing input skips its plot. `tables`: read_folder's, read
    here if not given; `fabrics`: {topology: Fabric} of the runs (their
    plans'), for a fabric drawing per run. Returns the files written."""
    tables = tables or read_folder(out_dir)
    links, steps, fabric = tables["links.csv"], tables["steps.csv"], tables["fabric.json"]
    fabrics = {**(fabrics or {}), **({fabric.topology: fabric} if fabric is not None else {})}
    written = []

    def draw(name: str, how, table) -> None:
        with replacing(os.path.join(out_dir, name)) as tmp:
            how(table, tmp)
        written.append(name)

    if links is not None:
        draw("heatmap.png", utilisation_heatmap, links)
    if fabric is not None:
        on_fabric = links
        if links is not None and "topology" in links.columns:
            on_fabric = links[links.topology == fabric.topology]   # fabric.json holds the last fabric only
        draw("fabric.png", lambda run, tmp: draw_fabric(fabric, run, tmp),
             one_run(on_fabric) if on_fabric is not None else None)
    if steps is not None:
        draw("timeline.png", step_timeline, steps)
    if tables["ops.csv"] is not None:
        draw("jobs.png", job_timeline, tables["ops.csv"])
    if tables["link_jobs.csv"] is not None:
        draw("job_links.png", job_link_bars, tables["link_jobs.csv"])
    flows = tables.get("capture_flows.csv")
    if flows is not None and not flows.empty:
        draw("capture_flows.png", capture_plot, flows)
    return written + _plots_per_run(out_dir, links, steps, fabrics)


def draw_fabric(fabric, run: pd.DataFrame | None, path: str) -> None:
    """fabric.png of one run's links.csv rows (None or none: drawn grey):
    each link's peak (colour) and mean (width) use during the heatmap's
    call, and in the title what that says."""
    if run is None or run.empty:
        fabric_drawing(fabric, {}, path, f"{fabric.topology}: no link samples")
        return
    peaks, means, call = call_use(run)
    lines = [f"{fabric.topology}: each link's peak use (colour) and mean use (width), {call_name(run, call)}",
             run_name(run), fabric_story(fabric, peaks, means)]
    fabric_drawing(fabric, peaks, path, "\n".join(line for line in lines if line), means)


def _plots_per_run(out_dir: str, links, steps, fabrics: dict) -> list[str]:
    """With several runs in a folder, a heatmap, a fabric drawing (where its
    fabric is known) and a timeline of each too
    (heatmap-2-halving-doubling-naive-shortest.png, ...), so runs can be
    compared side by side: heatmaps on one time axis and colour scale,
    timelines on one time axis."""
    written = []

    def draw(slug: str, how, *args, **kwargs) -> None:
        with replacing(os.path.join(out_dir, slug)) as tmp:
            how(*args, tmp, **kwargs)
        written.append(slug)

    for name, table in (("heatmap", links), ("timeline", steps)):
        if table is None or not set(RUN_COLUMNS) <= set(table.columns):
            continue
        runs = runs_of(table)
        if len(runs) < 2:
            continue
        if name == "heatmap":
            extent = heatmap_extent(runs)
        else:
            t_end = max(float(timeline_bars(run).end.max()) for run in runs)
        for i, run in enumerate(runs, 1):
            first = run.iloc[0]
            slug = f"{i}-{first.algorithm}-{first.mapping}-{as_name(label(str(first.policy)))}.png"
            if name == "heatmap":
                draw(f"heatmap-{slug}", utilisation_heatmap, run, extent=extent)
                if first.topology in fabrics:
                    draw(f"fabric-{slug}", draw_fabric, fabrics[first.topology], run)
            else:
                draw(f"timeline-{slug}", step_timeline, run, t_end=t_end)
    return written


# --- several results folders -----------------------------------------------------------------

def _folder_names(folders: list[str]) -> list[str]:
    """Short names (the folders' last parts) unless two would be the same."""
    names = [os.path.basename(os.path.normpath(f)) for f in folders]
    return names if len(set(names)) == len(names) else list(folders)


def compare(folders: list[str], specs: list[list[RunSpec]] | None = None) -> pd.DataFrame:
    """summary() of every folder in one table with a `folder` column: the
    same run and size of every folder on adjacent lines, runs in the order
    first seen, sizes ascending, folders in the order given; `busbw_vs_first`
    is busbw over that of the first folder holding the same run and size."""
    parts = []
    for i, (folder, name) in enumerate(zip(folders, _folder_names(folders))):
        path = os.path.join(folder, "collectives.csv")
        if not os.path.lexists(path):
            raise TableError(f"{folder} has no collectives.csv")
        collectives = read_table(path)
        if specs:   # `specs[i]`: the folder's spec.json, which its table must match
            check_runs(folder, {"collectives.csv": collectives}, specs[i])
        s = summarise(collectives)
        s.insert(0, "folder", name)
        s["_folder"] = i
        parts.append(s)
    d = pd.concat(parts, ignore_index=True)
    d["_run"] = d.groupby(RUN_KEYS, sort=False).ngroup()
    d = d.sort_values(["_run", "size_bytes", "_folder"], kind="stable").reset_index(drop=True)
    first = d.groupby(RUN_KEYS + ["size_bytes"], sort=False).busbw_mbps.transform("first")
    d["busbw_vs_first"] = d.busbw_mbps / first
    return d.drop(columns=["_run", "_folder"])


def format_compare(d: pd.DataFrame) -> str:
    width = max([6] + [len(f) for f in d.folder])
    lines = [f"{'folder':{width}} {'topology':34} {'policy':8} {'algorithm':16} {'mapping':7} {'size':>10} "
             f"{'time(ms)':>9} {'busbw':>8} {'model':>8} {'meas/model':>10} {'vs first':>8}"]
    for r in d.itertuples():
        lines.append(f"{r.folder:{width}} {r.topology:34} {r.policy:8} {r.algorithm:16} {r.mapping:7} "
                     f"{r.size_bytes:10d} {r.time_s * 1e3:9.1f} {r.busbw_mbps:8.2f} {r.model_busbw_mbps:8.2f} "
                     f"{r.meas_over_model:10.2f} {r.busbw_vs_first:8.2f}")
    return "\n".join(lines)


def plot_compare(d: pd.DataFrame, path: str) -> None:
    """busbw against size: one colour per run, one line style per folder."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    styles = ["o-", "s--", "^:", "d-.", "v-", "x--"]
    folders = list(dict.fromkeys(d.folder))
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, (key, run) in enumerate(d.groupby(RUN_KEYS, sort=False)):
        for j, folder in enumerate(folders):
            r = run[run.folder == folder]
            if len(r):
                ax.plot(r.size_bytes, r.busbw_mbps, styles[j % len(styles)], color=f"C{i % 10}",
                        label=f"{folder}: {key[0]} {key[2]} {key[3]} ({key[1]})")
    ax.axhline(d.rate_mbps.max(), color="grey", lw=0.8)
    _save_busbw_plot(fig, ax, "busbw against size across results folders (colour: run, line style: folder)",
                     path, 7)


SPEEDUP_SEEN = 1.2   # below it, the demo does not claim HDRM made a difference


def demo_story(out_dir: str) -> str:
    """What the demo showed, in words, from its results folder: per mapping
    the busiest link's flows and the measured busbw at the largest size."""
    s = summary(os.path.join(out_dir, "collectives.csv"))
    loads = read_table(os.path.join(out_dir, "link_loads.csv"))
    big = s[s.size_bytes == s.size_bytes.max()].drop_duplicates("mapping", keep="last").set_index("mapping")
    flows = loads.groupby("mapping").max_flows_per_link.max() if loads is not None else pd.Series(dtype=int)
    lines = ["", "# What happened"]
    for mapping in big.index:
        r = big.loc[mapping]
        lines.append(f"#   {mapping:6}: up to {flows.get(mapping, '?')} flow(s) on one link in a step; busbw "
                     f"{r.busbw_mbps:.1f} of {r.rate_mbps:g} Mbit/s (model {r.model_busbw_mbps:.1f}), "
                     f"busiest link {_num(r.max_link_util * 100, '3.0f').strip() or '?'}% used on average")
    if {"naive", "hdrm"} <= set(big.index):
        naive, hdrm = big.loc["naive"], big.loc["hdrm"]
        speedup = naive.time_s / hdrm.time_s
        if speedup >= SPEEDUP_SEEN:
            lines.append(f"#   HDRM made the same allreduce {speedup:.1f}x faster: every exchange crosses the two "
                         "parts of BiGraph on its own direct link, so no two flows of a step share a link.")
        else:   # a machine too slow for the link rates hides the difference
            lines.append(f"#   The model says HDRM makes it {hdrm.model_busbw_mbps / naive.model_busbw_mbps:.1f}x "
                         f"faster; measured {speedup:.1f}x: see the verdicts above for whether this machine, "
                         "not the network, set the pace (`bigraph-emu calibrate`, lower rates).")
    lines.append(f"#   See in {out_dir}/: heatmap-*.png (link load over time, one per mapping), "
                 "timeline-*.png (steps per rank), fabric-*.png (peak and mean load per link, one per mapping) "
                 "and busbw.png.")
    return "\n".join(lines)
