"""Sweep files (pure): expansion, what is refused and what is left out,
the points' keys, [confirm], and what the table says."""
from __future__ import annotations

import os

import pytest

from emulator.results import sweeps
from emulator.spec.experiment import SpecError
from emulator.spec.sweep import MAX_UNASKED_POINTS, confirm_spec, load_sweep

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
GRID = """
name = "t"
[defaults]
sizes = ["1M", "4M"]
[grid]
topology = ["bigraph:m=2,n=4", "fattree:k=4"]
policy = ["shortest", "bigraph"]
mapping = ["naive", "hdrm"]
"""


def sweep_file(tmp_path, text: str) -> str:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return str(path)


def test_every_combination_is_a_point_and_what_a_fabric_cannot_take_is_left_out_with_why(tmp_path):
    s = load_sweep(sweep_file(tmp_path, GRID))
    labels = [p.label for p in s.points]
    assert len(labels) == 5 and len(s.skipped) == 3
    assert "topology=bigraph:m=2,n=4 policy=bigraph mapping=hdrm" in labels
    assert "topology=fattree:k=4 policy=shortest mapping=naive" in labels
    reasons = dict(s.skip_reasons())
    assert reasons[next(r for r in reasons if r.startswith("policy: 'bigraph' routes bigraph"))] == 2
    assert any(r.startswith("mapping: rank mapping 'hdrm'") for r in reasons)
    assert s.factors == ["topology", "policy", "mapping"]
    assert all(p.spec.sizes == (1 << 20, 4 << 20) for p in s.points)
    assert [p.index for p in s.points] == list(range(5))


def test_explicit_points_come_after_the_grid_and_a_repeated_run_is_one_point(tmp_path):
    text = GRID + '[[points]]\ntopology = "leafspine:leaves=2,spines=1,hosts=2"\n' \
                  '[[points]]\ntopology = "fattree:k=4"\npolicy = "shortest"\nmapping = "naive"\n'
    s = load_sweep(sweep_file(tmp_path, text))
    assert s.points[5].spec.topology == "leafspine:leaves=2,spines=1,hosts=2"
    assert len(s.points) == 6   # the second [[points]] is a grid point already
    assert len({p.key for p in s.points}) == 6


@pytest.mark.parametrize("text, words", [
    (GRID + "colour = ['red']\n", ["grid: colour", "unknown key colour"]),
    (GRID.replace('mapping = ["naive", "hdrm"]', 'mapping = ["naive", "hdmr"]'), ["grid: mapping = 'hdmr'",
                                                                                    "mapping: 'hdmr' is not one of"]),
    (GRID.replace('mapping = ["naive", "hdrm"]', "mapping = []"), ["grid: mapping", "non-empty list"]),
    (GRID + "[[points]]\nranks = -3\n", ["point 1", "ranks: must be 0 or more"]),
    (GRID.replace('sizes = ["1M", "4M"]', 'sizes = ["1Q"]'), ["defaults", "sizes"]),
    (GRID.replace('"fattree:k=4"', '"fattree:k=5"'), ["grid: topology = 'fattree:k=5'", "topology:"]),
    ("[defaults]\nsizes = ['1M']\n", ["nothing to sweep"]),
    ("name = 'x'\nruns = []\n[grid]\nseed = [1, 2]\n", ["unknown top-level key(s) runs"]),
    (GRID.replace("[grid]", "[grid]\nseed = [1, 2]").replace('"fattree:k=4"', '"fattree:k=6"')
     + "[confirm]\ntopology = { 'fattree:k=6' = 'fattree:k=3' }\n", ["confirm: topology", "fattree"]),
])
def test_a_point_wrong_in_itself_is_refused_naming_the_point_and_the_key(tmp_path, text, words):
    with pytest.raises(SpecError) as e:
        load_sweep(sweep_file(tmp_path, text))
    for word in words:
        assert word in str(e.value)


def test_a_sweep_every_point_of_which_is_left_out_is_refused_with_the_reasons(tmp_path):
    text = "[defaults]\ntopology = 'fattree:k=4'\n[grid]\nmapping = ['hdrm']\npolicy = ['bigraph', 'shortest']\n"
    with pytest.raises(SpecError, match="every point was left out: .*(policy|mapping)"):
        load_sweep(sweep_file(tmp_path, text))


def test_a_huge_grid_needs_yes_and_a_giant_one_is_refused_before_expanding(tmp_path):
    big = "[grid]\nseed = [%s]\nmodel_alpha_us = [%s]\n" % (
        ", ".join(str(i) for i in range(1, 202)), ", ".join(str(i) for i in range(1, 52)))
    with pytest.raises(SpecError, match=f"10,251 points, more than {MAX_UNASKED_POINTS:,}: give --yes"):
        load_sweep(sweep_file(tmp_path, big))
    giant = "[grid]\nseed = [%s]\nmodel_alpha_us = [%s]\nrepetitions = [%s]\n" % tuple(
        ", ".join(str(i) for i in range(1, n)) for n in (1001, 101, 101))
    with pytest.raises(SpecError, match="10,000,000 points; at most 1,000,000"):
        load_sweep(sweep_file(tmp_path, giant), yes=True)


