"""Unit tests of re-judging a results folder's network verdicts
(emulator/results/rejudge.py, `bigraph-emu report`): verdicts written before
network verdicts were held to what TCP's measured sharing and the counted
timeouts explain are held to it, and verdict_changes.csv lists the changes."""
from __future__ import annotations

import csv
import dataclasses
import json
import os

import pytest

from emulator import cli
from emulator.plan import capacity
from emulator.plan.run_plan import plan_run
from emulator.results.calls import CallRecord, write_call
from emulator.results.rejudge import CHANGES, rejudge_folder
from emulator.spec.experiment import make_run

TWO_TENANTS = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "workloads", "two-tenants.toml")
OLD_LOSSY = ("network: {x:.2f}x max-min sharing: TCP recovered from 120 queue drops with up to 4 flows on a link; "
             "the machine kept up")


@pytest.fixture(autouse=True)
def reference_calibration(tmp_path, monkeypatch):
    """No machine's calibration: the reference machine's factors."""
    monkeypatch.setenv(capacity.ENV_FILE, str(tmp_path / "none.json"))


def as_modelled(plan, key: int, stretch: float = 1.0) -> list[list[dict]]:
    """Step records ending where the model's steps end, times `stretch`."""
    ends = plan.predictions[key].step_end_s
    return [[{"start": stretch * (ends[r][k - 1] if k else 0.0), "end": stretch * ends[r][k],
              "sent": sum(t.nbytes for t in s.sends), "received": sum(t.nbytes for t in s.recvs)}
             for k, s in enumerate(plan.schedules[key].steps[r])] for r in range(plan.ranks)]


def folder_of(path, plan) -> str:
    """A results folder of one run, every call as modelled (verdict ok)."""
    os.makedirs(path)
    with open(os.path.join(path, "spec.json"), "w") as f:
        json.dump({"name": "t", "runs": [dataclasses.asdict(plan.spec)]}, f)
    for call in plan.calls:
        write_call(str(path), plan, call, CallRecord(as_modelled(plan, call.size_bytes), {}), "user")
    return str(path)


def read(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def rewrite(path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_report_holds_a_folders_old_network_verdicts_to_the_bound_and_lists_the_changes(tmp_path, capsys):
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "algorithm": "halving-doubling", "sizes": ["64K"],
                              "repetitions": 4, "warmup": 0, "tcp": "bbr", "mtu": 1500}))
    folder = folder_of(tmp_path / "res", plan)
    table = os.path.join(folder, "collectives.csv")
    rows = read(table)
    model = float(rows[0]["model_time_s"])
    # as an older run wrote them: two network verdicts at any ratio, an ok and a failure
    for row, x, timeouts in zip(rows, (3.6, 1.1 + 0.2 / model, 1.0, 1.3), ("", "1", "", "")):
        row["time_s"], row["tcp_timeouts"] = repr(x * model), timeouts
    rows[0]["fidelity"], rows[1]["fidelity"] = OLD_LOSSY.format(x=3.6), OLD_LOSSY.format(x=1.1 + 0.2 / model)
    rows[3]["fidelity"] = "FAIL: 1.30x the model"
    rewrite(table, rows)
    before = read(table)

    assert cli.main(["report", folder]) == 0
    out = capsys.readouterr().out
    assert f"# re-judged 2 network verdict(s) against what TCP's measured sharing and the counted retransmission " \
           f"timeouts explain: 2 changed, 1 of them now failed (listed in {os.path.join(folder, CHANGES)})" in out.splitlines()
    after = read(table)
    flows = plan.predictions[65536].most_flows_on_a_link
    factor = capacity.network_bound(plan.spec, capacity.REFERENCE).factor(flows)
    left = 3.6 * model - model * factor * 1.15
    assert after[0]["fidelity"].startswith(f"FAIL: network: 3.60x, sharing explains {factor * 1.15:.2f}x")
    assert after[0]["fidelity"].endswith(f"no timeouts counted: {left:.3g} s unexplained ({before[0]['fidelity'][9:]})")
    # 1.1x and one timeout's 0.2 s: explained, and said
    assert after[1]["fidelity"].startswith(before[1]["fidelity"] + "; within what was measured: sharing explains ")
    assert [r["fidelity"] for r in after[2:]] == ["ok", "FAIL: 1.30x the model"]
    assert [{k: v for k, v in r.items() if k != "fidelity"} for r in after] == \
        [{k: v for k, v in r.items() if k != "fidelity"} for r in before]     # every other field as written
    assert read(os.path.join(folder, CHANGES)) == [
        {"call": f"run 0 bigraph:m=2,n=4 allreduce halving-doubling 65536 B repetition {i}", "old_verdict": before[i]["fidelity"],
         "new_verdict": after[i]["fidelity"]} for i in (0, 1)]
    assert "2/4 ok" in (tmp_path / "res" / "summary.txt").read_text()   # the summary counts the new verdicts

    # judged once: the report again finds nothing to re-judge
    assert rejudge_folder(folder, [plan], capacity.REFERENCE) == (0, [])


