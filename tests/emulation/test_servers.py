"""A fabric over two servers, for real, on one machine: this machine is
also the second server, reached by ssh at 127.0.0.2 (an sshd of the
test's own, tests/sshtools.py), so the ssh paths, the VXLAN tunnels and
their shaping, the remote agents and link samplers, the clock exchange,
the loss of a server and the teardown all run as across two machines.
`vm/stage.py --cluster` runs the same across two VMs."""
import csv
import json
import os
import subprocess
import sys
import time

import pytest

from emulator.net.cluster import SSH_CONFIG_ENV
from emulator.preflight import plan_emulated
from emulator.plan import servers as spread
from emulator.spec.experiment import make_run
from sshtools import LoopbackServer, available

pytestmark = pytest.mark.emulation

SERVERS = "localhost,127.0.0.2"
RING = ["-t", "bigraph:m=2,n=4", "-a", "ring", "-m", "naive", "-b", "2M", "-n", "1", "-w", "0", "--bw", "20",
        "--servers", SERVERS, "--placement", "switch-bin"]


@pytest.fixture
def second_server(monkeypatch):
    if not available():
        if os.environ.get("BIGRAPH_REQUIRE_EMULATION") == "1":
            pytest.fail("a fabric over servers needs sshd and ssh-keygen (vm/provision.sh --cluster)")
        pytest.skip("no sshd here (vm/provision.sh --cluster installs it)")
    with LoopbackServer() as server:
        monkeypatch.setenv(SSH_CONFIG_ENV, server.config)
        yield server


