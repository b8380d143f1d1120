"""`bigraph-emu exec`: a user's own program on the emulated fabric.

  prepare   every check before the network: the fabric, the mapping's
            ranks (one per host), the program (and mpiexec) found, the
            results folder
  execute   bring-up as for `run` (Emulation: routes verified), then the
            program once per rank in its host (or mpiexec in rank 0's),
            the links sampled all along; then ranks.csv, links.csv,
            machine.csv, summary.txt and the plots, and OUT.partial renamed
  teardown  every process the program started, then the fabric, also
            after a failure, a timeout, Ctrl-C or a hang-up
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import time

from emulator import exit_codes
from emulator.routes.routing import forwarding_table, policy_record
from emulator.plan import ranks as R
from emulator.net import capabilities
from emulator.spec.experiment import RunSpec, SpecError, make_run

# run keys that mean nothing to a program whose traffic is its own
NOT_FOR_EXEC = ("collective", "algorithm", "sizes", "repetitions", "warmup", "connections", "link_events",
                "model_alpha_us", "workload")
PLAN_KEYS = {"collective": "allreduce", "algorithm": "ring", "sizes": "64K", "repetitions": 1, "warmup": 0}
DEFAULT_TIMEOUT_S = 600.0
SUMMARY_TAIL_LINES = 20   # of rank 0's stdout, printed at the end


@dataclasses.dataclass
class Job:
    """What `exec` was asked to do, checked."""
    plan: object           # RunPlan: the fabric, its routes and the ranks' hosts
    command: list[str]
    timeout_s: float
    out: str               # the results folder (absolute: every rank changes directory)
    mpiexec: str = ""      # --mpi: MPICH's mpiexec, which starts the ranks


def prepare(values: dict, command: list[str], mpi: bool, timeout_s: float | None, out: str | None,
            experiment_file: str | None = None) -> Job:
    """Every error before the network, as a SpecError naming it."""
    from emulator import preflight
    from emulator.spec.experiment import load_experiment
    spec = (load_experiment(experiment_file, values, capabilities.netem_available).runs[0] if experiment_file
            else make_run(values, capabilities.netem_available))
    defaults = RunSpec()
    given = [k for k in NOT_FOR_EXEC if k in values or getattr(spec, k) != getattr(defaults, k)]
    if given:
        raise SpecError(f"{given[0]}: exec runs your program, whose traffic is its own; "
                        f"{', '.join(given)} {'has' if len(given) == 1 else 'have'} no meaning here")
    if policy_record(spec.policy).needs_demands:
        raise SpecError(f"policy: {spec.policy} routes a workload's demands, known before it runs; a program's "
                        "are not: choose another policy")
    spec = make_run({**{k: v for k, v in dataclasses.asdict(spec).items() if k not in PLAN_KEYS}, **PLAN_KEYS},
                    capabilities.netem_available)
    plan = preflight.plan_emulated(spec)
    if policy_record(spec.policy).takes_demands:   # a program's traffic is its own: routed without demands
        try:
            plan.table = forwarding_table(plan.fabric, spec.policy, None, spec.seed)
        except ValueError as e:
            raise SpecError(str(e)) from None
    try:
        R.check_one_rank_per_host(plan.hosts)
    except ValueError as e:
        raise SpecError(f"ranks: {e}") from None
    if not command:
        raise SpecError("exec: give the program after '--', e.g. bigraph-emu exec -t bigraph:m=2,n=4 -- "
                        "python3 my_allreduce.py")
    if shutil.which(command[0]) is None:
        raise SpecError(f"exec: {command[0]!r} is not a program on this machine (not found on PATH, "
                        "not an executable file)")
    command = absolute_paths(command)
    timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    if not 0 < timeout_s <= 7 * 24 * 3600:
        raise SpecError(f"--timeout: {timeout_s:g} s; give seconds, more than 0 and at most a week")
    mpiexec = find_mpiexec() if mpi else ""
    folder = os.path.abspath(preflight.results_dir(out, "exec"))
    return Job(plan, list(command), timeout_s, folder, mpiexec)


def absolute_paths(command: list[str]) -> list[str]:
    """The program, and every argument naming a file or folder that exists
    here, as absolute paths: each rank starts in a folder of its own."""
    program = command[0] if "/" not in command[0] else os.path.abspath(command[0])
    return [program] + [os.path.abspath(a) if not a.startswith("-") and not os.path.isabs(a) and os.path.exists(a)
                        else a for a in command[1:]]


def find_mpiexec() -> str:
    """MPICH's mpiexec beside this Python (pip's mpich), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")
    if not found:
        raise SpecError("--mpi: no mpiexec found: install the real clients (vm/provision.sh --clients, or "
                        "pip install '.[clients]')")
    return found


