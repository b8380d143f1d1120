"""bigraph-emu: the command users type (its commands: emulator.flags.USAGE).

One function per command: it calls the module that decides and prints
what comes back; emulator.flags holds the flags and their help."""
from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import time

from emulator import exit_codes
from emulator import pipeline
from emulator import progress
from emulator import preflight
from emulator.flags import (FLAG_KEYS, blame_flag, check_values, flag_values, parser,
                            typed_flags, web_address)
from emulator.inputs import shorten, to_int
from emulator.net import capabilities, interrupts, processes
from emulator.plan import capacity
from emulator.plan.describe import describe_fabric, describe_path, fabric_data, route_hops, routes_of
from emulator.plan.folders import check_out_folder, folder_plans, folder_specs, is_program_folder
from emulator.results.calls import write_model_steps
from emulator.results.trace import write_model_trace
from emulator.records.metrics import MODEL_HEADER, avg_busbw_line, model_row
from emulator.spec.experiment import OFFLOADS, Experiment, SpecError, load_experiment, make_run
from emulator.spec.vary import varied_runs

# The teaching demo: one halving-doubling allreduce on one BiGraph, first
# with consecutive ranks on a switch (congested links), then with HDRM.
DEMO_DEFAULTS = {"topology": "bigraph:m=2,n=4", "collective": "allreduce", "algorithm": "halving-doubling",
                 "sizes": "2M:8M:2", "repetitions": 2, "warmup": 1, "host_rate_mbps": 50, "switch_rate_mbps": 50}
DEMO = [{**DEMO_DEFAULTS, "mapping": "naive", "label": "demo naive"},
        {**DEMO_DEFAULTS, "mapping": "hdrm", "label": "demo hdrm"}]



def _experiment(args, check_kernel: bool = True) -> Experiment:
    has_netem = capabilities.netem_available if check_kernel else None
    values = flag_values(args)
    if args.experiment:
        experiment = load_experiment(args.experiment, values, has_netem)
    else:
        experiment = Experiment(args.command, [make_run(values, has_netem)])
    return _experiment_flags(args, experiment)


def _experiment_flags(args, experiment: Experiment) -> Experiment:
    """What flags say of the whole experiment: --yes, and --bw auto (every run's link rates scaled to this machine)."""
    experiment.yes |= bool(getattr(args, "yes", False))
    if getattr(args, "bw", None) == "auto":
        experiment.runs = [preflight.auto_rated(spec) for spec in experiment.runs]
    return experiment


# --- what runs print ------------------------------------------------------------------

# --- model and topo (no root) ------------------------------------------------------------

def cmd_model(args) -> int:
    """Predict every run; --out FOLDER gets every step's end and busiest link
    in model_steps.csv, --json prints the predictions as one JSON document."""
    runs, steps, traced = [], [], []
    if args.out is not None:
        check_out_folder(args.out)
        held = sorted(os.listdir(args.out)) if os.path.isdir(args.out) else []
        if held:   # as `run --out`: a new or empty folder, so nothing already there is overwritten
            said = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            raise SpecError(f"--out {args.out} is not empty (it holds {said}); choose a new or empty folder")
    predicted = pipeline.predict(_experiment(args, check_kernel=False), args.method, args.jitter, args.emulated,
                                 _ModelProgress())
    for index, run in enumerate(predicted):
        spec, got = run.spec, run.got
        if run.links_basis and not args.json:
            print(f"# model's links: {run.links_basis}")
        if spec.workload:
            if not args.json:
                _print_workload_prediction(spec, got)
            runs.append({"run": progress.describe(spec, got["ranks"]).lstrip("# "), "ranks": got["ranks"],
                         "jobs": got["jobs"], "approximation": got["approximation"]})
            traced.append({"name": runs[-1]["run"], "jobs": got["jobs"]})
            continue
        if not args.json:
            _print_sweep_prediction(spec, got, args.jitter, run.model)
        runs.append({"run": progress.describe(spec, got["ranks"]).lstrip("# "), "ranks": got["ranks"],
                     "sizes": got["sizes"]})
        steps += [{"run": index, **row} for row in got["steps"]]
        traced.append({"name": runs[-1]["run"], "sizes": got["sizes"], "steps": got["steps"]})
    if args.out:
        path = write_model_steps(args.out, steps)
        print(f"# every step: {path}", file=sys.stderr)
        print(f"# trace: {write_model_trace(args.out, traced)} (ui.perfetto.dev)", file=sys.stderr)
    if args.json:
        print(json.dumps(runs, indent=1))
    return 0


