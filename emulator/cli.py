"""bigraph-emu: the command users type.

  bigraph-emu demo                 8-host BiGraph, ring allreduce, about a minute
  bigraph-emu run [flags]          one run from flags, or --experiment FILE
  bigraph-emu model [flags]        the flow model only: no root, no network
  bigraph-emu report FOLDER        summary table, busbw plot, link loads of a results folder
  bigraph-emu cleanup              remove what a crashed run left behind
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time

from emulator.metrics import (MODEL_HEADER, TABLE_HEADER, algbw_mbps, busbw_mbps, model_row, payload_efficiency,
                              table_row)
from emulator.spec import Experiment, RunSpec, SpecError, load_experiment, make_run

DEMO = {"topology": "bigraph:m=2,n=4", "collective": "allreduce", "algorithm": "ring",
        "sizes": "1M:4M:2", "repetitions": 2, "warmup": 1, "label": "demo"}

# command-line flag -> RunSpec key (flags mirror nccl-tests where they can)
FLAGS = [
    (("-t", "--topology"), "topology", "e.g. bigraph:m=4,n=8, fattree:k=4, leafspine:leaves=4,spines=2,hosts=4"),
    (("-c", "--collective"), "collective", "allreduce, reduce-scatter, allgather, broadcast, all-to-all, parameter-server"),
    (("-a", "--algorithm"), "algorithm", "ring or halving-doubling"),
    (("-m", "--mapping"), "mapping", "rank mapping: naive, hdrm or random"),
    (("-p", "--policy"), "policy", "routing policy: shortest, spread or ecmp"),
    (("--ranks",), "ranks", "number of ranks (default: every host)"),
    (("--seed",), "seed", "seed of the random mapping"),
    (("-n", "--repetitions"), "repetitions", "counted repetitions per size"),
    (("-w", "--warmup"), "warmup", "uncounted warm-up repetitions per size"),
    (("--host-rate",), "host_rate_mbps", "host link rate, Mbit/s"),
    (("--switch-rate",), "switch_rate_mbps", "switch-switch link rate, Mbit/s"),
    (("--host-queue",), "host_queue_packets", "host link queue depth, packets"),
    (("--switch-queue",), "switch_queue_packets", "switch link queue depth, packets"),
    (("--mtu",), "mtu", "interface MTU, bytes"),
    (("--datapath",), "datapath", "auto, kernel or user"),
    (("--alpha-us",), "model_alpha_us", "per-message latency of the model, microseconds"),
    (("--label",), "label", "free text copied into the results"),
]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bigraph-emu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="8-host BiGraph ring allreduce (needs root)").add_argument(
        "--out", help="results folder (default: results/<time>-demo)")
    for name, text in (("run", "emulate (needs root)"), ("model", "flow model only")):
        sp = sub.add_parser(name, help=text)
        for flags, key, helptext in FLAGS:
            sp.add_argument(*flags, dest=key, help=helptext)
        sp.add_argument("-b", "--minbytes", help="smallest size, e.g. 64K")
        sp.add_argument("-e", "--maxbytes", help="largest size, e.g. 16M")
        sp.add_argument("-f", "--stepfactor", help="size multiplier between sizes (default 2)")
        sp.add_argument("--experiment", help="TOML experiment file; flags given override its keys")
        if name == "model":
            sp.add_argument("--jitter", type=float, default=0.0, metavar="AMP",
                            help="also predict with every flow up to AMP longer at random (e.g. 0.1), "
                                 "to see how sensitive the collective is to slow flows")
        sp.add_argument("--out", help="results folder (default: results/<time>-<name>)")
    sub.add_parser("cleanup", help="remove bridges, links and processes a crashed run left behind")
    sub.add_parser("report", help="summary, plot and link loads of a results folder").add_argument("folder")
    return p


def _flag_values(args) -> dict:
    values = {key: getattr(args, key) for _, key, _ in FLAGS if getattr(args, key) is not None}
    if args.stepfactor and not (args.minbytes or args.maxbytes):
        raise SpecError("sizes: -f/--stepfactor needs -b and/or -e")
    if args.minbytes or args.maxbytes:
        begin = args.minbytes or args.maxbytes
        values["sizes"] = f"{begin}:{args.maxbytes or begin}:{args.stepfactor or 2}"
    return values


def _experiment(args) -> Experiment:
    values = _flag_values(args)
    if args.experiment:
        return load_experiment(args.experiment, values)
    return Experiment("run", [make_run(values)])


def _results_dir(out: str | None, name: str) -> str:
    """A new folder for this run's results; never reuses one with results in it."""
    path = out or os.path.join("results", f"{time.strftime('%Y%m%d-%H%M%S')}-{name}")
    if os.path.exists(os.path.join(path, "collectives.csv")):
        raise SpecError(f"--out {path} already holds results; choose a new folder")
    return path


