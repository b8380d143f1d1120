"""One fabric over two machines, for real: the two VMs of `vm/stage.py
--cluster` (one CPU each, software emulation, a private segment of their
own), this one the head and $BIGRAPH_CLUSTER_SERVER the second server.
Software emulation cannot time a run faithfully: bytes, routes, placement
and teardown are asserted, times are recorded beside the model's.
Skipped anywhere else (tests/emulation/test_servers.py runs the same paths
on one machine)."""
import csv
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from emulator.preflight import plan_emulated
from emulator.plan import servers as spread
from emulator.spec.experiment import make_run

SERVER, HEAD = os.environ.get("BIGRAPH_CLUSTER_SERVER"), os.environ.get("BIGRAPH_CLUSTER_HEAD")
OUT = os.environ.get("BIGRAPH_STAGE_OUT", "")
KILL_REQUEST = "kill-server"   # vm/stage.py kills the server VM when this file appears in OUT

pytestmark = [pytest.mark.emulation,
              pytest.mark.skipif(not SERVER, reason="runs in the two VMs of vm/stage.py --cluster")]

RATE = "10"   # Mbit/s: the ring's peak (140 link-Mbit/s) is past one VM's reference budget (99): two are needed


def ring(servers: str | None, placement: str, size: str = "1M") -> list[str]:
    return ["run", "-t", "bigraph:m=2,n=4", "-a", "ring", "-m", "naive", "-b", size, "-n", "1", "-w", "0",
            "--bw", RATE, *(["--servers", servers, "--placement", placement] if servers else [])]


def _run(args, out) -> subprocess.CompletedProcess:
    at = args.index("--") if "--" in args else len(args)   # exec's program after "--" takes no flag of ours
    done = subprocess.run([sys.executable, "-m", "emulator.cli", *args[:at], "--out", out, *args[at:]],
                          capture_output=True, text=True, timeout=1800)
    print(done.stdout[-3000:], done.stderr[-2000:])
    return done


