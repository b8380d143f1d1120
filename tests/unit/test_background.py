"""Background traffic: [[background]] tables read and checked, compiled into
paced two-rank jobs on the hosts they name, a job beside them slowed as
max-min sharing says, and their bytes reported apart from the jobs'."""
import dataclasses
import json
import os
import tomllib

import pytest

from emulator import cli
from emulator.fabric.topology import LinkProfile, build
from emulator.model.iterations import iterations, modelled
from emulator.model.simulation import predict
from emulator.results.calls import CallRecord
from emulator.routes.routing import forwarding_table
from emulator.workloads.job import MAX_BACKGROUND, MAX_CHUNKS, PACE_S, WorkloadError
from emulator.workloads.program import compile_workload
from emulator.workloads.workload import parse_workload

JOB = '[[job]]\nname = "a"\nranks = 2\nplacement = ["bgh0", "bgh1"]\nops = [{op = "allreduce", bytes = "1M"}]\n'
FLOW = '[[background]]\nfrom = "bgh2"\nto = "bgh1"\n'


def read(text: str):
    return parse_workload(tomllib.loads(text), "w.toml")


def fabric(rate=100.0, topology="bigraph:m=2,n=4"):
    return build(topology, LinkProfile(host_rate_mbps=rate, switch_rate_mbps=rate))


# --- reading --------------------------------------------------------------------------------

def test_a_steady_flow_sends_a_chunk_every_pace_period():
    w = read(JOB + FLOW + 'name = "load"\nrate_mbps = 20\nstart_ms = 50\nduration_ms = 200\n')
    job, bg = w.jobs
    flow = bg.background
    assert job.background is None and bg.name == "load" and bg.ranks == 2 and bg.placement == ("bgh2", "bgh1")
    assert (flow.src, flow.dst, flow.period_s, flow.chunk) == ("bgh2", "bgh1", PACE_S, 20e6 * PACE_S / 8)
    assert bg.start_s == 0.05 and bg.iterations == 1 and flow.asked == "rate_mbps = 20"
    assert flow.sends() == [True] * 20 and flow.mean_mbps == pytest.approx(20) and flow.sending_mbps == pytest.approx(20)
    kinds = [op.kind for op in bg.ops]
    assert kinds == ["send", "recv", "compute"] * 20   # a chunk, then its period
    assert all(op.nonblocking for op in bg.ops if op.kind != "compute")
    assert all(op.ms == pytest.approx(PACE_S * 1e3) for op in bg.ops if op.kind == "compute")


def test_on_off_sends_only_in_the_on_part_of_every_cycle():
    flow = read(JOB + FLOW + 'rate_mbps = 8\non_ms = 20\noff_ms = 30\nduration_ms = 120\n').jobs[1].background
    # periods at 0, 10, ... 110 ms; on in [0, 20) and [50, 70) and [100, 120)
    assert flow.sends() == [True, True, False, False, False, True, True, False, False, False, True, True]
    assert flow.mean_mbps == pytest.approx(8 * 6 / 12)


def test_quiet_periods_at_the_end_are_left_out():
    bg = read(JOB + FLOW + 'rate_mbps = 8\non_ms = 20\noff_ms = 30\nduration_ms = 90\n').jobs[1]
    assert bg.background.sends() == [True, True, False, False, False, True, True]
    computes = [op.ms for op in bg.ops if op.kind == "compute"]
    assert computes == pytest.approx([10, 40, 10, 10])   # quiet periods merged into one compute; the last chunk's period


def test_a_storage_like_pattern_sends_its_burst_every_period():
    bg = read(JOB + FLOW + 'name = "ckpt"\nburst = "4M"\nevery_ms = 200\nduration_ms = 1000\n').jobs[1]
    flow = bg.background
    assert (flow.chunk, flow.period_s, flow.asked) == (4 << 20, 0.2, "burst = 4M every_ms = 200")
    assert sum(flow.sends()) == 5 and flow.mean_mbps == pytest.approx((4 << 20) * 8 / 0.2 / 1e6)
    assert [op.nbytes for op in bg.ops if op.kind == "send"] == [4 << 20] * 5


def test_background_tables_are_numbered_when_unnamed():
    w = read(JOB + FLOW + 'rate_mbps = 1\nduration_ms = 20\n' + FLOW + 'rate_mbps = 2\nduration_ms = 20\n')
    assert [j.name for j in w.jobs] == ["a", "bg1", "bg2"]