def test_a_points_key_is_its_resolved_spec_not_how_it_was_written(tmp_path):
    a = load_sweep(sweep_file(tmp_path, "[grid]\nsizes = [['1M', '2M']]\n")).points[0]
    b = load_sweep(sweep_file(tmp_path, "[grid]\nsizes = ['1M:2M:2']\n")).points[0]
    c = load_sweep(sweep_file(tmp_path, "[grid]\nsizes = ['1M:4M:2']\n")).points[0]
    assert a.key == b.key != c.key


def test_confirm_puts_its_keys_and_its_topology_in_place_of_the_points(tmp_path):
    text = GRID + "[confirm]\nsizes = ['256K']\nrepetitions = 1\n" \
                  "topology = { 'bigraph:m=2,n=4' = 'bigraph:m=2,n=2' }\n"
    s = load_sweep(sweep_file(tmp_path, text))
    on_bigraph = next(p for p in s.points if p.spec.topology.startswith("bigraph") and p.spec.mapping == "hdrm")
    emulated = confirm_spec(on_bigraph, s.confirm)
    assert (emulated.topology, emulated.sizes, emulated.repetitions, emulated.mapping, emulated.policy) == \
        ("bigraph:m=2,n=2", (256 << 10,), 1, "hdrm", on_bigraph.spec.policy)
    on_fattree = next(p for p in s.points if p.spec.topology == "fattree:k=4")
    assert confirm_spec(on_fattree, s.confirm).topology == "fattree:k=4"   # not named: emulated as it is


def test_a_workload_is_found_beside_the_sweep_file(tmp_path):
    (tmp_path / "w.toml").write_text('[[job]]\nname = "a"\nranks = 4\niterations = 1\n'
                                     'ops = [{op = "allreduce", bytes = "1M"}]\n')
    s = load_sweep(sweep_file(tmp_path, "[grid]\nworkload = ['w.toml']\nmapping = ['naive', 'hdrm']\n"))
    assert s.points[0].spec.workload == str(tmp_path / "w.toml")


# --- what the table says ---------------------------------------------------------------

def rows(times: dict) -> list[dict]:
    return [{"point": str(i + 1), "key": f"k{i}", "size_bytes": "1", "model_time_s": str(t), "emulated": "",
             "emulated_time_s": "", "a": a, "b": b} for i, ((a, b), t) in enumerate(times.items())]


def test_the_factor_that_moves_the_time_most_comes_first():
    table = rows({("x", "p"): 1.0, ("x", "q"): 1.1, ("y", "p"): 4.0, ("y", "q"): 4.4})
    effects = sweeps.factor_effects(table, ["a", "b"])
    assert [(f, round(e, 6), n) for f, e, n in effects] == [("a", 4.0, 2), ("b", 1.1, 2)]
    best, worst = sweeps.best_and_worst(table, 1)["1"]
    assert (best[0]["a"], best[0]["b"], worst[0]["a"], worst[0]["b"]) == ("x", "p", "y", "q")


def test_order_agreement_counts_pairs_in_the_same_order():
    assert sweeps.order_agreement([(1, 10), (2, 20), (3, 30)]) == (3, 3)
    assert sweeps.order_agreement([(1, 10), (2, 30), (3, 20)]) == (2, 3)


def test_routes_shared_between_points_predict_what_fresh_routes_do():
    """Points that differ in rates, overrides, placement or algorithm share
    their topology's routes; every prediction equals one made from scratch."""
    from emulator.plan.predictions import sweep_prediction
    from emulator.plan.run_plan import SharedRoutes
    from emulator.spec.experiment import make_run
    shared = SharedRoutes(size=2)
    for topology, policy in [("bigraph:m=4,n=8", "spread"), ("fattree:k=4", "valiant"), ("fattree:k=4", "ecmp")]:
        for values in [{"switch_rate_mbps": 10}, {"switch_rate_mbps": 40, "mapping": "random"},
                       {"link_overrides": ["bgs0-bgs4:5" if topology.startswith("bigraph") else "bgh1:5"],
                        "algorithm": "halving-doubling"}]:
            spec = make_run({"topology": topology, "policy": policy, "sizes": ["1M", "8M"], **values})
            got = sweep_prediction(spec, shared=shared, steps=False)
            assert got["sizes"] == sweep_prediction(spec, steps=False)["sizes"], (topology, policy, values)


