"""Faults, for real: interrupted runs leave nothing, `clean` after kill -9
removes only what the run left, a link failure mid-allreduce is rerouted
and shows in the step times, and a controller restart keeps traffic going."""
import csv
import json
import subprocess
import sys
import threading
import time

import pytest

from emulator.emulation import Emulation
from emulator.net import processes
from emulator.plan.run_plan import plan_run
from emulator.results.calls import bytes_ok
from emulator.spec.experiment import make_run
from terminal import INTERRUPTIONS, Terminal

pytestmark = pytest.mark.emulation

LONG_RUN = ["run", "-t", "bigraph:m=2,n=4", "-b", "64M", "-n", "1", "-w", "0", "--bw", "20"]


@pytest.mark.parametrize("how", [name for name in INTERRUPTIONS if name != "kill -9"])   # kill -9: below
def test_an_interrupted_run_tears_everything_down(tmp_path, clean_machine, how):
    term = Terminal([sys.executable, "-m", "emulator.cli", *LONG_RUN, "--out", str(tmp_path / "res")])
    try:
        term.expect("routes 'shortest' installed")
        time.sleep(2)   # the agents are moving data now
        INTERRUPTIONS[how](term)
        assert term.wait(timeout_s=60) == 130, term.text()
        if "SIGHUP" not in how and how != "terminal closed":   # after a hang-up output goes nowhere
            assert "bigraph-emu: interrupted" in term.text()
        # what it measured so far stays in OUT.partial
        assert (tmp_path / "res.partial" / "spec.json").exists() and not (tmp_path / "res").exists()
    finally:
        term.close()
    # clean_machine checks no bridge, link, recorded process or socket default is left


def test_teardown_finishes_when_a_node_shell_was_interrupted_mid_command(tmp_path, clean_machine):
    """Ctrl-C or a hang-up during bring-up can land while a Mininet shell
    runs a command; Mininet then refuses every later command on it
    ("assert not self.waiting") and its teardown stopped halfway."""
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "sizes": ["64K"], "repetitions": 1, "warmup": 0}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        for name in ("bgh0", "bgs1"):   # a host's shell and a switch's, each inside a command
            emu.network.net[name].sendCmd("sleep 30")
    # clean_machine checks that no bridge, link or recorded process is left