BAD = [
    ("unknown key", FLOW + 'rate_mbps = 1\nduration_ms = 100\nspeed = 2\n', "background 'bg1': unknown key.*speed"),
    ("no from", '[[background]]\nto = "bgh1"\nrate_mbps = 1\nduration_ms = 100\n', "'bg1': from is missing"),
    ("no to", '[[background]]\nfrom = "bgh1"\nrate_mbps = 1\nduration_ms = 100\n', "'bg1': to is missing"),
    ("from a number", '[[background]]\nfrom = 3\nto = "bgh1"\nrate_mbps = 1\nduration_ms = 100\n',
     "from must be a host name"),
    ("to blank", '[[background]]\nfrom = "bgh0"\nto = " "\nrate_mbps = 1\nduration_ms = 100\n', "to must be a host name"),
    ("same host", '[[background]]\nfrom = "bgh1"\nto = "bgh1"\nrate_mbps = 1\nduration_ms = 100\n', "same host"),
    ("neither", FLOW + 'duration_ms = 100\n', "rate_mbps .* or burst .* not neither"),
    ("both", FLOW + 'rate_mbps = 1\nburst = "1M"\nevery_ms = 10\nduration_ms = 100\n', "not both"),
    ("rate zero", FLOW + 'rate_mbps = 0\nduration_ms = 100\n', "rate_mbps must be above 0"),
    ("rate too small", FLOW + 'rate_mbps = 0.0001\nduration_ms = 100\n', "rate_mbps must be above 0"),
    ("rate negative", FLOW + 'rate_mbps = -5\nduration_ms = 100\n', "rate_mbps must be a number from 0 to 100000"),
    ("rate absurd", FLOW + 'rate_mbps = 1e9\nduration_ms = 100\n', "rate_mbps must be a number from 0 to 100000"),
    ("rate text", FLOW + 'rate_mbps = "20M"\nduration_ms = 100\n', "rate_mbps must be a number"),
    ("rate bool", FLOW + 'rate_mbps = true\nduration_ms = 100\n', "rate_mbps must be a number"),
    ("rate nan", FLOW + 'rate_mbps = nan\nduration_ms = 100\n', "rate_mbps must be a number"),
    ("every with rate", FLOW + 'rate_mbps = 1\nevery_ms = 100\nduration_ms = 100\n', "every_ms goes with burst"),
    ("burst without every", FLOW + 'burst = "1M"\nduration_ms = 100\n', "burst needs every_ms"),
    ("burst not a size", FLOW + 'burst = "lots"\nevery_ms = 100\nduration_ms = 100\n', "burst: size 'lots'"),
    ("burst zero", FLOW + 'burst = 0\nevery_ms = 100\nduration_ms = 100\n', "burst: size 0 must be at least 1 byte"),
    ("burst fraction", FLOW + 'burst = 1.5\nevery_ms = 100\nduration_ms = 100\n', "burst: size 1.5"),
    ("every zero", FLOW + 'burst = "1M"\nevery_ms = 0\nduration_ms = 100\n', "every_ms must be a number from 1"),
    ("burst absurd", FLOW + 'burst = "1G"\nevery_ms = 1\nduration_ms = 100\n', r"is 8589935 Mbit/s; at most 100000"),
    ("on without off", FLOW + 'rate_mbps = 1\non_ms = 20\nduration_ms = 100\n', "on_ms and off_ms together"),
    ("off without on", FLOW + 'rate_mbps = 1\noff_ms = 20\nduration_ms = 100\n', "on_ms and off_ms together"),
    ("on shorter than a period", FLOW + 'rate_mbps = 1\non_ms = 5\noff_ms = 20\nduration_ms = 100\n',
     r"on_ms \(at least one period\) must be a number from 10"),
    ("off negative", FLOW + 'rate_mbps = 1\non_ms = 20\noff_ms = -1\nduration_ms = 100\n', "off_ms"),
    ("no duration", FLOW + 'rate_mbps = 1\n', "duration_ms is missing"),
    ("duration under a period", FLOW + 'burst = "1M"\nevery_ms = 100\nduration_ms = 50\n',
     r"duration_ms \(at least one period\) must be a number from 100"),
    ("too many periods", FLOW + 'rate_mbps = 1\nduration_ms = 1e6\n', f"100000 periods of 10 ms; at most {MAX_CHUNKS}"),
    ("start negative", FLOW + 'rate_mbps = 1\nduration_ms = 100\nstart_ms = -1\n', "start_ms must be a number from 0"),
    ("name blank", FLOW + 'name = ""\nrate_mbps = 1\nduration_ms = 100\n', "name must be a short text"),
    ("name with a comma", FLOW + 'name = "a,b"\nrate_mbps = 1\nduration_ms = 100\n', "name must be a short text"),
    ("name of a job", FLOW + 'name = "a"\nrate_mbps = 1\nduration_ms = 100\n',
     "names of jobs and background flows must differ; 'a'"),
    ("not tables", 'background = 3\n', "background must be \\[\\[background\\]\\] tables"),
    ("too many", (FLOW + 'rate_mbps = 1\nduration_ms = 100\n') * (MAX_BACKGROUND + 1),
     f"{MAX_BACKGROUND + 1} \\[\\[background\\]\\] tables; at most {MAX_BACKGROUND}"),
]


