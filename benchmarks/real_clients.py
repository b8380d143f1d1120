"""Real collective libraries against the agents' replay and the flow model,
in the same bring-up (as root):

  gloo's allreduce (torch.distributed, a ring)     against our `ring`
  MPICH's allreduce forced to reduce-scatter +
  allgather (Rabenseifner)                         against our `halving-doubling`

For every topology and mapping: one fabric comes up; the agents replay the
sweep; then the real client (experiments/real-clients/) runs the same sizes
on the same hosts in the same rank order; the model predicts both. Prints
medians and ratios, and writes them to --out (CSV); with --doc, the
fidelity table of the docs (docs/fidelity.md), with the agents' calls that
kept the verdict.

  .venv/bin/python benchmarks/real_clients.py --topology bigraph:m=2,n=4 --mappings naive,hdrm
  .venv/bin/python benchmarks/real_clients.py --doc docs/fidelity.md      # regenerates the docs' table
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from emulator import execute

from emulator.plan import ranks as R
from emulator.emulation import Emulation                      # noqa: E402
from emulator.replay.programs import Program                     # noqa: E402
from emulator.pipeline import plan_emulated                   # noqa: E402
from emulator.results.calls import call_time, collective_rows      # noqa: E402
from emulator.results.verdict import trusted                        # noqa: E402
from emulator.spec.experiment import make_run                            # noqa: E402

CLIENTS_DIR = os.path.join(os.path.dirname(__file__), "..", "experiments", "real-clients")
# client -> (our algorithm it is compared with, its script, under mpiexec, the environment forcing its algorithm)
CLIENTS = {
    "torch-gloo": ("ring", "torch_allreduce.py", False, {}),
    "mpich": ("halving-doubling", "mpi_allreduce.py", True,
              {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "reduce_scatter_allgather",
               "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}),
}
COLUMNS = ["client", "topology", "mapping", "ranks", "algorithm", "size_bytes", "real_s", "agents_s", "model_s",
           "real_over_agents", "real_over_model", "agents_over_model", "real_reps", "agents_reps", "agents_trusted"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topology", action="append", help="repeatable (default bigraph:m=2,n=4)")
    p.add_argument("--mappings", default="naive,hdrm")
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("-b", default="1M")
    p.add_argument("-e", default="4M")
    p.add_argument("-n", type=int, default=5, help="counted repetitions per size")
    p.add_argument("--bw", type=float, default=20, help="host and switch link rate, Mbit/s")
    p.add_argument("--ranks", type=int, default=0, help="ranks on the fabric's first hosts (default: every host)")
    p.add_argument("--out", default="results/real-clients", help="folder for the CSV and every run's files")
    p.add_argument("--doc", help="also write the fidelity table, as markdown, to this file (docs/fidelity.md)")
    p.add_argument("--quick", action="store_true", help="hdrm only, 1 MiB, 2 counted repetitions")
    args = p.parse_args()
    if args.quick:
        args.mappings, args.b, args.e, args.n = "hdrm", "1M", "1M", 2
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for topology in args.topology or ["bigraph:m=2,n=4"]:
        for mapping in args.mappings.split(","):
            for client in args.clients.split(","):
                rows += measure(client, topology, mapping, args)
                write(rows, os.path.join(args.out, "real_clients.csv"))
    print_table(rows)
    if args.doc:
        write_doc(rows, args.doc, " ".join(sys.argv[1:]))
        print(f"# the fidelity table: {args.doc}")
    return 0


def measure(client: str, topology: str, mapping: str, args) -> list[dict]:
    algorithm, script, mpi, env = CLIENTS[client]
    spec = make_run({"topology": topology, "collective": "allreduce", "algorithm": algorithm, "mapping": mapping,
                     "sizes": f"{args.b}:{args.e}:2", "repetitions": args.n, "warmup": 1, "ranks": args.ranks,
                     "host_rate_mbps": args.bw, "switch_rate_mbps": args.bw})
    plan = plan_emulated(spec)
    work = os.path.abspath(os.path.join(args.out, f"{client}-{topology.replace(':', '-').replace(',', '-')}-{mapping}"))
    os.makedirs(work, exist_ok=False)
    print(f"# {client} vs agents' {algorithm}, {topology}, mapping {mapping}: {work}", flush=True)
    with Emulation(plan, work) as emu:
        agents, kept = {}, {}
        records = emu.replay(plan)
        for call, record in zip(plan.calls, records):
            if call.repetition >= 0:
                agents.setdefault(call.size_bytes, []).append(call_time(record.steps))
        for row in collective_rows(plan, records, emu.dataplane.datapath):
            kept[row["size_bytes"]] = kept.get(row["size_bytes"], 0) + trusted(row["fidelity"])
        real = run_client(emu, plan, work, script, mpi, env, args)
    out = []
    for size in spec.sizes:
        model, a, r = plan.predictions[size].time_s, statistics.median(agents[size]), statistics.median(real[size])
        out.append({"client": client, "topology": topology, "mapping": mapping, "ranks": plan.ranks,
                    "algorithm": algorithm, "size_bytes": size, "real_s": r, "agents_s": a, "model_s": model,
                    "real_over_agents": r / a, "real_over_model": r / model, "agents_over_model": a / model,
                    "real_reps": len(real[size]), "agents_reps": len(agents[size]), "agents_trusted": kept.get(size, 0)})
    return out


def run_client(emu, plan, work: str, script: str, mpi: bool, env: dict, args) -> dict[int, list[float]]:
    """The client on the same hosts in the same rank order; its times per size."""
    slots = R.slots(plan.fabric, plan.hosts)
    command = [sys.executable, os.path.abspath(os.path.join(CLIENTS_DIR, script)), "-b", args.b, "-e", args.e,
               "-n", str(args.n), "-w", "1", "--csv", "times.csv"]
    os.environ.update(env)   # the ranks (and mpiexec) inherit it
    try:
        with Program(emu.network, slots, work) as program:
            execute.start(program, emu, slots, work, command, execute.find_mpiexec() if mpi else "")
            stopped = program.wait(1800)
            failed = R.failures(work, program.exits())
            if stopped or failed:
                raise RuntimeError(f"{script}: {stopped or ''} {'; '.join(failed)}")
    finally:
        for key in env:
            os.environ.pop(key)
    times: dict[int, list[float]] = {}
    with open(os.path.join(R.rank_dir(work, 0), "times.csv")) as f:
        for row in csv.DictReader(f):
            times.setdefault(int(row["size_bytes"]), []).append(float(row["time_s"]))
    return times


def write(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(rows)


def write_doc(rows: list[dict], path: str, flags: str) -> None:
    """The docs' fidelity table: per case, the agents over the model with
    their calls that kept the verdict, and the real library over the agents."""
    lines = ["# Fidelity: the emulator against its model and real libraries", "",
             "Regenerated by `.venv/bin/python benchmarks/real_clients.py " + flags + "` (as root) on "
             f"{platform.node()} ({os.cpu_count()} CPUs), {time.strftime('%Y-%m-%d')}. Per case, the median "
             "call: our agents over the flow model (with the calls that kept the fidelity verdict) and the "
             "real library on the same hosts, in the same rank order, over our agents. "
             "[results.md](results.md) says what the verdict checks; [capacity.md](capacity.md#tcp-sharing) what the model knows "
             "of TCP; [exec.md](exec.md#real-libraries-against-our-agents) why MPICH's ranks yield rather than "
             "poll and where its gap to our agents comes from.", "",
             "| library (our algorithm) | topology | mapping | ranks | size | agents / model | agents' calls trusted "
             "| library / agents | library / model |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['client']} ({r['algorithm']}) | {r['topology']} | {r['mapping']} | {r['ranks']} "
                     f"| {r['size_bytes'] >> 10} KiB | {r['agents_over_model']:.2f}x "
                     f"| {r['agents_trusted']} of {r['agents_reps']} | {r['real_over_agents']:.2f}x "
                     f"| {r['real_over_model']:.2f}x |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def print_table(rows: list[dict]) -> None:
    print(f"{'client':11} {'topology':18} {'mapping':8} {'size':>8} {'real(ms)':>9} {'agents(ms)':>10} "
          f"{'model(ms)':>9} {'real/agents':>11} {'real/model':>10} {'agents/model':>12}")
    for r in rows:
        print(f"{r['client']:11} {r['topology']:18} {r['mapping']:8} {r['size_bytes']:>8} {r['real_s'] * 1e3:9.1f} "
              f"{r['agents_s'] * 1e3:10.1f} {r['model_s'] * 1e3:9.1f} {r['real_over_agents']:11.2f} "
              f"{r['real_over_model']:10.2f} {r['agents_over_model']:12.2f}")


if __name__ == "__main__":
    sys.exit(main())