def test_a_workload_point_is_one_row_its_makespan_and_each_jobs_slowdown(tmp_path):
    from emulator.plan.predictions import workload_prediction
    from emulator.sweep.points import model_point
    workload = os.path.join(REPO, "experiments", "workloads", "two-tenants.toml")
    s = load_sweep(sweep_file(tmp_path, f"[defaults]\ntopology = 'bigraph:m=2,n=4'\n[grid]\n"
                                        f"workload = ['{workload}']\nmapping = ['naive', 'hdrm']\n"))
    for point in s.points:
        (row,) = model_point(point, {"version": "v", "model_version": "m"})
        jobs = workload_prediction(point.spec)["jobs"]
        assert float(row["model_time_s"]) == max(j["end_s"] for j in jobs) and "error" not in row
        slowdowns = dict(part.split(":") for part in row["job_slowdowns"].split(";"))
        assert set(slowdowns) == {j["job"] for j in jobs} and all(float(v) >= 1 for v in slowdowns.values())
        assert (row["version"], row["model_version"], row["point"]) == ("v", "m", point.index + 1)


def test_a_point_the_model_cannot_take_is_a_row_with_its_error():
    from emulator.spec.sweep import Point
    from emulator.spec.experiment import make_run
    from emulator.sweep.points import model_point
    import dataclasses
    spec = dataclasses.replace(make_run({}), algorithm="no-such-algorithm")   # past the checks, as a bug would be
    (row,) = model_point(Point(0, {"algorithm": "no-such-algorithm"}, spec), {})
    assert "no-such-algorithm" in row["error"] and "model_time_s" not in row


def test_a_refused_run_names_the_process_that_holds_the_machine_and_a_lent_lock_is_held(tmp_path, monkeypatch):
    """The lock in a folder of the test's own: a real run elsewhere on this machine is never touched."""
    import subprocess
    import sys
    from emulator.net import processes
    monkeypatch.setattr(processes, "STATE_DIR", str(tmp_path))
    monkeypatch.setattr(processes, "LOCK_FILE", str(tmp_path / "lock"))
    with processes.RunLock() as held:
        with pytest.raises(processes.MachineBusy, match=rf"holds this machine: process {os.getpid()} \(.*, since "):
            processes.RunLock().__enter__()
        child = ("import sys; sys.path.insert(0, sys.argv[1]); from emulator.net import processes as p; "
                 f"p.STATE_DIR, p.LOCK_FILE = {str(tmp_path)!r}, {str(tmp_path / 'lock')!r}; "
                 "lock = p.RunLock().__enter__(); print('held')")
        got = subprocess.run([sys.executable, "-c", child, REPO], capture_output=True, text=True, **held.lend())
        assert got.stdout.strip() == "held", got.stderr   # the lent lock, taken through the same open file
        env = {k: v for k, v in os.environ.items() if k != processes.LENT_LOCK_ENV}
        refused = subprocess.run([sys.executable, "-c", child, REPO], capture_output=True, text=True, env=env)
        assert "MachineBusy" in refused.stderr and "holds this machine: process" in refused.stderr


def test_a_sweep_of_one_factor_says_why_it_has_no_sweep_png(tmp_path, capsys):
    from emulator import cli
    path = sweep_file(tmp_path, 'name = "one"\n[defaults]\nsizes = ["1M"]\n[grid]\nmapping = ["naive", "hdrm"]\n')
    out = str(tmp_path / "out")
    assert cli.main(["sweep", path, "--workers", "1", "--out", out]) == 0
    said = capsys.readouterr().out
    assert "# no sweep.png: it draws the time over two factors besides the topology, and this sweep varies 1" in said
    assert not os.path.exists(os.path.join(out, "sweep.png"))


def _confirm_rows(emulated_topology: str, emulated_size: str) -> list[dict]:
    """Three points modelled on a 32-host BiGraph at 64 MiB, emulated as given."""
    rows = []
    for key, model_s, measured_s in (("a", 1.0, 0.30), ("b", 2.0, 0.20), ("c", 3.0, 0.40)):
        rows.append({"key": key, "topology": "bigraph:m=4,n=8", "size_bytes": str(64 << 20), "emulated": "",
                     "model_time_s": str(model_s), "emulated_time_s": "", "verdict": ""})
        rows.append({"key": key, "topology": emulated_topology, "size_bytes": emulated_size, "emulated": "yes",
                     "model_time_s": str(measured_s * 1.05), "emulated_time_s": str(measured_s), "verdict": "ok"})
    return rows


def test_confirm_says_which_fabric_each_side_of_the_order_is():
    from emulator.sweep.run import confirm_text
    smaller = confirm_text(_confirm_rows("bigraph:m=2,n=4", str(1 << 20)))
    assert "model: the points as swept (bigraph:m=4,n=8 at 64M)" in smaller
    assert "measured: [confirm]'s fabric and size (bigraph:m=2,n=4 at 1M)" in smaller
    assert "differs from the model's (2 of 3 pairs" in smaller
    assert "whose own model orders them as measured (3 of 3 pairs)" in smaller
    same = confirm_text(_confirm_rows("bigraph:m=4,n=8", str(64 << 20)))
    assert same.endswith("measured: the same fabric and size") and "[confirm]" not in same