def test_clean_after_kill_9_removes_only_what_the_run_left(tmp_path, clean_machine):
    # look-alikes the project did not start: a process named like its
    # controller and agents, and a veth pair without the project's prefix
    decoy = subprocess.Popen(["bash", "-c", 'exec -a "python -m controller iperf3" sleep 600'])
    subprocess.run(["ip", "link", "add", "zzdecoy0", "type", "veth", "peer", "name", "zzdecoy1"], check=True)
    term = None
    try:
        term = Terminal([sys.executable, "-m", "emulator.cli", *LONG_RUN, "--out", str(tmp_path / "res")])
        term.expect("routes 'shortest' installed")
        time.sleep(1)
        term.kill()   # kill -9: no teardown at all
        assert processes.leftover_bridges() and processes.leftover_processes()
        # a new run refuses to start on the leftovers and says what to do
        refused = subprocess.run([sys.executable, "-m", "emulator.cli", *LONG_RUN, "--out", str(tmp_path / "again")],
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 1 and "bigraph-emu clean" in refused.stderr, refused.stderr
        cleaned = subprocess.run([sys.executable, "-m", "emulator.cli", "clean"], capture_output=True, text=True,
                                 timeout=120)
        assert cleaned.returncode == 0, cleaned.stderr
        assert processes.leftover_bridges() == [] and processes.leftover_links() == []
        assert processes.leftover_processes() == []
        assert decoy.poll() is None, "clean killed a process the project did not start"
        assert subprocess.run(["ip", "link", "show", "zzdecoy0"], capture_output=True).returncode == 0
    finally:
        if term is not None:
            term.close()
        decoy.kill()
        decoy.wait()
        subprocess.run(["ip", "link", "del", "zzdecoy0"], capture_output=True)


def test_a_link_failure_mid_allreduce_is_rerouted_and_visible(tmp_path, clean_machine, timing):
    # HDRM halving-doubling on BiGraph m=2,n=4 at 20 Mbit/s (about 12 s, one
    # flow per link per step); the direct link bgs0-bgs2 goes down at 2 s, up
    # at 4 s: its flow detours over links other flows use
    spec = make_run({"topology": "bigraph:m=2,n=4", "algorithm": "halving-doubling", "mapping": "hdrm",
                     "sizes": ["16M"], "repetitions": 1, "warmup": 0,
                     "host_rate_mbps": 20, "switch_rate_mbps": 20,
                     "link_events": ["2:bgs0-bgs2:down", "4:bgs0-bgs2:up"]})
    plan = plan_run(spec)
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        (record,) = emu.replay(plan)
    assert bytes_ok(plan, plan.calls[0].size_bytes, record.steps)   # TCP survived on the detour
    with open(tmp_path / "link_events.csv") as f:
        applied = list(csv.DictReader(f))
    assert [(e["link"], e["action"]) for e in applied] == [("bgs0-bgs2", "down"), ("bgs0-bgs2", "up")]
    with open(tmp_path / "events.jsonl") as f:
        seen = [json.loads(line) for line in f]
    reroutes = [e for e in seen if e["event"] in ("link down", "link up")]
    assert {e["event"] for e in reroutes} == {"link down", "link up"}
    assert all(e["rules_changed"] > 0 for e in reroutes), reroutes
    # the failure shows in the step times: the first step (0 s to about 3.4 s
    # without the failure) takes far longer than the model says
    size = plan.calls[0].size_bytes
    step0 = max(steps[0]["end"] for steps in record.steps)
    model0 = max(ends[0] for ends in plan.predictions[size].step_end_s)
    timing(step0 > 1.4 * model0, (step0, model0))


def test_a_controller_restart_keeps_traffic_flowing(tmp_path, clean_machine):
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "sizes": ["16M"], "repetitions": 1, "warmup": 0,
                              "host_rate_mbps": 20, "switch_rate_mbps": 20}))
    failed = []

    def restart_controller():
        try:
            emu.restart_controller()
        except Exception as e:   # noqa: BLE001 - reported by the assertion below
            failed.append(repr(e))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        restart = threading.Timer(1.5, restart_controller)
        restart.start()
        (record,) = emu.replay(plan)
        restart.join()
    assert not failed, failed
    assert bytes_ok(plan, plan.calls[0].size_bytes, record.steps)
    log = (tmp_path / "controller.log").read_text()
    # the new controller found every rule in place and changed none
    reconnects = [l for l in log.splitlines() if "(connected)" in l]
    assert len(reconnects) == 2 * len(plan.fabric.switches)
    assert all("0 rules deleted, 0 added" in l for l in reconnects[len(plan.fabric.switches):]), reconnects


def test_hosts_are_contained_in_the_fabric(tmp_path, clean_machine):
    """No route off the fabric, and the controller (on the machine's
    loopback) is out of the hosts' reach."""
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "sizes": ["64K"], "repetitions": 1, "warmup": 0}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        host = emu.network.host(plan.fabric.hosts[0].name)
        routes = [l for l in host.cmd("ip -color=never -4 route show").splitlines() if l.strip()]
        assert len(routes) == 1 and routes[0].startswith("198.18.0.0/15"), routes
        # TEST-NET-1: no route, so the kernel refuses before anything is sent
        assert "unreachable" in host.cmd("ping -c1 -W1 192.0.2.1 2>&1").lower()
        probe = (f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', "
                 f"{emu.controller.port}), timeout=2)\" 2>&1; echo rc=$?")
        assert "rc=0" not in host.cmd(probe)