@pytest.mark.parametrize("text, words", [(t, w) for _, t, w in BAD], ids=[c for c, _, _ in BAD])
def test_bad_background_tables_are_refused_naming_the_table_and_key(text, words):
    with pytest.raises(WorkloadError, match=words):
        read(text + JOB if text.startswith("background") else JOB + text)


def test_background_alone_is_not_a_workload():
    with pytest.raises(WorkloadError, match="at least one \\[\\[job\\]\\].*background traffic is load beside jobs"):
        read(FLOW + 'rate_mbps = 1\nduration_ms = 100\n')


@pytest.mark.parametrize("flow, words", [
    ('[[background]]\nfrom = "bgh99"\nto = "bgh1"\nrate_mbps = 1\nduration_ms = 100\n',
     "background 'bg1': from = 'bgh99' is not a host of bigraph:m=2,n=4 \\(bgh0..bgh7\\)"),
    ('[[background]]\nfrom = "bgh0"\nto = "host9"\nrate_mbps = 1\nduration_ms = 100\n',
     "background 'bg1': to = 'host9' is not a host"),
    (FLOW + 'rate_mbps = 150\nduration_ms = 100\n',
     "rate_mbps = 150 sends at 150 Mbit/s, more than the link of from = 'bgh2' carries \\(100 Mbit/s\\)"),
    (FLOW + 'burst = "2M"\nevery_ms = 100\nduration_ms = 100\n',
     "burst = 2M every_ms = 100 sends at 167.772 Mbit/s, more than the link of from"),
])
def test_what_the_fabric_lacks_is_refused_when_placed(flow, words):
    with pytest.raises(WorkloadError, match=words):
        compile_workload(read(JOB + flow), fabric())


def test_a_run_with_a_background_host_the_fabric_lacks_is_refused_before_anything(tmp_path):
    from emulator.spec.experiment import SpecError, make_run
    path = tmp_path / "w.toml"
    path.write_text(JOB + '[[background]]\nfrom = "bgh0"\nto = "bgh12"\nrate_mbps = 1\nduration_ms = 100\n')
    with pytest.raises(SpecError, match="workload: background 'bg1': to = 'bgh12' is not a host"):
        make_run({"workload": str(path), "topology": "bigraph:m=2,n=4"})


# --- compiled ----------------------------------------------------------------------------------

def test_background_ranks_go_on_their_hosts_beside_the_jobs_and_compute_at_speed_one():
    w = read('[hosts]\nbgh2 = 0.5\n' + JOB.replace('placement = ["bgh0", "bgh1"]\n', '')
             + '[[job]]\nname = "b"\nranks = 2\nops = [{op = "compute", ms = 5}]\n'
             + FLOW + 'rate_mbps = 20\nduration_ms = 30\n')
    compiled = compile_workload(w, fabric())
    a, b, bg = compiled.jobs
    assert a.hosts == ["bgh0", "bgh1"] and b.hosts == ["bgh2", "bgh3"]   # jobs keep their own hosts
    assert bg.hosts == ["bgh2", "bgh1"] and list(bg.ranks) == [4, 5]     # beside them, last
    sender = compiled.schedule.steps[4]
    assert [s.compute_s for s in sender if s.phase == "compute"] == pytest.approx([PACE_S] * 3)   # not slowed
    sends = [s for s in sender if s.sends]
    assert [t.nbytes for s in sends for t in s.sends] == [25000] * 3 and all(s.sends[0].peer == 5 for s in sends)
    # every chunk after the period before it: paced, not back to back
    compute = [k for k, s in enumerate(sender) if s.phase == "compute"]
    assert [s.after for s in sends] == [(), (compute[0],), (compute[1],)]