def _print_sweep_prediction(spec, got: dict, jitter: float, model: str) -> None:
    print(progress.describe(spec, got["ranks"]) + f" (model: {model})")
    print(MODEL_HEADER)
    for row in got["sizes"]:
        size = row["size_bytes"]
        print(model_row(size, row["time_s"], row["algbw_mbps"], row["busbw_mbps"], got["flows_per_step"][size]))
        if row["algorithm_used"] != spec.algorithm:   # auto: which one it picked for this size
            print(f"#   {spec.algorithm} picked {row['algorithm_used']}")
        if row["approximation"]:
            print(f"#   approximated: {row['approximation']}")
        if jitter:
            print(f"#   with flows up to {jitter:.0%} longer at random: "
                + " ".join(f"{r:.2f}x" for r in row["jitter_ratios"]))
    print(avg_busbw_line(row["busbw_mbps"] for row in got["sizes"]))


def _print_workload_prediction(spec, got: dict) -> None:
    print(progress.describe(spec, got["ranks"]) + " (model)")
    progress.print_jobs(got["jobs"], measured=False)
    if got["approximation"] or got["exact_because"]:
        print(f"#   approximated: {got['approximation']}" if got["approximation"] else f"#   exact: {got['exact_because']}")


class _ModelProgress:
    """Progress of a long model run on stderr: nothing for the first few
    seconds, then a line every few seconds."""
    QUIET_S = 3.0

    def __init__(self):
        self.start = self.last = time.monotonic()

    def __call__(self, size: int, fraction: float) -> None:
        now = time.monotonic()
        if now - self.start >= self.QUIET_S and now - self.last >= self.QUIET_S:
            self.last = now
            print(f"# model: {size} bytes, {fraction:.0%} of steps started after {now - self.start:.0f} s",
                  file=sys.stderr, flush=True)


def cmd_topo(args) -> int:
    spec = _experiment(args, check_kernel=False).runs[0]
    fabric = spec.fabric()
    route = route_hops(fabric, routes_of(spec, fabric), *args.path) if args.path else None
    if args.json:
        doc = fabric_data(fabric)
        if route:
            src, dst, hops = route
            doc["path"] = {"src": src, "dst": dst, "policy": spec.policy,
                           "hops": [{"node": node, "port": port} for node, port in hops]}
        print(json.dumps(doc, indent=1))
        return 0
    print(describe_fabric(fabric))
    if route:
        print(describe_path(spec.policy, *route))
    return 0


def cmd_plan(args) -> int:
    """Both placements over --servers, or the servers the run needs."""
    from emulator.plan import servers
    from emulator.plan.run_plan import plan_run
    try:
        names = servers.parse_servers(args.servers) if args.servers is not None else None
    except ValueError as e:
        raise SpecError(str(e)) from None
    try:
        cores = to_int(args.server_cores) if args.server_cores is not None else os.cpu_count() or 1
        max_hosts = to_int(args.server_hosts) if args.server_hosts is not None else capacity.MAX_EMULATED_HOSTS
    except ValueError as e:
        raise SpecError(f"--server-cores/--server-hosts: {e}") from None
    if cores < 1 or max_hosts < 1:
        raise SpecError("--server-cores and --server-hosts must be at least 1")
    from emulator.net.dataplane import resolve_offload
    spec = _experiment(args, check_kernel=False).runs[0]
    datapath = "user" if spec.datapath == "auto" else spec.datapath
    try:
        budget = capacity.faithful_budget(capacity.load(), datapath, spec.mtu,
                                          resolve_offload(datapath, spec.offload), cores)
    except (LookupError, ValueError) as e:
        raise SpecError(str(e)) from None
    print(progress.describe(spec, spec.ranks or len(spec.fabric().hosts)) + " (plan over servers)")
    print(servers.server_plan(plan_run(spec), names, servers.Server.of("server", budget, max_hosts),
                              f"the {datapath} datapath at MTU {spec.mtu}: {budget.basis}"))
    return 0