def _describe(spec: RunSpec, ranks: int) -> str:
    return (f"# {spec.collective} {spec.algorithm}, mapping {spec.mapping}, policy {spec.policy}, "
            f"{spec.topology} ({ranks} ranks), links {spec.host_rate_mbps:g} Mbit/s host / "
            f"{spec.switch_rate_mbps:g} Mbit/s switch, queues {spec.host_queue_packets}/"
            f"{spec.switch_queue_packets} packets, MTU {spec.mtu}")


def _print_table(rows: list[dict]) -> None:
    """One line per size: the median over repetitions, as summary.txt has it."""
    import pandas as pd
    from emulator.report import summarise
    print(TABLE_HEADER)
    for r in summarise(pd.DataFrame(rows)).itertuples():
        print(table_row(r.size_bytes, r.time_s, algbw_mbps(r.size_bytes, r.time_s), r.busbw_mbps, r.model_time_s))


def cmd_model(args) -> int:
    from emulator.plan import plan_run
    if not 0 <= args.jitter <= 10:
        raise SpecError(f"--jitter: must be between 0 and 10 (a fraction of each flow), got {args.jitter}")
    for spec in _experiment(args).runs:
        plan = plan_run(spec)
        print(_describe(spec, plan.ranks) + " (model)")
        print(MODEL_HEADER)
        for size in spec.sizes:
            pred = plan.predictions[size]
            t = pred.time_s
            print(model_row(size, t, algbw_mbps(size, t), busbw_mbps(spec.collective, plan.ranks, size, t),
                            pred.max_flows_per_step))
            if args.jitter:
                print(f"#   with flows up to {args.jitter:.0%} longer at random: {_jitter_ratios(plan, size, args.jitter)}")
    return 0


def _jitter_ratios(plan, size: int, amplitude: float, seeds: int = 3) -> str:
    """Predicted time with jittered flows over the plain prediction, per seed."""
    from emulator.model import predict
    from emulator.schedule import jittered
    plain = plan.predictions[size].time_s
    ratios = [predict(plan.fabric, plan.table, jittered(plan.schedules[size], amplitude, seed), plan.hosts,
                      plan.spec.model_alpha_us * 1e-6, payload_efficiency(plan.spec.mtu)).time_s / plain
              for seed in range(seeds)]
    return " ".join(f"{r:.2f}x" for r in ratios)


