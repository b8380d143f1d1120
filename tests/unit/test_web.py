"""Unit tests of the web view's pure parts (emulator/web/view.py), its
server on 127.0.0.1 without a browser, and the --web flags."""
from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request

import pandas as pd
import pytest

from emulator.results import linkstats
from emulator.records import links as link_records

from emulator import pipeline, preflight
from emulator.cli import main
from emulator.plan.run_plan import plan_run
from emulator.results.plots import layout
from emulator.results.calls import CallRecord
from emulator.spec.experiment import Experiment, SpecError, make_run
from emulator.web import view
from emulator.web.server import WebView
from webtools import _samples, write_results_folder

DEMO_RUN = {"topology": "bigraph:m=2,n=4", "collective": "allreduce", "algorithm": "halving-doubling",
            "sizes": "2M", "repetitions": 1, "warmup": 1, "mapping": "naive"}


@pytest.fixture(scope="module")
def plan():
    return plan_run(make_run(DEMO_RUN))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("results"))
    write_results_folder(path)
    return path


# --- the fabric and a live sample ------------------------------------------------------------

def test_the_fabric_has_every_link_with_the_monitors_labels_at_the_drawings_positions(plan):
    msg = view.fabric_message(plan.fabric)
    assert len(msg["links"]) == len(plan.fabric.links) == 12
    assert sum(l["kind"] == "switch" for l in msg["links"]) == 4   # upper x lower: 8 directed
    directions = [d for l in msg["links"] for d in l["directions"]]
    assert sorted(directions) == sorted(l.label for l in link_records.directed_links(plan.fabric))
    pos = layout(plan.fabric)
    assert {n["name"]: (n["x"], n["y"]) for n in msg["nodes"]} == pos
    assert {n["tier"] for n in msg["nodes"] if n["kind"] == "switch"} == {"upper", "lower"}


def test_a_sample_carries_each_links_use_and_queue_and_each_ranks_step(plan):
    links = link_records.directed_links(plan.fabric)
    rows = linkstats.link_rows(0, links, _samples(links, 2, 0.2, 0)[-2:], 0.0)
    roles = view.rank_roles(plan)
    msg = view.sample_message("[2/2] hd naive", rows, [3, 0, 10, 1, 1, 1, 1, 1], roles, 1.23456)
    json.dumps(msg)   # what the server sends
    assert msg["t_s"] == 1.235 and msg["label"] == "[2/2] hd naive"
    assert set(msg["links"]) == {l.label for l in links}
    for r in rows:
        assert msg["links"][r["link"]] == [r["util"], r["backlog_bytes"], r["drops"]]
    assert len({v[0] for v in msg["links"].values()}) > 1   # the sample's uses differ per link
    total = len(plan.schedules[max(plan.schedules)].steps[0])
    assert msg["ranks"][0] == {"rank": 0, "host": plan.hosts[0], "done": 3, "total": total}
    assert "job" not in msg["ranks"][0]


def test_with_jobs_a_rank_shows_its_job_and_op():
    wl = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "workloads", "two-tenants.toml")
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "workload": wl}))
    roles = view.rank_roles(plan)
    msg = view.sample_message("", [], [0] + [r["total"] for r in roles[1:]], roles, 0.0)
    jobs = {r["job"] for r in msg["ranks"]}
    assert jobs == {"train", "stream"}
    assert msg["ranks"][0]["op"].startswith("op 0")
    assert msg["ranks"][1]["op"] == "done"


def test_a_finished_call_gives_measured_and_model_busbw_and_the_verdict(plan):
    sched = plan.schedules[2 << 20]
    steps = [[{"start": 0.0, "end": plan.predictions[2 << 20].time_s * 2, "sent": 0, "received": 0}]
             for _ in sched.steps]
    record = CallRecord(steps)
    warm, counted = plan.calls
    msg = view.call_message(plan, warm, record, None, "warm")
    assert msg["verdict"] == "warm-up (not counted)" and msg["call"] == warm.index
    msg = view.call_message(plan, counted, record, {"fidelity": "FAIL: 2.00x the model"}, "rep 1")
    measured, model = (float(msg[k].split()[0]) for k in ("measured", "model"))
    assert measured == pytest.approx(model / 2, rel=0.01)
    assert msg["verdict"] == "FAIL: 2.00x the model"