def _run(args, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emulator.cli", "run", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=600)


def test_a_ring_over_two_servers_moves_its_bytes_through_the_tunnels(tmp_path, clean_machine, second_server, timing):
    done = _run(RING, tmp_path / "res")
    assert done.returncode in (0, 3), done.stdout + done.stderr   # 1: an agent moved wrong bytes, or a failure
    out = tmp_path / "res"
    # both placements were printed before the fabric was built, then the checks
    assert "placement switch-bin (Mininet's SwitchBinPlacer)" in done.stdout and "placement by traffic" in done.stdout
    assert "routes 'shortest' installed, read back from OVS and followed by probe packets" in done.stdout
    record = json.loads((out / "servers.json").read_text())
    assert record["where"]["bgs0"] == "localhost" and record["where"]["bgs3"] == "127.0.0.2"
    assert record["where"]["bgh7"] == "127.0.0.2"   # hosts with their switch
    second = record["servers"]["127.0.0.2"]
    assert abs(second["clock_offset_s"]) < 1e-3 and 0 < second["clock_uncertainty_s"] <= 1e-3   # one machine's clock
    assert second["project"] == record["servers"]["localhost"]["project"]
    # the bytes that crossed between the servers, as the switch ports counted them, against the plan's
    where = record["where"]
    with open(out / "links.csv") as f:
        crossed = sum(int(r["tx_bytes"]) for r in csv.DictReader(f) if where[r["node"]] != where[r["peer"]])
    plan = plan_emulated(make_run({"topology": "bigraph:m=2,n=4", "sizes": ["2M"], "repetitions": 1, "warmup": 0}))
    placed = spread.switch_bin(spread.traffic_of(plan), [spread.Server(n, 1e9, 256) for n in SERVERS.split(",")])
    assert placed.cross_bytes == pytest.approx(record["cross_bytes_planned"])
    assert placed.cross_bytes <= crossed <= 1.08 * placed.cross_bytes   # headers and ACKs on top
    with open(out / "collectives.csv") as f:
        row = next(csv.DictReader(f))
    assert row["bytes_ok"] in ("True", "true", "1")
    timing(row["fidelity"] == "ok", f"the run over two servers: {row['fidelity']}, "
                                    f"{float(row['time_over_model']):.2f}x the model")


def test_a_lost_server_fails_the_run_naming_it_and_the_head_is_torn_down(tmp_path, clean_machine, second_server):
    long_run = [*RING[:7], "256M", *RING[8:]]
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", "run", *long_run, "--out", str(tmp_path / "res")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = ""
        for line in proc.stdout:   # until the fabric is up; the agents then move data
            seen += line
            if "routes 'shortest' installed" in line:
                break
        time.sleep(5)
        second_server.kill_sessions()
        lost_at = time.monotonic()
        rest, _ = proc.communicate(timeout=120)
        failed_after = time.monotonic() - lost_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, seen + rest
    assert "lost server 127.0.0.2" in rest, rest
    assert failed_after < 30 + 15, f"{failed_after:.0f} s to fail and tear down"
    # what it measured so far stays in OUT.partial
    assert (tmp_path / "res.partial" / "servers.json").exists() and not (tmp_path / "res").exists()
    # clean_machine: nothing of either server is left (one machine here)


def test_clean_with_servers_after_kill_9_of_the_head(tmp_path, clean_machine, second_server):
    long_run = [*RING[:7], "256M", *RING[8:]]
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", "run", *long_run, "--out", str(tmp_path / "res")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            if "routes 'shortest' installed" in line:
                break
        time.sleep(2)
    finally:
        proc.kill()   # kill -9: no teardown at all
        proc.wait()
    cleaned = subprocess.run([sys.executable, "-m", "emulator.cli", "clean", "--servers", SERVERS],
                             capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert "bridge bgs0" in cleaned.stdout and "removed on 127.0.0.2: " in cleaned.stdout, cleaned.stdout
    # clean_machine: nothing left



def test_a_capture_on_the_second_server_comes_back_and_report_opens_it(tmp_path, clean_machine, second_server):
    """bgh7's link is on the second server's switch: its tcpdump runs there,
    its pcap comes back into the results, and `report` reads its flows."""
    out = tmp_path / "res"
    done = _run([*RING, "--capture", "bgh7,bgh0"], out)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    assert json.loads((out / "servers.json").read_text())["where"]["bgs3"] == "127.0.0.2"
    with open(out / "captures.csv") as f:
        captures = {r["link"]: r for r in csv.DictReader(f)}
    assert set(captures) == {"bgh7", "bgh0"}
    for row in captures.values():
        shown = subprocess.run(["tcpdump", "-r", str(out / row["file"]), "-n"], capture_output=True, text=True)
        assert shown.returncode == 0 and shown.stdout.count(" IP ") > 100, shown.stderr
        assert int(row["packets"]) > 100 and row["dropped"] == "0"
    report = subprocess.run([sys.executable, "-m", "emulator.cli", "report", str(out)], capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    with open(out / "capture_flows.csv") as f:
        assert {r["link"] for r in csv.DictReader(f)} == {"bgh7", "bgh0"}
    assert not [p for p in os.listdir("/tmp") if p.startswith("bigraph-capture-")]

RANK_SUM = os.path.join(os.path.dirname(__file__), "..", "fixtures", "rank_sum.py")


def test_exec_of_a_program_over_two_servers_brings_every_ranks_folder_back(tmp_path, clean_machine, second_server):
    """Ranks on the second server run there with their environment, talk to
    rank 0 over the tunnels, and their folders, exit codes, times and CPU
    come back to the head's results; nothing is left on either server."""
    out = tmp_path / "res"
    done = subprocess.run([sys.executable, "-m", "emulator.cli", "exec", *RING[:2], "--bw", "20", "--servers",
                           SERVERS, "--placement", "switch-bin", "--out", str(out), "--", sys.executable,
                           os.path.abspath(RANK_SUM)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    where = json.loads((out / "servers.json").read_text())["where"]
    with open(out / "ranks.csv") as f:
        ranks = list(csv.DictReader(f))
    away = [r for r in ranks if where[r["host"]] == "127.0.0.2"]
    assert away and len(away) < len(ranks)
    assert "sum 28 from 7" in (out / "ranks" / "0" / "stdout").read_text()
    for r in ranks:
        text = (out / "ranks" / r["rank"] / "stdout").read_text()
        assert f"rank {r['rank']} on {r['host']} hostfile lines 8" in text
        assert r["exit_code"] == "0" and 0 <= float(r["start_s"]) < float(r["end_s"]) < 60
        assert float(r["cpu_s"]) > 0
    assert all(r["cpu_wait_s"] == "" for r in away)   # not read on another server
    assert not [p for p in os.listdir("/tmp") if p.startswith("bigraph-exec-")]


def test_exec_with_mpi_over_two_servers_allreduces_across_them(tmp_path, clean_machine, second_server):
    """mpiexec in rank 0's host on the head; hydra's launcher reaches the
    second server's hosts by ssh from the head's namespace."""
    import importlib.util
    if importlib.util.find_spec("mpi4py") is None:
        if os.environ.get("BIGRAPH_REQUIRE_CLIENTS") == "1":
            pytest.fail("mpi4py is required (BIGRAPH_REQUIRE_CLIENTS=1) but not installed")
        pytest.skip("mpi4py is not installed (the real clients: vm/provision.sh --clients)")
    out = tmp_path / "res"
    client = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "real-clients", "mpi_allreduce.py")
    done = subprocess.run([sys.executable, "-m", "emulator.cli", "exec", *RING[:2], "--bw", "20", "--servers",
                           SERVERS, "--placement", "switch-bin", "--ranks", "4", "-m", "round-robin", "--mpi",
                           "--timeout", "240", "--out", str(out), "--", sys.executable, os.path.abspath(client),
                           "-b", "1M", "-e", "1M", "-n", "2", "-w", "1"],
                          capture_output=True, text=True, timeout=400)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    where = json.loads((out / "servers.json").read_text())["where"]
    with open(out / "ranks.csv") as f:
        ranks = list(csv.DictReader(f))
    assert {where[r["host"]] for r in ranks} == {"localhost", "127.0.0.2"}
    assert all(r["exit_code"] == "0" and float(r["end_s"]) > 0 for r in ranks)
    assert "Out of bounds values : 0 OK" in (out / "ranks" / "0" / "stdout").read_text()
    assert not [p for p in os.listdir("/tmp") if p.startswith("bigraph-exec-")]