def cmd_run(args, experiment: Experiment | None = None) -> int:
    from emulator.emulation import Emulation
    from emulator.plan import plan_run
    from emulator.results import COLLECTIVE_COLUMNS, STEP_COLUMNS, append_csv, collective_rows, step_rows

    experiment = experiment or _experiment(args)
    plans = [plan_run(spec) for spec in experiment.runs]   # every error before the network
    for plan in plans:
        _fits_one_machine(plan)
    out = _results_dir(args.out, experiment.name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "spec.json"), "w") as f:
        json.dump({"name": experiment.name, "runs": [dataclasses.asdict(s) for s in experiment.runs]}, f, indent=1)
    ok = True
    for group in _by_fabric(plans):
        with Emulation(group[0].fabric, group[0].spec, out) as emu:
            for plan in group:
                print(_describe(plan.spec, plan.ranks))
                records = emu.replay(plan)
                rows = collective_rows(plan, records, emu.dataplane.datapath)
                append_csv(os.path.join(out, "collectives.csv"), COLLECTIVE_COLUMNS, rows)
                append_csv(os.path.join(out, "steps.csv"), STEP_COLUMNS, step_rows(plan, records))
                _print_table(rows)
                if not all(r["bytes_ok"] for r in rows):
                    print("# ERROR: some agent moved a wrong number of bytes; see steps.csv")
                    ok = False
    _report(out, plans)
    print(f"# results: {out}/ collectives.csv, steps.csv, summary.txt, busbw.png, link_loads.csv, fabric.json")
    return 0 if ok else 1


def _report(out: str, plans) -> None:
    from emulator.report import write_report
    text = write_report(out, plans)
    if len(plans) > 1:
        print("# summary (median busbw in Mbit/s; model: the flow model's busbw)")
        print(text)


def cmd_report(args) -> int:
    """Rebuild summary.txt, busbw.png and link_loads.csv of a results folder."""
    from emulator.plan import plan_run
    try:
        with open(os.path.join(args.folder, "spec.json")) as f:
            runs = json.load(f)["runs"]
    except (OSError, ValueError, KeyError) as e:
        raise SpecError(f"{args.folder} is not a results folder with a readable spec.json: {e}") from None
    if not os.path.exists(os.path.join(args.folder, "collectives.csv")):
        raise SpecError(f"{args.folder} has no collectives.csv: its run measured nothing")
    plans = [plan_run(make_run(r)) for r in runs]
    _report(args.folder, plans)
    return 0


# Mininet on one machine: beyond these, use `bigraph-emu model`.
MAX_EMULATED_HOSTS = 256
MAX_EMULATED_SWITCHES = 128


def _fits_one_machine(plan) -> None:
    hosts, switches = len(plan.fabric.hosts), len(plan.fabric.switches)
    if hosts > MAX_EMULATED_HOSTS or switches > MAX_EMULATED_SWITCHES:
        raise SpecError(f"{plan.fabric.topology} has {hosts} hosts and {switches} switches; one machine "
                        f"emulates at most {MAX_EMULATED_HOSTS} and {MAX_EMULATED_SWITCHES}: "
                        "use 'bigraph-emu model' for it")


def _by_fabric(plans):
    """Consecutive runs on the same fabric share one emulated network."""
    groups = []
    for plan in plans:
        if groups and groups[-1][0].spec.fabric_key() == plan.spec.fabric_key():
            groups[-1].append(plan)
        else:
            groups.append([plan])
    return groups


def cmd_demo(args) -> int:
    return cmd_run(args, Experiment("demo", [make_run(DEMO)]))


def cmd_cleanup(_args) -> int:
    from emulator.net import processes
    with processes.RunLock():
        removed = processes.sweep()
    print("removed: " + (", ".join(removed) if removed else "nothing; the machine is clean"))
    return 0


def _needs_root(command: str) -> None:
    if command in ("demo", "run", "cleanup") and os.geteuid() != 0:
        raise SpecError(f"'bigraph-emu {command}' needs root (Mininet and Open vSwitch); "
                        "'bigraph-emu model' runs without it")


def _interrupt(*_):
    """SIGTERM unwinds like Ctrl-C, so teardown always runs."""
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        _needs_root(args.command)
        commands = {"demo": cmd_demo, "run": cmd_run, "model": cmd_model, "cleanup": cmd_cleanup, "report": cmd_report}
        return commands[args.command](args)
    except SpecError as e:
        print(f"bigraph-emu: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as e:   # the emulation failed; teardown has run
        print(f"bigraph-emu: {args.command} failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bigraph-emu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