# --- the model: max-min sharing on a link both use ------------------------------------------------

def test_a_job_beside_background_traffic_gets_what_max_min_sharing_leaves_it():
    """bgh0 sends 1,000,000 B to bgh1 (a 2-rank job), on 100 Mbit/s links; a
    20 Mbit/s flow from bgh2 to bgh1 shares bgh1's link. By hand: in each 10 ms
    period the flow's 25,000 B chunk and the job share the link at 50 Mbit/s
    each for 4 ms (25,000 B each), then the job has it alone for 6 ms
    (75,000 B): 100,000 B per period, 10 periods, 0.1 s, against 0.08 s alone.
    The flow keeps its 20 Mbit/s: every chunk is done before the next is due."""
    job = ('[[job]]\nname = "a"\nranks = 2\nplacement = ["bgh0", "bgh1"]\n'
           'ops = [{op = "send", bytes = 1000000, group = "world"}, {op = "recv", bytes = 1000000, group = "world"}]\n')
    fab = fabric()
    table = forwarding_table(fab, "shortest")

    def modelled_iterations(text):
        compiled = compile_workload(read(text), fab)
        prediction = predict(fab, table, compiled.schedule, compiled.hosts)
        return [iterations(layout, *modelled(prediction)) for layout in compiled.jobs]

    (alone,) = modelled_iterations(job)
    beside, flow = modelled_iterations(job + FLOW + 'rate_mbps = 20\nduration_ms = 200\n')
    assert alone[0]["time_s"] == pytest.approx(1e6 * 8 / 100e6, rel=1e-9)
    assert beside[0]["time_s"] == pytest.approx(1e6 * 8 / (100e6 - 20e6), rel=1e-9)
    assert flow[0]["time_s"] == pytest.approx(0.2, rel=1e-9)   # 20 chunks, each in its period


def test_the_model_of_a_workload_with_background_is_exact_and_lists_only_jobs(tmp_path):
    from emulator.plan.run_plan import model_workload
    from emulator.spec.experiment import make_run
    path = tmp_path / "w.toml"
    path.write_text(JOB + FLOW + 'rate_mbps = 40\nduration_ms = 3000\n')
    spec = make_run({"workload": str(path), "topology": "bigraph:m=2,n=4", "host_rate_mbps": 100,
                     "switch_rate_mbps": 100})
    ranks, rows, approximation, why = model_workload(spec, "lockstep")
    assert ranks == 4 and approximation == "" and why == "background 'bg1' is load on the jobs' links"
    assert [r["job"] for r in rows] == ["a"] and rows[0]["slowdown"] > 1.2


# --- results ------------------------------------------------------------------------------------

def plan_of(tmp_path, text: str, **keys):
    from emulator.plan.run_plan import plan_run
    from emulator.spec.experiment import make_run
    path = tmp_path / "w.toml"
    path.write_text(text)
    return plan_run(make_run({"workload": str(path), "repetitions": 1, "warmup": 0, "topology": "bigraph:m=2,n=4",
                              **keys}))


def as_modelled(plan, slower: float = 1.0) -> list[list[dict]]:
    """Agent records as if the run went as the model says (`slower` times as long)."""
    ends = plan.predictions[0].step_end_s
    return [[{"start": slower * (ends[r][k - 1] if k else 0.0), "end": slower * ends[r][k],
              "sent": sum(t.nbytes for t in s.sends), "received": sum(t.nbytes for t in s.recvs)}
             for k, s in enumerate(plan.schedules[0].steps[r])] for r in range(plan.ranks)]


