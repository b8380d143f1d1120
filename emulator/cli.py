"""bigraph-emu: the command users type.

  bigraph-emu demo                   8-host BiGraph, halving-doubling allreduce, naive then HDRM mapping (root)
  bigraph-emu run [flags]            one run from flags, or --experiment FILE (root)
  bigraph-emu compare --vary K=A,B   one run per value of a key, one table at the end (root)
  bigraph-emu cli [flags]            fabric and controller up, then Mininet's CLI (root)
  bigraph-emu exec [flags] -- CMD    your program once per rank on the emulated hosts (root)
  bigraph-emu topo [flags]           describe a fabric; --path SRC DST shows a route
  bigraph-emu model [flags]          the flow model only: no root, no network
  bigraph-emu report FOLDER...       summary, plot and link loads; several folders: compared
  bigraph-emu clean                  remove what a crashed run left behind (alias: cleanup)

Every input is validated before anything is created; bad input exits with
code 2 and a message naming the key. `COMMAND --help` lists each one's flags.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import re
import sys
import time

from emulator.routes.routing import POLICIES
from emulator.fabric.mapping import MAPPINGS
from emulator import pipeline
from emulator.execute import DEFAULT_TIMEOUT_S, NOT_FOR_EXEC
from emulator.net import capabilities, interrupts
from emulator.inputs import shorten, to_int
from emulator.results.metrics import MODEL_HEADER, avg_busbw_line, model_row
from emulator.inputs import size_name
from emulator.workloads.collectives import COLLECTIVES
from emulator.workloads.algorithms import ALGORITHMS
from emulator.spec.experiment import OFFLOADS
from emulator.plan import predictions
from emulator.results.calls import write_model_steps
from emulator.spec.experiment import FIELDS, Experiment, RunSpec, SpecError, load_experiment, make_run, switch_links

# The teaching demo: one halving-doubling allreduce on one BiGraph, first
# with consecutive ranks on a switch (congested links), then with HDRM.
DEMO_DEFAULTS = {"topology": "bigraph:m=2,n=4", "collective": "allreduce", "algorithm": "halving-doubling",
                 "sizes": "2M:8M:2", "repetitions": 2, "warmup": 1, "host_rate_mbps": 50, "switch_rate_mbps": 50}
DEMO = [{**DEMO_DEFAULTS, "mapping": "naive", "label": "demo naive"},
        {**DEMO_DEFAULTS, "mapping": "hdrm", "label": "demo hdrm"}]

# command-line flag -> RunSpec key (flags mirror nccl-tests where they can)
FLAGS = [
    (("-t", "--topology"), "topology", "e.g. bigraph:m=4,n=8, fattree:k=4, leafspine:leaves=4,spines=2,hosts=4"),
    (("-c", "--collective"), "collective", ", ".join(COLLECTIVES)),
    (("-a", "--algorithm"), "algorithm", " or ".join(ALGORITHMS)),
    (("-m", "--mapping"), "mapping", "rank mapping: " + ", ".join(MAPPINGS)),
    (("-p", "--policy"), "policy", "routing policy: " + ", ".join(POLICIES) + " ('bigraph-emu topo --help' says "
                                   "what each does)"),
    (("--ranks",), "ranks", "number of ranks (default: every host)"),
    (("--seed",), "seed", "seed of the random mapping"),
    (("-n", "--repetitions"), "repetitions", "counted repetitions per size"),
    (("-w", "--warmup"), "warmup", "uncounted warm-up repetitions per size"),
    (("--host-rate",), "host_rate_mbps", "host link rate, Mbit/s"),
    (("--switch-rate",), "switch_rate_mbps", "switch-switch link rate, Mbit/s"),
    (("--host-queue",), "host_queue_packets", "host link queue depth, packets"),
    (("--switch-queue",), "switch_queue_packets", "switch link queue depth, packets"),
    (("--mtu",), "mtu", "interface MTU, bytes (576..9000)"),
    (("--datapath",), "datapath", "auto, kernel or user"),
    (("--offload",), "offload", "off (hosts send frames) or tso (segments up to the HTB burst; the userspace "
                                "datapath needs `vm/provision.sh --userspace-tso on`)"),
    (("--connections",), "connections", "TCP connections per peer pair, 1..16 (default 1)"),
    (("--delay",), "link_delay_ms", "netem delay on every link, ms (needs sch_netem)"),
    (("--loss",), "link_loss_pct", "netem loss on every link, percent (needs sch_netem)"),
    (("--link-event",), "link_events", "e.g. 2.5:bgs1-bgs5:down: switch link A-B goes down (or up) "
                                       "T seconds after the first counted call starts; repeatable"),
    (("--link-rate", "--link"), "link_overrides", "e.g. bgs0-bgs2:5 or bgh3:10: that link (both directions) at "
                                                  "another rate, Mbit/s; or TARGET:rate=MBPS,delay=MS,loss=PCT "
                                                  "with TARGET a link, a host or two tiers (leaf-spine, "
                                                  "host-edge, lower-upper); repeatable"),
    (("--capture",), "capture", "record these links (pcap, headers only, for Wireshark) during "
                                "every counted call (exec: the whole program), into captures/ of the results folder: A-B (two switches) or "
                                "HOST (its own link), e.g. bgs0-bgs2,bgh3; needs tcpdump"),
    (("--monitor-interval",), "monitor_interval_ms", "link sampling period, ms (10..1000, default 100)"),
    (("--alpha-us",), "model_alpha_us", "per-message latency of the model, microseconds"),
    (("--label",), "label", "free text copied into the results"),
    (("--workload",), "workload", "a workload file of [[job]] tables (jobs, placements, programs), or "
                                  "simai:FILE; replaces -c and the sizes, while -a, -m and --ranks fill in "
                                  "what its jobs leave open"),
]
METAVARS = {"host_rate_mbps": "MBPS", "switch_rate_mbps": "MBPS", "host_queue_packets": "PACKETS",
            "switch_queue_packets": "PACKETS", "mtu": "BYTES", "link_delay_ms": "MS", "link_loss_pct": "PCT",
            "link_events": "T:A-B:down|up", "link_overrides": "LINK:SETTINGS", "capture": "LINK[,LINK]", "monitor_interval_ms": "MS", "model_alpha_us": "US", "ranks": "N",
            "seed": "N", "repetitions": "N", "warmup": "N", "connections": "N", "workload": "FILE"}
# --vary accepts a key or its long flag name (policy, host-rate, delay, ...)
FLAG_KEYS = {flags[-1].lstrip("-"): key for flags, key, _ in FLAGS}
MAX_COMPARE_RUNS = 64
NOT_EMULATED = ("capture",)   # flags of what only an emulation does: not on model, topo, cli


# --- parsing --------------------------------------------------------------------------

def _with_default(key: str, text: str) -> str:
    """A flag's help with the spec's default, unless it names it already or there is none."""
    default = FIELDS[key].default
    if "default" in text or default in ("", ()):
        return text
    return f"{text} (default {default:g})" if isinstance(default, float) else f"{text} (default {default})"


def _add_spec_flags(sp: argparse.ArgumentParser, sizes: bool = True, skip: tuple[str, ...] = ()) -> None:
    for flags, key, helptext in FLAGS:
        if key in skip:
            continue
        sp.add_argument(*flags, dest=key, help=_with_default(key, helptext),
                        metavar=METAVARS.get(key, key.split("_")[0].upper()),
                        action="append" if key in ("link_events", "link_overrides") else "store")
    sp.add_argument("--bw", metavar="MBPS", help="host and switch link rate at once, Mbit/s; 'auto': as fast as "
                                                 "this machine emulates the run faithfully (from its calibration)")
    sp.add_argument("--queue", metavar="PACKETS", help="host and switch queue depth at once, packets")
    if sizes:
        low, high = min(RunSpec.sizes), max(RunSpec.sizes)
        sp.add_argument("-b", "--minbytes", metavar="SIZE", help=f"smallest size, e.g. 64K (default {size_name(low)})")
        sp.add_argument("-e", "--maxbytes", metavar="SIZE", help=f"largest size, e.g. 16M (default {size_name(high)})")
        sp.add_argument("-f", "--stepfactor", metavar="F", help="size multiplier between sizes (default 2)")
    sp.add_argument("--experiment", metavar="FILE", help="TOML experiment file; flags given override its keys")


# One or two lines a user can start from, per command (shown by its --help).
EXAMPLES = {
    "demo": ["bigraph-emu demo --web"],
    "run": ["bigraph-emu run -t bigraph:m=4,n=8 -a halving-doubling -m hdrm -b 1M -e 16M -f 2",
            "bigraph-emu run --experiment experiments/eflops.toml -n 3 --json > summary.json"],
    "compare": ["bigraph-emu compare -t bigraph:m=4,n=8 -a halving-doubling --vary mapping=naive,hdrm"],
    "model": ["bigraph-emu model -t bigraph:m=32,n=64 -a halving-doubling -m naive -b 64M"],
    "cli": ["bigraph-emu cli -t bigraph:m=2,n=4 -p ecmp"],
    "topo": ["bigraph-emu topo -t fattree:k=4 -p spread --path bgh0 bgh15"],
    "report": ["bigraph-emu report results/<folder>",
               "bigraph-emu report results/<a> results/<b> --plot cmp.png"],
    "calibrate": ["bigraph-emu calibrate --mtu 9000 --offload off,tso"],
    "clean": ["bigraph-emu clean"],
    "exec": ["bigraph-emu exec -t bigraph:m=2,n=4 -m hdrm -- python3 experiments/real-clients/torch_allreduce.py -b 1M",
             "bigraph-emu exec -t bigraph:m=2,n=4 --mpi -- python3 experiments/real-clients/mpi_allreduce.py -b 1M"],
}
EXIT_BAD_INPUT = 2
# every exit code of every command (the README's table says the same)
EXIT_CODES = {pipeline.EXIT_OK: "done; a run: every call passed the fidelity verdict",
              pipeline.EXIT_FAILED: "failed: the emulation (or a command) failed, or an agent moved wrong bytes",
              EXIT_BAD_INPUT: "bad input: nothing was created",
              pipeline.EXIT_UNTRUSTED: "a run finished, but some calls failed the fidelity verdict",
              interrupts.EXIT_CODE: "interrupted (Ctrl-C, SIGTERM, a hang-up); teardown has run"}


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's, except that a paragraph with indented lines (the
    examples) is kept as it is written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.split("\n\n"):
            if "\n  " in paragraph:
                paragraphs.append(paragraph)
            else:
                paragraphs.append(super()._fill_text(paragraph, width, indent))
        return "\n\n".join(paragraphs)


def _command(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with examples."""
    examples = "\n".join(f"  {line}" for line in EXAMPLES[name])
    heading = "examples" if len(EXAMPLES[name]) > 1 else "example"
    return sub.add_parser(name, formatter_class=_HelpFormatter, epilog=f"{heading}:\n{examples}", **kwargs)