def _server_leftovers() -> dict:
    script = ("import json; from emulator.net import processes as p; print(json.dumps({'bridges': "
              "p.leftover_bridges(), 'links': p.leftover_links(), 'processes': p.leftover_processes()}))")
    done = subprocess.run(["ssh", "-o", "BatchMode=yes", f"root@{SERVER}", sys.executable, "-c", json.dumps(script)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _crossed(out: str) -> tuple[float, dict]:
    record = json.load(open(os.path.join(out, "servers.json")))
    where = record["where"]
    with open(os.path.join(out, "links.csv")) as f:
        crossed = sum(int(r["tx_bytes"]) for r in csv.DictReader(f) if where[r["node"]] != where[r["peer"]])
    return crossed, record


def _collective(out: str) -> dict:
    with open(os.path.join(out, "collectives.csv")) as f:
        return next(csv.DictReader(f))


@pytest.mark.parametrize("placement", ["switch-bin", "traffic"])
def test_a_ring_over_two_vms(placement, clean_machine, timing, record_property):
    out = os.path.join(OUT, f"two-servers-{placement}")
    done = _run(ring(f"{HEAD},{SERVER}", placement), out)
    assert done.returncode in (0, 3), done.stdout + done.stderr   # 3: a fidelity verdict failed (recorded)
    assert "routes 'shortest' installed, read back from OVS and followed by probe packets; all 8 hosts reach " \
           "each other" in done.stdout
    row = _collective(out)
    assert row["bytes_ok"] == "True"   # every agent moved exactly its bytes
    crossed, record = _crossed(out)
    plan = plan_emulated(make_run({"topology": "bigraph:m=2,n=4", "sizes": ["1M"], "repetitions": 1, "warmup": 0,
                                   "host_rate_mbps": RATE, "switch_rate_mbps": RATE}))
    budgets = [spread.Server(n, s["faithful_mbps"], 256) for n, s in record["servers"].items()]
    planned = spread.place(spread.traffic_of(plan), budgets, placement).cross_bytes
    assert planned == pytest.approx(record["cross_bytes_planned"]) and planned > 0
    assert planned <= crossed <= 1.1 * planned, (crossed, planned)   # headers and ACKs on top
    second = record["servers"][SERVER]
    record_property("two_vms", json.dumps({"placement": placement, "crossed_bytes": crossed, "planned": planned,
                                           "clock_offset_s": second["clock_offset_s"],
                                           "clock_uncertainty_s": second["clock_uncertainty_s"],
                                           "network_mbps": second.get("network_mbps"),
                                           "time_over_model": row["time_over_model"],
                                           "fidelity": row["fidelity"]}))
    timing(row["fidelity"] == "ok", f"{placement} over two VMs: {float(row['time_over_model']):.2f}x the model, "
                                    f"{row['fidelity']}")
    assert _server_leftovers() == {"bridges": [], "links": [], "processes": []}


def test_the_same_ring_on_the_head_alone(clean_machine, timing, record_property):
    out = os.path.join(OUT, "one-server")
    done = _run(ring(None, ""), out)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    row = _collective(out)
    assert row["bytes_ok"] == "True"
    record_property("one_vm", json.dumps({"time_over_model": row["time_over_model"], "fidelity": row["fidelity"]}))
    timing(row["fidelity"] == "ok", f"on one VM: {float(row['time_over_model']):.2f}x the model, {row['fidelity']}")


def test_exec_of_a_program_over_two_vms(clean_machine, record_property):
    """exec over the two VMs: the second VM's ranks run there (ssh from the
    head) and their folders come back to the head's results."""
    out = os.path.join(OUT, "exec")
    program = os.path.join(os.path.dirname(__file__), "..", "fixtures", "rank_sum.py")
    done = _run(["exec", "-t", "bigraph:m=2,n=4", "--bw", RATE, "--servers", f"{HEAD},{SERVER}",
                 "--placement", "switch-bin", "--timeout", "600", "--", sys.executable, os.path.abspath(program)], out)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    where = json.load(open(os.path.join(out, "servers.json")))["where"]
    with open(os.path.join(out, "ranks.csv")) as f:
        ranks = list(csv.DictReader(f))
    assert {where[r["host"]] for r in ranks} == {HEAD, SERVER}
    assert "sum 28 from 7" in open(os.path.join(out, "ranks", "0", "stdout")).read()
    for r in ranks:
        assert r["exit_code"] == "0", r
        assert f"rank {r['rank']} on {r['host']}" in open(os.path.join(out, "ranks", r["rank"], "stdout")).read()
    record_property("exec", json.dumps({r["rank"]: {k: r[k] for k in ("host", "start_s", "end_s", "cpu_s")}
                                        for r in ranks}))
    assert _server_leftovers() == {"bridges": [], "links": [], "processes": []}

def test_the_server_vm_killed_mid_run(clean_machine, record_property):
    """Last: the server VM does not come back."""
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", *ring(f"{HEAD},{SERVER}", "switch-bin", "64M"),
                             "--out", os.path.join(OUT, "killed")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})   # each line read when it is printed
    seen = ""
    try:
        for line in proc.stdout:
            seen += line
            if "routes 'shortest' installed" in line:
                break
        assert "routes 'shortest' installed" in seen, seen   # the run failed before its agents started
        time.sleep(10)   # the agents start (under software emulation, perhaps not yet moving data)
        open(os.path.join(OUT, KILL_REQUEST), "w").close()
        killed_at = time.monotonic()
        rest, watchdog = "", threading.Timer(300, proc.kill)
        watchdog.start()
        for line in proc.stdout:   # each line stamped: a slow teardown shows where its time went
            rest += f"[+{time.monotonic() - killed_at:.1f} s] {line}"
        proc.wait()
        watchdog.cancel()
        failed_after = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
    record_property("killed", json.dumps({"failed_after_s": round(failed_after, 1), "output": rest}))
    assert proc.returncode == 1, seen + rest
    assert f"lost server {SERVER}" in rest, rest
    assert failed_after < 60, f"{failed_after:.0f} s to notice the lost server and tear down:\n{rest}"
    assert os.path.exists(os.path.join(OUT, "killed.partial", "servers.json"))
    # clean_machine: nothing of the run is left on the head

