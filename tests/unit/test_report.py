"""Unit tests of the results report (emulator/results/report.py): the plots it adds
when their inputs exist, peak utilisation, and the comparison of several
results folders. Pure: synthetic folders and a copy of a measured one."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pandas as pd
import pytest

from emulator.results import report
from emulator.plan.run_plan import plan_run
from emulator.records.links import LINK_COLUMNS
from emulator.results.plots import link_label
from emulator.results.report import compare, format_compare, plot_compare, write_plots, write_report
from emulator.results.calls import COLLECTIVE_COLUMNS, STEP_COLUMNS, CallRecord, append_csv, collective_rows, step_rows
from emulator.spec.experiment import make_run

MEASURED = os.path.join(os.path.dirname(__file__), "..", "fixtures", "results-without-links")
EXPERIMENTS = os.path.join(os.path.dirname(__file__), "..", "..", "experiments")
SIMAI_EXAMPLE = os.path.join(EXPERIMENTS, "simai-example.txt")


def assert_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


# --- a measured folder: no links.csv, steps.csv or fabric.json ---------------------------------

@pytest.fixture(scope="module")
def measured_plans():
    with open(os.path.join(MEASURED, "spec.json")) as f:
        return [plan_run(make_run(r)) for r in json.load(f)["runs"]]


def test_write_report_on_measured_folder(tmp_path, measured_plans):
    folder = tmp_path / "eflops"
    shutil.copytree(MEASURED, folder)
    text = write_report(str(folder), measured_plans)
    assert isinstance(text, str)
    assert (folder / "summary.txt").read_text() == text + "\n"
    assert len(text.splitlines()) == 2 + 6 * 5                   # header, units + 6 runs x 5 sizes
    assert_png(folder / "busbw.png")
    assert len((folder / "link_loads.csv").read_text().splitlines()) > 1
    assert not any((folder / p).exists() for p in ("heatmap.png", "fabric.png", "timeline.png"))


# --- a small synthetic folder with every input ------------------------------------------------

def fake_records(plan, call):
    """Step records matching the schedule, each step 0.1 s, from t = 50 s."""
    sched = plan.schedules[call.size_bytes]
    return CallRecord([[{"start": 50 + 0.1 * k, "end": 50 + 0.1 * (k + 1), "sent": sum(t.nbytes for t in s.sends),
                         "received": sum(t.nbytes for t in s.recvs)} for k, s in enumerate(steps)]
                       for steps in sched.steps], {})


def link_samples(plan, call, util):
    """links.csv rows of one call: every directed link at `util` for two
    samples; the monitor's columns plus the run keys."""
    rows = []
    for link in plan.fabric.links:
        (a, ap), (b, bp) = link.ends()
        for node, port, peer in ((a, ap, b), (b, bp, a)):
            for t in (0.5, 1.0):
                rows.append({"topology": plan.fabric.topology, "policy": plan.spec.policy,
                             "algorithm": plan.spec.algorithm, "mapping": plan.spec.mapping, "call": call, "t_s": t,
                             "link": link_label(node, port, peer), "node": node, "port": port, "peer": peer,
                             "kind": link.kind, "scope": link.scope, "rate_mbps": link.rate_mbps, "tx_bytes": 0,
                             "tx_packets": 0, "util": util, "backlog_bytes": 0, "drops": 0, "marks": 0})
    assert set(LINK_COLUMNS) <= set(rows[0])
    return rows


@pytest.fixture(scope="module")
def small_plans():
    """Two runs of an experiment, each in its place (the `run` column)."""
    return [dataclasses.replace(plan_run(make_run({"topology": "bigraph:m=1,n=4", "algorithm": a, "sizes": "8K:16K:2",
                                                   "repetitions": 1, "warmup": 1})), run=i)
            for i, a in enumerate(("ring", "halving-doubling"))]


def fake_folder(folder, plans, links=True, steps=True, fabric=True):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "spec.json"), "w") as f:
        json.dump({"name": "t", "runs": [dataclasses.asdict(p.spec) for p in plans]}, f)
    samples = []
    for i, plan in enumerate(plans):
        records = [fake_records(plan, c) for c in plan.calls]
        append_csv(os.path.join(folder, "collectives.csv"), COLLECTIVE_COLUMNS, collective_rows(plan, records, "user"))
        if steps:
            append_csv(os.path.join(folder, "steps.csv"), STEP_COLUMNS, step_rows(plan, records))
        samples += [r for c in plan.calls for r in link_samples(plan, c.index, 0.1 * (i + 1) + 0.01 * c.index)]
    if links:
        pd.DataFrame(samples).to_csv(os.path.join(folder, "links.csv"), index=False)
    if fabric:
        plans[-1].fabric.save(os.path.join(folder, "fabric.json"))


