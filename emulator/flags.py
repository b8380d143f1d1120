"""The command line's flags (pure argparse): every flag and the spec key it
fills, the help and examples of every command, the exit codes, and the
flags turned into spec keys. emulator.cli runs the commands."""
from __future__ import annotations

import argparse
import re
from emulator import exit_codes
from emulator.inputs import shorten, size_name, to_float, to_int
from emulator import version
from emulator.plan import capacity
from emulator.routes.routing import POLICIES
from emulator.routes.user_policy import FILE_POLICY
from emulator.fabric.mapping import MAPPINGS
from emulator.workloads.algorithms import ALGORITHMS
from emulator.workloads.collectives import COLLECTIVES
from emulator.spec.experiment import FIELDS, RunSpec, SpecError
from emulator.spec.sweep import MAX_UNASKED_POINTS
from emulator.execute import DEFAULT_TIMEOUT_S, NOT_FOR_EXEC


# command-line flag -> RunSpec key (flags mirror nccl-tests where they can)
FLAGS = [
    (("-t", "--topology"), "topology", "e.g. bigraph:m=4,n=8, fattree:k=4, leafspine:leaves=4,spines=2,hosts=4, "
                                       "rail:nodes=4,rails=4,spines=2, file:PATH (a .toml, .json or .graphml "
                                       "topology file)"),
    (("--hosts-per-switch",), "hosts_per_switch", "hosts on every switch of a GraphML topology file whose node "
                                                  "has no hosts attribute"),
    (("-c", "--collective"), "collective", ", ".join(COLLECTIVES)),
    (("-a", "--algorithm"), "algorithm", " or ".join(ALGORITHMS)),
    (("-m", "--mapping"), "mapping", "rank mapping: " + ", ".join(MAPPINGS)),
    (("-p", "--policy"), "policy", "routing policy: " + ", ".join(POLICIES) + ", or " + FILE_POLICY + "PATH.py, your "
                                   "own ('bigraph-emu topo --help' says what each does)"),
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
    (("--offload",), "offload", "off (hosts send frames), tso (segments up to the HTB burst; the userspace "
                                "datapath needs Open vSwitch's userspace TSO, which `vm/provision.sh` turns on) "
                                "or auto (default: tso on the userspace datapath where it is on, else off)"),
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
    (("--sharing",), "sharing", "the model's congested links: tcp (each step stretched by what TCP flows "
                                "sharing one queue measured on this machine, `calibrate --tcp-sharing`; "
                                "max-min where not measured) or max-min"),
    (("--label",), "label", "free text copied into the results"),
    (("--tcp",), "tcp", "TCP congestion control of every emulated host, as the kernel names it: cubic, reno, "
                        "bbr, dctcp (a module the kernel must offer)"),
    (("--queue-discipline",), "queue_discipline", "every switch port's queue: fifo (default), red-ecn (DCTCP's "
                                                  "step marking) or fq_codel; the last two switch ECN on in the "
                                                  "hosts (a kernel qdisc the kernel must offer)"),
    (("--ecn-threshold",), "ecn_threshold_packets", "red-ecn marks packets arriving while this many or more wait "
                                                    "(default: a fifth of the switch queue)"),
    (("--servers",), "servers", "spread the fabric over these servers: HOST[,HOST...], the first this machine "
                                "(the head, running the controller), the others reached by ssh as root "
                                "(docs/servers.md)"),
    (("--placement",), "placement", "which server holds which switch and its hosts: traffic (the fewest bytes "
                                    "across servers within each server's budget) or switch-bin (Mininet's "
                                    "SwitchBinPlacer)"),
    (("--accelerators",), "accelerators", "nodes of N accelerators at the fabric's endpoints, which become the "
                                          "nodes' NICs (NIC j of node i: endpoint i*K+j); default: none, every "
                                          "endpoint a plain host with its own NIC"),
    (("--nics",), "nics", "NICs per node, dividing the accelerators; accelerator a uses NIC floor(a*K/N) "
                          "(default 1: one shared NIC)"),
    (("--interconnect",), "interconnect", "inside a node: pcie (a PCIe switch per NIC, a root switch between "
                                          "them) or nvlink (one NVSwitch); default pcie"),
    (("--interconnect-mbps",), "interconnect_mbps", "rate of the interconnect's links, Mbit/s (default: 2x the "
                                                    "host link rate for pcie, 4x for nvlink)"),
    (("--workload",), "workload", "a workload file of [[job]] tables (jobs, placements, programs), "
                                  "simai:FILE or chakra:FOLDER; replaces -c and the sizes, while -a, -m and "
                                  "--ranks fill in what its jobs leave open"),
]


