"""Sweeps on real Dask: `bigraph-emu sweep` as a user runs it, against a
scheduler and two workers started as processes on 127.0.0.1, and against
the embedded local pool. No root and no network beyond loopback."""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import time

import pytest
from dasktools import BIN, DaskCluster, free_port

TIMING = ("worker", "started_s", "ended_s", "wall_s")

# 24 points of a few tenths of a second each
SWEEP = """
name = "dask-test"
[defaults]
sizes = ["1M", "8M"]
[grid]
topology = ["bigraph:m=4,n=8", "fattree:k=4"]
policy = ["shortest", "ecmp", "spread"]
mapping = ["naive", "random"]
algorithm = ["ring", "halving-doubling"]
"""
POINTS, SIZES = 24, 2


@pytest.fixture
def sweep_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SWEEP)
    return str(path)


@pytest.fixture
def cluster(tmp_path):
    c = DaskCluster(2, tmp_path)
    yield c
    c.stop()


def sweep(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([BIN, "sweep", *args], capture_output=True, text=True, timeout=600, **kwargs)


def rows_of(folder) -> list[dict]:
    with open(os.path.join(folder, "sweep.csv"), newline="") as f:
        return list(csv.DictReader(f))


def results(folder) -> list[tuple]:
    """Every row but where and when it ran, in point and size order."""
    rows = [tuple((k, v) for k, v in r.items() if k not in TIMING) for r in rows_of(folder)]
    return sorted(rows, key=lambda r: (int(dict(r)["point"]), int(dict(r)["size_bytes"] or 0)))


def assert_whole(folder) -> None:
    rows = rows_of(folder)
    assert not [r for r in rows if r["error"]], [r["error"] for r in rows if r["error"]][:3]
    pairs = [(r["key"], r["size_bytes"]) for r in rows]
    assert len(pairs) == len(set(pairs)) == POINTS * SIZES, "a row lost or written twice"


def test_the_clusters_rows_equal_the_local_pools_bit_for_bit(sweep_file, tmp_path, cluster):
    local = sweep(sweep_file, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    assert "2 Dask workers on 1 machine(s)" in local.stdout
    remote = sweep(sweep_file, "--out", str(tmp_path / "remote"), "--scheduler", cluster.address)
    assert remote.returncode == 0, remote.stderr
    assert f"scheduler {cluster.address}" in remote.stdout
    assert_whole(tmp_path / "local")
    assert results(tmp_path / "local") == results(tmp_path / "remote")
    assert "what moves the time most" in remote.stdout and os.path.exists(tmp_path / "remote" / "sweep.png")


def test_a_worker_killed_mid_sweep_loses_no_row_and_doubles_none(sweep_file, tmp_path, cluster):
    out = tmp_path / "out"
    proc = subprocess.Popen([BIN, "sweep", sweep_file, "--out", str(out), "--scheduler", cluster.address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "sweep.csv").exists() or len(rows_of(out)) < 4:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        os.kill(cluster.workers[0].pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert cluster.workers[0].wait() == -signal.SIGKILL
    assert_whole(out)


def test_ctrl_c_stops_cleanly_and_resume_runs_only_what_is_missing(sweep_file, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([BIN, "sweep", sweep_file, "--out", str(out), "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "sweep.csv").exists() or len(rows_of(out)) < 6:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    before = rows_of(out)
    assert 0 < len(before) < POINTS * SIZES and len(before) % SIZES == 0   # whole points only
    resumed = sweep(sweep_file, "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert f"{POINTS - len(before) // SIZES} to model" in resumed.stdout
    assert rows_of(out)[:len(before)] == before
    assert_whole(out)


def test_resume_refuses_another_sweeps_folder_and_rows_of_another_model(sweep_file, tmp_path):
    from emulator.results.sweeps import header
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.csv").write_text("point,key,model_version\n1,abc,0123456789ab\n")
    got = sweep(sweep_file, "--resume", str(out))
    assert got.returncode == 2 and "has other columns than this sweep's" in got.stderr, got.stderr
    columns = header(["topology", "policy", "mapping", "algorithm"])
    row = {c: "" for c in columns} | {"point": "1", "key": "abc", "model_version": "0123456789ab"}
    (out / "sweep.csv").write_text(",".join(columns) + "\n" + ",".join(row[c] for c in columns) + "\n")
    got = sweep(sweep_file, "--resume", str(out))
    assert got.returncode == 2 and "another version of the model (0123456789ab" in got.stderr, got.stderr


@pytest.mark.parametrize("args, words", [
    (["--scheduler", "tcp://127.0.0.1:{port}"], ["--scheduler tcp://127.0.0.1:", "no Dask scheduler answers"]),
    (["--confirm", "-1"], ["--confirm"]),
])
def test_bad_input_exits_2_and_creates_nothing(sweep_file, tmp_path, args, words):
    out = tmp_path / "never"
    args = [a.format(port=free_port()) for a in args]
    got = sweep(sweep_file, "--out", str(out), *args)
    assert got.returncode == 2, got.stderr
    for word in words:
        assert word in got.stderr
    assert not out.exists()


def test_bad_sweep_files_exit_2_naming_the_point_and_key(tmp_path):
    cases = {"unknown": SWEEP + "colour = ['red']\n", "empty": SWEEP.replace('["naive", "random"]', "[]"),
             "huge": "[grid]\nseed = [%s]\nrepetitions = [%s]\n" % (", ".join(map(str, range(1, 10001))),
                                                                     ", ".join(map(str, range(1, 1001))))}
    words = {"unknown": "grid: colour = 'red': unknown key colour", "empty": "grid: mapping: give a non-empty list",
             "huge": "10,000,000 points"}
    for name, text in cases.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        got = sweep(str(path), "--out", str(tmp_path / name))
        assert got.returncode == 2 and words[name] in got.stderr, (name, got.stderr)
        assert not (tmp_path / name).exists()
