"""Peak memory of the emulator's processes at 64 hosts, against the same
run at 8 hosts measured in the same invocation. Needs root.

Each case runs in a child process of its own (so the emulator's peak is
that case's alone): Emulation on the topology, then one warm-up and one
counted halving-doubling allreduce (HDRM mapping). After each call, while
the agents are still alive, it reads VmHWM (peak resident set) and VmRSS
from /proc/<pid>/status of:
  emulator    this process (planning, Mininet, the fleet, the monitors)
  controller  the os-ken controller (Emulation.controller.proc.pid)
  agents      every rank's agent (Emulation.fleet.procs)
and, for context, the sum of Mininet's node shells (one bash per host and
switch) and ovs-vswitchd's current RSS (shared, started before us). Last,
what all of them take of the machine's memory at once: their proportional
set sizes summed (Pss in /proc/<pid>/smaps_rollup: a page shared by N
processes counts 1/N in each, so the sum is the memory they use).

    .venv/bin/python benchmarks/memory.py [--quick] [-t TOPOLOGY ...]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

import benchlib
from emulator.net import interrupts

TOPOLOGIES = ["bigraph:m=2,n=4", "bigraph:m=8,n=8"]   # the first is the baseline
RATE_MBPS = 8.0
SIZE = 1 << 20


def status(pid: int) -> dict[str, int]:
    """VmHWM and VmRSS of `pid` in KiB ({} if it is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def pss(pid: int) -> int:
    """Proportional set size of `pid` in KiB (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def ovs_pid() -> int | None:
    from emulator.measure.counters import OVS_PIDFILE
    try:
        with open(OVS_PIDFILE) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def one(topology: str) -> dict:
    """Run in the child: emulate `topology`, sample memory after each call."""
    from emulator.emulation import Emulation
    from emulator.plan.run_plan import plan_run
    from emulator.spec.experiment import RunSpec

    spec = RunSpec(topology=topology, collective="allreduce", algorithm="halving-doubling", mapping="hdrm",
                   datapath="user", host_rate_mbps=RATE_MBPS, switch_rate_mbps=RATE_MBPS, sizes=(SIZE,),
                   repetitions=1, warmup=1, label="benchmarks/memory.py")
    plan = plan_run(spec)
    rd = benchlib.run_dir("memory")
    peak: dict = {}

    def keep(name: str, kib: int) -> None:
        peak[name] = max(peak.get(name, 0), kib)

    def sample(emu) -> None:
        keep("emulator", status(os.getpid()).get("VmHWM", 0))
        keep("controller", status(emu.controller.proc.pid).get("VmHWM", 0))
        agent_pids = [p.pid for p in emu.fleet.procs]
        agents = [status(pid).get("VmHWM", 0) for pid in agent_pids]
        keep("agent max", max(agents))
        keep("agents sum", sum(agents))
        peak["agents"] = len(agents)
        shell_pids = emu.network.host_pids() + [s.pid for s in emu.network.net.switches]
        keep("node shells sum (RSS)", sum(status(pid).get("VmRSS", 0) for pid in shell_pids))
        ovs = ovs_pid()
        if ovs:
            keep("ovs-vswitchd (RSS)", status(ovs).get("VmRSS", 0))
        every = [os.getpid(), emu.controller.proc.pid, *agent_pids, *shell_pids, *([ovs] if ovs else [])]
        keep("all of them at once (PSS)", sum(pss(pid) for pid in every))

    def on_call(call, record):
        sample(emu)

    try:
        with Emulation(plan, rd, log=lambda line: None) as emu:
            keep("emulator after bring-up", status(os.getpid()).get("VmHWM", 0))
            keep("controller after bring-up", status(emu.controller.proc.pid).get("VmHWM", 0))
            emu.replay(plan, on_call=on_call)
    finally:
        shutil.rmtree(rd, ignore_errors=True)
    return {"topology": topology, "hosts": len(plan.fabric.hosts), "peak_kib": peak}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="same cases (each is short already)")
    p.add_argument("--topology", "-t", action="append", default=[],
                   help="a topology (repeatable); the first is the baseline; default: " + " ".join(TOPOLOGIES))
    p.add_argument("--one", default="", help=argparse.SUPPRESS)   # child mode
    args = p.parse_args()
    interrupts.unwind_on_signals()   # SIGTERM and a hang-up tear down like Ctrl-C
    if os.geteuid() != 0:
        raise SystemExit("memory.py needs root (Mininet and Open vSwitch)")
    if args.one:
        print("RESULT " + json.dumps(one(args.one)), flush=True)
        return
    topologies = args.topology or TOPOLOGIES
    results = []
    for topology in topologies:
        def child():
            proc = benchlib.run_child([sys.executable, os.path.abspath(__file__), "--one", topology], capture=True)
            found = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
            if not found:
                if "another bigraph-emu emulation is running" in proc.stderr:
                    raise RuntimeError("another bigraph-emu emulation is running")
                raise RuntimeError(f"{topology}: child failed ({proc.returncode}): {proc.stderr[-2000:]}")
            return json.loads(found[0][len("RESULT "):])
        results.append(benchlib.with_lock_retry(child))
        benchlib.check_clean(f"memory {topology}")
        print(f"# {topology}: done", flush=True)
    report(results)


def report(results: list[dict]) -> None:
    base = results[0]
    keys = list(dict.fromkeys(k for r in results for k in r["peak_kib"] if k != "agents"))
    print()
    print("# peak memory, MiB (VmHWM unless marked RSS); x = this case / " + base["topology"])
    print(f"{'process':28} " + " ".join(f"{r['topology'] + ' (' + str(r['hosts']) + ')':>24} {'x':>5}"
                                        for r in results))
    for k in keys:
        cells = []
        for r in results:
            v = r["peak_kib"].get(k)
            b = base["peak_kib"].get(k)
            cells.append(f"{benchlib.fmt(v / 1024 if v else None, 24, 1)} {benchlib.ratio(v, b, 5)}")
        print(f"{k:28} " + " ".join(cells))
    for r in results:
        pk = r["peak_kib"]
        total = pk.get("emulator", 0) + pk.get("controller", 0) + pk.get("agents sum", 0)
        print(f"# {r['topology']} ({r['hosts']} hosts): emulator + controller + {pk.get('agents', 0)} agents = "
              f"{total / 1024:.0f} MiB (sum of peaks; shared pages counted once per process); every process "
              f"of the run with Open vSwitch, at once: {pk.get('all of them at once (PSS)', 0) / 1024:.0f} MiB (PSS)")


if __name__ == "__main__":
    main()
