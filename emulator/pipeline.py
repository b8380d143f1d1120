"""The run pipeline, top to bottom: one module a newcomer can read.

  prepare   every check before the network: plans, machine limits, the
            results folder, what the run asks of this machine's dataplane
  emulate   per fabric: bring-up (Emulation), replay of every plan with a
            line per call and the live view, results written as calls end;
            then the report, and the folder renamed from OUT.partial to OUT
  teardown  always, by Emulation's `with` block, also after errors and signals

The CLI only parses arguments and calls these; `interactive` is the same
bring-up with Mininet's CLI in place of the replay.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import time

from emulator import exits
from emulator.records.metrics import TABLE_HEADER, algbw_mbps, avg_busbw_line, table_row
from emulator.results.verdict import LATENCY_BOUND, NETWORK, trusted
from emulator.inputs import size_name
from emulator.spec.experiment import Experiment, RunSpec, SpecError

from emulator.plan import capacity
from emulator.plan.folders import PARTIAL, check_out_folder   # a run writes OUT.partial/, renamed when done
from emulator.plan.capacity import MAX_EMULATED_HOSTS, MAX_EMULATED_SWITCHES  # noqa: E402 - one place, re-exported
MAX_UNASKED_S = 3600   # a run the model predicts to be longer needs --yes


# --- before the network: plans and checks ---------------------------------------------

def prepare(experiment: Experiment, out: str | None):
    """Every error before the network: plans, machine limits, the results
    folder; then what each run asks of this machine's dataplane (a warning
    if more than it emulates faithfully)."""
    plans = [dataclasses.replace(plan_emulated(spec), run=i) for i, spec in enumerate(experiment.runs)]
    if any(spec.capture for spec in experiment.runs) and shutil.which("tcpdump") is None:
        raise SpecError("capture: records with tcpdump, which is not installed (apt-get install tcpdump; "
                        "vm/provision.sh installs it)")
    announce_duration(plans, experiment.yes)
    folder = results_dir(out, experiment.name)
    for plan, check in zip(plans, capacity_checks(plans)):
        if plan.spec.servers:
            print("# capacity: checked per server, with the placement, before anything is built")
        else:
            print(check.describe(plan.spec.host_rate_mbps))
    plans = with_sharing(plans)
    for line in filter(None, map(latency_bound, plans)):
        print(line)
    return plans, folder


def latency_bound(plan) -> str:
    """A line naming the sizes whose model is mostly per-message latency
    and least step times, which the verdict names for a call that misses
    it; "" if none (or a workload)."""
    if plan.is_workload:
        return ""
    bound = [f"{size_name(size)} ({share:.0%})" for size in sorted(plan.schedules)
             if (share := plan.latency_share(size)) >= LATENCY_BOUND]
    return (f"# latency-bound: per-message latency and least step times are most of the model's time at "
            f"{', '.join(bound)}; those calls measure this machine's hosts and switches more than the links "
            f"(larger messages or slower links measure the links)") if bound else ""


def with_sharing(plans) -> list:
    """Each plan with the TCP sharing its model stretches congested steps
    by (spec key sharing "tcp", where measured), and says which model runs."""
    calibration = loaded_calibration()
    shared = []
    for plan in plans:
        found, model = capacity.sharing_of(plan.spec, calibration)
        print(f"# model: {model}")
        if plan.links:
            print(f"# model's links: {plan.links.basis}")
        shared.append(dataclasses.replace(plan, sharing=found))
    return shared


def loaded_calibration():
    """This machine's calibration (capacity.load); an unreadable file is bad input."""
    try:
        return capacity.load()
    except ValueError as e:
        raise SpecError(str(e)) from None


def predicted_calls(plans) -> list[float]:
    """The model's time of every call the plans replay, warm-ups included, in order."""
    return [plan.predictions[call.size_bytes].time_s for plan in plans for call in plan.calls]


