"""Unit tests of the command line (emulator/cli.py) that need no root and no
network: `model`, `report`, flag parsing and error reporting. Commands that
build a network (run, demo, cleanup) are only checked for refusing non-root."""
from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest

from emulator import exit_codes
from emulator import cli, flags, pipeline
from emulator import progress
from emulator import preflight
from emulator.plan.run_plan import plan_run
from emulator.results.calls import CallRecord, COLLECTIVE_COLUMNS, append_csv, collective_rows
from emulator.workloads.collectives import COLLECTIVES
from emulator.spec.experiment import SpecError, load_experiment, make_run

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
    """main() installs SIGTERM and SIGHUP handlers; give pytest its own back."""
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in old.items():
        signal.signal(s, handler)


@pytest.fixture
def no_network(monkeypatch):
    """Make sure no test here can start a real emulation, even as root."""
    def refuse(*_a, **_k):
        raise AssertionError("a network command ran in a unit test")
    for name in ("emulate", "interactive"):
        monkeypatch.setattr(pipeline, name, refuse)
    monkeypatch.setattr(cli, "cmd_clean", refuse)
    monkeypatch.setitem(cli.COMMANDS, "clean", refuse)
    monkeypatch.setitem(cli.COMMANDS, "cleanup", refuse)


def table_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]


def headers(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("# ") and " (model: " in line]


# --- model ---------------------------------------------------------------------------