def execute(job: Job, page=None) -> int:
    """Bring-up, the program, the results; the exit code (_write_results').
    `page`: the web view (pipeline.web_view), shown the links and each
    rank's state as it goes, then the summary and the plots."""
    from emulator.records.captures import FOLDER as CAPTURES, capture_rows
    from emulator.fabric.captured import captured_links
    from emulator.emulation import Emulation
    from emulator.measure.capture import LinkCapture
    from emulator.measure.monitor import LinkMonitor
    from emulator.replay.programs import Program
    from emulator.preflight import PARTIAL
    from emulator.progress import describe_fabric_run
    work = job.out + PARTIAL
    os.makedirs(work)
    if os.path.isdir(job.out):
        os.rmdir(job.out)   # empty (checked before): the finished folder takes its place
    _write_spec(work, job)
    print(describe_exec(job) + "\n# " + describe_fabric_run(job.plan.spec, job.plan.ranks), flush=True)
    try:
        with Emulation(job.plan, work) as emu:
            slots = R.slots(job.plan.fabric, job.plan.hosts)
            web = ExecWeb(page, job, emu, slots) if page else None
            links = captured_links(job.plan.fabric, job.plan.spec.capture)
            files = [f"{CAPTURES}/program-{link.name}.pcap" for link in links]   # one per link, the whole program
            wall = time.time() - time.monotonic()   # a pcap keeps the wall clock, the ranks the monotonic one
            samplers = emu.samplers(job.plan)   # the links of other servers, read there
            with _stopping(samplers), Program(emu.network, slots, work, away_of(emu, slots)) as program, \
                    LinkCapture(links, work, files, emu.remote_of) as capture, \
                    LinkMonitor(emu.links, job.plan.spec.monitor_interval_ms / 1e3, web and web.on_sample,
                                samplers) as monitor:
                start(program, emu, slots, work, job.command, job.mpiexec)
                print(f"# {len(slots)} ranks started; outputs in {work}/{R.RANKS_FOLDER}/<rank>/", flush=True)
                stopped = program.wait(job.timeout_s, web and web.on_poll)
            exits = program.exits()
            failed = R.failures(work, exits)
            if job.mpiexec:
                failed += R.mpiexec_failure(work, program.procs[0].returncode)
            _write_captures(work, job, capture_rows(0, links, files, program.t0 + wall, capture.counts))
            code, text = _write_results(job, work, slots, exits, program.t0, monitor.samples, emu, stopped, failed,
                                        program.hosts.by_host(), program.cpu_away())
            if web:
                web.finished(exits, program.t0, text, work)
    except BaseException:
        print(f"# the program did not finish; what was measured is in {work}/", file=sys.stderr)
        raise
    os.rename(work, job.out)
    print(f"# results: {job.out}/ ranks.csv, links.csv, machine.csv, summary.txt, heatmap.png, fabric.png, "
          f"routes.json; every rank's stdout and stderr in {R.RANKS_FOLDER}/")
    return code


def describe_exec(job: Job) -> str:
    how = f"under mpiexec ({job.mpiexec})" if job.mpiexec else "once per rank"
    return f"# exec {R.describe_command(job.command)}: {job.plan.ranks} ranks {how}, timeout {job.timeout_s:g} s"


def _write_spec(work: str, job: Job) -> None:
    spec = {k: v for k, v in dataclasses.asdict(job.plan.spec).items()}
    with open(os.path.join(work, "spec.json"), "w") as f:
        json.dump({"name": "exec", "runs": [spec], "command": job.command, "mpi": bool(job.mpiexec),
                   "timeout_s": job.timeout_s}, f, indent=1)


@contextlib.contextmanager
def _stopping(samplers):
    try:
        yield
    finally:
        for sampler in samplers:
            sampler.stop()


def away_of(emu, slots) -> dict:
    """The ranks whose host another server holds, with that server."""
    from emulator.replay.programs import Away
    if not emu.servers:
        return {}
    return {s.rank: Away(remote, emu.servers.offset_of(s.host)) for s in slots
            for remote in [emu.servers.remote_of(s.host)] if remote is not None}