METAVARS = {"host_rate_mbps": "MBPS", "switch_rate_mbps": "MBPS", "host_queue_packets": "PACKETS",
            "switch_queue_packets": "PACKETS", "mtu": "BYTES", "link_delay_ms": "MS", "link_loss_pct": "PCT",
            "link_events": "T:A-B:down|up", "servers": "HOST,...", "placement": "HOW", "tcp": "NAME", "queue_discipline": "NAME", "ecn_threshold_packets": "PACKETS", "link_overrides": "LINK:SETTINGS", "capture": "LINK[,LINK]", "monitor_interval_ms": "MS", "model_alpha_us": "US", "sharing": "MODEL", "ranks": "N",
            "seed": "N", "repetitions": "N", "warmup": "N", "connections": "N", "workload": "FILE",
            "accelerators": "N", "nics": "K", "interconnect": "KIND", "interconnect_mbps": "MBPS", "hosts_per_switch": "N"}


# --vary accepts a key or its long flag name (policy, host-rate, delay, ...)
FLAG_KEYS = {flags[-1].lstrip("-"): key for flags, key, _ in FLAGS}


NOT_EMULATED = ("capture",)   # flags of what only an emulation does: not on model, topo, cli
ON_SERVERS = ("servers", "placement")   # a fabric over several servers: not on model, topo, plan


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
    "plan": ["bigraph-emu plan -t bigraph:m=4,n=8 -a halving-doubling -m hdrm --servers 2 --server-cores 2",
             "bigraph-emu plan -t fattree:k=16 --bw 1000 --server-cores 64"],
    "report": ["bigraph-emu report results/<folder>",
               "bigraph-emu report results/<a> results/<b> --plot cmp.png",
               "bigraph-emu report --trace results/<folder>"],
    "calibrate": ["bigraph-emu calibrate --mtu 9000 --offload off,tso"],
    "sweep": ["bigraph-emu sweep experiments/sweep-placement.toml --dry-run",
              "bigraph-emu sweep experiments/sweep-placement-32.toml --confirm 3 --scheduler tcp://head:8786"],
    "clean": ["bigraph-emu clean"],
    "exec": ["bigraph-emu exec -t bigraph:m=2,n=4 -m hdrm -- python3 experiments/real-clients/torch_allreduce.py -b 1M",
             "bigraph-emu exec -t bigraph:m=2,n=4 --mpi -- python3 experiments/real-clients/mpi_allreduce.py -b 1M"],
}




# flags whose value is a number: read here with the project's strict rule (argparse's type=int and
# type=float take '١٢' and '1_0'); (how, least, most), None: the command checks the range itself
NUMBER_FLAGS = {"jitter": (to_float, None, None), "steps": (to_int, None, None), "confirm": (to_int, None, None),
                "workers": (to_int, 1, 4096)}
# free text, and a flag whose command says what an empty one lacks; any other flag given as empty text
# is a mistake, not "not given"
EMPTY_ALLOWED = ("label", "web_host")
POSITIONAL = ("command", "folder", "file", "program")


def check_values(args) -> argparse.Namespace:
    """Every flag's value as text checked before a command runs: none empty
    (except free text), every number in NUMBER_FLAGS read strictly; SpecError
    names the flag."""
    for dest, value in vars(args).items():
        texts = value if isinstance(value, list) and dest not in POSITIONAL else [value]
        if dest not in EMPTY_ALLOWED + POSITIONAL and any(isinstance(t, str) and not t.strip() for t in texts):
            raise SpecError(f"{flag_name(dest)}: the value {shorten(repr(value))} is empty; give one, or leave "
                            f"{flag_name(dest).split('/')[-1]} out")
        if dest in NUMBER_FLAGS and isinstance(value, str):
            how, least, most = NUMBER_FLAGS[dest]
            try:
                number = how(value)
            except ValueError as e:
                raise SpecError(f"{flag_name(dest)}: {e}") from None
            if least is not None and not least <= number <= most:
                raise SpecError(f"{flag_name(dest)}: must be from {least} to {most}, got {value}")
            setattr(args, dest, number)
    return args


def flag_name(dest: str) -> str:
    """The flag(s) that fill `dest`, as --help shows them ('-b/--minbytes')."""
    named = {key: "/".join(flags) for flags, key, _ in FLAGS}
    named.update(minbytes="-b/--minbytes", maxbytes="-e/--maxbytes", stepfactor="-f/--stepfactor")
    return named.get(dest, "--" + dest.replace("_", "-"))


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