# --- replay from a results folder ---------------------------------------------------------------

def test_replay_frames_are_the_samples_of_links_csv_in_time_order(folder):
    links = pd.read_csv(os.path.join(folder, "links.csv"))
    frames = view.folder_frames(folder, 1, 0)["frames"]
    mine = links[(links.run == 1) & (links.call == 0)]
    assert [f["t_s"] for f in frames] == sorted(mine.t_s.unique())
    for frame in frames:
        rows = mine[mine.t_s == frame["t_s"]]
        assert len(frame["links"]) == len(rows) == 24   # every directed link
        for r in rows.itertuples():
            assert frame["links"][r.link] == [r.util, r.backlog_bytes, r.drops]
    assert frames[0]["links"] != frames[1]["links"]
    with pytest.raises(ValueError, match="no samples of run 1, call 7"):
        view.folder_frames(folder, 1, 7)


def test_the_folder_shows_its_fabric_calls_story_and_plots(folder):
    msgs = view.folder_messages(folder)
    assert [m["type"] for m in msgs] == ["fabric", "call", "call", "end"]
    assert [(m["run"], m["call"]) for m in msgs[1:3]] == [(0, 0), (1, 0)]   # each replays from links.csv
    assert msgs[1]["label"] == "halving-doubling naive 2097152 B rep 1 (demo naive)"
    assert msgs[2]["verdict"] == "ok" and msgs[2]["measured"].endswith("Mbit/s")
    assert "What happened" in msgs[-1]["story"] and "HDRM made the same allreduce" in msgs[-1]["story"]
    assert "fabric.png" in msgs[-1]["plots"] and "links.csv" not in msgs[-1]["plots"]
    assert view.folder_calls(folder)["calls"][1] == {"run": 1, "call": 0,
                                                     "label": "halving-doubling hdrm 2097152 B rep 1 (demo hdrm)"}


# --- the server -------------------------------------------------------------------------------------

def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.headers, r.read()


def test_the_server_serves_the_page_and_only_files_directly_in_the_folder(folder, tmp_path):
    (tmp_path / "secret.txt").write_text("no")
    with WebView("127.0.0.1", 0, folder) as web:
        status, headers, body = _get(web.url)
        assert status == 200 and b"/static/app.js" in body
        assert headers["Content-Security-Policy"] == "default-src 'self'"
        assert _get(web.url + "results/fabric.png")[2][:4] == b"\x89PNG"
        for bad in ("results/..%2Fsecret.txt", "results/../secret.txt", "results/", "static/server.py",
                    "results/.hidden"):
            with pytest.raises(urllib.error.HTTPError) as e:
                _get(web.url + bad)
            assert e.value.code == 404, bad
        calls = json.loads(_get(web.url + "api/replay")[2])["calls"]
        assert len(calls) == 2
        frames = json.loads(_get(web.url + "api/replay?run=0&call=0")[2])["frames"]
        assert len(frames) == 6


def test_before_the_run_has_a_folder_the_replay_says_so():
    with WebView() as web:
        with pytest.raises(urllib.error.HTTPError) as e:
            _get(web.url + "api/replay")
        assert e.value.code == 404 and json.loads(e.value.read()) == {"error": "no results folder yet"}


def _events(stream, count: int) -> list[dict]:
    """The next `count` server-sent events' data."""
    got = []
    while len(got) < count:
        line = stream.readline()
        assert line, "the stream ended"
        if line.startswith(b"data: "):
            got.append(json.loads(line[len(b"data: "):]))
    return got