# --- run, compare, demo, cli (root) ----------------------------------------------------------

def cmd_run(args, experiment: Experiment | None = None) -> int:
    """Validate and plan everything, then (as root) emulate. --json: what
    the run prints goes to stderr, and its summary, as JSON, to stdout."""
    import contextlib
    experiment = experiment or _experiment(args)
    web = web_address(args)
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        plans, out = preflight.prepare(experiment, args.out)
        _needs_root(args.command)
        code = pipeline.emulate(experiment, plans, out, web=web)
    if args.json:
        print(json.dumps(run_summary(out, code), indent=1))
    return code


def run_summary(out: str, code: int) -> dict:
    """A finished run as data (run --json): its folder, exit code, and per
    run and size (or job) the figures of summary.txt."""
    from emulator.results.report import summary_records
    return {"folder": out, "exit_code": code, "exit": exit_codes.MEANINGS[code], **summary_records(out)}


def compare_experiment(args) -> Experiment:
    """One run per combination of --vary values (each over every run of
    --experiment), labelled 'key=value'."""
    keys, runs = varied_runs(args.vary, flag_values(args), args.experiment, capabilities.netem_available, FLAG_KEYS)
    return _experiment_flags(args, Experiment("compare-" + "-".join(keys), runs))


def cmd_compare(args) -> int:
    return cmd_run(args, compare_experiment(args))


def cmd_demo(args) -> int:
    """The same allreduce with the naive mapping, then with HDRM; then what it showed."""
    from emulator.results.report import demo_story
    web = web_address(args)
    servers = {"servers": args.servers} if args.servers else {}
    experiment = Experiment("demo", [make_run({**run, **servers}, capabilities.netem_available) for run in DEMO])
    plans, out = preflight.prepare(experiment, args.out)
    _needs_root(args.command)
    return pipeline.emulate(experiment, plans, out, web=web, story=demo_story)


def cmd_cli(args) -> int:
    """Validate, then (as root) the fabric and controller up and Mininet's CLI."""
    experiment = _experiment(args)
    if len(experiment.runs) > 1:
        print(f"# {args.experiment} has {len(experiment.runs)} runs; the fabric of the first one comes up")
    plan = preflight.plan_emulated(experiment.runs[0])
    out = preflight.results_dir(args.out, "cli")
    _needs_root(args.command)
    return pipeline.interactive(plan, out)


def cmd_exec(args) -> int:
    """Validate, then (as root) the fabric up and the program on it."""
    from emulator import execute
    from emulator.inputs import to_float
    command = args.program[1:] if args.program[:1] == ["--"] else args.program
    try:
        timeout = None if args.timeout is None else to_float(args.timeout)
    except ValueError:
        raise SpecError(f"--timeout: {args.timeout!r} is not a number of seconds") from None
    web = web_address(args)
    job = execute.prepare(flag_values(args), command, args.mpi, timeout, args.out, args.experiment)
    _needs_root(args.command)
    with pipeline.web_view(web) as page:
        if page:
            page.folder = job.out + preflight.PARTIAL
        code = execute.execute(job, page)
        if page:
            page.folder = job.out
            print(f"# the program has finished; {page.url} shows its results until Ctrl-C", flush=True)
            page.serve_until_interrupted()
    return code


# --- report and clean ---------------------------------------------------------------------


