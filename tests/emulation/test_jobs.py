"""Jobs for real: two jobs at once on one fabric, each with its own agents
and connections, and compute overlapping communication, measured over
real TCP beside the flow model."""
import csv
import statistics
import subprocess
import sys

import pytest

from emulator import exit_codes
from emulator.results.verdict import NETWORK

pytestmark = pytest.mark.emulation

RATE = ["--bw", "20"]


def run_workload(tmp_path, text: str, *extra) -> list[dict]:
    path = tmp_path / "w.toml"
    path.write_text(text)
    out = tmp_path / "res"
    done = subprocess.run([sys.executable, "-m", "emulator.cli", "run", "-t", "bigraph:m=2,n=4", "--workload",
                           str(path), "-n", "1", "-w", "0", *RATE, *extra, "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in exit_codes.FINISHED, done.stdout + done.stderr   # the verdicts: each test's timing checks
    with open(out / "jobs.csv") as f:
        return list(csv.DictReader(f))


def test_two_jobs_run_at_once_and_slow_each_other_down(tmp_path, clean_machine, timing):
    job = 'ranks = 4\nplacement = "round-robin"\niterations = 2\nops = [{op = "allreduce", bytes = "4M"}]\n'
    rows = run_workload(tmp_path, f'[[job]]\nname = "a"\n{job}[[job]]\nname = "b"\n{job}')
    assert [(r["job"], r["iteration"]) for r in rows] == [("a", "0"), ("a", "1"), ("b", "0"), ("b", "1")]
    # the model (max-min here: an incast's TCP factor is 1.00x) leaves out how the jobs' steps fall against
    # each other: one call can run 0.88x while its neighbour runs 1.33x (40 calls in
    # lab/two-jobs-sharing-2026-12-04), so the median call is judged; and a call slower for
    # TCP's own loss recovery (a `network:` verdict: drops and a retransmission timeout, which max-min leaves
    # out; one ran 1.60x on 2026-12-05) is not held to the model's bound: its verdict holds only as far as TCP's
    # measured sharing and the timeouts counted explain it (docs/results.md); one out of step is held to it
    over_model = [float(r["time_s"]) / float(r["model_time_s"]) for r in rows]
    lossy = [r["fidelity"].startswith(NETWORK) and "out of step" not in r["fidelity"] for r in rows]
    unexplained = [x for x, recovered in zip(over_model, lossy) if not recovered]
    timing(0.8 < statistics.median(over_model) < 1.3 and max(unexplained, default=0) < 1.5, rows)
    for r in rows:
        timing(float(r["time_s"]) > 1.3 * float(r["alone_model_s"]), r)   # they share every switch link: both slower


def test_compute_overlaps_an_async_allreduce(tmp_path, clean_machine, timing):
    # a 4 MiB ring allreduce of 4 ranks at 20 Mbit/s takes about 2.6 s
    hidden = run_workload(tmp_path, '[[job]]\nname = "o"\nranks = 4\nops = [{op = "allreduce", bytes = "4M", '
                                    'async = true, tag = "g"}, {op = "compute", ms = 3500}, {op = "wait", tag = "g"}]\n')
    (r,) = hidden
    time_s, compute_s, comm_s = float(r["time_s"]), float(r["compute_s"]), float(r["comm_s"])
    assert compute_s == pytest.approx(3.5)
    timing(abs(time_s - float(r["model_time_s"])) < 0.15 * float(r["model_time_s"]), r)
    timing(comm_s < 0.1 * time_s, r)   # the allreduce finished behind the compute: little exposed
    timing(abs(comm_s - float(r["model_comm_s"])) < 0.03 * time_s + 0.05, r)


def test_background_traffic_takes_its_share_of_a_link_and_is_reported_apart(tmp_path, clean_machine, timing):
    # a 2-rank ring allreduce of 4 MiB between bgh0 and bgh1 (each sends 2 MiB: about 0.85 s at 20 Mbit/s)
    # beside a 10 Mbit/s flow from bgh2 into bgh1 for longer than the job: max-min leaves the job 10 of
    # bgh1's 20 Mbit/s in both iterations
    rows = run_workload(tmp_path, '[[job]]\nname = "a"\nranks = 2\nplacement = ["bgh0", "bgh1"]\niterations = 2\n'
                                  'ops = [{op = "allreduce", bytes = "4M", algorithm = "ring"}]\n'
                                  '[[background]]\nname = "load"\nfrom = "bgh2"\nto = "bgh1"\nrate_mbps = 10\n'
                                  'duration_ms = 8000\n')
    assert [(r["job"], r["background_flows"]) for r in rows] == [("a", "1"), ("a", "1")]
    for r in rows:
        time_s, model_s, alone_s = float(r["time_s"]), float(r["model_time_s"]), float(r["alone_model_s"])
        timing(0.8 < time_s / model_s < 1.3, r)
        timing(time_s > 1.5 * alone_s, r)   # about half of its link left to it
    with open(tmp_path / "res" / "background.csv") as f:
        (flow,) = list(csv.DictReader(f))
    assert (flow["background"], flow["from"], flow["to"]) == ("load", "bgh2", "bgh1")
    assert int(flow["bytes"]) == 800 * 12500   # every chunk arrived: 800 periods of 10 ms
    timing(0.85 < float(flow["mbps"]) / float(flow["asked_mbps"]) < 1.05, flow)


def test_an_elastic_job_runs_each_iteration_on_its_group(tmp_path, clean_machine, timing):
    # 2 ranks, then 4 from iteration 1 (the rendezvous through rank 0 in between), then 2 again at 3
    rows = run_workload(tmp_path, '[[job]]\nname = "e"\nranks = 2\niterations = 4\nplacement = "round-robin"\n'
                                  'resize = [{at_iteration = 1, ranks = 4}, {at_iteration = 3, ranks = 2}]\n'
                                  'ops = [{op = "allreduce", bytes = "2M", algorithm = "ring"}]\n')
    assert [(r["job"], r["iteration"], r["ranks"]) for r in rows] == \
        [("e", "0", "2"), ("e", "1", "4"), ("e", "2", "4"), ("e", "3", "2")]
    for r in rows:
        timing(0.8 < float(r["time_s"]) / float(r["model_time_s"]) < 1.3, r)
    starts, ends = [float(r["start_s"]) for r in rows], [float(r["end_s"]) for r in rows]
    assert starts[1] >= ends[0] and starts[3] >= ends[2]   # a resize's group starts once the group before has ended


def test_a_jobs_own_congestion_control_is_the_one_its_sockets_use(tmp_path, clean_machine):
    """Job a asks for reno (TCP_CONGESTION on its agents' sockets), job b
    takes the run's cubic: read from the kernel (ss) in their hosts while
    the jobs run."""
    import re
    import time
    job = 'ranks = 4\niterations = 2\nops = [{op = "allreduce", bytes = "4M"}]\n'
    on = {"a": ["bgh0", "bgh2", "bgh4", "bgh6"], "b": ["bgh1", "bgh3", "bgh5", "bgh7"]}
    path = tmp_path / "w.toml"
    path.write_text(f'[[job]]\nname = "a"\ntcp = "reno"\nplacement = {on["a"]}\n{job}'
                    f'[[job]]\nname = "b"\nplacement = {on["b"]}\n{job}'.replace("'", '"'))
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", "run", "-t", "bigraph:m=2,n=4", "--workload",
                             str(path), "-n", "1", "-w", "0", *RATE, "--tcp", "cubic", "--out", str(tmp_path / "res")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[str, set[str]] = {}
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline and len(seen) < 8:
            shells = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
            for pid, host in re.findall(r"^\s*(\d+) bash .*mininet:(bgh\d+)$", shells, re.M):
                sockets = subprocess.run(["mnexec", "-a", pid, "ss", "-tinH", "state", "established"],
                                         capture_output=True, text=True).stdout
                names = set(re.findall(r"^\s+(reno|cubic|bbr)\b", sockets, re.M))
                if names:
                    seen[host] = names
            time.sleep(0.2)
        assert proc.wait(timeout=300) in exit_codes.FINISHED, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(seen) == 8 and all(len(names) == 1 for names in seen.values()), seen
    for host, names in seen.items():
        assert names == ({"reno"} if host in on["a"] else {"cubic"}), (host, seen)