def test_background_bytes_are_reported_apart_from_the_jobs(tmp_path):
    from emulator.plan.run_plan import Call
    from emulator.results.jobs import (BACKGROUND_COLUMNS, JOB_COLUMNS, background_rows, job_rows, link_job_rows,
                                       op_rows, sharing_jobs)
    apart = JOB.replace('["bgh0", "bgh1"]', '["bgh0", "bgh4"]')   # across switch links, as the flow
    plan = plan_of(tmp_path, apart + '[[background]]\nfrom = "bgh2"\nto = "bgh6"\nrate_mbps = 4\nduration_ms = 500\n')
    records = as_modelled(plan, 1.1)
    jobs = job_rows(plan, Call(0, 0, 0), CallRecord(records, {}))
    assert [r["job"] for r in jobs] == ["a"] and jobs[0]["jobs"] == 1 and jobs[0]["background_flows"] == 1
    assert all(set(r) == set(JOB_COLUMNS) for r in jobs)
    assert {r["job"] for r in op_rows(plan, Call(0, 0, 0), records)} == {"a"}
    (flow,) = background_rows(plan, Call(0, 0, 0), records)
    assert set(flow) == set(BACKGROUND_COLUMNS)
    assert (flow["background"], flow["from"], flow["to"], flow["asked"]) == ("bg1", "bgh2", "bgh6", "rate_mbps = 4")
    assert flow["bytes"] == 50 * 5000 and flow["asked_mbps"] == pytest.approx(4)
    assert flow["model_mbps"] == pytest.approx(4, rel=1e-3)          # unhindered in the model
    assert flow["mbps"] == pytest.approx(flow["model_mbps"] / 1.1)   # measured: from the records
    assert background_rows(plan, Call(0, 0, -1), records) == []     # warm-up: not counted
    kinds = {(r["job"], r["kind"]) for r in link_job_rows(plan)}
    assert ("bg1", "background") in kinds and ("a", "job") in kinds
    beside = plan_of(tmp_path, apart + '[[background]]\nfrom = "bgh1"\nto = "bgh5"\nrate_mbps = 4\nduration_ms = 500\n')
    by_link: dict = {}
    for r in link_job_rows(beside):
        by_link.setdefault(r["link"], set()).add(r["job"])
    assert {"a", "bg1"} in by_link.values() and sharing_jobs(beside) == set()   # a flow shares, but is not a job


def test_a_run_with_background_is_not_taken_for_the_job_alone():
    import pandas as pd
    from emulator.results.report import format_jobs, job_summary, with_measured_alone
    base = {"topology": "t", "policy": "ecmp", "algorithm": "ring", "job": "a", "ranks": 2, "placement": "naive",
            "label": "", "iteration": 0, "compute_s": 0.0, "comm_s": 0.5, "model_time_s": 1.0, "model_comm_s": 0.9,
            "alone_model_s": 0.5, "alone_s": "", "slowdown": 2.0, "slowdown_basis": "model alone", "fidelity": "ok"}
    d = pd.DataFrame([{**base, "jobs": 1, "background_flows": 0, "time_s": 0.6},
                      {**base, "jobs": 1, "background_flows": 2, "time_s": 0.9}])
    out = with_measured_alone(d)
    assert out.slowdown[1] == pytest.approx(1.5) and out.slowdown_basis[1] == "measured alone"
    assert out.slowdown_basis[0] == "model alone"
    s = job_summary(out)
    assert len(s) == 2 and s.measured_slowdown.iloc[1] == pytest.approx(1.5)
    assert " 1+2 " in format_jobs(s)


def test_a_workload_folder_with_background_reports_it_apart(capsys, tmp_path):
    """What the writers write for background traffic (background.csv, link_jobs.csv's kind) the report reads."""
    from emulator.results.calls import write_call
    plan = plan_of(tmp_path, JOB + FLOW + 'name = "load"\nrate_mbps = 4\nduration_ms = 500\n')
    folder = tmp_path / "res"
    folder.mkdir()
    (folder / "spec.json").write_text(json.dumps({"name": "t", "runs": [dataclasses.asdict(plan.spec)]}))
    for call in plan.calls:
        write_call(str(folder), plan, call, CallRecord(as_modelled(plan), {}), "user")
    assert cli.main(["report", str(folder)]) == 0, capsys.readouterr().err
    summary = (folder / "summary.txt").read_text()
    assert "background (load beside the jobs, not judged)" in summary
    line = next(line for line in summary.splitlines() if "load" in line.split())
    assert line.split()[-5:-3] == ["bgh2", "bgh1"] and float(line.split()[-3]) == pytest.approx(4)
    assert {"background.csv", "jobs.csv", "link_jobs.csv"} <= set(os.listdir(folder))
    assert "load" not in (folder / "jobs.csv").read_text()