def test_an_old_verdict_within_the_bound_stays_trusted_and_says_so(tmp_path):
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "algorithm": "halving-doubling", "sizes": ["64K"],
                              "repetitions": 1, "warmup": 0, "tcp": "bbr", "mtu": 1500}))
    folder = folder_of(tmp_path / "res", plan)
    table = os.path.join(folder, "collectives.csv")
    rows = read(table)
    rows[0]["time_s"] = repr(1.16 * float(rows[0]["model_time_s"]))
    rows[0]["fidelity"] = OLD_LOSSY.format(x=1.16)
    rewrite(table, rows)
    judged, changes = rejudge_folder(folder, [plan], capacity.REFERENCE)
    (row,) = read(table)
    assert judged == 1 and changes == [{"call": "run 0 bigraph:m=2,n=4 allreduce halving-doubling 65536 B repetition 0",
                                        "old_verdict": OLD_LOSSY.format(x=1.16), "new_verdict": row["fidelity"]}]
    assert row["fidelity"] == OLD_LOSSY.format(x=1.16) + (
        "; within what was measured: sharing explains 1.20x (1.05x for 4 flows, bbr MTU 1500 100-packet queue) "
        "and no timeouts counted")


def test_report_re_judges_jobs_out_of_step(tmp_path):
    spec = make_run({"workload": TWO_TENANTS, "repetitions": 1, "warmup": 0})
    plan = plan_run(spec)
    folder = folder_of(tmp_path / "res", plan)
    table = os.path.join(folder, "jobs.csv")
    rows = read(table)
    old = ("network: 1.39x max-min sharing: jobs out of step: TCP gave the jobs sharing its links unequal shares, "
           "and the whole workload took 1.02x its model; the machine kept up")
    rows[0]["time_s"], rows[0]["fidelity"] = repr(1.39 * float(rows[0]["model_time_s"])), old
    rows[1]["time_s"], rows[1]["fidelity"] = repr(0.53 * float(rows[1]["model_time_s"])), old.replace("1.39", "0.53")
    rewrite(table, rows)
    judged, changes = rejudge_folder(folder, [plan], capacity.REFERENCE)
    assert judged == 2 and len(changes) == 1   # ahead of its model: nothing to explain
    after = read(table)
    assert after[0]["fidelity"].startswith("FAIL: network: 1.39x, sharing explains 1.15x")
    assert after[0]["fidelity"].endswith(f"unexplained ({old[9:]})") and after[1]["fidelity"] == rows[1]["fidelity"]
    (change,) = read(os.path.join(folder, CHANGES))
    assert change["call"] == f"{plan.fabric.topology} job {rows[0]['job']} repetition 0 iteration {rows[0]['iteration']}"
