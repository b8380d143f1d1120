"""The run pipeline, top to bottom: one module a newcomer can read.

  prepare   every check before the network (emulator/preflight.py): plans,
            machine limits, the results folder, what the run asks of this
            machine's dataplane
  emulate   per fabric: bring-up (Emulation), replay of every plan with a
            line per call and the live view (emulator/progress.py), results
            written as calls end;
            then the report, and the folder renamed from OUT.partial to OUT
  teardown  always, by Emulation's `with` block, also after errors and signals

The CLI only parses arguments and calls these; `interactive` is the same
bring-up with Mininet's CLI in place of the replay. `predict` is the model's
side, no network: every run predicted (`bigraph-emu model`, and the Python
interface's model()).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys

from emulator import exit_codes
from emulator.plan.folders import PARTIAL   # a run writes OUT.partial/, renamed when done
from emulator import preflight
from emulator.plan import capacity, predictions
from emulator.progress import LiveView, Progress, WebRun, call_label, describe, print_jobs, print_table, sample_listener
from emulator.results.trace import write_trace
from emulator.results.verdict import NETWORK, trusted
from emulator.spec.experiment import Experiment, RunSpec


# --- the model (no root, no network) ---------------------------------------------------

@dataclasses.dataclass
class Predicted:
    """One run of an experiment as the flow model predicts it: what
    predictions.sweep_prediction (a collective's sizes, `steps` and, asked
    for, `links`) or predictions.workload_prediction (a workload's `jobs`)
    returns, and what the prediction stood on, said."""
    spec: RunSpec
    got: dict
    model: str = ""                # which sharing model ran (a workload: "")
    links_basis: str = ""          # the emulated links' basis (emulated=True), else ""


def predict(experiment: Experiment, method: str = "auto", jitter: float = 0.0, emulated: bool = False,
            progress=None, per_link: bool = False):
    """Every run of the experiment predicted by the flow model, one at a
    time (a generator: `bigraph-emu model` prints each as it comes).
    `emulated`: as this machine emulates the links (a run's model column);
    `progress(size, fraction)`: told how far a long prediction is."""
    for spec in experiment.runs:
        links = preflight.emulated_links(spec, spec.fabric()) if emulated else None
        basis = links.basis if links else ""
        if spec.workload:
            yield Predicted(spec, predictions.workload_prediction(spec, method, jitter, links), "", basis)
            continue
        sharing, model = capacity.sharing_of(spec, preflight.loaded_calibration())
        got = predictions.sweep_prediction(spec, method, jitter, progress, sharing=sharing, links=links,
                                           per_link=per_link)
        yield Predicted(spec, got, model, basis)


# --- the emulation -----------------------------------------------------------------------

def emulate(experiment: Experiment, plans, out: str, web: tuple[str, int] | None = None, story=None) -> int:
    """Emulate every plan into OUT.partial, renamed to OUT only when the
    run has finished: a half-written folder is never taken for results.
    `story(OUT)`: the text printed at the end (the demo's). `web`: (host,
    port) of the live page, which binds its port before anything else is
    built, shows the run, then its end and keeps serving the results until
    Ctrl-C; it stops at teardown with everything else."""
    with web_view(web) as page:
        code = _emulate(experiment, plans, out, page)
        text = story(out) if story else ""
        if text:
            print(text)
        if page:
            from emulator.web.view import end_message, plots_of
            page.publish(end_message(text, plots_of(os.listdir(out))))
            print(f"# the run has finished; {page.url} shows its results until Ctrl-C", flush=True)
            page.serve_until_interrupted()
    return code


@contextlib.contextmanager
def web_view(web: tuple[str, int] | None, folder: str | None = None):
    """The web page's server, its URL printed, or None without `web`."""
    if web is None:
        yield None
        return
    from emulator.web.server import WebView
    with WebView(*web, folder=folder) as page:
        print(f"# web view: {page.url}" + (" (every address of this machine)" if web[0] in ("0.0.0.0", "::") else ""),
              flush=True)
        yield page


def _emulate(experiment: Experiment, plans, out: str, page) -> int:
    from emulator.emulation import Emulation
    work = out + PARTIAL
    os.makedirs(work)
    if os.path.isdir(out):
        os.rmdir(out)   # empty (checked before): the finished folder takes its place
    copies = keep_workloads(experiment.runs, work)
    with open(os.path.join(work, "spec.json"), "w") as f:
        # each run as planned: offload "auto" resolved to what this machine gives it
        json.dump({"name": experiment.name, "runs": [dataclasses.asdict(p.spec) for p in plans],
                   "workload_copies": copies, "file_copies": keep_files(experiment.runs, work)}, f, indent=1)
    with open(os.path.join(work, "capacity.json"), "w") as f:
        json.dump([c.to_dict() for c in preflight.capacity_checks(plans)], f, indent=1)
    progress = Progress(preflight.predicted_calls(plans))
    ok, verdicts = True, []
    if page:
        page.folder = work
    try:
        for group in by_fabric(plans):
            if page:
                from emulator.web.view import fabric_message
                page.publish(fabric_message(group[0].fabric))
            with Emulation(group[0], work) as emu:
                for plan in group:
                    print(describe(plan.spec, plan.ranks))
                    ok &= _replay(emu, plan, work, progress, verdicts, page)
        write_reports(work, plans)
        write_trace(work)
    except BaseException:
        if sorted(set(os.listdir(work)) - {WORKLOADS, FILES}) == ["capacity.json", "spec.json"]:   # it failed before creating anything
            shutil.rmtree(work)
        else:
            print(f"# the run did not finish; what it measured is in {work}/", file=sys.stderr)
        raise
    os.rename(work, out)
    if page:
        page.folder = out
    tables = " ".join(name for name in ("collectives.csv", "jobs.csv", "ops.csv") if os.path.exists(os.path.join(out, name)))
    captured = ", captures/ (pcaps), captures.csv, capture_flows.csv" if os.path.exists(os.path.join(out, "captures.csv")) else ""
    print(f"# results: {out}/ {tables} steps.csv, links.csv, machine.csv, summary.txt, "
          f"{'busbw.png, ' if 'collectives' in tables else ''}heatmap.png, fabric.png, timeline.png, "
          f"link_loads.csv, fabric.json, trace.json (ui.perfetto.dev){captured}")
    failed = sum(not trusted(v) for v in verdicts)
    network = sum(v.startswith(NETWORK) for v in verdicts)
    if network:
        print(f"# {network} of {len(verdicts)} counted calls (or iterations of a workload's jobs) missed max-min "
              "sharing for the network's own reasons (TCP recovering from drops at shared queues, sharing busy links "
              "unevenly, or giving jobs on the same links unequal shares, the machine keeping up): trusted as far as "
              "TCP's measured sharing and the retransmission timeouts counted explain them, and their fidelity "
              "column says so")
    if not ok:
        return exit_codes.FAILED
    if failed:
        print(f"# {failed} of {len(verdicts)} counted calls failed the fidelity verdict (see collectives.csv or "
              f"jobs.csv): exit code {exit_codes.UNTRUSTED}")
        return exit_codes.UNTRUSTED
    return exit_codes.OK


WORKLOADS = "workloads"   # a results folder keeps a copy of every workload file it ran in here
FILES = "files"           # and of every topology file and policy of one's own, here


def keep_workloads(runs: list[RunSpec], folder: str) -> dict[str, str]:
    """Copy every workload file the runs name, with the files its jobs
    import in their places relative to it, into FOLDER/workloads/K/; returns
    {the workload as the spec names it: its copy, relative to FOLDER}, which
    spec.json keeps: the report reads what ran, even if the original has
    moved, changed or gone. (An import by absolute path still reads the original.)"""
    from emulator.spec.experiment import workload_file, workload_files
    copies = {}
    for workload in dict.fromkeys(spec.workload for spec in runs if spec.workload):
        files = [os.path.abspath(f) for f in workload_files(workload)]
        top = os.path.commonpath([os.path.dirname(f) for f in files])
        place = os.path.join(WORKLOADS, str(len(copies)))
        for file in dict.fromkeys(files):
            copy = os.path.join(folder, place, os.path.relpath(file, top))
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            if os.path.isdir(file):   # an imported folder (chakra:FOLDER), whole
                shutil.copytree(file, copy, dirs_exist_ok=True)
            else:
                shutil.copyfile(file, copy)
        copies[workload] = workload_file(workload)[0] + os.path.join(place, os.path.relpath(files[0], top))
    return copies


def keep_files(runs: list[RunSpec], folder: str) -> dict[str, str]:
    """Copy every topology file and policy file (file:PATH) the runs name
    into FOLDER/files/K/; returns {the name as the spec gives it: file:COPY,
    relative to FOLDER}, which spec.json keeps, as for workloads. (A
    policy's own imports are not copied.)"""
    from emulator.fabric.files import PREFIX, is_file, path_of
    copies = {}
    for name in dict.fromkeys(n for spec in runs for n in (spec.topology, spec.policy) if is_file(n)):
        place = os.path.join(FILES, str(len(copies)), os.path.basename(path_of(name)))
        os.makedirs(os.path.join(folder, os.path.dirname(place)))
        shutil.copyfile(path_of(name), os.path.join(folder, place))
        copies[name] = PREFIX + place
    return copies


def by_fabric(plans):
    """Consecutive runs on the same fabric share one emulated network."""
    groups = []
    for plan in plans:
        if groups and groups[-1][0].spec.fabric_key() == plan.spec.fabric_key():
            groups[-1].append(plan)
        else:
            groups.append([plan])
    return groups


def _replay(emu, plan, out: str, progress: "Progress", verdicts: list[str], page=None) -> bool:
    """Replay a plan, writing every call's results as it ends; prints the
    table (per size, or per job and iteration), and False if some agent
    moved a wrong number of bytes. Every counted call's (or job iteration's)
    fidelity verdict joins `verdicts`. The terminal's live view and the web
    page (if any) both get every sample and finished call."""
    from emulator.results.calls import bytes_ok, call_time, write_call
    rows, wrong = [], []

    def on_call(call, record):
        if live:
            live.clear()
        written = write_call(out, plan, call, record, emu.dataplane.datapath)
        if not bytes_ok(plan, call.size_bytes, record.steps):
            wrong.append(call.index)
        if plan.is_workload:
            rows.extend(written or [])
            verdicts = sorted({r["fidelity"] for r in written or []}, key=lambda v: not trusted(v))
            model = plan.predictions[call.size_bytes].time_s
            verdict = f" {call_time(record.steps):.2f} s (model {model:.2f} s)" + (f", {verdicts[-1]}" if verdicts else "")
        else:
            rows.extend([written] if written else [])
            verdict = f" busbw {written['busbw_mbps']:.2f} Mbit/s, {written['fidelity']}" if written else ""
        progress.call_done(call_label(plan, call), verdict)
        if web:
            web.call_done(call, record, written)

    live = LiveView(plan, progress) if sys.stdout.isatty() else None
    web = WebRun(page, plan, progress) if page else None
    views = [v for v in (live, web) if v]
    emu.on_sample = sample_listener(emu, views) if views else None
    emu.replay(plan, on_call=on_call)
    verdicts.extend(r["fidelity"] for r in rows)
    if plan.is_workload:
        print_jobs(rows)
    else:
        print_table(rows)
    if wrong:
        print(f"# ERROR: in calls {wrong[:5]} some agent moved a wrong number of bytes; see steps.csv")
        return False
    return True


def write_reports(out: str, plans, shown: bool = False) -> None:
    """summary.txt and the plots; the summary printed where the run's own
    table did not already show it (several runs, or `shown`: `report`)."""
    from emulator.results.report import write_report
    text = write_report(out, plans)
    if len(plans) > 1 or shown:
        print("# summary (median busbw in Mbit/s; model: the flow model's busbw)")
        print(text)


def interactive(plan, out: str) -> int:
    from emulator.emulation import Emulation
    os.makedirs(out, exist_ok=True)
    with Emulation(plan, out) as emu:
        hosts = plan.fabric.hosts
        print(f"# Mininet CLI on {plan.fabric.topology}: hosts {hosts[0].name}..{hosts[-1].name} "
              f"({hosts[0].ip}..), e.g. '{hosts[0].name} ping -c1 {hosts[-1].ip}'; 'exit' tears it down")
        emu.network.interactive()
    return 0



