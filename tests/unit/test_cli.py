"""Unit tests of the command line (emulator/cli.py) that need no root and no
network: `model`, `report`, flag parsing and error reporting. Commands that
build a network (run, demo, cleanup) are only checked for refusing non-root."""
from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest

from emulator import cli
from emulator.plan import plan_run
from emulator.results import CallRecord, COLLECTIVE_COLUMNS, append_csv, collective_rows
from emulator.schedule import COLLECTIVES
from emulator.spec import SpecError, load_experiment, make_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EFLOPS = os.path.join(REPO, "experiments", "eflops.toml")
DEMO = os.path.join(REPO, "experiments", "demo.toml")
M = 1 << 20



COUNTERS = {"cpu_busy": 0.5, "ovs_cpu": 0.3, "queue_drops": 0, "most_drops_port": "", "tcp_retrans": 0}


def wrap(records_by_call):
    """Agent records as Emulation.replay returns them, with quiet counters."""
    return [CallRecord(r, dict(COUNTERS)) for r in records_by_call]


@pytest.fixture(autouse=True)
def keep_sigterm_handler():
    """main() installs a SIGTERM handler; give pytest its own back."""
    old = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, old)


@pytest.fixture
def no_network(monkeypatch):
    """Make sure no test here can start a real emulation, even as root."""
    def refuse(*_a, **_k):
        raise AssertionError("a network command ran in a unit test")
    for name in ("cmd_run", "cmd_demo", "cmd_cleanup"):
        monkeypatch.setattr(cli, name, refuse)


def table_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]


def headers(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("# ") and line.endswith("(model)")]


# --- model ---------------------------------------------------------------------------