def cmd_report(args) -> int:
    """One folder: rebuild summary.txt, busbw.png and link_loads.csv.
    Several: one comparison table and plot."""
    if len(args.folder) == 1 and args.plot:
        raise SpecError(f"--plot names the comparison plot of several folders; one folder's plot is "
                        f"{os.path.join(args.folder[0], 'busbw.png')}")
    if args.plot:
        _check_plot_path(args.plot)
    web = web_address(args)
    if web and len(args.folder) > 1:
        raise SpecError("--web serves one results folder; give one")
    if args.trace:   # the tables alone: older folders may lack spec.json
        return _write_trace(args.folder, web or args.plot)
    specs = [folder_specs(folder) for folder in args.folder]
    if web:
        return _serve_folder(args.folder[0], web)
    if len(args.folder) > 1:
        programs = [f for f in args.folder if is_program_folder(f)]
        if programs:
            raise SpecError(f"{programs[0]}: a program's results (bigraph-emu exec) have no calls to compare; "
                            "report it alone")
        return _compare_folders(args.folder, args.plot, specs)
    if is_program_folder(args.folder[0]):   # exec's: its summary stays, its plots are redrawn
        from emulator.results.report import write_program_report
        print(write_program_report(args.folder[0]), end="")
        return 0
    plans = folder_plans(args.folder[0], specs[0])
    _rejudge(args.folder[0], plans)
    pipeline.write_reports(args.folder[0], plans, shown=True)
    return 0


def _write_trace(folders: list[str], other) -> int:
    """report --trace: one folder's trace.json, nothing else rewritten."""
    if len(folders) > 1 or other:
        raise SpecError("--trace writes one results folder's trace.json; give one folder, without --web or --plot")
    from emulator.results.trace import write_trace
    print(f"# trace: {write_trace(folders[0])} (open it in ui.perfetto.dev or chrome://tracing)")
    return 0


def _rejudge(folder: str, plans) -> None:
    """The folder's network verdicts held to what TCP's measured sharing and
    the counted timeouts explain, if they were written before that rule; said."""
    from emulator.results.rejudge import CHANGES, rejudge_folder
    from emulator.results.verdict import trusted
    judged, changes = rejudge_folder(folder, plans, preflight.loaded_calibration())
    if judged:
        failed = sum(not trusted(c["new_verdict"]) for c in changes)
        where = f" (listed in {os.path.join(folder, CHANGES)})" if changes else ""
        print(f"# re-judged {judged} network verdict(s) against what TCP's measured sharing and the counted "
              f"retransmission timeouts explain: {len(changes)} changed, {failed} of them now failed{where}")


def _serve_folder(folder: str, web: tuple[str, int]) -> int:
    """The replay page of a results folder, until Ctrl-C (no root: nothing is emulated)."""
    from emulator.web.view import folder_messages
    try:
        messages = folder_messages(folder)
    except ValueError as e:   # TableError too: a damaged file, named
        raise SpecError(str(e)) from None
    with pipeline.web_view(web, folder) as page:
        for message in messages:
            page.publish(message)
        print("# Ctrl-C stops it", flush=True)
        page.serve_until_interrupted()
    return 0


PLOT_FORMATS = (".png", ".pdf", ".svg")


def _check_plot_path(path: str) -> None:
    folder = os.path.dirname(path) or "."
    if not path.lower().endswith(PLOT_FORMATS):
        raise SpecError(f"--plot {shorten(path)}: give a file ending in {', '.join(PLOT_FORMATS)}")
    if not os.path.isdir(folder):
        raise SpecError(f"--plot {shorten(path)}: there is no folder {shorten(folder)}")
    if os.path.lexists(path) and not os.path.isfile(path):
        raise SpecError(f"--plot {shorten(path)}: there is a folder (or another non-file) of that name")


def _compare_folders(folders: list[str], plot_path: str | None, specs: list) -> int:
    from emulator.results import report
    df = report.compare(folders, specs)
    print(report.format_compare(df))
    parent = os.path.dirname(os.path.normpath(folders[0])) or "."
    plot_path = plot_path or os.path.join(parent, f"compare-{time.strftime('%Y%m%d-%H%M%S')}.png")
    with report.replacing(plot_path) as tmp:
        report.plot_compare(df, tmp)
    print(f"# plot: {plot_path}")
    return 0


