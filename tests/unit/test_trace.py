"""trace.json against the Trace Event Format: fields per phase, slices that
nest on each track, times monotonic per track; a recorded folder converts;
a 1,024-rank folder stays small; report --trace and model --out write it."""
import json
import os
import shutil

import pandas as pd
import pytest

from emulator.cli import main
from emulator.results.trace import STEP_SLICES_MAX, folder_events, model_events, write_trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = os.path.join(ROOT, "lab", "first-step-2026-12-05")   # steps.csv of 3 calls, no spec.json
JOBS = os.path.join(ROOT, "lab", "jobs-2026-12-01", "moe")
NEEDS = {"X": {"name", "ph", "ts", "dur", "pid", "tid"}, "C": {"name", "ph", "ts", "pid", "args"},
         "M": {"name", "ph", "pid", "args"}}


def check_trace(events: list[dict]) -> None:
    """The spec's fields per phase; every X slice and counter on a track
    non-negative and in time order; slices on a track nest (none overlaps
    another partly); every process and thread with a slice named."""
    tracks: dict = {}
    named = {(e["pid"], e.get("tid")) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    processes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    for e in events:
        assert e["ph"] in NEEDS, e
        assert NEEDS[e["ph"]] <= set(e), e
        if e["ph"] == "M":
            assert e["args"]["name" if e["name"].endswith("_name") else "sort_index"] != ""
            continue
        assert e["ts"] >= 0, e
        assert e["pid"] in processes, e
        track = tracks.setdefault((e["pid"], e["tid"] if e["ph"] == "X" else e["name"]), [])
        assert not track or track[-1]["ts"] <= e["ts"], (track[-1], e)
        track.append(e)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and (e["pid"], e["tid"]) in named, e
        else:
            assert all(isinstance(v, (int, float)) for v in e["args"].values()), e
    for track in tracks.values():
        open_ends: list[float] = []
        for e in (e for e in track if e["ph"] == "X"):
            while open_ends and open_ends[-1] <= e["ts"]:
                open_ends.pop()
            end = e["ts"] + e["dur"]
            assert not open_ends or end <= open_ends[-1] + 1e-6, f"partial overlap at {e}"
            open_ends.append(end)


def steps_table(ranks: int, steps: int, calls: int = 1, phases=("reduce-scatter", "allgather")) -> pd.DataFrame:
    rows = []
    for rep in range(calls):
        for rank in range(ranks):
            for k in range(steps):
                rows.append({"run": 0, "topology": "flat", "policy": "shortest", "algorithm": "ring",
                             "mapping": "naive", "label": "", "size_bytes": 1 << 20, "repetition": rep,
                             "rank": rank, "host": f"h{rank}", "step": k,
                             "phase": phases[k * len(phases) // steps], "start_s": k * 0.01 + rank * 1e-6,
                             "end_s": (k + 1) * 0.01, "bytes_sent": 10, "bytes_received": 10,
                             "model_end_s": (k + 1) * 0.009})
    return pd.DataFrame(rows)


def links_table(links: int, samples: int, calls: int = 1) -> pd.DataFrame:
    return pd.DataFrame([{"run": 0, "size_bytes": 1 << 20, "repetition": rep - 1, "call": rep, "t_s": 0.1 * (i + 1),
                          "link": f"s{n}:1>s{n + 1}", "kind": "switch", "util": (i % 3) / 2, "backlog_bytes": 1000 * i}
                         for rep in range(calls) for n in range(links) for i in range(samples)])


def test_synthetic_folder_follows_the_format():
    events = folder_events({"steps.csv": steps_table(4, 6, calls=2), "links.csv": links_table(3, 5, calls=3)}, [])
    check_trace(events)
    kinds = {e["ph"] for e in events}
    assert kinds == {"M", "X", "C"}
    calls = [e for e in events if e["ph"] == "X" and e["tid"] == 0 and e["name"].endswith(("rep 0", "rep 1"))]
    assert [c["name"] for c in calls] == ["1M rep 0", "1M rep 1"]
    # the warm-up call (links only) ran first: the counted calls follow it, one after the other
    assert calls[0]["ts"] == pytest.approx(0.5e6) and calls[1]["ts"] >= calls[0]["ts"] + calls[0]["dur"]


def test_a_recorded_folder_converts(tmp_path):
    folder = tmp_path / "first-step"
    folder.mkdir()
    shutil.copy(os.path.join(STEPS, "steps.csv"), folder)
    with open(write_trace(str(folder))) as f:
        doc = json.load(f)
    assert doc["displayTimeUnit"] == "ms"
    check_trace(doc["traceEvents"])
    steps = pd.read_csv(os.path.join(STEPS, "steps.csv"))
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("step")]
    assert len(slices) == len(steps)


def test_a_recorded_workload_converts(tmp_path):
    folder = shutil.copytree(JOBS, tmp_path / "moe")
    with open(write_trace(str(folder))) as f:
        events = json.load(f)["traceEvents"]
    check_trace(events)
    iterations = [e for e in events if e["ph"] == "X" and e["name"].startswith("iteration")]
    assert iterations and all("fidelity" in e["args"] for e in iterations)


def test_1024_ranks_stay_small(tmp_path):
    """A ring allreduce's 2,046 steps on each of 1,024 ranks: per phase, not per step."""
    steps = steps_table(1024, 2046)
    assert len(steps) > STEP_SLICES_MAX
    events = folder_events({"steps.csv": steps, "links.csv": links_table(512, 20)}, [])
    check_trace(events)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}, separators=(",", ":")))
    assert path.stat().st_size < 3_000_000   # docs/results.md says how large


def test_report_trace_writes_the_file(tmp_path, capsys):
    folder = shutil.copytree(JOBS, tmp_path / "moe")
    assert main(["report", "--trace", str(folder)]) == 0
    assert os.path.isfile(folder / "trace.json")
    assert str(folder / "trace.json") in capsys.readouterr().out


def test_model_trace_follows_the_format():
    events = model_events([{"name": "allreduce", "sizes": [{"size_bytes": 1024, "time_s": 0.3, "busbw_mbps": 1.0},
                                                             {"size_bytes": 2048, "time_s": 0.5, "busbw_mbps": 2.0}],
                            "steps": [{"size_bytes": s, "step": k, "end_s": 0.1 * (k + 1)} for s in (1024, 2048)
                                      for k in range(3)]},
                           {"name": "workload", "jobs": [{"job": "a", "iteration": i, "start_s": 0.4 * i,
                                                          "end_s": 0.4 * i + 0.5, "time_s": 0.5} for i in range(3)]}])
    check_trace(events)
    steps = [e for e in events if e["name"] == "step 2"]
    assert [e["dur"] for e in steps] == [pytest.approx(1e5), pytest.approx(1e5)]