def test_write_report_writes_every_plot(tmp_path, small_plans):
    fake_folder(str(tmp_path), small_plans)
    text = write_report(str(tmp_path), small_plans)
    plots = sorted(p for p in os.listdir(tmp_path) if p.endswith(".png"))
    assert {"busbw.png", "heatmap.png", "fabric.png", "timeline.png"} <= set(plots)
    # several runs in the folder: a heatmap and a timeline of each as well
    per_run = [p for p in plots if p.startswith(("heatmap-", "timeline-"))]
    assert len(per_run) == 4 and not any(".partial" in p for p in os.listdir(tmp_path))
    assert {"fabric-1-ring-naive-shortest.png", "fabric-2-halving-doubling-naive-shortest.png"} <= set(plots)
    for name in plots:
        assert_png(tmp_path / name)
    assert (tmp_path / "summary.txt").read_text() == text + "\n"


def test_write_plots_skips_missing_inputs(tmp_path, small_plans):
    fake_folder(str(tmp_path), small_plans, links=False, steps=False)
    assert write_plots(str(tmp_path)) == ["fabric.png"]             # drawn grey: no samples
    (tmp_path / "links.csv").write_text("")
    (tmp_path / "steps.csv").write_text(",".join(STEP_COLUMNS) + "\n")
    assert write_plots(str(tmp_path)) == ["fabric.png"]
    (tmp_path / "fabric.json").unlink()
    assert write_plots(str(tmp_path)) == []


def test_fabric_is_coloured_by_the_last_run_on_its_fabric(tmp_path, small_plans, monkeypatch):
    other = plan_run(make_run({"topology": "bigraph:m=2,n=4", "sizes": "8K", "repetitions": 1}))
    fake_folder(str(tmp_path), small_plans)
    pd.DataFrame(link_samples(other, 0, 0.99)).to_csv(tmp_path / "links.csv", mode="a", header=False, index=False)
    drawn = {}
    monkeypatch.setattr(report, "fabric_drawing", lambda fabric, peaks, path, title, means=None:
                        drawn.update(peaks=peaks, means=means, title=title) or open(path, "w").close())
    write_plots(str(tmp_path))
    # fabric.json is bigraph:m=1,n=4; its last run (halving-doubling) peaks at its last call, 3
    peaks = list(drawn["peaks"].values())
    assert len(peaks) == 2 * len(small_plans[0].fabric.links) and peaks == pytest.approx([0.2 + 0.03] * len(peaks))
    assert drawn["means"] == pytest.approx(drawn["peaks"])   # every sample of the call alike
    assert "mean use (width)" in drawn["title"] and "busiest switch link" in drawn["title"]