def announce_duration(plans, yes: bool) -> None:
    """Print the model's total before anything starts; a run longer than
    MAX_UNASKED_S stops here (SpecError) unless the user said yes."""
    total = sum(predicted_calls(plans))
    print(f"# the model predicts {duration(total)} of calls ({len(predicted_calls(plans))} calls; "
          "bring-up and setup come on top)", flush=True)
    if total > MAX_UNASKED_S and not yes:
        raise SpecError(f"the model predicts this run takes {duration(total)}, more than "
                        f"{duration(MAX_UNASKED_S)}: give --yes (or yes = true in the experiment file) to run it "
                        "anyway, or ask for fewer repetitions, sizes or hosts")


def plan_emulated(spec: RunSpec):
    """The plan of a run to emulate; too large a fabric is refused before planning."""
    from emulator.net.dataplane import resolve_offload
    from emulator.plan.run_plan import plan_run
    spec = dataclasses.replace(spec, offload=resolve_offload(spec.datapath, spec.offload))
    fabric = spec.fabric()
    fits_the_servers(fabric, len(spec.servers) or 1)
    offers_congestion_control(spec.tcp)
    offers_queue_discipline(spec.queue_discipline)
    plan = plan_run(spec, fabric, emulated_links(spec, fabric))
    for name in sorted(set(plan.congestion_controls()) - {""}):
        offers_congestion_control(name, f"workload {spec.workload}: a job's tcp")
    return plan


def emulated_links(spec: RunSpec, fabric):
    """What the run's model adds for links emulated on this machine
    (capacity.emulated_links), for the datapath the run will get."""
    from emulator.net.dataplane import detect
    try:
        plane = detect(spec.datapath, spec.offload)
        datapath, offload = plane.datapath, plane.offload
    except RuntimeError:   # none of that kind here: bring-up says so
        datapath = "user" if spec.datapath == "auto" else spec.datapath
        offload = "off" if spec.offload == "auto" else spec.offload
    hosts = spec.ranks if spec.ranks and not spec.workload else len(fabric.hosts)   # the agents that step at once
    return capacity.emulated_links(loaded_calibration(), datapath, spec.mtu, offload, hosts,
                                   capacity.switch_ports(fabric))


def offers_congestion_control(name: str, where: str = "tcp") -> None:
    from emulator.net.capabilities import congestion_controls
    offered = congestion_controls()
    if name not in offered:
        raise SpecError(f"{where}: this kernel does not offer {name!r}; it offers {', '.join(offered) or 'none'}. A "
                        f"kernel that loads modules adds it with `modprobe tcp_{name}` (a VM's kernel does; "
                        "docs/vm.md)")


def offers_queue_discipline(name: str) -> None:
    from emulator.fabric.queues import DISCIPLINES, FIFO
    from emulator.net.capabilities import qdisc_available
    wanted = DISCIPLINES[name]
    if wanted is FIFO or qdisc_available(wanted.module, wanted.config):
        return
    offered = [d.name for d in DISCIPLINES.values() if d is FIFO or qdisc_available(d.module, d.config)]
    raise SpecError(f"queue_discipline: this kernel has no {wanted.module} for {name!r}; it offers "
                    f"{', '.join(offered)}. A kernel that loads modules adds it with `modprobe {wanted.module}` "
                    "(a VM's kernel does; docs/vm.md)")


def fits_the_servers(fabric, servers: int = 1) -> None:
    """The host and switch limits are per machine: a fabric over several
    servers may have that many on each (its placement checks each one)."""
    hosts, switches = len(fabric.hosts), len(fabric.switches)
    if hosts > MAX_EMULATED_HOSTS * servers or switches > MAX_EMULATED_SWITCHES * servers:
        machines = "one machine emulates" if servers == 1 else f"{servers} servers emulate"
        raise SpecError(f"topology: {fabric.topology} has {hosts} hosts and {switches} switches; {machines} "
                        f"at most {MAX_EMULATED_HOSTS * servers} and {MAX_EMULATED_SWITCHES * servers}: "
                        "use 'bigraph-emu model' for it, or 'bigraph-emu plan' to see how many servers it needs")