def test_model_hd_hdrm_table(capsys):
    rc = cli.main(["model", "-t", "bigraph:m=4,n=8", "-a", "halving-doubling", "-m", "hdrm", "-b", "1M", "-e", "2M"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    hs = headers(out)
    assert len(hs) == 1
    assert "allreduce halving-doubling" in hs[0] and "mapping hdrm" in hs[0]
    assert "bigraph:m=4,n=8 (32 ranks)" in hs[0]
    assert "size" in out and "busbw(Mb/s)" in out and "max flows on a link, per step" in out
    rows = table_rows(out)
    assert [int(r[0]) for r in rows] == [M, 2 * M]
    for r in rows:
        assert len(r) == 4 + 10                 # 10 steps of halving-doubling on 32 ranks
        size, time_ms, algbw, busbw, flows = r[0], r[1], r[2], r[3], r[4:]
        assert float(time_ms) > 0
        assert float(algbw) == pytest.approx(int(size) * 8 / (float(time_ms) / 1e3) / 1e6, rel=1e-2)
        assert float(busbw) == pytest.approx(float(algbw) * 2 * 31 / 32, rel=1e-2)
        assert float(busbw) < 50                # below the 50 Mbit/s link rate
        assert flows == ["1"] * 10              # HDRM: one flow per link at every step


def test_model_naive_hd_collides(capsys):
    assert cli.main(["model", "-t", "bigraph:m=4,n=8", "-a", "halving-doubling", "-m", "naive", "-b", "1M"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 1 and max(int(f) for f in rows[0][4:]) > 1


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_model_every_collective(capsys, collective):
    rc = cli.main(["model", "-c", collective, "-b", "64K", "-e", "128K"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    hs = headers(out)
    assert len(hs) == 1 and hs[0].startswith(f"# {collective} ")
    rows = table_rows(out)
    assert [int(r[0]) for r in rows] == [64 << 10, 128 << 10]
    assert all(float(r[1]) > 0 and int(r[-1]) >= 1 for r in rows)


def test_model_experiment_eflops(capsys):
    rc = cli.main(["model", "--experiment", EFLOPS])
    out, err = capsys.readouterr()
    assert rc == 0, err
    hs = headers(out)
    assert len(hs) == 6
    assert sum("bigraph:m=4,n=8" in h for h in hs) == 3
    assert sum("leafspine:leaves=8,spines=4,hosts=4" in h for h in hs) == 3
    assert all("MTU 9000" in h and "8 Mbit/s host" in h for h in hs)
    assert len(table_rows(out)) == 6 * 5          # sizes 512K..8M per run


def test_model_flags_override_experiment(capsys):
    rc = cli.main(["model", "--experiment", DEMO, "-a", "halving-doubling", "-b", "64K"])
    out, _ = capsys.readouterr()
    assert rc == 0
    hs = headers(out)
    assert len(hs) == 1 and "allreduce halving-doubling" in hs[0]
    assert [int(r[0]) for r in table_rows(out)] == [64 << 10]


@pytest.mark.parametrize("flags, sizes", [
    (["-b", "1M", "-e", "4M"], [M, 2 * M, 4 * M]),
    (["-b", "1M", "-e", "4M", "-f", "4"], [M, 4 * M]),
    (["-b", "2M"], [2 * M]),
    (["-e", "2M"], [2 * M]),
    ([], [M, 2 * M, 4 * M]),
])
def test_model_size_flags(capsys, flags, sizes):
    assert cli.main(["model", "-t", "bigraph:m=1,n=2", *flags]) == 0
    assert [int(r[0]) for r in table_rows(capsys.readouterr().out)] == sizes


def test_model_stepfactor_alone_not_ignored(capsys):
    assert cli.main(["model", "-t", "bigraph:m=1,n=2", "-f", "4"]) == 2
    assert "-f/--stepfactor needs -b and/or -e" in capsys.readouterr().err


def test_demo_file_is_the_demo():
    """experiments/demo.toml documents what `bigraph-emu demo` runs."""
    demo = load_experiment(os.path.join(REPO, "experiments", "demo.toml"))
    assert demo.runs == [make_run(cli.DEMO)]


# --- bad input: exit code 2, the key named on stderr -------------------------------------

@pytest.mark.parametrize("flags, words", [
    (["-m", "bogus"], ["mapping", "bogus"]),
    (["-c", "bogus"], ["collective", "bogus"]),
    (["-a", "bogus"], ["algorithm", "bogus"]),
    (["-p", "bogus"], ["policy", "bogus"]),
    (["--datapath", "bogus"], ["datapath", "bogus"]),
    (["-t", "bigraph:n=3"], ["n=3"]),
    (["-t", "torus:k=2"], ["topology", "torus"]),
    (["-b", "1X"], ["sizes", "1X"]),
    (["-b", "8M", "-e", "1M"], ["sizes"]),
    (["-b", "1M", "-e", "8M", "-f", "1"], ["sizes", "factor"]),
    (["-n", "0"], ["repetitions"]),
    (["-w", "-1"], ["warmup"]),
    (["--mtu", "100"], ["mtu"]),
    (["--ranks", "1.5"], ["ranks", "1.5"]),
    (["--ranks", "100"], ["100"]),
    (["--host-rate", "0"], ["host_rate_mbps"]),
    (["--host-queue", "x"], ["host_queue_packets"]),
    (["-t", "fattree:k=4", "-m", "hdrm"], ["hdrm"]),
])
def test_model_bad_flags(capsys, flags, words):
    rc = cli.main(["model", *flags])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.startswith("bigraph-emu: error: ")
    for w in words:
        assert w in err
    assert "Traceback" not in err
    assert table_rows(out) == []


def test_model_infinite_size_flag(capsys):
    assert cli.main(["model", "-b", "inf"]) == 2
    assert "sizes" in capsys.readouterr().err


def test_model_missing_experiment_file(capsys, tmp_path):
    path = str(tmp_path / "missing.toml")
    assert cli.main(["model", "--experiment", path]) == 2
    assert path in capsys.readouterr().err


def test_model_experiment_error_names_run(capsys, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[runs]]\nmapping = "naive"\n[[runs]]\nalgorithm = "bogus"\n')
    assert cli.main(["model", "--experiment", str(path)]) == 2
    err = capsys.readouterr().err
    assert "run 2" in err and "algorithm" in err


def test_unknown_command_and_flag_exit_2(capsys):
    for argv in (["bogus"], ["model", "--bogus-flag", "1"], []):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
    capsys.readouterr()


# --- network commands refuse non-root ------------------------------------------------------

@pytest.mark.skipif(os.geteuid() == 0, reason="runs as root: run/demo would build a real network")
@pytest.mark.parametrize("argv", [["run"], ["demo"], ["run", "-t", "bigraph:m=1,n=2"], ["cleanup"]])
def test_network_commands_need_root(capsys, argv):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and f"bigraph-emu {argv[0]}" in err


@pytest.mark.parametrize("argv", [["run"], ["demo"], ["cleanup"], ["run", "--experiment", EFLOPS]])
def test_network_commands_need_root_simulated(capsys, monkeypatch, no_network, argv):
    """The same check as a simulated non-root user, so it also runs as root."""
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and "'bigraph-emu model' runs without it" in err


def test_model_and_report_do_not_need_root(capsys, monkeypatch, no_network, tmp_path):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    assert cli.main(["model", "-t", "bigraph:m=1,n=2", "-b", "64K"]) == 0
    assert cli.main(["report", str(tmp_path)]) == 2          # no spec.json, but not "needs root"
    assert "needs root" not in capsys.readouterr().err


# --- report -------------------------------------------------------------------------------

def test_report_without_spec_json(capsys, tmp_path):
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "spec.json" in err


def test_report_with_broken_spec_json(capsys, tmp_path):
    (tmp_path / "spec.json").write_text("{not json")
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "spec.json" in capsys.readouterr().err


def fake_run_folder(folder, specs):
    """A results folder as `run` leaves it, with fabricated agent records."""
    with open(os.path.join(folder, "spec.json"), "w") as f:
        json.dump({"name": "t", "runs": [dataclasses.asdict(s) for s in specs]}, f)
    for spec in specs:
        plan = plan_run(spec)
        records = []
        for c in plan.calls:
            sched = plan.schedules[c.size_bytes]
            records.append([[{"start": 0.0, "end": 0.1 * (k + 1), "sent": sum(t.nbytes for t in st.sends),
                              "received": sum(t.nbytes for t in st.recvs)} for k, st in enumerate(steps)]
                            for steps in sched.steps])
        append_csv(os.path.join(folder, "collectives.csv"), COLLECTIVE_COLUMNS,
                   collective_rows(plan, wrap(records), "user"))


def test_report_rebuilds_files(capsys, tmp_path):
    specs = [make_run({"topology": "bigraph:m=1,n=4", "algorithm": a, "sizes": "8K:16K:2",
                       "repetitions": 1, "warmup": 0}) for a in ("ring", "halving-doubling")]
    fake_run_folder(str(tmp_path), specs)
    assert cli.main(["report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    summary = (tmp_path / "summary.txt").read_text()
    assert len(summary.splitlines()) == 1 + 2 * 2       # header + 2 runs x 2 sizes
    assert "halving-doubling" in summary and "ring" in summary
    assert summary.strip() in out                        # two runs: the summary is printed
    assert (tmp_path / "busbw.png").read_bytes()[:4] == b"\x89PNG"
    loads = (tmp_path / "link_loads.csv").read_text().splitlines()
    assert loads[0].startswith("topology,policy,algorithm,mapping,step")
    assert len(loads) > 1


# --- helpers of `run` that need no network ------------------------------------------------

def test_results_dir_refuses_folder_with_results(tmp_path):
    assert cli._results_dir(str(tmp_path), "x") == str(tmp_path)
    (tmp_path / "collectives.csv").write_text("topology\n")
    with pytest.raises(SpecError, match="already holds results"):
        cli._results_dir(str(tmp_path), "x")


def test_default_results_dir_named_after_experiment():
    path = cli._results_dir(None, "eflops")
    assert path.startswith("results" + os.sep) and path.endswith("-eflops")


def test_by_fabric_groups_consecutive_runs():
    plans = [plan_run(make_run(v)) for v in (
        {"algorithm": "ring", "sizes": "8K"}, {"algorithm": "halving-doubling", "sizes": "8K"},
        {"topology": "bigraph:m=1,n=4", "sizes": "8K"}, {"sizes": "8K", "mapping": "random"})]
    groups = cli._by_fabric(plans)
    assert [len(g) for g in groups] == [2, 1, 1]          # not consecutive: not merged
    assert all(p.spec.fabric_key() == g[0].spec.fabric_key() for g in groups for p in g)


def test_print_table_uses_median(capsys):
    run = {"topology": "bigraph:m=2,n=4", "policy": "shortest", "algorithm": "ring", "mapping": "naive",
           "host_rate_mbps": 50.0, "switch_rate_mbps": 50.0, "mtu": 9000, "label": "", "bytes_ok": True}
    rows = [{**run, "size_bytes": M, "time_s": t, "collective": "allreduce", "ranks": 8, "model_time_s": 0.2}
            for t in (0.1, 0.3, 0.2)]
    cli._print_table(rows)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("#") and "meas/model" in out[0]
    assert out[1].split() == ["1048576", "200.0", "41.94", "73.40", "200.0", "1.00"]


def test_demo_spec_is_valid():
    spec = make_run(cli.DEMO)
    assert spec.topology == "bigraph:m=2,n=4" and spec.sizes == (M, 2 * M, 4 * M)
    assert plan_run(spec).ranks == 8


def test_every_flag_maps_to_a_spec_key():
    keys = [key for _, key, _ in cli.FLAGS]
    assert len(keys) == len(set(keys))
    assert set(keys) | {"sizes"} == set(dataclasses.asdict(make_run({})))


def test_model_jitter_shows_hdrm_is_sensitive(capsys):
    """Flows up to 10% longer slow HDRM's lock-step exchanges more than ring's."""
    def ratios(algorithm, mapping):
        assert cli.main(["model", "-t", "bigraph:m=4,n=8", "-a", algorithm, "-m", mapping, "-b", "1M",
                         "--jitter", "0.1"]) == 0
        line = [l for l in capsys.readouterr().out.splitlines() if "longer at random" in l][0]
        return [float(x.rstrip("x")) for x in line.split(":")[1].split()]
    hd, ring = ratios("halving-doubling", "hdrm"), ratios("ring", "naive")
    assert all(1.0 <= r for r in hd + ring)
    assert min(hd) > max(ring)


def test_model_jitter_out_of_range(capsys):
    assert cli.main(["model", "--jitter", "-1"]) == 2
    assert "--jitter" in capsys.readouterr().err