def test_runs_that_differ_only_in_keys_beyond_the_plot_keys_get_plots_of_their_own(tmp_path):
    """compare --vary connections=1,2: two runs alike in topology, policy,
    algorithm and mapping; the run column keeps their plots apart."""
    plans = [dataclasses.replace(plan_run(make_run({"topology": "bigraph:m=1,n=4", "sizes": "8K", "repetitions": 1,
                                                    "warmup": 0, "connections": c, "label": f"connections={c}"})), run=i)
             for i, c in enumerate((1, 2))]
    fake_folder(str(tmp_path), plans)
    links = pd.read_csv(tmp_path / "links.csv")   # the runs' samples, one after the other, as the emulator writes them
    links.assign(run=[0] * (len(links) // 2) + [1] * (len(links) // 2)).to_csv(tmp_path / "links.csv", index=False)
    written = write_report(str(tmp_path), plans) and write_plots(str(tmp_path))
    assert {"heatmap-1-ring-naive-shortest.png", "heatmap-2-ring-naive-shortest.png",
            "timeline-1-ring-naive-shortest.png", "timeline-2-ring-naive-shortest.png"} <= set(written)



def test_a_file_policys_plots_are_named_by_its_file_alone(tmp_path):
    """A file policy's name holds its path: the per-run plots take its file's name."""
    example = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "policies", "avoid_busiest.py")
    plans = [dataclasses.replace(plan_run(make_run({"topology": "bigraph:m=1,n=4", "sizes": "8K", "repetitions": 1,
                                                    "warmup": 0, "policy": policy})), run=i)
             for i, policy in enumerate(("shortest", f"file:{example}"))]
    fake_folder(str(tmp_path), plans)
    links = pd.read_csv(tmp_path / "links.csv")
    links.assign(run=[0] * (len(links) // 2) + [1] * (len(links) // 2)).to_csv(tmp_path / "links.csv", index=False)
    written = write_report(str(tmp_path), plans) and write_plots(str(tmp_path))
    assert {"heatmap-1-ring-naive-shortest.png", "heatmap-2-ring-naive-file-avoid_busiest.py.png"} <= set(written)


# --- several folders --------------------------------------------------------------------------

def coll(size, time_s, algorithm="ring", mapping="naive", rep=0):
    """A collectives.csv row of a 4-rank allreduce (the columns summary() reads)."""
    row = dict.fromkeys(COLLECTIVE_COLUMNS, "")
    row.update(topology="bigraph:m=1,n=4", policy="shortest", collective="allreduce", algorithm=algorithm,
               mapping=mapping, ranks=4, size_bytes=size, repetition=rep, time_s=time_s, model_time_s=1.0,
               bytes_ok=True, host_rate_mbps=8.0, switch_rate_mbps=8.0, mtu=9000, run=0, connections=1, seed=1,
               host_queue_packets=100, switch_queue_packets=100, link_delay_ms=0.0, link_loss_pct=0.0)
    return row


@pytest.fixture
def two_folders(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for folder, rows in ((a, [coll(1024, 1.0), coll(1024, 3.0, rep=1), coll(1024, 2.0, rep=2), coll(2048, 4.0),
                              coll(1024, 1.0, "halving-doubling")]),
                         (b, [coll(1024, 1.0, "halving-doubling", "hdrm"), coll(2048, 4.0), coll(1024, 4.0)])):
        os.makedirs(folder)
        append_csv(os.path.join(folder, "collectives.csv"), COLLECTIVE_COLUMNS, rows)
    return a, b


def test_compare_puts_folders_side_by_side(two_folders):
    d = compare(list(two_folders))
    assert list(d.folder) == ["a", "b", "a", "b", "a", "b"]
    assert list(d.algorithm) == ["ring"] * 4 + ["halving-doubling"] * 2
    assert list(d.mapping) == ["naive"] * 5 + ["hdrm"]              # a run of b only comes last
    assert list(d.size_bytes) == [1024, 1024, 2048, 2048, 1024, 1024]
    assert list(d.time_s) == [2.0, 4.0, 4.0, 4.0, 1.0, 1.0]        # medians
    assert list(d.busbw_vs_first) == pytest.approx([1.0, 0.5, 1.0, 1.0, 1.0, 1.0])


def test_compare_names(tmp_path, two_folders):
    a, _ = two_folders
    twin = str(tmp_path / "x" / "a")
    shutil.copytree(a, twin)
    assert list(dict.fromkeys(compare([a, twin]).folder)) == [a, twin]   # same last part: full paths
    with pytest.raises(ValueError, match="no collectives.csv"):
        compare([a, str(tmp_path)])


def test_format_compare(two_folders):
    d = compare(list(two_folders))
    lines = format_compare(d).splitlines()
    assert len(lines) == 1 + len(d)
    assert lines[0].split()[:2] == ["folder", "topology"] and "vs first" in lines[0]
    assert lines[1].split()[:6] == ["a", "bigraph:m=1,n=4", "shortest", "ring", "naive", "1024"]
    assert lines[1].split()[6] == "2000.0" and lines[2].split()[-1] == "0.50"


def test_plot_compare_writes_png(tmp_path, two_folders):
    plot_compare(compare(list(two_folders)), str(tmp_path / "compare.png"))
    assert_png(tmp_path / "compare.png")


def test_summarise_counts_trusted_repetitions_and_sums_losses():
    from emulator.results.report import format_summary, summarise
    base = {"topology": "bigraph:m=2,n=4", "policy": "traffic-aware", "algorithm": "ring", "mapping": "naive",
            "collective": "allreduce", "ranks": 8, "host_rate_mbps": 50.0, "switch_rate_mbps": 50.0, "mtu": 9000,
            "label": "", "size_bytes": 1 << 20, "model_time_s": 0.3, "bytes_ok": True}
    rows = [{**base, "time_s": 0.30, "fidelity": "ok", "max_link_util": 0.9, "mean_link_util": 0.5,
             "queue_drops": 2, "tcp_retrans": 1},
            {**base, "time_s": 0.40, "fidelity": "FAIL: 1.33x the model", "max_link_util": 0.7,
             "mean_link_util": 0.3, "queue_drops": 3, "tcp_retrans": ""}]
    (r,) = summarise(pd.DataFrame(rows)).itertuples()
    assert (r.reps, r.fidelity_ok, r.queue_drops, r.tcp_retrans) == (2, 1, 5, 1)
    assert r.max_link_util == pytest.approx(0.8) and r.time_s == pytest.approx(0.35)
    line = format_summary(summarise(pd.DataFrame(rows))).splitlines()[2]
    assert "traffic-aware" in line and line.endswith("1/2 ok")
    # runs that differ only where no column shows it say how, at the end of their rows
    other = [{**row, "tcp": "bbr", "queue_marks": 4} for row in rows]
    lines = format_summary(summarise(pd.DataFrame([{**row, "tcp": "cubic"} for row in rows] + other))).splitlines()
    assert lines[2].endswith("1/2 ok  tcp=cubic") and lines[3].endswith("1/2 ok  tcp=bbr")
    assert summarise(pd.DataFrame(other)).queue_marks.tolist() == [8]


def test_demo_story_tells_which_mapping_congested_and_by_how_much(tmp_path):
    from emulator.results.report import demo_story
    base = {"topology": "bigraph:m=2,n=4", "policy": "shortest", "algorithm": "halving-doubling",
            "collective": "allreduce", "ranks": 8, "host_rate_mbps": 50.0, "switch_rate_mbps": 50.0, "mtu": 9000,
            "size_bytes": 8 << 20, "bytes_ok": True, "fidelity": "ok", "max_link_util": 0.5}
    rows = [{**base, "mapping": "naive", "label": "demo naive", "time_s": 4.8, "model_time_s": 4.7},
            {**base, "mapping": "hdrm", "label": "demo hdrm", "time_s": 2.4, "model_time_s": 2.37}]
    pd.DataFrame(rows).to_csv(tmp_path / "collectives.csv", index=False)
    pd.DataFrame([{"mapping": "naive", "max_flows_per_link": 4}, {"mapping": "hdrm", "max_flows_per_link": 1},
                  {"mapping": "naive", "max_flows_per_link": 2}]).to_csv(tmp_path / "link_loads.csv", index=False)
    story = demo_story(str(tmp_path))
    assert "naive : up to 4 flow(s) on one link" in story
    assert "hdrm  : up to 1 flow(s)" in story
    assert "HDRM made the same allreduce 2.0x faster" in story
    # on a machine too slow for the rates, it does not claim a speedup it did not see
    rows[0]["time_s"] = 2.5
    pd.DataFrame(rows).to_csv(tmp_path / "collectives.csv", index=False)
    story = demo_story(str(tmp_path))
    assert "HDRM made" not in story and "measured 1.0x" in story and "The model says HDRM makes it 2.0x" in story


# --- a workload's folder keeps the workload ---------------------------------------------------

def test_report_reads_the_workload_the_folder_keeps_after_the_original_has_gone(tmp_path, capsys):
    """A workload file importing a SimAI file beside it: the run copies both
    into the folder; with the originals gone, the report plans from the copies
    and the tables still name the workload as it ran."""
    from emulator import cli
    from emulator.pipeline import keep_workloads
    from emulator.results.calls import write_call
    original = tmp_path / "mine"
    (original / "jobs").mkdir(parents=True)
    shutil.copyfile(SIMAI_EXAMPLE, original / "layers.txt")
    workload = original / "jobs" / "w.toml"
    workload.write_text('[[job]]\nname = "imported"\nimport = "simai:../layers.txt"\n'
                        '[[job]]\nname = "small"\nranks = 2\nops = [{op = "allreduce", bytes = "64K"}]\n')
    spec = make_run({"workload": str(workload), "repetitions": 1, "warmup": 0, "topology": "bigraph:m=3,n=4"})
    plan = plan_run(spec)
    folder = tmp_path / "res"
    folder.mkdir()
    copies = keep_workloads([spec, dataclasses.replace(spec, mapping="round-robin")], str(folder))
    assert copies == {str(workload): os.path.join("workloads", "0", "jobs", "w.toml")}
    assert (folder / "workloads" / "0" / "layers.txt").read_bytes() == (original / "layers.txt").read_bytes()
    (folder / "spec.json").write_text(json.dumps({"name": "t", "runs": [dataclasses.asdict(spec)],
                                                  "workload_copies": copies}))
    ends = plan.predictions[0].step_end_s
    steps = [[{"start": min(ends[r][k - 1], ends[r][k]) if k else 0.0, "end": ends[r][k], "sent": sum(t.nbytes for t in s.sends),
               "received": sum(t.nbytes for t in s.recvs)} for k, s in enumerate(plan.schedules[0].steps[r])]
             for r in range(plan.ranks)]
    for call in plan.calls:
        write_call(str(folder), plan, call, CallRecord(steps, {}), "user")
    shutil.rmtree(original)
    assert cli.main(["report", str(folder)]) == 0, capsys.readouterr().err
    assert set(pd.read_csv(folder / "link_jobs.csv").workload) == {str(workload)}
    assert "imported" in (folder / "summary.txt").read_text()


def test_report_reads_the_topology_and_policy_files_the_folder_keeps_after_they_have_moved(tmp_path, capsys):
    """A run on a topology file with a policy of one's own: the folder keeps
    both; with the originals gone, the report plans from the copies and its
    tables and summary still name the files as the run did."""
    from emulator import cli
    from emulator.pipeline import keep_files
    from emulator.results.calls import write_call
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copyfile(os.path.join(EXPERIMENTS, "topologies", "two-tier.toml"), mine / "two-tier.toml")
    shutil.copyfile(os.path.join(EXPERIMENTS, "policies", "avoid_busiest.py"), mine / "avoid_busiest.py")
    spec = make_run({"topology": f"file:{mine / 'two-tier.toml'}", "policy": f"file:{mine / 'avoid_busiest.py'}",
                     "sizes": ["64K"], "repetitions": 1, "warmup": 0})
    plan = plan_run(spec)
    folder = tmp_path / "res"
    folder.mkdir()
    copies = keep_files([spec, spec], str(folder))
    assert copies == {spec.topology: "file:" + os.path.join("files", "0", "two-tier.toml"),
                      spec.policy: "file:" + os.path.join("files", "1", "avoid_busiest.py")}
    (folder / "spec.json").write_text(json.dumps({"name": "t", "runs": [dataclasses.asdict(spec)],
                                                  "file_copies": copies}))
    size = plan.calls[0].size_bytes
    ends = plan.predictions[size].step_end_s
    steps = [[{"start": min(ends[r][k - 1], ends[r][k]) if k else 0.0, "end": ends[r][k],
               "sent": sum(t.nbytes for t in s.sends), "received": sum(t.nbytes for t in s.recvs)}
              for k, s in enumerate(plan.schedules[size].steps[r])] for r in range(plan.ranks)]
    write_call(str(folder), plan, plan.calls[0], CallRecord(steps, {}), "user")
    shutil.rmtree(mine)
    assert cli.main(["report", str(folder)]) == 0, capsys.readouterr().err
    assert set(pd.read_csv(folder / "collectives.csv").topology) == {plan.fabric.topology}
    assert str(mine / "two-tier.toml") in (folder / "summary.txt").read_text()
    (folder / "spec.json").write_text(json.dumps({"name": "t", "runs": [dataclasses.asdict(spec)]}))   # an older folder
    assert cli.main(["report", str(folder)]) == 2
    assert "avoid_busiest.py: cannot read it" in capsys.readouterr().err   # named, exit 2


def test_keep_workloads_copies_an_imported_workload_once(tmp_path):
    from emulator.pipeline import keep_workloads
    simai = os.path.normpath(SIMAI_EXAMPLE)
    runs = [make_run({"workload": f"simai:{simai}", "mapping": m}) for m in ("naive", "random")]
    assert keep_workloads(runs, str(tmp_path)) == {f"simai:{simai}": "simai:" + os.path.join("workloads", "0",
                                                                                              "simai-example.txt")}
    assert keep_workloads(runs[:0], str(tmp_path / "none")) == {}
    assert os.listdir(tmp_path) == ["workloads"]


def test_the_summary_names_the_class_of_link_that_was_the_bottleneck():
    from emulator.results.report import bottleneck_scopes
    rows = [{"run": run, "repetition": 0, "link": link, "scope": scope, "util": util}
            for run, (node_use, network_use) in enumerate(((0.3, 0.95), (0.9, 0.5)))
            for link, scope, util in (("bgh0:0>bgs4", "node", node_use), ("bgh1:0>bgs4", "node", 0.1),
                                      ("bgs4:3>bgs0", "network", network_use))]
    rows.append({"run": 0, "repetition": -1, "link": "bgh1:0>bgs4", "scope": "node", "util": 1.0})   # a warm-up
    text = bottleneck_scopes(pd.DataFrame(rows))
    assert text.splitlines()[1:] == [
        "#   run 0: busiest inside a node bgh0:0>bgs4 30%, network bgs4:3>bgs0 95%: the bottleneck is the network",
        "#   run 1: busiest inside a node bgh0:0>bgs4 90%, network bgs4:3>bgs0 50%: the bottleneck is inside the nodes"]
    assert bottleneck_scopes(pd.DataFrame(rows).assign(scope="network")) == ""   # no nodes: nothing to say
    assert bottleneck_scopes(None) == ""