def start(program, emu, slots, work: str, command: list[str], mpiexec: str = "") -> None:
    """The program's ranks on the fabric emu holds, with WORK/hostfile: each
    in its host, or, given `mpiexec`, under it in rank 0's host with a
    launcher that enters the others (through ssh on other servers)."""
    from emulator.replay.programs import AWAY_ROOT
    hostfile = os.path.join(work, R.HOSTFILE)
    with open(hostfile, "w") as f:
        f.write(R.hostfile_text(slots))
    program.prepare_away(R.hostfile_text(slots), [sys.executable] + [a for a in command if os.path.isabs(a)]
                         + ([mpiexec] if mpiexec else []))
    if not mpiexec:
        program.start_ranks(command, hostfile)
        return
    launcher = os.path.join(work, "launcher.sh")
    pids = {s.address: emu.network.host(s.host).pid for s in slots}
    if 0 in program.away:
        raise RuntimeError(f"--mpi: rank 0's host, {slots[0].host}, is on server {program.away[0].remote.name}; "
                           "mpiexec runs in rank 0's host, which must be on the head (another mapping or placement)")
    through = {s.address: program.away[s.rank].remote.ssh_alone() for s in slots if s.rank in program.away}
    with open(launcher, "w") as f:
        f.write(R.launcher_script(pids, through, os.getpid()))
    os.chmod(launcher, 0o755)
    away = {rank: AWAY_ROOT for rank in program.away}
    program.start_mpi(R.mpiexec_argv(mpiexec, launcher, slots, sys.executable, work, hostfile, command, away))


def _write_results(job: Job, work: str, slots, exits, t0: float, samples, emu, stopped: str,
                   failed: list[str], cpu: dict[str, tuple[float, float]], cpu_away: dict) -> tuple[int, str]:
    """ranks.csv, links.csv, machine.csv, summary.txt and the plots; the
    exit code (0: every rank exited 0 by itself and the verdict is ok; 3:
    they did, but the verdict failed) and the summary. `cpu`: per rank
    host on this machine, its processes' seconds on a core and waiting for
    one; `cpu_away`: per host on another server, its seconds on a core."""
    from emulator.results import linkstats
    from emulator.records import links as link_records
    from emulator.measure import counters
    from emulator.results.report import write_program_report
    from emulator.results.calls import append_csv
    from emulator.results.verdict import program_fidelity, trusted
    spec = job.plan.spec
    run_keys = {"run": 0, "topology": job.plan.fabric.topology, "policy": spec.policy, "mapping": spec.mapping,
                "label": spec.label}
    append_csv(os.path.join(work, "ranks.csv"), R.RANK_COLUMNS, R.rank_rows(0, slots, exits, t0, spec.label, {**cpu, **cpu_away}))
    links = linkstats.link_rows(0, emu.links, samples, t0)
    machine = linkstats.machine_rows(0, samples, t0, counters.TICKS)
    append_csv(os.path.join(work, "links.csv"), list(run_keys) + link_records.LINK_COLUMNS,
               [{**run_keys, **r} for r in links])
    append_csv(os.path.join(work, "machine.csv"), list(run_keys) + link_records.MACHINE_COLUMNS,
               [{**run_keys, **r} for r in machine])
    ports = linkstats.port_rows(0, emu.controller.port_readings(), t0, samples[-1].t, job.plan.fabric)
    append_csv(os.path.join(work, "ports.csv"), list(run_keys) + link_records.PORT_COLUMNS,
               [{**run_keys, **r} for r in ports])
    duration = samples[-1].t - samples[0].t
    figures = {**linkstats.machine_totals(samples[0], samples[-1], counters.TICKS),
               **linkstats.call_figures(links, duration, spec.mtu)}
    core_s = (samples[-1].cpu_total - samples[0].cpu_total) / counters.TICKS   # every core's, over the window
    verdict = program_fidelity(figures, duration, R.program_cpu_s(slots, exits, cpu), core_s)
    text = summary_text(job, slots, exits, t0, figures, verdict, stopped, failed, cpu)
    with open(os.path.join(work, "summary.txt"), "w") as f:
        f.write(text + "\n")
    write_program_report(work)
    print(_stdout_tail(work, 0))
    print(text)
    if failed or stopped:
        return exit_codes.FAILED, text
    return (exit_codes.OK if trusted(verdict) else exit_codes.UNTRUSTED), text


def _write_captures(work: str, job: Job, rows: list[dict]) -> None:
    """captures.csv: the pcaps of --capture, which the report reads into capture_flows.csv."""
    from emulator.records.captures import CAPTURE_COLUMNS
    from emulator.results.calls import append_csv
    if rows:
        keys = {"run": 0, "topology": job.plan.fabric.topology}
        append_csv(os.path.join(work, "captures.csv"), list(keys) + CAPTURE_COLUMNS, [{**keys, **r} for r in rows])