def cmd_calibrate(args) -> int:
    """Measure what this machine emulates faithfully; keep it for every run's check."""
    import socket
    from emulator import calibration
    from emulator.net.dataplane import resolve_offload
    mtus, offloads = _int_list("--mtu", args.mtu, 576, 9000), args.offload.split(",")
    if args.offload == "auto":
        offloads = [resolve_offload("auto", "auto")]
    if any(o not in OFFLOADS for o in offloads):
        raise SpecError(f"--offload: {args.offload!r}: give off, tso, off,tso or auto")
    if not 1 <= args.steps <= 10:
        raise SpecError(f"--steps: must be 1 to 10, got {args.steps}")
    path = args.file or capacity.calibration_path()
    if os.path.lexists(path) and not os.path.isfile(path):
        raise SpecError(f"--file {shorten(path)}: there is a folder (or another non-file) of that name")
    check_out_folder(os.path.dirname(os.path.abspath(path)), "--file")
    try:
        capacity.load(path)   # what it holds is merged with the new figures: readable, before minutes of measuring
    except ValueError as e:
        raise SpecError(str(e)) from None
    sharing = _sharing_request(args) if args.tcp_sharing else None
    _needs_root(args.command)
    machine = f"{socket.gethostname()}, {os.cpu_count()} CPUs"
    if sharing:
        return _calibrate_sharing(sharing, mtus, 5 if args.quick else 10, machine, path)
    result = calibration.calibrate("auto", mtus, offloads, args.steps, 1 if args.quick else 2, machine,
                                   lambda line: print(line, flush=True))
    saved = capacity.save(result, path)
    print("# datapath  MTU  offload  raw wire Mbit/s  faithful link-Mbit/s  share of raw  at link rate  step latency"
          f"  switch latency a port  faithful on {capacity.MANY_PORTS_TOPOLOGY}  port exponent")
    for p in result.points:
        exponent = capacity.port_exponent(result, p.datapath, p.mtu, p.offload)[0]
        print(f"  {p.datapath:8} {p.mtu:5} {p.offload:7} {p.raw_mbps:16.0f} {p.faithful_mbps:21.0f} "
              f"{p.faithful_mbps / p.raw_mbps:12.0%} {p.link_rate_mbps:10g} Mbit/s {p.step_latency_us / 1e3:8.2f} ms"
              f"  {p.port_latency_us:16.2f} us  {_figure(p.many_ports_faithful_mbps):>22}  {exponent:13.2f}")
    print(f"# saved in {saved}: every run{_reading(saved)} now checks itself against it")
    return 0


def _reading(saved: str) -> str:
    """What makes a run read a calibration file: nothing if it is the one runs look up."""
    if os.path.abspath(saved) == os.path.abspath(capacity.calibration_path()):
        return ""
    return f" given {capacity.ENV_FILE}={shorten(saved)}"


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _sharing_request(args) -> tuple[list[int], int, str]:
    """(flow counts, queue packets, congestion control) of calibrate --tcp-sharing, checked."""
    from emulator import calibration
    flows = _int_list("--tcp-sharing", args.tcp_sharing, 2, calibration.SHARING_MOST_FLOWS)
    spec = make_run({"tcp": args.tcp, "host_queue_packets": args.queue, "switch_queue_packets": args.queue})
    return sorted(set(flows)), spec.host_queue_packets, spec.tcp


def _calibrate_sharing(request: tuple[list[int], int, str], mtus: list[int], reps: int, machine: str, path: str) -> int:
    from emulator import calibration
    flows, queue, tcp = request
    points = [p for mtu in mtus for p in calibration.measure_sharing(flows, mtu, queue, tcp, reps,
                                                                     lambda line: print(line, flush=True))]
    saved = capacity.save(capacity.Calibration(machine, time.strftime("%Y-%m-%d"), [], "", points), path)
    print("# tcp    MTU  queue  flows  time over max-min (median)  drops per call  calls with a timeout"
          "  standing queue")
    for p in points:
        print(f"  {p.tcp:6} {p.mtu:4} {p.queue_packets:6} {p.flows:6} {p.over_max_min:27.2f} {p.drops_per_call:15.1f} "
              f"{p.timeouts_per_call:21.0%} {p.standing_queue_ms:11.0f} ms")
    print(f"# saved in {saved}: runs{_reading(saved)} with sharing tcp ({tcp}, these MTUs, a {queue}-packet queue) "
          "now stretch congested steps by it")
    return 0