def _version() -> str:
    from importlib import metadata
    try:
        return metadata.version("bigraph-emu")
    except metadata.PackageNotFoundError:   # run from a checkout that was never installed
        return "(not installed; pip install -e . gives it its version)"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bigraph-emu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="exit codes:\n" + "\n".join(f"  {code:3}  {meaning}"
                                                                   for code, meaning in sorted(EXIT_CODES.items())))
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    out_help = "results folder, new or empty (default: results/<time>-<name>)"
    sp = _command(sub, "demo", help="8-host BiGraph halving-doubling allreduce, naive then HDRM mapping (needs root)")
    sp.add_argument("--out", metavar="FOLDER", help=out_help)
    _add_web_flags(sp, "shows the run live, then its results until Ctrl-C")
    for name, text in (("run", "emulate (needs root)"), ("compare", "one emulated run per --vary value (needs root)"),
                       ("model", "flow model only (no root)")):
        sp = _command(sub, name, help=text, description=text)
        _add_spec_flags(sp, skip=NOT_EMULATED if name == "model" else ())
        sp.add_argument("--out", metavar="FOLDER", help=out_help)
        if name != "model":
            _add_web_flags(sp, "shows the run live, then its results until Ctrl-C")
        sp.add_argument("--yes", action="store_true", help="run even if the model predicts more than an hour "
                                                           "(TOML: yes = true; model takes it and needs none)")
        if name == "compare":
            sp.add_argument("--vary", action="append", required=True, metavar="KEY=V1,V2,...",
                            help="one run per value, e.g. policy=shortest,ecmp or mapping=naive,hdrm "
                                 "(';' separates values that hold commas, as topologies do); repeat for "
                                 "every combination")
        if name == "model":
            sp.add_argument("--jitter", type=float, default=0.0, metavar="AMP",
                            help="also predict with every flow up to AMP longer at random (e.g. 0.1), "
                                 "to see how sensitive the collective is to slow flows")
            sp.add_argument("--method", choices=("auto", "exact", "lockstep"), default="auto",
                            help="exact: simulate every flow; lockstep: ring and halving-doubling round by "
                                 "round, all ranks together, and so a workload's jobs whose ranks all run the "
                                 "same ops, on links of their own (said in the output); auto (default): "
                                 "lock-step past 32768 flows")
        sp.add_argument("--json", action="store_true",
                        help="print the predictions as JSON, for scripts" if name == "model" else
                        "print the final summary as JSON on stdout (all else goes to stderr), for scripts")
    sp = _command(sub, "cli", help="fabric and controller up, then Mininet's CLI (needs root)",
                       description="Bring the fabric and controller up, then Mininet's interactive CLI "
                                   "(ping, iperf3, ...); 'exit' tears everything down.")
    _add_spec_flags(sp, sizes=False, skip=NOT_EMULATED)
    sp.add_argument("--out", metavar="FOLDER", help=out_help)
    sp = _command(sub, "exec", help="your own program once per rank on the emulated hosts (needs root)",
                       description="Bring the fabric and controller up as 'run' does, start CMD once per rank "
                                   "inside that rank's host (rank order of the mapping), wait for every rank, "
                                   "tear down. Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, "
                                   "MASTER_PORT, GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, BIGRAPH_HOSTFILE, and "
                                   "a folder of its own (cwd, TMPDIR, stdout, stderr) in the results; "
                                   "arguments naming files that exist here are made absolute.")
    _add_spec_flags(sp, sizes=False, skip=NOT_FOR_EXEC)
    sp.add_argument("--mpi", action="store_true", help="run CMD under MPICH's mpiexec, started in rank 0's host, "
                                                       "one rank per host (its launcher enters each host)")
    sp.add_argument("--timeout", metavar="S", help=f"stop every rank after S seconds (default {DEFAULT_TIMEOUT_S:g})")
    sp.add_argument("--out", metavar="FOLDER", help=out_help)
    _add_web_flags(sp, "shows the links and each rank's state live, then the results until Ctrl-C")
    sp.add_argument("program", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the program and its arguments")
    sp = _command(sub, "topo", help="describe a fabric and its routes (no root)",
                       description="Switches per tier, hosts, links and rates of a fabric; with --path, "
                                   "the route a policy gives between two hosts. Policies: " + _policies())
    _add_spec_flags(sp, sizes=False, skip=NOT_EMULATED)
    sp.add_argument("--path", nargs=2, metavar=("SRC", "DST"), help="hosts, e.g. bgh0 bgh5 (or 0 5)")
    sp.add_argument("--json", action="store_true", help="print the fabric (and the route) as JSON, for scripts")
    sp = _command(sub, "report", help="summary, plot and link loads of results folders (no root)")
    sp.add_argument("folder", nargs="+", help="one results folder, or several to compare")
    sp.add_argument("--plot", metavar="PNG", help="with several folders: where the comparison plot goes "
                                                  "(default: compare-<time>.png beside the first folder)")
    _add_web_flags(sp, "replays the folder's calls and links its plots, read-only, until Ctrl-C "
                       "(rebuilds nothing)")
    sp = _command(sub, "calibrate", help="measure how much this machine emulates faithfully (needs root)",
                       description="Per MTU and offload: raw dataplane capacity (iperf3 through one switch) "
                                   "and the largest load, in link-Mbit/s summed over switch traversals, at "
                                   "which saturated links stay within 5% of their rate. Every run then "
                                   "warns before it starts if it asks for more; --bw auto picks rates from it. "
                                   "About 2 minutes per setting; the machine must be otherwise idle.")
    sp.add_argument("--mtu", default="1500,9000", help="MTUs to measure (default 1500,9000)")
    sp.add_argument("--offload", default="off", help="off, tso or off,tso (tso on the userspace datapath "
                                                     "needs `vm/provision.sh --userspace-tso on`)")
    sp.add_argument("--steps", type=int, default=5, help="bisection steps per setting (default 5: within 3%%)")
    sp.add_argument("--quick", action="store_true", help="one counted call per rate instead of two")
    sp.add_argument("--file", help=f"where to keep the figures (default {CALIBRATION_HELP})")
    _command(sub, "clean", aliases=["cleanup"], help="remove bridges, links and processes a crashed run left "
                                                     "behind (needs root)")
    return p


CALIBRATION_HELP = "$BIGRAPH_EMU_CALIBRATION or /var/lib/bigraph-emu/calibration.json"
WEB_HOST = "127.0.0.1"   # this machine only; another address exposes the page to whoever reaches it


def _add_web_flags(sp: argparse.ArgumentParser, what: str) -> None:
    sp.add_argument("--web", action="store_true", help=f"serve a web page that {what}; prints its URL")
    sp.add_argument("--web-host", metavar="ADDR", help=f"address the page listens on (default {WEB_HOST}: this "
                                                       "machine only; 0.0.0.0: anyone who reaches it); implies --web")
    sp.add_argument("--web-port", metavar="PORT", help="its port (default: a free one); implies --web")


def web_address(args) -> tuple[str, int] | None:
    """(host, port) of the web page, or None: no --web flag given."""
    if not (args.web or args.web_host is not None or args.web_port is not None):
        return None
    host = WEB_HOST if args.web_host is None else args.web_host.strip()
    if not host:
        raise SpecError("--web-host: the address is empty; give one, e.g. 127.0.0.1 or 0.0.0.0")
    try:
        port = 0 if args.web_port is None else to_int(args.web_port)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise SpecError(f"--web-port: {args.web_port!r} is not a port number (0 to 65535; 0: a free one)")
    return host, port


def _policies() -> str:
    return "; ".join(f"{p.name}: {p.description}" for p in POLICIES.values())


def _flag_values(args) -> dict:
    values = {key: getattr(args, key) for _, key, _ in FLAGS if getattr(args, key, None) is not None}
    for flag, keys in (("bw", ("host_rate_mbps", "switch_rate_mbps")),
                       ("queue", ("host_queue_packets", "switch_queue_packets"))):
        if getattr(args, flag, None) is not None and (flag, getattr(args, flag)) != ("bw", "auto"):
            for key in keys:
                values.setdefault(key, getattr(args, flag))
    minbytes, maxbytes, factor = (getattr(args, k, None) for k in ("minbytes", "maxbytes", "stepfactor"))
    if factor and not (minbytes or maxbytes):
        raise SpecError("sizes: -f/--stepfactor needs -b and/or -e")
    if minbytes or maxbytes:
        begin = minbytes or maxbytes
        values["sizes"] = f"{begin}:{maxbytes or begin}:{factor or 2}"
    return values


def typed_flags(args) -> dict:
    """spec key -> the flag(s) the user typed for it, to name in errors
    (--queue 1.5 is a mistake in --queue, whatever key it fills)."""
    typed = {key: "/".join(flags) for flags, key, _ in FLAGS if getattr(args, key, None) is not None}
    for flag, keys in (("--bw", ("host_rate_mbps", "switch_rate_mbps")),
                       ("--queue", ("host_queue_packets", "switch_queue_packets"))):
        if getattr(args, flag.lstrip("-"), None) is not None:
            typed.update({key: flag for key in keys if key not in typed})
    sweep = [flag for flag, name in (("-b", "minbytes"), ("-e", "maxbytes"), ("-f", "stepfactor"))
             if getattr(args, name, None) is not None]
    if sweep:
        typed["sizes"] = "/".join(sweep)
    return typed


def blame_flag(message: str, typed: dict) -> str:
    """'host_queue_packets: ...' -> '--queue (host_queue_packets): ...' when
    a flag gave that key (the key starts the message, or follows 'FILE: run N: ')."""
    found = [m for m in (re.search(rf"(?:^|: )({re.escape(key)}):", message) for key in typed) if m]
    if not found:
        return message
    m = min(found, key=lambda m: m.start(1))
    return f"{message[:m.start(1)]}{typed[m.group(1)]} ({m.group(1)}){message[m.end(1):]}"


def _experiment(args, check_kernel: bool = True) -> Experiment:
    has_netem = capabilities.netem_available if check_kernel else None
    values = _flag_values(args)
    if args.experiment:
        experiment = load_experiment(args.experiment, values, has_netem)
    else:
        experiment = Experiment(args.command, [make_run(values, has_netem)])
    return _experiment_flags(args, experiment)


def _experiment_flags(args, experiment: Experiment) -> Experiment:
    """What flags say of the whole experiment: --yes, and --bw auto (every run's link rates scaled to this machine)."""
    experiment.yes |= bool(getattr(args, "yes", False))
    if getattr(args, "bw", None) == "auto":
        experiment.runs = [pipeline.auto_rated(spec) for spec in experiment.runs]
    return experiment


# --- what runs print ------------------------------------------------------------------

# --- model and topo (no root) ------------------------------------------------------------

def cmd_model(args) -> int:
    """Predict every run; --out FOLDER gets every step's end and busiest link
    in model_steps.csv, --json prints the predictions as one JSON document."""
    runs, steps = [], []
    for index, spec in enumerate(_experiment(args, check_kernel=False).runs):
        if spec.workload:
            got = predictions.workload_prediction(spec, args.method, args.jitter)
            if not args.json:
                _print_workload_prediction(spec, got)
            runs.append({"run": pipeline.describe(spec, got["ranks"]).lstrip("# "), "ranks": got["ranks"],
                         "jobs": got["jobs"], "approximation": got["approximation"]})
            continue
        got = predictions.sweep_prediction(spec, args.method, args.jitter, _ModelProgress())
        if not args.json:
            _print_sweep_prediction(spec, got, args.jitter)
        runs.append({"run": pipeline.describe(spec, got["ranks"]).lstrip("# "), "ranks": got["ranks"],
                     "sizes": got["sizes"]})
        steps += [{"run": index, **row} for row in got["steps"]]
    if args.out:
        path = write_model_steps(args.out, steps)
        print(f"# every step: {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(runs, indent=1))
    return 0


def _print_sweep_prediction(spec, got: dict, jitter: float) -> None:
    print(pipeline.describe(spec, got["ranks"]) + " (model)")
    print(MODEL_HEADER)
    for row in got["sizes"]:
        size = row["size_bytes"]
        print(model_row(size, row["time_s"], row["algbw_mbps"], row["busbw_mbps"], got["flows_per_step"][size]))
        if row["approximation"]:
            print(f"#   approximated: {row['approximation']}")
        if jitter:
            print(f"#   with flows up to {jitter:.0%} longer at random: "
                + " ".join(f"{r:.2f}x" for r in row["jitter_ratios"]))
    print(avg_busbw_line(row["busbw_mbps"] for row in got["sizes"]))


def _print_workload_prediction(spec, got: dict) -> None:
    print(pipeline.describe(spec, got["ranks"]) + " (model)")
    pipeline.print_jobs(got["jobs"], measured=False)
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


def _names(names: list[str], limit: int = 16) -> str:
    shown = " ".join(names[:limit])
    return shown + (f" ... ({len(names) - limit} more)" if len(names) > limit else "")


def describe_fabric(fabric) -> str:
    """Switches per tier, hosts, links with their rates and queues."""
    lines = [f"# {fabric.topology}: {len(fabric.switches)} switches, {len(fabric.hosts)} hosts, "
             f"{len(fabric.links)} links"]
    for tier in dict.fromkeys(s.tier for s in fabric.switches):
        names = [s.name for s in fabric.switches if s.tier == tier]
        per = "/".join(str(n) for n in sorted({len(fabric.hosts_on(n)) for n in names}))
        hosts = "no hosts" if per == "0" else f"{per} hosts each"
        lines.append(f"{tier} switches: {len(names)}, {hosts}: {_names(names)}")
    lines.append(f"hosts: {fabric.hosts[0].name} .. {fabric.hosts[-1].name}")
    for kind in ("host", "switch"):
        links = [l for l in fabric.links if l.kind == kind]
        rates = "/".join(f"{r:g}" for r in sorted({l.rate_mbps for l in links}))
        queues = "/".join(str(q) for q in sorted({l.queue_packets for l in links}))
        lines.append(f"{kind} links: {len(links)} at {rates} Mbit/s, queues {queues} packets")
    lines.append(f"switch links by name (for --link-event): {_names(switch_links(fabric), 32)}")
    return "\n".join(lines)


def _host_name(fabric, text: str) -> str:
    from emulator.fabric.graph import HOST_PREFIX
    name = HOST_PREFIX + text if text.isdigit() else text
    if name not in {h.name for h in fabric.hosts}:
        raise SpecError(f"--path: no host {text!r} in {fabric.topology}; hosts are "
                        f"{fabric.hosts[0].name}..{fabric.hosts[-1].name} (or their numbers)")
    return name


def _routes(spec: RunSpec, fabric):
    """The forwarding table of the spec's policy; a policy that routes the
    workload's demands gets its table from the run's plan."""
    from emulator.routes.routing import forwarding_table
    from emulator.plan.run_plan import plan_run
    try:
        if POLICIES[spec.policy].needs_demands:
            return plan_run(spec, fabric).table
        return forwarding_table(fabric, spec.policy)
    except ValueError as e:
        raise SpecError(f"policy: {e}") from None


def route_hops(fabric, table, src: str, dst: str) -> tuple[str, str, list[tuple[str, int]]]:
    """(source, destination, hops) of the route between two hosts given by
    name or number: each hop a node and its egress port."""
    from emulator.routes.routing import path
    src, dst = _host_name(fabric, src), _host_name(fabric, dst)
    if src == dst:
        raise SpecError(f"--path: source and destination are both {src}")
    return src, dst, path(fabric, table, src, dst)


def describe_path(policy: str, src: str, dst: str, hops: list[tuple[str, int]]) -> str:
    """The route from host src to host dst: each node with its egress port."""
    route = " > ".join(f"{node}:{port}" for node, port in hops)
    return f"path {src} -> {dst}, policy {policy}: {route} > {dst}  ({len(hops) - 1} switches; node:egress port)"


def fabric_data(fabric) -> dict:
    """What describe_fabric says, as data (topo --json): fabric.json's
    switches, hosts and links, the switches per tier, the switch links by name."""
    tiers = {tier: [s.name for s in fabric.switches if s.tier == tier] for tier in dict.fromkeys(s.tier for s in fabric.switches)}
    return {**fabric.to_dict(), "tiers": tiers, "switch_links": switch_links(fabric)}


def cmd_topo(args) -> int:
    spec = _experiment(args, check_kernel=False).runs[0]
    fabric = spec.fabric()
    route = route_hops(fabric, _routes(spec, fabric), *args.path) if args.path else None
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


# --- run, compare, demo, cli (root) ----------------------------------------------------------

def cmd_run(args, experiment: Experiment | None = None) -> int:
    """Validate and plan everything, then (as root) emulate. --json: what
    the run prints goes to stderr, and its summary, as JSON, to stdout."""
    import contextlib
    experiment = experiment or _experiment(args)
    web = web_address(args)
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        plans, out = pipeline.prepare(experiment, args.out)
        _needs_root(args.command)
        code = pipeline.emulate(experiment, plans, out, web=web)
    if args.json:
        print(json.dumps(run_summary(out, code), indent=1))
    return code


def run_summary(out: str, code: int) -> dict:
    """A finished run as data (run --json): its folder, exit code, and per
    run and size (or job) the figures of summary.txt."""
    from emulator.results.report import summary_records
    return {"folder": out, "exit_code": code, "exit": EXIT_CODES[code], **summary_records(out)}


def _vary_values(text: str) -> tuple[str, list[str]]:
    """'policy=shortest,ecmp' -> ('policy', ['shortest', 'ecmp']); ';' separates when values hold commas."""
    name, eq, rest = text.partition("=")
    key = FLAG_KEYS.get(name.strip(), name.strip())
    if not eq or key not in FIELDS:
        raise SpecError(f"--vary: {text!r} is not KEY=V1,V2,... with a known key; keys: {', '.join(FIELDS)}")
    values = [v.strip() for v in rest.split(";" if ";" in rest else ",") if v.strip()]
    if not values:
        raise SpecError(f"--vary {key}: give at least one value")
    return key, values


def compare_experiment(args) -> Experiment:
    """One run per combination of --vary values (each over every run of
    --experiment), labelled 'key=value'."""
    varied = [_vary_values(text) for text in args.vary]
    keys = [key for key, _ in varied]
    flags = _flag_values(args)
    for key in keys:
        if keys.count(key) > 1 or key in flags:
            raise SpecError(f"--vary {key}: {key} is given twice (in --vary or also as a flag); give it once")
    combos = list(itertools.product(*[[(key, v) for v in values] for key, values in varied]))
    runs = []
    for combo in combos:
        tag = " ".join(f"{k}={v}" for k, v in combo)
        args_combo = {**flags, **dict(combo)}
        try:
            specs = (load_experiment(args.experiment, args_combo, capabilities.netem_available).runs if args.experiment
                     else [make_run(args_combo, capabilities.netem_available)])
        except SpecError as e:
            raise SpecError(f"--vary {tag}: {e}") from None
        runs += [dataclasses.replace(s, label=f"{s.label} {tag}".strip()) for s in specs]
    if len(runs) > MAX_COMPARE_RUNS:
        raise SpecError(f"--vary: {len(runs)} runs; compare at most {MAX_COMPARE_RUNS} at once")
    return _experiment_flags(args, Experiment("compare-" + "-".join(keys), runs))


def cmd_compare(args) -> int:
    return cmd_run(args, compare_experiment(args))


def cmd_demo(args) -> int:
    """The same allreduce with the naive mapping, then with HDRM; then what it showed."""
    from emulator.results.report import demo_story
    web = web_address(args)
    experiment = Experiment("demo", [make_run(run, capabilities.netem_available) for run in DEMO])
    plans, out = pipeline.prepare(experiment, args.out)
    _needs_root(args.command)
    return pipeline.emulate(experiment, plans, out, web=web, story=demo_story)


def cmd_cli(args) -> int:
    """Validate, then (as root) the fabric and controller up and Mininet's CLI."""
    experiment = _experiment(args)
    if len(experiment.runs) > 1:
        print(f"# {args.experiment} has {len(experiment.runs)} runs; the fabric of the first one comes up")
    plan = pipeline.plan_emulated(experiment.runs[0])
    out = pipeline.results_dir(args.out, "cli")
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
    job = execute.prepare(_flag_values(args), command, args.mpi, timeout, args.out, args.experiment)
    _needs_root(args.command)
    with pipeline.web_view(web) as page:
        if page:
            page.folder = job.out + pipeline.PARTIAL
        code = execute.execute(job, page)
        if page:
            page.folder = job.out
            print(f"# the program has finished; {page.url} shows its results until Ctrl-C", flush=True)
            page.serve_until_interrupted()
    return code


# --- report and clean ---------------------------------------------------------------------

def _results_folder(folder: str) -> list[RunSpec]:
    """The runs of a results folder's spec.json, each workload read from
    the copy the folder keeps of it (older folders: from where spec.json
    says); SpecError if it is not one."""
    from emulator.results.tables import read_runs, read_workload_copies
    if not os.path.isdir(folder):
        raise SpecError(f"{folder}: no such results folder")
    runs = read_runs(folder)
    if not any(os.path.exists(os.path.join(folder, name)) for name in ("collectives.csv", "jobs.csv", "ranks.csv")):
        raise SpecError(f"{folder} has no collectives.csv, jobs.csv or ranks.csv: its run measured nothing")
    copies = read_workload_copies(folder)
    specs = []
    for i, run in enumerate(runs):
        kept = copies.get(run["workload"]) if isinstance(run.get("workload"), str) else None
        try:
            specs.append(make_run({**run, "workload": kept} if kept else run))
        except SpecError as e:
            raise SpecError(f"{os.path.join(folder, 'spec.json')}: run {i + 1}: {e}") from None
    return specs


def _folder_plans(folder: str, specs: list[RunSpec]) -> list:
    """The plans of a folder's runs, each in its place, its workload named
    as when it ran (the tables say that name, not the copy's)."""
    from emulator.plan.run_plan import plan_run
    from emulator.results.tables import read_runs
    plans = []
    for i, (spec, run) in enumerate(zip(specs, read_runs(folder))):
        plan = dataclasses.replace(plan_run(spec), run=i)
        plan.spec = dataclasses.replace(spec, workload=run.get("workload", ""))
        plans.append(plan)
    return plans


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
    specs = [_results_folder(folder) for folder in args.folder]
    if web:
        return _serve_folder(args.folder[0], web)
    if len(args.folder) > 1:
        programs = [f for f in args.folder if _is_program_folder(f)]
        if programs:
            raise SpecError(f"{programs[0]}: a program's results (bigraph-emu exec) have no calls to compare; "
                            "report it alone")
        return _compare_folders(args.folder, args.plot)
    if _is_program_folder(args.folder[0]):   # exec's: its summary stays, its plots are redrawn
        from emulator.results.report import write_program_report
        write_program_report(args.folder[0])
        with open(os.path.join(args.folder[0], "summary.txt")) as f:
            print(f.read(), end="")
        return 0
    pipeline.write_reports(args.folder[0], _folder_plans(args.folder[0], specs[0]))
    return 0


def _is_program_folder(folder: str) -> bool:
    """A folder `exec` wrote: a program's ranks, no collectives or jobs."""
    return os.path.exists(os.path.join(folder, "ranks.csv")) and not any(
        os.path.exists(os.path.join(folder, name)) for name in ("collectives.csv", "jobs.csv"))


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


def _compare_folders(folders: list[str], plot_path: str | None) -> int:
    from emulator.results import report
    df = report.compare(folders)
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
    from emulator.plan import capacity
    mtus, offloads = _int_list("--mtu", args.mtu, 576, 9000), args.offload.split(",")
    if any(o not in OFFLOADS for o in offloads):
        raise SpecError(f"--offload: {args.offload!r}: give off, tso or off,tso")
    if not 1 <= args.steps <= 10:
        raise SpecError(f"--steps: must be 1 to 10, got {args.steps}")
    path = args.file or capacity.calibration_path()
    _needs_root(args.command)
    machine = f"{socket.gethostname()}, {os.cpu_count()} CPUs"
    result = calibration.calibrate("auto", mtus, offloads, args.steps, 1 if args.quick else 2, machine,
                                   lambda line: print(line, flush=True))
    saved = capacity.save(result, path)
    print("# datapath  MTU  offload  raw wire Mbit/s  faithful link-Mbit/s  share of raw  at link rate")
    for p in result.points:
        print(f"  {p.datapath:8} {p.mtu:5} {p.offload:7} {p.raw_mbps:16.0f} {p.faithful_mbps:21.0f} "
              f"{p.faithful_mbps / p.raw_mbps:12.0%} {p.link_rate_mbps:10g} Mbit/s")
    print(f"# saved in {saved}: every run now checks itself against it")
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
    from emulator.net import processes
    _needs_root(args.command)
    with processes.RunLock():
        removed = processes.sweep()
    print("removed: " + (", ".join(removed) if removed else "nothing; the machine is clean"))
    return 0


# --- shared ---------------------------------------------------------------------------

# Mininet on one machine: beyond these, use `bigraph-emu model`.
def _needs_root(command: str) -> None:
    """Called by network commands after validation, before anything is created."""
    if os.geteuid() != 0:
        raise SpecError(f"'bigraph-emu {command}' needs root (Mininet and Open vSwitch); "
                        "'bigraph-emu model' and 'bigraph-emu topo' run without it")


COMMANDS = {"calibrate": cmd_calibrate, "demo": cmd_demo, "run": cmd_run, "compare": cmd_compare, "cli": cmd_cli,
            "exec": cmd_exec, "topo": cmd_topo,
            "model": cmd_model, "report": cmd_report, "clean": cmd_clean, "cleanup": cmd_clean}


PRINT_ONLY = ("model", "topo")   # commands whose output is all they do


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    interrupts.unwind_on_signals()   # Ctrl-C, SIGTERM and a hang-up all tear down
    try:
        return COMMANDS[args.command](args)
    except SpecError as e:
        print(f"bigraph-emu: error: {shorten(blame_flag(str(e), typed_flags(args)))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:   # e.g. `| head -1`: the reader stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the exit's flush goes nowhere
        if args.command in PRINT_ONLY:   # the reader has what it wanted
            return 0
        print(f"bigraph-emu: {args.command} stopped: its output was closed", file=sys.stderr)
        return pipeline.EXIT_FAILED
    except (RuntimeError, OSError) as e:   # the emulation failed; teardown has run
        if interrupts.lost_terminal(e):   # a hang-up's first sign can be a failed write, before SIGHUP
            return interrupts.EXIT_CODE
        print(f"bigraph-emu: {args.command} failed: {e}", file=sys.stderr)
        return pipeline.EXIT_FAILED
    except (KeyboardInterrupt, interrupts.Interrupted):
        print("bigraph-emu: interrupted", file=sys.stderr)
        return interrupts.EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