def summary_text(job: Job, slots, exits, t0: float, figures: dict, verdict: str, stopped: str,
                 failed: list[str], cpu: dict[str, tuple[float, float]]) -> str:
    from emulator.progress import describe_fabric_run
    lines = [describe_exec(job), "# " + describe_fabric_run(job.plan.spec, job.plan.ranks),
             "#  rank  host      address      exit   start(s)    end(s)"]
    for s, e in zip(slots, exits):
        code = "-" if e.exit_code is None else str(e.exit_code)
        times = [f"{t - t0:9.3f}" if t is not None else f"{'-':>9}" for t in (e.start_s, e.end_s)]
        lines.append(f"  {s.rank:5d}  {s.host:8}  {s.address:11}  {code:>4}  {times[0]}  {times[1]}")
    ends = [e.end_s for e in exits if e.end_s is not None]
    if ends and len(ends) == len(exits):
        lines.append(f"# the program took {max(ends) - t0:.3f} s (start to the last rank's end)")
        if cpu:
            lines.append(cpu_line(cpu, max(ends) - t0))
    lines.append(f"# switch links over the whole program: the busiest carried {figures['max_link_util']:.0%} of its "
                 f"rate, the mean {figures['mean_link_util']:.0%}; CPU idle {1 - figures['cpu_busy']:.0%}; "
                 f"queue drops {figures['queue_drops']}; fidelity (no model: the machine and the links) {verdict}")
    if stopped:
        lines.append(f"# FAILED: stopped ({'after the timeout of ' + format(job.timeout_s, 'g') + ' s' if stopped == 'timeout' else stopped})")
    lines += [f"# FAILED: {line}" for line in failed]
    return "\n".join(lines)


def cpu_line(cpu: dict[str, tuple[float, float]], seconds: float) -> str:
    """The ranks' share of the machine: where their processes wait for a
    core, the program's times measure the machine as well as the network."""
    on_cpu, waiting = sum(c for c, _ in cpu.values()), sum(w for _, w in cpu.values())
    return (f"# the ranks' processes ({len(cpu)} hosts on this machine): {on_cpu:.2f} s on a core "
            f"({on_cpu / seconds:.2f} of one over the program), {waiting:.2f} s runnable but waiting for one "
            f"({waiting / seconds:.2f} threads waiting on average)")


def _stdout_tail(work: str, rank: int) -> str:
    path = os.path.join(R.rank_dir(work, rank), "stdout")
    try:
        with open(path, errors="replace") as f:
            tail = f.readlines()[-SUMMARY_TAIL_LINES:]
    except OSError:
        tail = []
    if not tail:
        return f"# rank {rank} wrote nothing to its stdout"
    return f"# rank {rank}'s stdout (last {len(tail)} lines of {R.RANKS_FOLDER}/{rank}/stdout):\n" + "".join(tail)


class ExecWeb:
    """What the web page shows of a program: the links of every sample, each
    rank's state (running, exited and its code), then one line for the
    program, the summary and the plots."""

    def __init__(self, page, job: Job, emu, slots):
        from emulator.web.view import fabric_message
        self.page, self.job, self.emu, self.slots = page, job, emu, slots
        self.states = [{"rank": s.rank, "host": s.host, "state": "starting"} for s in slots]
        self.last: dict = {}   # the last sample's message, without the ranks
        self.t0 = time.monotonic()
        page.publish(fabric_message(job.plan.fabric))

    def on_sample(self, samples) -> None:
        from emulator.results import linkstats
        from emulator.web.view import link_values
        if len(samples) < 2:
            return
        rows = linkstats.link_rows(0, self.emu.links, samples[-2:], samples[0].t)
        self.last = {"type": "sample", "label": describe_exec(self.job).lstrip("# "),
                     "t_s": round(samples[-1].t - self.t0, 3), "links": link_values(rows)}
        self.page.publish({**self.last, "ranks": list(self.states)})

    def on_poll(self, exits) -> None:
        self.states = [{**state, "state": "running" if e.exit_code is None else f"exited {e.exit_code}"}
                       for state, e in zip(self.states, exits)]

    def finished(self, exits, t0: float, summary: str, work: str) -> None:
        from emulator.web.view import call_row, end_message, plots_of
        self.on_poll(exits)
        if self.last:   # the monitor has stopped: the ranks' last states in a sample of their own
            self.page.publish({**self.last, "ranks": list(self.states)})
        ends = [e.end_s for e in exits if e.end_s is not None]
        took = f"{max(ends) - t0:.2f} s" if ends else "-"
        verdict = "ok" if all(e.exit_code == 0 for e in exits) else "FAIL: " + ", ".join(
            f"rank {e.rank} {'running' if e.exit_code is None else 'exit ' + str(e.exit_code)}"
            for e in exits if e.exit_code != 0)
        self.page.publish(call_row(0, 0, f"program {R.describe_command(self.job.command)}"[:80], took, "-", verdict))
        self.page.publish(end_message(summary, plots_of(os.listdir(work))))
