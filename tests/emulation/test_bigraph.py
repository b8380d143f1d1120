"""The 8-host BiGraph for real: it comes up, routes are in OVS, every host
reaches every other, collectives move exactly the scheduled bytes over TCP,
and teardown leaves nothing behind, also when something fails."""
import csv
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from emulator import exit_codes
from emulator.emulation import Emulation
from emulator.fabric.graph import interface_name
from emulator.net import processes
from emulator.replay.agents import AgentError
from emulator.plan.run_plan import plan_run
from emulator.results.calls import bytes_ok, call_time, collective_row
from emulator.spec.experiment import make_run
from emulator.workloads.schedule import build_schedule

pytestmark = pytest.mark.emulation

SMALL = {"topology": "bigraph:m=2,n=4", "sizes": [256 * 1024], "repetitions": 1, "warmup": 0}


def test_fabric_comes_up_with_routes_and_full_reachability(tmp_path, clean_machine):
    plan = plan_run(make_run(SMALL))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        # one route per host plus the drop rule, read back from OVS itself
        assert {s: len(rules) for s, rules in emu.installed_rules().items()} == {s.name: 9 for s in plan.fabric.switches}
        assert emu.network.ping_all() == []
        # a host cut off: exactly its pairs fail, each pair pinged once
        emu.network.set_link("bgh0", plan.fabric.host("bgh0").switch, up=False)
        assert emu.network.ping([("bgh0", "bgh5"), ("bgh6", "bgh0"), ("bgh6", "bgh7")], timeout_s=1) == \
            [("bgh0", "bgh5"), ("bgh6", "bgh0")]
        emu.network.set_link("bgh0", plan.fabric.host("bgh0").switch, up=True)
        ports = [interface_name(n, p) for link in plan.fabric.links for n, p in link.ends() if plan.fabric.is_switch(n)]
        if os.path.isdir("/proc/sys/net/ipv6"):   # no IPv6 from switch ports into the fabric
            assert {p: open(f"/proc/sys/net/ipv6/conf/{p}/disable_ipv6").read().strip() for p in ports} == \
                {p: "1" for p in ports}
        host_pids = emu.network.host_pids()
        assert all(os.path.exists(f"/proc/{pid}") for pid in host_pids)
    # the hosts' shells (and with them their network namespaces) are gone
    assert not any(os.path.exists(f"/proc/{pid}") for pid in host_pids)


@pytest.mark.parametrize("tcp", ["reno", "cubic"])
def test_every_host_runs_the_congestion_control_of_the_spec(tmp_path, clean_machine, tcp):
    # the machine's own (bbr on some of ours) is never inherited
    plan = plan_run(make_run({**SMALL, "tcp": tcp}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        used = {h.name: emu.network.host(h.name).cmd("sysctl -n net.ipv4.tcp_congestion_control").strip()
                for h in plan.fabric.hosts}
        # and the agents' connections use it
        emu.replay(plan)
    assert used == {h.name: tcp for h in plan.fabric.hosts}


@pytest.mark.parametrize("algorithm,mapping", [("ring", "naive"), ("halving-doubling", "naive"),
                                               ("halving-doubling", "hdrm"), ("halving-doubling", "random"),
                                               ("tree", "naive")])
def test_allreduce_moves_exactly_the_scheduled_bytes(tmp_path, clean_machine, algorithm, mapping):
    plan = plan_run(make_run({**SMALL, "algorithm": algorithm, "mapping": mapping}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        records = emu.replay(plan)[0].steps
    size = plan.calls[0].size_bytes
    assert bytes_ok(plan, size, records)
    p = plan.ranks
    for rank, steps in enumerate(records):
        assert len(steps) == len(plan.schedules[size].steps[rank])
        sent = sum(s["sent"] for s in steps)
        assert sent == plan.schedules[size].bytes_sent(rank)
        if algorithm != "tree":   # the tree's inner ranks send more than its leaves
            assert abs(sent - 2 * (p - 1) / p * size) <= 2 * p   # chunk rounding only
        # step k+1 starts only after step k ended
        assert all(b["start"] >= a["end"] for a, b in zip(steps, steps[1:]))
    assert sum(s["sent"] for steps in records for s in steps) == 2 * (p - 1) * size
    assert call_time(records) > 0


def test_auto_runs_the_tree_for_a_small_allreduce_and_ring_for_a_large_one(tmp_path, clean_machine):
    plan = plan_run(make_run({**SMALL, "algorithm": "auto", "sizes": [2 * 1024, 256 * 1024]}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        replayed = emu.replay(plan)
    assert sorted(call.size_bytes for call in plan.calls) == [2 * 1024, 256 * 1024]
    for call, rec in zip(plan.calls, replayed):
        picked = "tree" if call.size_bytes < 3 * 1024 else "ring"   # 8 ranks: tree up to about 3.5 KiB
        assert plan.schedules[call.size_bytes].steps == \
            build_schedule("allreduce", picked, plan.ranks, call.size_bytes).steps
        assert bytes_ok(plan, call.size_bytes, rec.steps)
        assert collective_row(plan, call, rec, "kernel")["algorithm_used"] == picked


def test_teardown_after_an_error_inside_the_run(tmp_path, clean_machine):
    plan = plan_run(make_run(SMALL))
    with pytest.raises(ZeroDivisionError):
        with Emulation(plan, str(tmp_path), log=lambda *_: None):
            1 / 0  # noqa: B018 (the error is the point)
    assert processes.leftover_bridges() == [] and processes.leftover_links() == []


def test_a_dying_agent_fails_the_run_and_is_cleaned_up(tmp_path, clean_machine):
    plan = plan_run(make_run({**SMALL, "sizes": [64 << 20], "host_rate_mbps": 10, "switch_rate_mbps": 10}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        # kill rank 3's agent (by its own pid) while the call is under way
        killer = threading.Timer(3.0, lambda: os.kill(emu.fleet.procs[3].pid, signal.SIGKILL))
        killer.start()
        with pytest.raises(AgentError):
            emu.replay(plan)
        killer.join()


def test_cli_run_writes_the_results_table(tmp_path, clean_machine):
    out = tmp_path / "res"
    proc = subprocess.run([sys.executable, "-m", "emulator.cli", "run", "-b", "128K", "-e", "256K",
                           "-n", "2", "-w", "1", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode in exit_codes.FINISHED, proc.stdout + proc.stderr   # the verdict: tests/emulation/test_fidelity.py
    assert "busbw" in proc.stdout and "(Mb/s)" in proc.stdout   # nccl-tests: units in a row of their own
    assert "userspace datapath" in proc.stdout or "kernel datapath" in proc.stdout
    with open(out / "collectives.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["size_bytes"]) for r in rows] == [131072, 131072, 262144, 262144]
    for col in ("topology", "policy", "collective", "algorithm", "mapping", "ranks", "size_bytes",
                "repetition", "time_s", "algbw_mbps", "busbw_mbps", "model_time_s"):
        assert col in rows[0]
    assert all(r["bytes_ok"] == "True" and float(r["busbw_mbps"]) > 0 for r in rows)
    with open(out / "trace.json") as f:   # the timeline for Perfetto: every step of every rank
        events = json.load(f)["traceEvents"]
    with open(out / "steps.csv") as f:
        assert sum(e["ph"] == "X" and e["name"].startswith("step") for e in events) == len(list(csv.DictReader(f)))
