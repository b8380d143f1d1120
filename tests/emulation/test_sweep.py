"""Emulation points of a sweep on real Dask workers: two workers on one
machine, each offering the `fabric` resource, never emulate at once (the
machine's lock decides, and no point is lost to it); --confirm emulates
the model's best and worst and compares their order."""
import csv
import os
import subprocess

from dasktools import BIN, DaskCluster

SMALL = """
name = "emulated"
[defaults]
topology = "bigraph:m=2,n=4"
algorithm = "halving-doubling"
sizes = ["512K"]
repetitions = 1
warmup = 0
host_rate_mbps = 50
switch_rate_mbps = 50
[grid]
mapping = ["naive", "hdrm", "random"]
"""


def emulated_rows(folder) -> list[dict]:
    with open(os.path.join(folder, "sweep.csv"), newline="") as f:
        return [r for r in csv.DictReader(f) if r["emulated"] == "yes"]


def test_two_workers_on_one_machine_never_emulate_at_once(tmp_path, clean_machine):
    (tmp_path / "s.toml").write_text(SMALL)
    cluster = DaskCluster(2, tmp_path, resources="fabric=1")
    try:
        got = subprocess.run([BIN, "sweep", str(tmp_path / "s.toml"), "--emulate", "--scheduler", cluster.address,
                              "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=900)
    finally:
        cluster.stop()
    assert got.returncode == 0, got.stderr[-3000:]
    rows = emulated_rows(tmp_path / "out")
    assert sorted(r["mapping"] for r in rows) == ["hdrm", "naive", "random"], "a point lost to the lock"
    assert not [r["error"] for r in rows if r["error"]]
    spans = sorted((float(r["started_s"]), float(r["ended_s"])) for r in rows)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, f"two emulations at once: {spans}"
    for r in rows:   # each moved its bytes and has its own results folder
        assert r["verdict"] and os.path.isfile(os.path.join(r["results"], "collectives.csv"))
        assert float(r["emulated_time_s"]) > 0 and float(r["model_time_s"]) > 0


def test_confirm_emulates_the_best_and_worst_and_compares_their_order(tmp_path, clean_machine):
    (tmp_path / "s.toml").write_text(SMALL + "[confirm]\nsizes = ['1M']\n")
    got = subprocess.run([BIN, "sweep", str(tmp_path / "s.toml"), "--confirm", "1", "--workers", "1",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=900)
    assert got.returncode == 0, got.stderr[-3000:]
    rows = emulated_rows(tmp_path / "out")
    assert len(rows) == 2 and {r["size_bytes"] for r in rows} == {str(1 << 20)}
    assert "# confirmed: 2 points emulated" in got.stdout and "pairs in the same order" in got.stdout
    assert os.path.isfile(tmp_path / "out" / "confirm.png")