def capacity_checks(plans) -> list:
    """capacity.Assessment of every plan, from this machine's calibration."""
    from emulator.plan import capacity
    from emulator.net.dataplane import detect
    try:
        calibration = capacity.load()
        planes = [detect(plan.spec.datapath, plan.spec.offload) for plan in plans]
        return [capacity.assess(plan, calibration, plane.datapath, plane.offload) for plan, plane in zip(plans, planes)]
    except (ValueError, RuntimeError) as e:
        raise SpecError(str(e)) from None


def auto_rated(spec: RunSpec) -> RunSpec:
    """The spec with host and switch rates scaled together so that the run's
    peak load is capacity.AUTO_MARGIN of what the machine emulates faithfully."""
    from emulator.plan.capacity import AUTO_MARGIN, scaled_rate
    from emulator.plan.run_plan import plan_run
    check = capacity_checks([plan_run(spec)])[0]
    if check.faithful_mbps is None:
        raise SpecError(f"--bw auto: this machine is {check.basis}")
    if not check.peak_mbps:   # nothing crosses a switch: any rate fits
        return spec
    factor = AUTO_MARGIN / check.fraction
    return dataclasses.replace(spec, host_rate_mbps=scaled_rate(spec.host_rate_mbps, factor),
                               switch_rate_mbps=scaled_rate(spec.switch_rate_mbps, factor))


def results_dir(out: str | None, name: str) -> str:
    """A new folder for this run's results: never an existing folder with
    anything in it. Checked before anything is created; not created here."""
    path = os.path.join("results", f"{time.strftime('%Y%m%d-%H%M%S')}-{name}") if out is None else out
    check_out_folder(path)
    if os.path.isdir(path) and os.listdir(path):
        raise SpecError(f"--out {path} is not empty (earlier results or other files); choose a new folder")
    if os.path.exists(path + PARTIAL):
        raise SpecError(f"--out {path}: {path + PARTIAL} holds an unfinished earlier run; move it or choose "
                        "a new folder")
    return path



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
                   "workload_copies": copies}, f, indent=1)
    with open(os.path.join(work, "capacity.json"), "w") as f:
        json.dump([c.to_dict() for c in capacity_checks(plans)], f, indent=1)
    progress = Progress(predicted_calls(plans))
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
    except BaseException:
        if sorted(set(os.listdir(work)) - {WORKLOADS}) == ["capacity.json", "spec.json"]:   # it failed before creating anything
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
          f"link_loads.csv, fabric.json{captured}")
    failed = sum(not trusted(v) for v in verdicts)
    network = sum(v.startswith(NETWORK) for v in verdicts)
    if network:
        print(f"# {network} of {len(verdicts)} counted calls (or iterations of a workload's jobs) missed max-min "
              "sharing for the network's own reasons (TCP recovering from drops at shared queues, sharing busy links "
              "unevenly, or giving jobs on the same links unequal shares, the machine keeping up): trusted, and their "
              "fidelity column says so")
    if not ok:
        return exits.FAILED
    if failed:
        print(f"# {failed} of {len(verdicts)} counted calls failed the fidelity verdict (see collectives.csv or "
              f"jobs.csv): exit code {exits.UNTRUSTED}")
        return exits.UNTRUSTED
    return exits.OK


WORKLOADS = "workloads"   # a results folder keeps a copy of every workload file it ran in here


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
        progress.call_done(_call_label(plan, call), verdict)
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


def write_reports(out: str, plans) -> None:
    from emulator.results.report import write_report
    text = write_report(out, plans)
    if len(plans) > 1:
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



# --- what a run prints --------------------------------------------------------------------

