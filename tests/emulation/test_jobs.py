"""Jobs for real: two jobs at once on one fabric, each with its own agents
and connections, and compute overlapping communication, measured over
real TCP beside the flow model."""
import csv
import subprocess
import sys

import pytest

from emulator import pipeline

pytestmark = pytest.mark.emulation

RATE = ["--bw", "20"]


def run_workload(tmp_path, text: str, *extra) -> list[dict]:
    path = tmp_path / "w.toml"
    path.write_text(text)
    out = tmp_path / "res"
    done = subprocess.run([sys.executable, "-m", "emulator.cli", "run", "-t", "bigraph:m=2,n=4", "--workload",
                           str(path), "-n", "1", "-w", "0", *RATE, *extra, "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in pipeline.FINISHED, done.stdout + done.stderr   # the verdicts: each test's timing checks
    with open(out / "jobs.csv") as f:
        return list(csv.DictReader(f))


def test_two_jobs_run_at_once_and_slow_each_other_down(tmp_path, clean_machine, timing):
    job = 'ranks = 4\nplacement = "round-robin"\niterations = 2\nops = [{op = "allreduce", bytes = "4M"}]\n'
    rows = run_workload(tmp_path, f'[[job]]\nname = "a"\n{job}[[job]]\nname = "b"\n{job}')
    assert [(r["job"], r["iteration"]) for r in rows] == [("a", "0"), ("a", "1"), ("b", "0"), ("b", "1")]
    for r in rows:
        time_s, model_s, alone_s = float(r["time_s"]), float(r["model_time_s"]), float(r["alone_model_s"])
        timing(0.8 < time_s / model_s < 1.3, r)
        timing(time_s > 1.3 * alone_s, r)   # they share every switch link: both run slower than alone


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