def _int_list(flag: str, text: str, low: int, high: int) -> list[int]:
    try:
        values = [to_int(v) for v in text.split(",")]
    except ValueError:
        raise SpecError(f"{flag}: {text!r} is not a comma-separated list of integers") from None
    if not all(low <= v <= high for v in values):
        raise SpecError(f"{flag}: every value must be between {low} and {high}, got {text}")
    return values


def cmd_clean(args) -> int:
    from emulator.spec.experiment import server_names
    others = server_names(args.servers)[1:] if args.servers else ()
    _needs_root(args.command)
    with processes.RunLock():
        removed = processes.sweep()
    print("removed: " + (", ".join(removed) if removed else "nothing; the machine is clean"))
    if others:
        from emulator.net.cluster import clean_servers
        for name, what in clean_servers(others).items():
            print(f"removed on {name}: {what}")
    return 0


# --- shared ---------------------------------------------------------------------------

# Mininet on one machine: beyond these, use `bigraph-emu model`.
def _needs_root(command: str) -> None:
    """Called by network commands after validation, before anything is created."""
    if os.geteuid() != 0:
        raise SpecError(f"'bigraph-emu {command}' needs root (Mininet and Open vSwitch); "
                        "'bigraph-emu model' and 'bigraph-emu topo' run without it")


def cmd_sweep(args) -> int:
    from emulator.sweep.run import sweep
    if (args.emulate or args.confirm) and not args.dry_run:
        _needs_root(args.command)
    return sweep(args.file, args.out, args.resume, args.scheduler, args.workers, args.emulate, args.confirm,
                 args.dry_run, args.yes)


COMMANDS = {"calibrate": cmd_calibrate, "demo": cmd_demo, "run": cmd_run, "compare": cmd_compare, "cli": cmd_cli,
            "exec": cmd_exec, "topo": cmd_topo, "plan": cmd_plan,
            "model": cmd_model, "sweep": cmd_sweep, "report": cmd_report, "clean": cmd_clean, "cleanup": cmd_clean}


PRINT_ONLY = ("model", "topo", "plan")   # commands whose output is all they do


def failure(e: Exception) -> str:
    """Why a command failed; a full disk names the file it could not write and the space left there."""
    if not (isinstance(e, OSError) and e.errno == errno.ENOSPC):
        return str(e)
    where = os.path.dirname(os.path.abspath(e.filename)) if e.filename else "."
    free = shutil.disk_usage(where).free if os.path.isdir(where) else 0
    return (f"no space left on the device: could not write {e.filename or 'a results file'} "
            f"({free / 2**20:.1f} MiB free there); free some space and run again")


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    interrupts.unwind_on_signals()   # Ctrl-C, SIGTERM and a hang-up all tear down
    try:
        return COMMANDS[args.command](check_values(args))
    except SpecError as e:
        print(f"bigraph-emu: error: {shorten(blame_flag(str(e), typed_flags(args)))}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except BrokenPipeError:   # e.g. `| head -1`: the reader stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the exit's flush goes nowhere
        if args.command in PRINT_ONLY:   # the reader has what it wanted
            return 0
        print(f"bigraph-emu: {args.command} stopped: its output was closed", file=sys.stderr)
        return exit_codes.FAILED
    except processes.MachineBusy as e:
        print(f"bigraph-emu: {args.command}: {e}", file=sys.stderr)
        return exit_codes.BUSY
    except (RuntimeError, OSError) as e:   # the emulation failed; teardown has run
        if interrupts.lost_terminal(e):   # a hang-up's first sign can be a failed write, before SIGHUP
            return exit_codes.INTERRUPTED
        print(f"bigraph-emu: {args.command} failed: {failure(e)}", file=sys.stderr)
        return exit_codes.FAILED
    except (KeyboardInterrupt, interrupts.Interrupted):
        print("bigraph-emu: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