def describe(spec: RunSpec, ranks: int) -> str:
    if spec.workload:
        return (f"# workload {spec.workload} (where it leaves them open: {spec.algorithm}, mapping {spec.mapping}), "
                f"policy {spec.policy}, {spec.topology} ({ranks} ranks), links {spec.host_rate_mbps:g} Mbit/s host / "
                f"{spec.switch_rate_mbps:g} Mbit/s switch{_link_extras(spec)}, MTU {spec.mtu}"
                + (f", {spec.label}" if spec.label else ""))
    extra = ""
    if spec.connections > 1:
        extra += f", {spec.connections} connections per peer"
    if spec.link_events:
        extra += ", link events " + " ".join(map(str, spec.link_events))
    if spec.capture:
        extra += ", capturing " + " ".join(spec.capture)
    return f"# {spec.collective} {spec.algorithm}, {describe_fabric_run(spec, ranks)}{extra}"


def describe_fabric_run(spec: RunSpec, ranks: int) -> str:
    """Mapping, policy, fabric and its links: what every run says of itself."""
    return (f"mapping {spec.mapping}, policy {spec.policy}, {spec.topology} ({ranks} ranks), links "
            f"{spec.host_rate_mbps:g} Mbit/s host / {spec.switch_rate_mbps:g} Mbit/s switch, queues "
            f"{spec.host_queue_packets}/{spec.switch_queue_packets} packets, MTU {spec.mtu}{_link_extras(spec)}")


def _link_extras(spec: RunSpec) -> str:
    netem = (f", netem {spec.link_delay_ms:g} ms / {spec.link_loss_pct:g}% loss"
             if spec.link_delay_ms or spec.link_loss_pct else "")
    queue = "" if spec.queue_discipline == RunSpec.queue_discipline else f" {spec.queue_discipline}"
    threshold = f" (marking from {spec.ecn_threshold_packets} packets)" if spec.ecn_threshold_packets else ""
    return (netem + (f", links {' '.join(map(str, spec.link_overrides))}" if spec.link_overrides else "")
            + f", tcp {spec.tcp}" + (f", switch queues{queue}{threshold}" if queue else ""))


def print_table(rows: list[dict]) -> None:
    """One line per size: the median over repetitions, as summary.txt has it."""
    import pandas as pd
    from emulator.results.report import summarise
    print(TABLE_HEADER)
    summary = summarise(pd.DataFrame(rows))
    for r in summary.itertuples():
        print(table_row(r.size_bytes, r.time_s, algbw_mbps(r.size_bytes, r.time_s), r.busbw_mbps, r.model_time_s))
    print(avg_busbw_line(summary.busbw_mbps))


JOB_HEADER = "#  job              ranks  placement     iter   time(ms)  compute(ms)  exposed comm(ms)"


def print_jobs(rows: list[dict], measured: bool = True) -> None:
    """A line per job and iteration: time, compute and exposed communication
    of the rank that finished last, and the slowdown against the job alone
    (both from the model when `measured` is False)."""
    print(JOB_HEADER + ("   model(ms)  slowdown  verdict" if measured else "   alone(ms)  slowdown"))
    for r in rows:
        line = (f"  {r['job'][:16]:16} {r['ranks']:>6}  {r['placement'][:12]:12} {r['iteration']:>5} "
                f"{r['time_s'] * 1e3:>10.1f} {r['compute_s'] * 1e3:>12.1f} {r['comm_s'] * 1e3:>17.1f}")
        if measured:
            line += f" {r['model_time_s'] * 1e3:>11.1f} {r['slowdown']:>9.2f}  {r['fidelity']}"
        else:
            line += f" {r['alone_s'] * 1e3:>11.1f} {r['slowdown']:>9.2f}"
        print(line)


class Progress:
    """One line per finished call: which, its verdict, and the time left,
    estimated from the model's time of every call (sizes differ a lot)."""

    def __init__(self, predicted_s: list[float]):
        self.predicted, self.total, self.done, self.start = predicted_s, len(predicted_s), 0, time.monotonic()

    def call_done(self, label: str, verdict: str = "") -> None:
        self.done += 1
        share = sum(self.predicted[:self.done]) / max(1e-9, sum(self.predicted))
        print(progress_line(self.done, self.total, time.monotonic() - self.start, label, share) + verdict,
              flush=True)