def test_a_late_viewer_gets_what_was_kept_but_no_old_samples():
    with WebView() as web:
        web.publish({"type": "fabric", "n": 1})
        web.publish({"type": "sample", "n": 2})
        web.publish({"type": "fabric", "n": 3})   # a new fabric replaces the one kept
        web.publish({"type": "call", "n": 4})
        with urllib.request.urlopen(web.url + "events", timeout=5) as stream:
            kept = _events(stream, 2)
            web.publish({"type": "sample", "n": 5})
            live = _events(stream, 1)
    assert [m["n"] for m in kept + live] == [3, 4, 5]


def test_a_port_in_use_is_refused_before_anything_is_created(plan, tmp_path, monkeypatch):
    import emulator.emulation

    def no_fabric(*args, **kwargs):
        raise AssertionError("the fabric was to be built")
    monkeypatch.setattr(emulator.emulation, "Emulation", no_fabric)
    out = str(tmp_path / "out")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SpecError, match=f"--web-port {port}: the port is in use"):
            pipeline.emulate(Experiment("t", [plan.spec]), [plan], out, ("127.0.0.1", port))
    assert os.listdir(tmp_path) == []   # neither OUT nor OUT.partial


@pytest.mark.parametrize("flags, message", [
    (["--web-port", "70000"], "--web-port: '70000' is not a port number"),
    (["--web-port", "http"], "--web-port: 'http' is not a port number"),
    (["--web-host", " "], "--web-host: the address is empty"),
    (["--web-host", "192.0.2.1"], "--web-host 192.0.2.1: cannot listen there"),   # not this machine's
])
def test_bad_web_flags_exit_2_naming_the_flag(folder, flags, message, capsys):
    assert main(["report", folder, *flags]) == 2
    assert message in capsys.readouterr().err


def test_report_web_serves_one_folder_only(folder, capsys):
    assert main(["report", folder, folder, "--web"]) == 2
    assert "--web serves one results folder" in capsys.readouterr().err


def test_a_run_with_web_sends_the_fabric_every_sample_every_call_and_the_end(plan, tmp_path, monkeypatch):
    """pipeline.emulate's wiring, with FakeEmulation in place of the network:
    the page gets what the terminal's views get, then serves until Ctrl-C."""
    import emulator.emulation
    from webtools import FakeEmulation
    monkeypatch.setattr(emulator.emulation, "Emulation", FakeEmulation)
    monkeypatch.setattr(preflight, "capacity_checks", lambda plans: [])
    sent = []
    monkeypatch.setattr(WebView, "publish", lambda self, message: sent.append(message))
    monkeypatch.setattr(WebView, "serve_until_interrupted", lambda self: sent.append({"type": "served"}))
    out = str(tmp_path / "out")
    assert pipeline.emulate(Experiment("t", [plan.spec]), [plan], out, web=("127.0.0.1", 0),
                            story=lambda folder: f"story of {folder}") == 0
    types = [m["type"] for m in sent]
    assert types == ["fabric"] + (["sample"] * 5 + ["call"]) * len(plan.calls) + ["end", "served"]
    samples = [m for m in sent if m["type"] == "sample"]
    assert samples[0]["label"].startswith("[1/2] halving-doubling naive 2M warm-up")
    assert samples[-1]["label"].startswith("[2/2] halving-doubling naive 2M rep 1/1")
    total = len(plan.schedules[max(plan.schedules)].steps[0])
    assert [r["done"] for r in samples[1]["ranks"]] == [total * 2 // 5] * plan.ranks
    assert samples[0]["links"] != samples[1]["links"]
    calls = [m for m in sent if m["type"] == "call"]
    assert [c["verdict"] for c in calls] == ["warm-up (not counted)", "ok"]
    assert sent[-2]["story"] == f"story of {out}" and "fabric.png" in sent[-2]["plots"]


def test_the_fabric_message_boxes_each_node_of_accelerators():
    from emulator.fabric.nodes import NodeShape
    from emulator.fabric.topology import build
    fabric = build("bigraph:m=2,n=4", node=NodeShape(4, 2, "pcie"))
    msg = view.fabric_message(fabric)
    assert len(msg["boxes"]) == 4 and set(msg["boxes"][0]) == {"x", "y", "width", "height"}
    assert view.fabric_message(build("bigraph:m=2,n=4"))["boxes"] == []