def test_model_hd_hdrm_table(capsys):
    rc = cli.main(["model", "-t", "bigraph:m=4,n=8", "-a", "halving-doubling", "-m", "hdrm", "-b", "1M", "-e", "2M"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    hs = headers(out)
    assert len(hs) == 1
    assert "allreduce halving-doubling" in hs[0] and "mapping hdrm" in hs[0]
    assert "bigraph:m=4,n=8 (32 ranks)" in hs[0]
    assert "(model: TCP sharing measured with cubic, MTU 9000, a 100-packet queue: 2 flows" in hs[0]   # which model ran
    lines = out.splitlines()
    assert lines[1].split()[1:] == ["size", "time", "algbw", "busbw", "max", "flows", "on", "a", "link,", "per", "step"]
    assert lines[2].split() == ["#", "(B)", "(ms)", "(Mb/s)", "(Mb/s)"]          # nccl-tests' units row
    assert lines[-1].startswith("# Avg bus bandwidth    : ")
    rows = table_rows(out)
    assert [int(r[0]) for r in rows] == [M, 2 * M]
    assert float(lines[-1].split(":")[1]) == pytest.approx(sum(float(r[3]) for r in rows) / 2, abs=0.01)
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


def test_model_many_steps_print_a_histogram_and_go_to_the_csv(capsys, tmp_path):
    out_dir = tmp_path / "m"
    argv = ["model", "-t", "bigraph:m=4,n=8", "-a", "ring", "-m", "naive", "-b", "1M", "-e", "2M", "--out", str(out_dir)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert [r[4:] for r in rows] == [["62", "steps:", "1", "in", "62"]] * 2   # 2 x 31 ring steps, one flow each
    import csv
    with open(out_dir / "model_steps.csv") as f:
        steps = list(csv.DictReader(f))
    assert len(steps) == 2 * 62 and {s["size_bytes"] for s in steps} == {str(M), str(2 * M)}
    last = [float(s["end_s"]) for s in steps if s["size_bytes"] == str(M)][-1]
    assert last * 1e3 == pytest.approx(float(rows[0][1]), abs=0.1)      # the last step ends the call


def test_model_json_and_lockstep_said(capsys):
    argv = ["model", "-t", "bigraph:m=4,n=8", "-a", "halving-doubling", "-m", "hdrm", "-b", "1M", "--json"]
    assert cli.main(argv + ["--method", "lockstep"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["ranks"] == 32
    (size,) = run["sizes"]
    assert size["size_bytes"] == M and "lock-step" in size["approximation"]
    assert size["max_flows_per_step"] == {"1": 10}
    assert cli.main(argv + ["--method", "exact"]) == 0
    (exact,) = json.loads(capsys.readouterr().out)[0]["sizes"]
    assert exact["approximation"] == "" and exact["time_s"] == pytest.approx(size["time_s"], rel=1e-9)


def test_model_emulated_predicts_what_a_run_compares_with(capsys):
    argv = ["model", "-t", "bigraph:m=2,n=4", "-a", "halving-doubling", "-m", "hdrm", "-b", "64K", "-e", "4M"]
    assert cli.main(argv + ["--emulated"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# model's links: links burst 10 ms of their rate")
    emulated = {int(r[0]): float(r[1]) for r in table_rows(out)}
    assert cli.main(argv) == 0
    network = {int(r[0]): float(r[1]) for r in table_rows(capsys.readouterr().out)}
    run = preflight.plan_emulated(make_run({"topology": "bigraph:m=2,n=4", "algorithm": "halving-doubling",
                                           "mapping": "hdrm", "sizes": "64K:4M"}))
    assert emulated == {size: pytest.approx(p.time_s * 1e3, abs=0.05) for size, p in run.predictions.items()}
    assert emulated[64 << 10] < 0.8 * network[64 << 10]                         # 32 KB steps spend a burst
    assert emulated[4 << 20] == pytest.approx(network[4 << 20], rel=0.02)      # 2 MiB steps hardly


def test_model_progress_goes_to_stderr(capsys, monkeypatch):
    monkeypatch.setattr(cli._ModelProgress, "QUIET_S", 0.0)
    argv = ["model", "-t", "bigraph:m=4,n=8", "-a", "halving-doubling", "-b", "1M", "--method", "lockstep"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert "of steps started" in err and "of steps started" not in out


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
    assert len(hs) == 2 and all("allreduce halving-doubling" in h for h in hs)
    assert [int(r[0]) for r in table_rows(out)] == [64 << 10, 64 << 10]


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
    assert demo.runs == [make_run(run) for run in cli.DEMO]


# --- bad input: exit code 2, the key named on stderr -------------------------------------

@pytest.mark.parametrize("flags, words", [
    (["-m", "bogus"], ["mapping", "bogus"]),
    (["-c", "bogus"], ["collective", "bogus"]),
    (["-a", "bogus"], ["algorithm", "bogus"]),
    (["-p", "bogus"], ["policy", "bogus"]),
    (["--datapath", "bogus"], ["datapath", "bogus"]),
    (["-t", "bigraph:n=3"], ["n=3"]),
    (["-t", "hypercube:k=2"], ["topology", "hypercube"]),
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


@pytest.mark.parametrize("argv", [["run"], ["demo"], ["run", "--experiment", EFLOPS],
                                  ["compare", "--vary", "policy=shortest,ecmp"], ["cli"]])
def test_network_commands_need_root_simulated(capsys, monkeypatch, argv):
    """The same check as a simulated non-root user, so it also runs as root
    (emulate and interactive refuse: nothing can be built)."""
    def refuse(*_a, **_k):
        raise AssertionError("a network command ran in a unit test")
    monkeypatch.setattr(pipeline, "emulate", refuse)
    monkeypatch.setattr(pipeline, "interactive", refuse)
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "needs root" in err and "'bigraph-emu model' and 'bigraph-emu topo' run without it" in err
    assert f"bigraph-emu {argv[0]}" in err


@pytest.mark.parametrize("argv", [["clean"], ["cleanup"]])
def test_clean_needs_root_simulated(capsys, monkeypatch, argv):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    assert cli.main(argv) == 2
    assert f"'bigraph-emu {argv[0]}' needs root" in capsys.readouterr().err


@pytest.mark.parametrize("argv, key", [
    (["run", "-m", "bogus"], "mapping"),
    (["demo", "--out", "{full}"], "--out"),
    (["compare", "--vary", "policy=shortest,bogus"], "policy"),
    (["cli", "-t", "hypercube:k=2"], "topology"),
])
def test_bad_input_reported_before_needs_root(capsys, monkeypatch, no_network, tmp_path, argv, key):
    """A non-root user with bad input learns what is wrong with it first."""
    (tmp_path / "old.txt").write_text("x")
    argv = [a.replace("{full}", str(tmp_path)) for a in argv]
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert key in err and "needs root" not in err


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
    for i, spec in enumerate(specs):
        plan = dataclasses.replace(plan_run(spec), run=i)
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
    assert len(summary.splitlines()) == 2 + 2 * 2       # header, units + 2 runs x 2 sizes
    assert "halving-doubling" in summary and "ring" in summary
    assert summary.strip() in out                        # two runs: the summary is printed
    assert (tmp_path / "busbw.png").read_bytes()[:4] == b"\x89PNG"
    loads = (tmp_path / "link_loads.csv").read_text().splitlines()
    assert loads[0].startswith("topology,policy,algorithm,mapping,step")
    assert len(loads) > 1


# --- helpers of `run` that need no network ------------------------------------------------

def test_results_dir_refuses_folder_with_results(tmp_path):
    assert preflight.results_dir(str(tmp_path), "x") == str(tmp_path)          # empty: fine
    assert preflight.results_dir(str(tmp_path / "new"), "x") == str(tmp_path / "new")
    assert not (tmp_path / "new").exists()                                 # checked, not created
    (tmp_path / "collectives.csv").write_text("topology\n")
    with pytest.raises(SpecError, match="not empty"):
        preflight.results_dir(str(tmp_path), "x")


@pytest.mark.parametrize("name", ["notes.txt", "spec.json", ".hidden"])
def test_results_dir_refuses_any_non_empty_folder(tmp_path, name):
    (tmp_path / name).write_text("x")
    with pytest.raises(SpecError, match="--out"):
        preflight.results_dir(str(tmp_path), "x")


def test_results_dir_refuses_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(SpecError, match="not a folder"):
        preflight.results_dir(str(tmp_path / "f"), "x")


def test_default_results_dir_named_after_experiment():
    path = preflight.results_dir(None, "eflops")
    assert path.startswith("results" + os.sep) and path.endswith("-eflops")


def test_by_fabric_groups_consecutive_runs():
    plans = [plan_run(make_run(v)) for v in (
        {"algorithm": "ring", "sizes": "8K"}, {"algorithm": "halving-doubling", "sizes": "8K"},
        {"topology": "bigraph:m=1,n=4", "sizes": "8K"}, {"sizes": "8K", "mapping": "random"})]
    groups = pipeline.by_fabric(plans)
    assert [len(g) for g in groups] == [2, 1, 1]          # not consecutive: not merged
    assert all(p.spec.fabric_key() == g[0].spec.fabric_key() for g in groups for p in g)


def test_print_table_uses_median(capsys):
    run = {"topology": "bigraph:m=2,n=4", "policy": "shortest", "algorithm": "ring", "mapping": "naive",
           "host_rate_mbps": 50.0, "switch_rate_mbps": 50.0, "mtu": 9000, "label": "", "bytes_ok": True}
    rows = [{**run, "size_bytes": M, "time_s": t, "collective": "allreduce", "ranks": 8, "model_time_s": 0.2}
            for t in (0.1, 0.3, 0.2)]
    progress.print_table(rows)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("#") and "meas/model" in out[0] and out[1].split()[1:3] == ["(B)", "(ms)"]
    assert out[2].split() == ["1048576", "200.0", "41.94", "73.40", "200.0", "1.00"]
    assert out[3] == "# Avg bus bandwidth    : 73.4003"


def test_demo_compares_naive_and_hdrm_on_one_fabric():
    naive, hdrm = (make_run(run) for run in cli.DEMO)
    assert (naive.mapping, hdrm.mapping) == ("naive", "hdrm")
    assert naive.fabric_key() == hdrm.fabric_key()          # one network for both
    assert naive.sizes == (2 * M, 4 * M, 8 * M)
    slow, fast = plan_run(naive), plan_run(hdrm)
    assert max(slow.predictions[8 * M].max_flows_per_step) == 4
    assert max(fast.predictions[8 * M].max_flows_per_step) == 1


def test_every_flag_maps_to_a_spec_key():
    keys = [key for _, key, _ in flags.FLAGS]
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


# --- subcommands and their help ------------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "compare", "demo", "cli", "topo", "model", "report", "clean", "cleanup"])
def test_every_subcommand_has_help(capsys, command):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0
    assert "usage: bigraph-emu " + command.replace("cleanup", "clean") in capsys.readouterr().out


def test_top_level_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for command in ("run", "compare", "demo", "cli", "topo", "model", "report", "clean"):
        assert f"bigraph-emu {command}" in out


def test_run_compare_model_share_flags():
    sub = cli.parser()._subparsers._group_actions[0].choices
    flags = {name: {s for a in sub[name]._actions for s in a.option_strings} for name in ("run", "model", "compare")}
    # model shows no run, records no packets and spreads nothing over servers
    assert flags["run"] <= flags["model"] | {"--out", "--web", "--web-host", "--web-port", "--capture", "--servers",
                                             "--placement"}
    assert not {"--capture", "--servers", "--placement"} & flags["model"]
    assert flags["compare"] == flags["run"] | {"--vary"}


def test_new_flags_reach_the_spec():
    args = cli.parser().parse_args(["model", "--connections", "4", "--monitor-interval", "50", "--delay", "2",
                                     "--loss", "0.5", "--link-event", "1:bgs0-bgs2:down",
                                     "--link-event", "2:bgs2-bgs0:up"])
    spec = cli._experiment(args, check_kernel=False).runs[0]
    assert (spec.connections, spec.monitor_interval_ms, spec.link_delay_ms, spec.link_loss_pct) == (4, 50.0, 2.0, 0.5)
    assert [str(e) for e in spec.link_events] == ["1:bgs0-bgs2:down", "2:bgs2-bgs0:up"]


def test_bw_and_queue_set_both_tiers_and_yield_to_specific_flags():
    args = cli.parser().parse_args(["model", "--bw", "20", "--queue", "30", "--switch-rate", "40"])
    spec = cli._experiment(args).runs[0]
    assert (spec.host_rate_mbps, spec.switch_rate_mbps) == (20.0, 40.0)
    assert (spec.host_queue_packets, spec.switch_queue_packets) == (30, 30)


def test_model_ignores_missing_netem(capsys, monkeypatch):
    """The model needs no kernel: delay is accepted there even without netem."""
    monkeypatch.setattr("emulator.net.capabilities.netem_available", lambda: False)
    assert cli.main(["model", "-t", "bigraph:m=1,n=2", "-b", "64K", "--delay", "5"]) == 0
    assert "netem 5 ms" in capsys.readouterr().out


# --- progress ----------------------------------------------------------------------------

@pytest.mark.parametrize("done, total, elapsed, want", [
    (3, 12, 10.0, "[ 3/12] ring 1M ... ~30 s left"),
    (0, 12, 0.0, "[ 0/12] ring 1M ..."),
    (0, 12, 5.0, "[ 0/12] ring 1M ..."),
    (1, 4, 60.0, "[1/4] ring 1M ... ~3 min left"),
    (1, 3, 0.01, "[1/3] ring 1M ... ~1 s left"),
    (1, 101, 100.0, "[  1/101] ring 1M ... ~2 h 47 min left"),
    (12, 12, 95.0, "[12/12] ring 1M ... done in 95 s"),
])
def test_progress_line(done, total, elapsed, want):
    assert progress.progress_line(done, total, elapsed, "ring 1M") == want


def test_progress_line_time_left_shrinks():
    lefts = [progress.progress_line(d, 10, d * 30.0, "x") for d in range(1, 10)]
    assert lefts[0].endswith("~5 min left") and lefts[-1].endswith("~30 s left")


# --- topo ----------------------------------------------------------------------------------

def test_topo_bigraph(capsys, no_network):
    assert cli.main(["topo", "-t", "bigraph:m=2,n=4", "--bw", "10"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# bigraph:m=2,n=4: 4 switches, 8 hosts, 12 links")
    assert "upper switches: 2, 2 hosts each: bgs0 bgs1\n" in out
    assert "lower switches: 2, 2 hosts each: bgs2 bgs3\n" in out
    assert "hosts: bgh0 .. bgh7\n" in out
    assert "host links: 8 at 10 Mbit/s, queues 100 packets" in out
    assert "switch links: 4 at 10 Mbit/s" in out
    assert "(for --link-event): bgs0-bgs2 bgs0-bgs3 bgs1-bgs2 bgs1-bgs3\n" in out


def test_topo_fattree_tiers(capsys):
    assert cli.main(["topo", "-t", "fattree:k=4"]) == 0
    out = capsys.readouterr().out
    assert "20 switches, 16 hosts" in out
    assert "edge switches: 8, 2 hosts each" in out and "core switches: 4, no hosts:" in out
    assert "switch links: 32 at" in out


@pytest.mark.parametrize("src, dst", [("bgh0", "bgh7"), ("0", "7")])
def test_topo_path(capsys, src, dst):
    assert cli.main(["topo", "-t", "bigraph:m=2,n=4", "--path", src, dst]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    # bgh0 on upper bgs0, bgh7 on lower bgs3: one switch-switch hop
    assert line == "path bgh0 -> bgh7, policy shortest: bgh0:0 > bgs0:4 > bgs3:2 > bgh7  (2 switches; node:egress port)"


def test_topo_path_follows_the_routing_table(capsys):
    from emulator.routes.routing import forwarding_table, switch_path
    from emulator.fabric.topology import build
    fabric = build("fattree:k=4")
    for policy in ("shortest", "spread", "ecmp"):
        assert cli.main(["topo", "-t", "fattree:k=4", "-p", policy, "--path", "bgh0", "bgh15"]) == 0
        line = capsys.readouterr().out.splitlines()[-1]
        want = switch_path(fabric, forwarding_table(fabric, policy), "bgh0", "bgh15")
        got = [hop.split(":")[0] for hop in line.split(": ", 1)[1].split("  (")[0].split(" > ")][1:-1]
        assert got == want and len(want) == 5


@pytest.mark.parametrize("path, words", [(["bgh0", "bgh99"], ["--path", "bgh99"]), (["3", "3"], ["--path"]),
                                         (["x", "bgh1"], ["--path", "'x'"])])
def test_topo_bad_path(capsys, path, words):
    assert cli.main(["topo", "--path", *path]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words)


def test_topo_needs_no_root(capsys, monkeypatch, no_network):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    assert cli.main(["topo"]) == 0


# --- compare -----------------------------------------------------------------------------------

def compare_args(*argv):
    return cli.parser().parse_args(["compare", *argv])


def test_compare_one_run_per_value():
    exp = cli.compare_experiment(compare_args("--vary", "policy=shortest,ecmp", "-b", "64K"))
    assert exp.name == "compare-policy"
    assert [r.policy for r in exp.runs] == ["shortest", "ecmp"]
    assert [r.label for r in exp.runs] == ["policy=shortest", "policy=ecmp"]
    assert all(r.sizes == (64 << 10,) for r in exp.runs)


def test_compare_mapping_and_flag_names():
    exp = cli.compare_experiment(compare_args("--vary", "mapping=naive,hdrm", "--vary", "host-rate=10,20",
                                              "-a", "halving-doubling", "--label", "x"))
    assert [(r.mapping, r.host_rate_mbps) for r in exp.runs] == [("naive", 10), ("naive", 20), ("hdrm", 10), ("hdrm", 20)]
    assert exp.runs[-1].label == "x mapping=hdrm host_rate_mbps=20"
    assert all(r.algorithm == "halving-doubling" for r in exp.runs)


def test_compare_topologies_with_semicolons():
    exp = cli.compare_experiment(compare_args("--vary", "topology=bigraph:m=2,n=4;leafspine:leaves=4,spines=2,hosts=2"))
    assert [r.topology for r in exp.runs] == ["bigraph:m=2,n=4", "leafspine:leaves=4,spines=2,hosts=2"]


def test_compare_over_an_experiment_file():
    exp = cli.compare_experiment(compare_args("--experiment", EFLOPS, "--vary", "policy=shortest,ecmp"))
    assert len(exp.runs) == 12
    assert [r.policy for r in exp.runs] == ["shortest"] * 6 + ["ecmp"] * 6


@pytest.mark.parametrize("argv, words", [
    (["--vary", "policy"], ["--vary", "KEY=V1"]),
    (["--vary", "bogus=1,2"], ["--vary", "bogus"]),
    (["--vary", "policy="], ["--vary policy", "at least one value"]),
    (["--vary", "policy=shortest,bogus"], ["--vary policy=bogus", "policy", "bogus"]),
    (["--vary", "policy=shortest,ecmp", "-p", "spread"], ["policy", "twice"]),
    (["--vary", "mtu=1500,9000", "--vary", "mtu=576"], ["mtu", "twice"]),
    (["--vary", "seed=" + ",".join(map(str, range(9))), "--vary", "warmup=" + ",".join(map(str, range(9)))],
     ["at most"]),
])
def test_compare_bad_vary(capsys, no_network, argv, words):
    assert cli.main(["compare", *argv]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


def test_compare_calls_run_with_one_experiment(monkeypatch, no_network):
    seen = []
    monkeypatch.setattr(cli, "cmd_run", lambda args, experiment=None: seen.append(experiment) or 0)
    assert cli.main(["compare", "--vary", "algorithm=ring,halving-doubling"]) == 0
    assert [r.algorithm for r in seen[0].runs] == ["ring", "halving-doubling"]


# --- report of several folders ---------------------------------------------------------------

def test_report_several_folders_needs_results(capsys, tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    fake_run_folder(str(a), [make_run({"topology": "bigraph:m=1,n=4", "sizes": "8K", "repetitions": 1, "warmup": 0})])
    assert cli.main(["report", str(a), str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err


def test_report_several_folders_calls_report_compare(capsys, tmp_path, monkeypatch):
    from emulator.results import report
    folders = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        fake_run_folder(str(tmp_path / name), [make_run({"topology": "bigraph:m=1,n=4", "sizes": "8K",
                                                         "repetitions": 1, "warmup": 0})])
        folders.append(str(tmp_path / name))
    calls = []
    monkeypatch.setattr(report, "compare", lambda fs, specs: calls.append(("compare", list(fs))) or "DF",
                        raising=False)
    monkeypatch.setattr(report, "format_compare", lambda df: "TABLE " + df, raising=False)
    def plot_compare(df, path):   # writes a temporary file that replaces the plot when it is whole
        calls.append(("plot", path))
        open(path, "w").close()
    monkeypatch.setattr(report, "plot_compare", plot_compare, raising=False)
    plot = str(tmp_path / "cmp.png")
    assert cli.main(["report", *folders, "--plot", plot]) == 0
    out = capsys.readouterr().out
    assert "TABLE DF" in out and plot in out
    assert calls == [("compare", folders), ("plot", str(tmp_path / "cmp.partial.png"))] and os.path.exists(plot)
    assert cli.main(["report", *folders]) == 0          # default plot path: beside the folders
    assert calls[-1][1].startswith(str(tmp_path / "compare-")) and calls[-1][1].endswith(".partial.png")


def test_report_reads_new_keys_back(capsys, tmp_path, monkeypatch):
    """spec.json of a run with link events and delay is read back, also on a kernel without netem."""
    monkeypatch.setattr("emulator.net.capabilities.netem_available", lambda: True)
    spec = make_run({"topology": "bigraph:m=1,n=4", "sizes": "8K", "repetitions": 1, "warmup": 0,
                     "link_delay_ms": 1, "connections": 2, "link_events": ["0.5:bgs0-bgs2:down"]})
    fake_run_folder(str(tmp_path), [spec])
    monkeypatch.setattr("emulator.net.capabilities.netem_available", lambda: False)
    assert cli.main(["report", str(tmp_path)]) == 0
    runs = json.loads((tmp_path / "spec.json").read_text())["runs"]
    assert make_run(runs[0]) == spec
    assert (tmp_path / "summary.txt").read_text().strip() in capsys.readouterr().out   # one run: printed too


def test_topo_path_every_policy_on_bigraph(capsys):
    from emulator.routes.routing import POLICIES, forwarding_table, switch_path
    from emulator.fabric.topology import build
    fabric = build("bigraph:m=2,n=8")
    for policy in POLICIES:
        record = POLICIES[policy]   # traffic-aware: a workload's table; pxn: rail nodes; other families' own
        if policy == "traffic-aware" or record.needs_nodes or record.fabric_kind not in (None, "bigraph"):
            continue
        assert cli.main(["topo", "-t", "bigraph:m=2,n=8", "-p", policy, "--path", "bgh0", "bgh3"]) == 0, policy
        line = capsys.readouterr().out.splitlines()[-1]
        want = switch_path(fabric, forwarding_table(fabric, policy), "bgh0", "bgh3")
        got = [hop.split(":")[0] for hop in line.split(": ", 1)[1].split("  (")[0].split(" > ")][1:-1]
        assert got == want, policy


# --- cli: Mininet's CLI on the emulated network (faked here) -------------------------------------

def test_cli_command_opens_mininet_cli_on_the_network(monkeypatch, tmp_path, capsys):
    import sys
    import types
    seen, opened, exits = [], [], []

    class FakeEmulation:
        def __init__(self, plan, out):
            seen.append((plan.fabric.topology, plan.spec.policy, out))
            self.network = types.SimpleNamespace(interactive=lambda: opened.append("Mininet's CLI"))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            exits.append(exc)

    monkeypatch.setitem(sys.modules, "emulator.emulation", types.SimpleNamespace(Emulation=FakeEmulation))
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)
    out = str(tmp_path / "c")
    assert cli.main(["cli", "-t", "bigraph:m=1,n=2", "-p", "ecmp", "--out", out]) == 0
    assert seen == [("bigraph:m=1,n=2", "ecmp", out)]
    assert opened == ["Mininet's CLI"] and len(exits) == 1
    assert os.path.isdir(out)
    assert "Mininet CLI on bigraph:m=1,n=2" in capsys.readouterr().out


def test_progress_line_estimates_from_the_share_of_work_done():
    # one call of four done, but it was a tenth of the predicted work: 90 s left after 10 s
    assert progress.progress_line(1, 4, 10.0, "hdrm 8M", work_done=0.1).endswith("~90 s left")
    assert progress.progress_line(1, 4, 10.0, "hdrm 8M").endswith("~30 s left")


# --- errors name what the user typed ---------------------------------------------

@pytest.mark.parametrize("argv, start", [
    (["--queue", "1.5"], "--queue (host_queue_packets): "),
    (["--switch-queue", "1.5"], "--switch-queue (switch_queue_packets): "),
    (["--bw", "x"], "--bw (host_rate_mbps): "),
    (["-b", "1", "-e", "4G", "-f", "1.00000001"], "-b/-e/-f (sizes): "),
    (["-n", "2.0"], "-n/--repetitions (repetitions): "),
])
def test_an_error_names_the_flag_typed(capsys, argv, start):
    assert cli.main(["model", *argv]) == 2
    assert capsys.readouterr().err.startswith("bigraph-emu: error: " + start)


def test_an_error_in_an_experiment_names_the_flag_that_overrode_it(capsys, tmp_path):
    path = tmp_path / "e.toml"
    path.write_text("[defaults]\nrepetitions = 2\n")
    assert cli.main(["model", "--experiment", str(path), "--queue", "0"]) == 2
    assert f"{path}: run 1: --queue (host_queue_packets): must be" in capsys.readouterr().err


def test_an_error_does_not_echo_a_huge_input_whole(capsys):
    assert cli.main(["model", "-t", "bigraph:m=" + "9" * 100_000]) == 2
    err = capsys.readouterr().err
    assert len(err) < 1000 and "characters cut" in err and err.startswith("bigraph-emu: error: -t/--topology")


def test_a_closed_output_pipe_is_no_failure_of_model():
    """`bigraph-emu model ... | head -1`: no 'Broken pipe', exit 0."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", "model", "-b", "1M"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()   # before it writes its first line
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and err == "", err


def test_blame_flag_leaves_messages_about_other_keys_alone():
    assert cli.blame_flag("ranks: too many", {"topology": "-t"}) == "ranks: too many"
    assert cli.blame_flag("f.toml: run 2: mtu: 1", {"mtu": "--mtu"}) == "f.toml: run 2: --mtu (mtu): 1"


# --- a run the model predicts to be long asks first ----------------------------

@pytest.fixture
def non_root_userspace(monkeypatch, no_network):
    """A non-root user on a machine without the kernel datapath (no modprobe, no ovs-vsctl)."""
    from emulator.net import dataplane
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(dataplane, "_module_loaded", lambda name: False)
    monkeypatch.setattr(dataplane, "_try_modprobe", lambda name: False)


def test_a_run_longer_than_an_hour_stops_before_the_root_check(capsys, tmp_path, non_root_userspace):
    out = tmp_path / "out"
    assert cli.main(["run", "-n", "1000", "-b", "4G", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "# the model predicts" in captured.out and "--yes" in captured.err
    assert "needs root" not in captured.err and not out.exists()


def test_yes_lets_a_long_run_go_on_to_the_root_check(capsys, tmp_path, non_root_userspace):
    assert cli.main(["run", "-n", "1000", "-b", "4G", "--yes", "--out", str(tmp_path / "out")]) == 2
    assert "needs root" in capsys.readouterr().err


def test_yes_in_the_experiment_file(capsys, tmp_path, non_root_userspace):
    path = tmp_path / "long.toml"
    path.write_text('yes = true\n[defaults]\nrepetitions = 1000\nsizes = ["4G"]\n')
    assert cli.main(["run", "--experiment", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "needs root" in capsys.readouterr().err
    path.write_text('yes = "sure"\n[defaults]\n')
    assert cli.main(["run", "--experiment", str(path)]) == 2
    assert "yes must be true or false" in capsys.readouterr().err


def test_every_run_prints_its_predicted_total_first(capsys, tmp_path, non_root_userspace):
    """A short run: the total (the model's calls, warm-ups included) and then the root check."""
    from emulator.plan.run_plan import plan_run
    spec = make_run({"sizes": ["1M"]})
    want = progress.duration(sum(plan_run(spec).predictions[c.size_bytes].time_s for c in plan_run(spec).calls))
    assert cli.main(["run", "-b", "1M", "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert f"# the model predicts {want} of calls (3 calls" in captured.out and "needs root" in captured.err


def test_announce_duration_limit_is_the_one_constant(capsys):
    from emulator.plan.run_plan import plan_run
    plan = plan_run(make_run({"sizes": ["1M"], "repetitions": 1, "warmup": 0}))
    total = plan.predictions[1 << 20].time_s
    preflight.announce_duration([plan], yes=False)                       # well below an hour
    with pytest.raises(SpecError, match="more than"):
        preflight.announce_duration([plan] * (int(preflight.MAX_UNASKED_S / total) + 1), yes=False)
    preflight.announce_duration([plan] * (int(preflight.MAX_UNASKED_S / total) + 1), yes=True)


# --- exit codes, --version, --help, --json ---------------------------------------------------

def test_the_readme_tables_every_exit_code():
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    table = text[text.index("| code | meaning |"):].split("\n\n")[0].splitlines()[2:]
    rows = [line.split("|")[1].strip() for line in table]
    assert rows == [str(code) for code in sorted(exit_codes.MEANINGS)]
    assert len(set(exit_codes.MEANINGS)) == 6 and exit_codes.UNTRUSTED not in (0, 1, 2, 130)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("bigraph-emu ")


@pytest.mark.parametrize("command", ["run", "compare", "demo", "cli", "topo", "model", "report", "calibrate", "clean"])
def test_every_subcommands_help_shows_an_example(capsys, command):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    examples = out[out.index("\nexample"):].strip().splitlines()[1:]
    assert examples and all(line.startswith(f"  bigraph-emu {command}") for line in examples), out


def test_run_help_shows_each_flags_default_and_choices(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())   # argparse wraps lines
    out = out[out.index("options:"):]
    for flag, default in (("--repetitions N", "default 2"), ("--warmup N", "default 1"), ("--mtu BYTES", "default 9000"),
                          ("--minbytes SIZE", "default 1M"), ("--maxbytes SIZE", "default 4M"),
                          ("--policy POLICY", "default shortest"), ("--host-rate MBPS", "default 50")):
        assert default in out[out.index(flag):out.index(flag) + 300], flag
    assert "naive, round-robin, random, hdrm" in out and "shortest, spread, ecmp" in out


def test_topo_json_is_the_fabric_and_the_route(capsys):
    assert cli.main(["topo", "-t", "bigraph:m=2,n=4", "--path", "0", "7", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["topology"] == "bigraph:m=2,n=4" and len(doc["hosts"]) == 8 and doc["tiers"]["upper"] == ["bgs0", "bgs1"]
    assert len(doc["links"]) == 8 + 4 and "bgs0-bgs2" in doc["switch_links"]
    assert doc["path"]["src"] == "bgh0" and doc["path"]["dst"] == "bgh7"
    assert cli.main(["topo", "-t", "bigraph:m=2,n=4", "--path", "0", "7"]) == 0
    text = capsys.readouterr().out
    hops = " > ".join(f"{h['node']}:{h['port']}" for h in doc["path"]["hops"])
    assert f"{hops} > bgh7" in text


def test_a_run_whose_calls_fail_the_verdict_exits_3_and_json_says_so(capsys, tmp_path, monkeypatch):
    """The pipeline for real with a stand-in for the network whose machine
    was too busy: the run finishes (results renamed in place) with exit code
    3, its summary as JSON on stdout and everything else on stderr."""
    import emulator.emulation
    from webtools import FakeEmulation

    class BusyMachine(FakeEmulation):
        def replay(self, plan, on_call):
            def busy(call, record):
                record.counters["cpu_busy"] = 0.95
                on_call(call, record)
            super().replay(plan, busy)

    monkeypatch.setattr(emulator.emulation, "Emulation", BusyMachine)
    monkeypatch.setattr(preflight, "capacity_checks", lambda plans: [])
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)
    out = str(tmp_path / "out")
    argv = ["run", "-t", "bigraph:m=1,n=4", "-b", "8K", "-e", "16K", "-n", "2", "-w", "0", "--out", out]
    assert cli.main([*argv, "--json"]) == exit_codes.UNTRUSTED
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["folder"] == out and summary["exit_code"] == 3 and "fidelity verdict" in summary["exit"]
    assert [(r["size_bytes"], r["reps"], r["fidelity_ok"]) for r in summary["collectives"]] == [(8192, 2, 0), (16384, 2, 0)]
    assert summary["jobs"] == [] and summary["collectives"][0]["busbw_mbps"] > 0
    assert "4 of 4 counted calls failed the fidelity verdict" in captured.err and os.path.isdir(out)
    monkeypatch.setattr(emulator.emulation, "Emulation", FakeEmulation)   # a quiet machine: all ok
    assert cli.main([*argv[:-1], out + "-2"]) == exit_codes.OK
    assert "# results:" in capsys.readouterr().out


def test_a_capture_without_tcpdump_is_refused_before_the_root_check(capsys, tmp_path, non_root_userspace, monkeypatch):
    monkeypatch.setattr(pipeline.shutil, "which", lambda name: None)
    out = tmp_path / "out"
    assert cli.main(["run", "-b", "1M", "--capture", "bgs0-bgs2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "capture" in err and "tcpdump" in err and "needs root" not in err and not out.exists()


def test_calibrate_says_how_runs_read_a_file_other_than_the_one_they_look_up(monkeypatch, tmp_path):
    from emulator.plan import capacity
    looked_up, other = tmp_path / "machine.json", tmp_path / "elsewhere.json"
    monkeypatch.setenv(capacity.ENV_FILE, str(looked_up))
    assert cli._reading(str(looked_up)) == ""
    assert cli._reading(str(other)) == f" given {capacity.ENV_FILE}={other}"


def test_model_says_which_algorithm_auto_picked_for_each_size(capsys):
    from emulator.workloads.schedule import chosen_algorithm
    assert cli.main(["model", "-t", "fattree:k=4", "-a", "auto", "-b", "4K", "-e", "16M", "-f", "64"]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("#   auto picked ")]
    assert said == [f"#   auto picked {chosen_algorithm('allreduce', 'auto', 16, size)}" for size in (4096, 1 << 18, 1 << 24)]
    assert {line.split()[-1] for line in said} <= {"ring", "tree"}
    assert cli.main(["model", "-a", "ring", "-b", "4K", "-e", "4K"]) == 0
    assert "picked" not in capsys.readouterr().out   # an algorithm that picks nothing says nothing


def test_model_out_refuses_a_folder_that_holds_an_earlier_prediction(tmp_path, capsys):
    out = str(tmp_path / "m")
    assert cli.main(["model", "-b", "64K", "-e", "64K", "--out", out]) == 0
    before = (tmp_path / "m" / "model_steps.csv").read_text()
    assert cli.main(["model", "-a", "halving-doubling", "-b", "64K", "-e", "64K", "--out", out]) == 2
    assert f"--out {out} is not empty (it holds model_steps.csv, trace.json)" in capsys.readouterr().err
    assert (tmp_path / "m" / "model_steps.csv").read_text() == before


def test_model_out_refuses_a_folder_of_other_files_as_run_does(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("mine")
    assert cli.main(["model", "-b", "64K", "-e", "64K", "--out", str(tmp_path / "m")]) == 2
    assert "is not empty (it holds notes.txt)" in capsys.readouterr().err
    assert os.listdir(tmp_path / "m") == ["notes.txt"]
    (tmp_path / "e").mkdir()   # an empty folder is taken, as by run
    assert cli.main(["model", "-b", "64K", "-e", "64K", "--out", str(tmp_path / "e")]) == 0