def progress_line(done_calls: int, total_calls: int, elapsed_s: float, label: str,
                  work_done: float | None = None) -> str:
    """'[ 3/12] label ... ~40 s left': calls done so far, and the time left
    if the remaining work goes as fast as the done work. `work_done` is the
    share of the work done (by default, of the calls)."""
    line = f"[{done_calls:>{len(str(total_calls))}}/{total_calls}] {label}"
    if total_calls and done_calls >= total_calls:
        return f"{line} ... done in {duration(elapsed_s)}"
    if done_calls <= 0 or elapsed_s <= 0:
        return f"{line} ..."
    share = work_done if work_done else done_calls / total_calls
    return f"{line} ... ~{duration(elapsed_s * (1 - share) / share)} left"


def duration(seconds: float) -> str:
    """'40 s', '5 min', '2 h 05 min' (rounded half up)."""
    seconds = max(1, int(seconds + 0.5))
    if seconds < 100:
        return f"{seconds} s"
    minutes = int(seconds / 60 + 0.5)
    if minutes < 100:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _call_label(plan, call) -> str:
    what = "warm-up" if call.repetition < 0 else f"rep {call.repetition + 1}/{plan.spec.repetitions}"
    if plan.is_workload:
        return f"workload {os.path.basename(plan.spec.workload)} {what}"
    return f"{plan.spec.algorithm} {plan.spec.mapping} {size_name(call.size_bytes)} {what}"


def sample_listener(emu, views):
    """The monitor's callback: the last interval's link rows, computed once,
    with the ranks' progress, to every view's update(rows, steps_done, elapsed_s)."""
    from emulator.results import linkstats

    def on_sample(samples) -> None:
        if len(samples) < 2 or emu.fleet is None:
            return
        rows = linkstats.link_rows(0, emu.links, samples[-2:], samples[0].t)
        for v in views:
            v.update(rows, emu.fleet.steps_done, samples[-1].t - emu.fleet.call_start)
    return on_sample


class LiveView:
    """Redraws the busiest links and the step progress in place while a
    call runs (only on a terminal)."""

    def __init__(self, plan, progress: Progress):
        self.progress = progress
        self.steps_total = max(len(s) for s in plan.schedules[max(plan.schedules)].steps)
        self.lines = 0

    def update(self, rows, steps_done, elapsed_s: float) -> None:
        from emulator.results import liveview
        text = liveview.render(f"[{self.progress.done + 1}/{self.progress.total}]", rows,
                               steps_done, self.steps_total, elapsed_s)
        up = f"\x1b[{self.lines}F\x1b[J" if self.lines else ""
        print(up + text, flush=True)
        self.lines = text.count("\n") + 1

    def clear(self) -> None:
        if self.lines:
            print(f"\x1b[{self.lines}F\x1b[J", end="", flush=True)
            self.lines = 0


class WebRun:
    """Sends one plan's samples and finished calls to the web page."""

    def __init__(self, page, plan, progress: Progress):
        from emulator.web.view import rank_roles
        self.page, self.plan, self.progress = page, plan, progress
        self.roles = rank_roles(plan)
        self.call = plan.calls[0]   # the call under way

    def update(self, rows, steps_done, elapsed_s: float) -> None:
        from emulator.web.view import sample_message
        label = f"[{self.progress.done + 1}/{self.progress.total}] {_call_label(self.plan, self.call)}"
        self.page.publish(sample_message(label, rows, steps_done, self.roles, elapsed_s))

    def call_done(self, call, record, written) -> None:
        from emulator.web.view import call_message
        self.page.publish(call_message(self.plan, call, record, written, _call_label(self.plan, call)))
        self.call = self.plan.calls[min(call.index + 1, len(self.plan.calls) - 1)]
