"""The agents' own cost, without switches or links: N agents on the
loopback (127.0.0.x, this machine's namespace; no Mininet, no Open
vSwitch), one collective call after another as the emulator drives them:
the median call and step time and the CPU the agents took over the calls,
against the agents of another revision (`--baseline REV`: its agent
module, from `git show`, beside this tree's other modules) in the same
run. What a step costs the agents is a floor under every emulated step,
and their CPU is taken from the switches' cores.

    .venv/bin/python benchmarks/agent_steps.py --baseline HEAD~1
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from emulator.workloads.schedule import build_schedule  # noqa: E402
from emulator.workloads.steps import steps_to_data  # noqa: E402

START_AHEAD_S = 0.05   # as the emulator: every agent is told the start instant this far ahead
PORT = 23000
# (agents, collective, algorithm, bytes, calls): small steps (the floor) and large ones (bytes a core moves)
CASES = [(8, "allreduce", "ring", 32 << 10, 30), (8, "allreduce", "halving-doubling", 32 << 10, 30),
         (16, "allreduce", "ring", 32 << 10, 30), (16, "allreduce", "halving-doubling", 32 << 10, 30),
         (32, "all-to-all", "ring", 256 << 10, 5), (8, "allreduce", "ring", 64 << 20, 3),
         (8, "allreduce", "halving-doubling", 16 << 20, 3)]
QUICK = [CASES[0], CASES[1], CASES[5]]


def _agent_command(baseline: str | None, work: str) -> list[str]:
    if not baseline:
        return [sys.executable, "-m", "emulator.replay.agent"]
    path = os.path.join(work, "baseline_agent.py")
    # the agent lived in emulator/net/ before the replay stage had a package of its own
    for where in ("emulator/replay/agent.py", "emulator/net/agent.py"):
        shown = subprocess.run(["git", "show", f"{baseline}:{where}"], cwd=REPO, capture_output=True, text=True)
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"no agent in {baseline}: {shown.stderr.strip()}")
    with open(path, "w") as f:
        f.write(shown.stdout)
    return [sys.executable, path]


def _cpu_s(pid: int) -> float:
    """A process's user and system CPU seconds so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _line(proc, word: str) -> str:
    while True:
        line = proc.stdout.readline()
        if not line or line.startswith("ERROR"):
            raise SystemExit(f"an agent failed: {line.strip() or 'it ended'}")
        if line.startswith(word):
            return line


def run_case(command: list[str], work: str, ranks: int, collective: str, algorithm: str, size: int,
             calls: int) -> dict:
    """Median call and step time (s) and the agents' CPU seconds per call."""
    schedule = build_schedule(collective, algorithm, ranks, size)
    addresses = [[f"127.0.0.{10 + r}", PORT + r] for r in range(ranks)]
    procs = []
    try:
        for r in range(ranks):
            plan = os.path.join(work, f"plan-{r}.json")
            with open(plan, "w") as f:
                json.dump({"rank": r, "addresses": addresses, "programs": {"0": steps_to_data(schedule.steps[r])},
                           "calls": ["0"] * calls}, f)
            procs.append(subprocess.Popen([*command, "--plan", plan], cwd=REPO, env={**os.environ, "PYTHONPATH": REPO},
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1))
        for p in procs:
            _line(p, "LISTENING")
        for p in procs:
            p.stdin.write("CONNECT\n")
        for p in procs:
            _line(p, "READY")
        times, steps = [], []
        before = sum(_cpu_s(p.pid) for p in procs)
        for call in range(calls):
            at = time.monotonic() + START_AHEAD_S
            for p in procs:
                p.stdin.write(f"GO {call} {at:.6f}\n")
            records = [json.loads(_line(p, "DONE").split(" ", 2)[2]) for p in procs]
            times.append(max(s["end"] for rank in records for s in rank) - at)
            steps += [s["end"] - s["start"] for rank in records for s in rank]
        cpu = sum(_cpu_s(p.pid) for p in procs) - before
        for p in procs:
            p.stdin.write("EXIT\n")
            p.stdin.flush()
    finally:
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return {"call_s": statistics.median(times), "step_s": statistics.median(steps),
            "steps": len(schedule.steps[0]), "cpu_per_call_s": cpu / calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", metavar="REV", help="a git revision whose agents run beside this tree's")
    ap.add_argument("--quick", action="store_true", help="three cases")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bigraph-agent-steps-") as work:
        sides = {"this tree": _agent_command(None, work)}
        if args.baseline:
            sides[args.baseline] = _agent_command(args.baseline, work)
        print(f"# the agents on the loopback ({os.cpu_count()} cores): median call, its time a step, "
              "median step of any rank, the agents' CPU a call")
        for ranks, collective, algorithm, size, calls in (QUICK if args.quick else CASES):
            got = {name: run_case(cmd, work, ranks, collective, algorithm, size, calls) for name, cmd in sides.items()}
            for name, m in got.items():
                print(f"{ranks:3d} agents {collective} {algorithm:16} {size >> 10:6d} KiB  {name:10}  "
                      f"call {m['call_s'] * 1e3:8.2f} ms  a step {m['call_s'] / m['steps'] * 1e3:7.3f} ms  "
                      f"step median {m['step_s'] * 1e3:7.3f} ms  CPU {m['cpu_per_call_s'] * 1e3:7.1f} ms a call")
            if args.baseline:
                new, old = got["this tree"], got[args.baseline]
                print(f"{'':48}this tree / {args.baseline}: call {new['call_s'] / old['call_s']:.2f}x, "
                      f"CPU {new['cpu_per_call_s'] / old['cpu_per_call_s']:.2f}x")


if __name__ == "__main__":
    main()