USAGE = """\
  bigraph-emu demo                   8-host BiGraph, halving-doubling allreduce, naive then HDRM mapping (root)
  bigraph-emu run [flags]            one run from flags, or --experiment FILE (root)
  bigraph-emu compare --vary K=A,B   one run per value of a key, one table at the end (root)
  bigraph-emu cli [flags]            fabric and controller up, then Mininet's CLI (root)
  bigraph-emu exec [flags] -- CMD    your program once per rank on the emulated hosts (root)
  bigraph-emu topo [flags]           describe a fabric; --path SRC DST shows a route
  bigraph-emu model [flags]          the flow model only: no root, no network
  bigraph-emu plan --servers N|H,H   a fabric over several servers: placement, load per server, bytes across
  bigraph-emu sweep FILE             many runs from a grid: the model on every core (or a Dask cluster)
  bigraph-emu report FOLDER...       summary, plot and link loads; several folders: compared
  bigraph-emu clean                  remove what a crashed run left behind (alias: cleanup)

Every input is validated before anything is created; bad input exits with
code 2 and a message naming the key. `COMMAND --help` lists each one's flags.
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bigraph-emu", description=USAGE,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="exit codes:\n" + "\n".join(f"  {code:3}  {meaning}"
                                                                   for code, meaning in sorted(exit_codes.MEANINGS.items())))
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    out_help = "results folder, new or empty (default: results/<time>-<name>)"
    sp = _command(sub, "demo", help="8-host BiGraph halving-doubling allreduce, naive then HDRM mapping (needs root)")
    sp.add_argument("--out", metavar="FOLDER", help=out_help)
    sp.add_argument("--servers", metavar="HOST,...", help="spread the fabric over these servers, the first this "
                                                          "machine (docs/servers.md)")
    _add_web_flags(sp, "shows the run live, then its results until Ctrl-C")
    for name, text in (("run", "emulate (needs root)"), ("compare", "one emulated run per --vary value (needs root)"),
                       ("model", "flow model only (no root)")):
        sp = _command(sub, name, help=text, description=text)
        _add_spec_flags(sp, skip=NOT_EMULATED + ON_SERVERS if name == "model" else ())
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
            sp.add_argument("--jitter", default=0.0, metavar="AMP",
                            help="also predict with every flow up to AMP longer at random (e.g. 0.1), "
                                 "to see how sensitive the collective is to slow flows")
            sp.add_argument("--method", choices=("auto", "exact", "lockstep"), default="auto",
                            help="exact: simulate every flow; lockstep: ring and halving-doubling round by "
                                 "round, all ranks together, and so a workload's jobs whose ranks all run the "
                                 "same ops, on links of their own (said in the output); auto (default): "
                                 "lock-step past 32768 flows")
            sp.add_argument("--emulated", action="store_true",
                            help="predict the calls as this machine emulates them, as a run's model column: "
                                 "the links' HTB burst and the calibrated step latency (docs/model.md)")
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
                                                       "one rank per host (its launcher enters each host; on "
                                                       "other servers through ssh)")
    sp.add_argument("--timeout", metavar="S", help=f"stop every rank after S seconds (default {DEFAULT_TIMEOUT_S:g})")
    sp.add_argument("--out", metavar="FOLDER", help=out_help)
    _add_web_flags(sp, "shows the links and each rank's state live, then the results until Ctrl-C")
    sp.add_argument("program", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the program and its arguments")
    sp = _command(sub, "topo", help="describe a fabric and its routes (no root)",
                       description="Switches per tier, hosts, links and rates of a fabric; with --path, "
                                   "the route a policy gives between two hosts. Policies: " + _policies())
    _add_spec_flags(sp, sizes=False, skip=NOT_EMULATED + ON_SERVERS)
    sp.add_argument("--path", nargs=2, metavar=("SRC", "DST"), help="hosts, e.g. bgh0 bgh5 (or 0 5)")
    sp.add_argument("--json", action="store_true", help="print the fabric (and the route) as JSON, for scripts")
    sp = _command(sub, "plan", help="a fabric over several servers: placement and load (no root)",
                       description="Place the run's switches and hosts on servers (a switch and its hosts "
                                   "together), by Mininet's SwitchBinPlacer and by the run's traffic (the "
                                   "fewest bytes across servers within every server's budget), and print per "
                                   "server its switches, hosts and load against its budget, and the bytes "
                                   "between servers. Without --servers: how many servers it needs. A server's "
                                   "budget is --server-cores times this machine's calibrated link-Mbit/s per "
                                   "core (see docs/servers.md).")
    _add_spec_flags(sp, skip=NOT_EMULATED + ON_SERVERS)
    sp.add_argument("--servers", metavar="N|HOST,...", help="N servers, or their names (the first is the head)")
    sp.add_argument("--server-cores", metavar="C", help="cores of every server (default: this machine's)")
    sp.add_argument("--server-hosts", metavar="H", help=f"emulated hosts a server may hold (default "
                                                        f"{capacity.MAX_EMULATED_HOSTS})")
    sp = _command(sub, "report", help="summary, plot and link loads of results folders (no root)")
    sp.add_argument("folder", nargs="+", help="one results folder, or several to compare")
    sp.add_argument("--plot", metavar="PNG", help="with several folders: where the comparison plot goes "
                                                  "(default: compare-<time>.png beside the first folder)")
    sp.add_argument("--trace", action="store_true", help="write the folder's trace.json alone (a Chrome trace for "
                                                         "ui.perfetto.dev: steps, iterations, links' use)")
    _add_web_flags(sp, "replays the folder's calls and links its plots, read-only, until Ctrl-C "
                       "(rebuilds nothing)")
    sp = _command(sub, "calibrate", help="measure how much this machine emulates faithfully (needs root)",
                       description="Per MTU and offload: raw dataplane capacity (iperf3 through one switch) "
                                   "and the largest load, in link-Mbit/s summed over switch traversals, at "
                                   "which saturated links stay within 5% of their rate. Every run then "
                                   "warns before it starts if it asks for more; --bw auto picks rates from it. "
                                   "About 2 minutes per setting; the machine must be otherwise idle.")
    sp.add_argument("--mtu", default="1500,9000", help="MTUs to measure (default 1500,9000)")
    sp.add_argument("--offload", default="auto", help="off, tso or off,tso (tso on the userspace datapath "
                                                      "needs Open vSwitch's userspace TSO); default: what runs "
                                                      "take (offload auto)")
    sp.add_argument("--steps", default=5, help="bisection steps per setting (default 5: within 3%%)")
    sp.add_argument("--quick", action="store_true", help="one counted call per rate instead of two")
    sp.add_argument("--file", help=f"where to keep the figures (default {CALIBRATION_HELP})")
    sp.add_argument("--tcp-sharing", metavar="FLOWS",
                    help="measure TCP's sharing of one queue instead: an incast of N flows (e.g. 2,4,8,16, "
                         "at most 16) into one host at 50 Mbit/s, calls of about 0.5 s, 10 counted per N (5 with "
                         "--quick): the median call's time over max-min and the calls that waited a "
                         "retransmission timeout, per MTU; runs "
                         "stretch congested steps by it (spec key sharing)")
    sp.add_argument("--tcp", default="cubic", help="with --tcp-sharing: the hosts' congestion control (default cubic)")
    sp.add_argument("--queue", default="100", help="with --tcp-sharing: the queue's depth, packets (default 100)")
    sp = _command(sub, "sweep", help="many runs from a sweep file: the model on a pool, emulations where asked",
                       description="Expand a sweep file ([defaults], [grid] of values, [[points]], [confirm]) "
                                   "into points, check them all, and run them on a Dask pool: this machine's "
                                   "cores, or the cluster of --scheduler. Rows go to sweep.csv as points "
                                   "finish. See docs/sweeps.md.")
    sp.add_argument("file", metavar="FILE", help="the sweep file (TOML)")
    sp.add_argument("--dry-run", action="store_true", help="print the count, the estimate and the first points; "
                                                           "run nothing")
    sp.add_argument("--emulate", action="store_true", help="emulate every point too (needs root; one emulation "
                                                           "at a time per machine)")
    sp.add_argument("--confirm", default=0, metavar="N",
                    help="emulate the N best and N worst points the model found (on [confirm]'s fabric), and "
                         "say whether the measured order matches the model's (needs root)")
    sp.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                    help="a Dask scheduler to send the points to (default: $BIGRAPH_DASK_SCHEDULER, else a pool "
                         "of this machine's cores)")
    sp.add_argument("--workers", metavar="N", help="local pool: N worker processes (default: one per core)")
    sp.add_argument("--out", metavar="FOLDER", help=out_help)
    sp.add_argument("--resume", metavar="FOLDER", help="an earlier sweep's folder: run only the points not yet in it")
    sp.add_argument("--yes", action="store_true", help=f"run a sweep of more than {MAX_UNASKED_POINTS:,} points")
    sp = _command(sub, "clean", aliases=["cleanup"], help="remove bridges, links and processes a crashed run left "
                                                          "behind (needs root)")
    sp.add_argument("--servers", metavar="HOST,...", help="also on these servers of a fabric over several (by ssh; "
                                                          "the first, this machine, is cleaned anyway)")
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
    return "; ".join([f"{p.name}: {p.description}" for p in POLICIES.values()]
                     + [f"{FILE_POLICY}PATH.py: your own, the routes a Python file's routes(fabric, demands) returns "
                        "(docs/routing.md)"])


def flag_values(args) -> dict:
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
