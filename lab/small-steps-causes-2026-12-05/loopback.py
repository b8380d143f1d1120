"""The agents alone on the loopback (benchmarks/agent_steps.py's run_case: 8 agents, no switches, no links),
ring and halving-doubling allreduce of 32-256 KiB, 100 calls each, all of it twice: a call's time a step, and the CPU the agents
took a step (all of them) and over the machine's cores.

    /work/main/.venv/bin/python loopback.py > loopback.txt
"""
import os
import sys
import tempfile

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path[:0] = [os.path.join(REPO, "benchmarks"), REPO]
import agent_steps  # noqa: E402

with tempfile.TemporaryDirectory() as work:
    command = agent_steps._agent_command(None, work)
    print(f"# 8 agents on the loopback, {os.cpu_count()} cores, 100 calls a size, the whole twice")
    for algorithm in ("ring", "halving-doubling") * 2:
        for size in (32 << 10, 64 << 10, 128 << 10, 256 << 10):
            m = agent_steps.run_case(command, work, 8, "allreduce", algorithm, size, 100)
            cpu = m["cpu_per_call_s"] / m["steps"]
            print(f"{algorithm:17} {size >> 10:4} KiB  a step {m['call_s'] / m['steps'] * 1e3:6.3f} ms  "
                  f"the agents' CPU a step {cpu * 1e3:6.3f} ms, over {os.cpu_count()} cores "
                  f"{cpu / os.cpu_count() * 1e3:6.3f} ms", flush=True)
