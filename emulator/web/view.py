"""What the web page shows, as JSON-ready dicts (pure): the fabric with the
drawing's layout, a live sample, a finished call, and the replay of a call
from links.csv. The server (emulator/web/server.py) only sends these."""
from __future__ import annotations

import functools
import json
import os

import pandas as pd

from emulator.fabric.graph import Fabric
from emulator.inputs import read_bytes
from emulator.records.links import link_label
from emulator.records.metrics import busbw_mbps
from emulator.results.plots import layout, node_boxes
from emulator.results.calls import call_time
from emulator.results.verdict import trusted

PLOT_SUFFIXES = (".png", ".svg", ".pdf")   # what the page links to in the results folder


def fabric_message(fabric: Fabric) -> dict:
    """Nodes at plots.layout's positions (so the page matches fabric.png),
    every link with the labels of its two directions, as links.csv names
    them, and a box around each node of accelerators (plots.node_boxes)."""
    pos = layout(fabric)
    nodes = [{"name": s.name, "kind": "switch", "tier": s.tier, "x": pos[s.name][0], "y": pos[s.name][1]}
             for s in fabric.switches]
    nodes += [{"name": h.name, "kind": "host", "tier": "host", "x": pos[h.name][0], "y": pos[h.name][1]}
              for h in fabric.hosts]
    links = []
    for link in fabric.links:
        (a, ap), (b, bp) = link.ends()
        links.append({"a": a, "b": b, "kind": link.kind, "rate_mbps": link.rate_mbps,
                      "directions": [link_label(a, ap, b), link_label(b, bp, a)]})
    boxes = [{"x": x, "y": y, "width": w, "height": h} for (x, y), w, h in node_boxes(fabric, pos)]
    return {"type": "fabric", "topology": fabric.topology, "nodes": nodes, "links": links, "boxes": boxes}


def link_values(rows) -> dict[str, list]:
    """{link label: [util, backlog bytes, drops]} of one sample's rows
    (linkstats.link_rows' dicts, or links.csv rows of one time)."""
    return {r["link"]: [round(float(r["util"]), 4), _int(r.get("backlog_bytes")), _int(r.get("drops"))]
            for r in rows}


def _int(value) -> int:
    return 0 if value is None or pd.isna(value) or value == "" else int(value)


# --- live: what a run sends ----------------------------------------------------------------

def rank_roles(plan) -> list[dict]:
    """Per rank: its host, its job (a workload's) and the ops of its steps,
    so a sample only needs each rank's count of steps done."""
    program = plan.programs.get(max(plan.schedules)) if plan.is_workload else None
    job_of = {rank: layout.job.name for layout in program.jobs for rank in layout.ranks} if program else {}
    steps = plan.schedules[max(plan.schedules)].steps
    return [{"host": plan.hosts[rank], "job": job_of.get(rank, ""),
             "ops": [f"op {s.op} {s.phase}".strip() for s in steps[rank]] if program else [],
             "total": len(steps[rank])} for rank in range(plan.ranks)]


def sample_message(label: str, rows: list[dict], steps_done: list[int], roles: list[dict], elapsed_s: float) -> dict:
    """One monitor sample: every directed link's use and queue, and each
    rank's progress (step, or job and op when jobs run)."""
    ranks = []
    for rank, (done, role) in enumerate(zip(steps_done, roles)):
        entry = {"rank": rank, "host": role["host"], "done": done, "total": role["total"]}
        if role["job"]:
            entry["job"] = role["job"]
            entry["op"] = role["ops"][min(done, len(role["ops"]) - 1)] if done < role["total"] else "done"
        ranks.append(entry)
    return {"type": "sample", "label": label, "t_s": round(elapsed_s, 3), "links": link_values(rows), "ranks": ranks}


def call_message(plan, call, record, written, label: str) -> dict:
    """A finished call: measured against the model (busbw, or time for a
    workload) and the verdict; warm-ups are measured but not counted."""
    t = call_time(record.steps)
    model = record.model_time_s or plan.predictions[call.size_bytes].time_s
    rows = written if isinstance(written, list) else [written] if written else []
    verdicts = sorted({r["fidelity"] for r in rows}, key=lambda v: not trusted(v))
    verdict = verdicts[-1] if verdicts else "warm-up (not counted)"
    if plan.is_workload:
        measured, modelled = f"{t:.2f} s", f"{model:.2f} s"
    else:
        measured, modelled = (_busbw(plan.spec.collective, plan.ranks, call.size_bytes, x) for x in (t, model))
    return call_row(plan.run, call.index, label, measured, modelled, verdict)


def call_row(run: int, call: int | None, label: str, measured: str, model: str, verdict: str) -> dict:
    """A line of the page's call table; `call` (links.csv's) replays it, None: nothing to replay."""
    return {"type": "call", "run": run, "call": call, "label": label, "measured": measured, "model": model,
            "verdict": verdict}


def _busbw(collective: str, ranks: int, size: int, time_s: float) -> str:
    return f"{busbw_mbps(collective, ranks, size, time_s):.2f} Mbit/s"


def end_message(story: str, plots: list[str]) -> dict:
    return {"type": "end", "story": story, "plots": plots}


def plots_of(names) -> list[str]:
    """The plots among a folder's file names, sorted."""
    return sorted(n for n in names if n.lower().endswith(PLOT_SUFFIXES))


# --- replay: what a results folder holds -----------------------------------------------------

def replay_calls(links: pd.DataFrame, topology: str) -> list[dict]:
    """The calls links.csv holds on `topology` (fabric.json's: the drawing
    is of that fabric), in order, each with the label the page lists."""
    d = links[links.topology == topology] if "topology" in links.columns else links
    keys = [k for k in ("run", "call") if k in d.columns]
    return [{"run": int(r.get("run", 0)), "call": int(r["call"]), "label": call_name(r)}
            for r in d.drop_duplicates(keys).to_dict("records")]


def call_name(row: dict) -> str:
    """'halving-doubling naive 2097152 B rep 1 (demo naive)' from a table's
    row: what it has of algorithm, mapping, size, repetition and label."""
    what = " ".join(str(row[k]) for k in ("algorithm", "mapping") if row.get(k))
    if row.get("size_bytes"):
        what += f" {int(row['size_bytes'])} B"
    if row.get("repetition") is not None:
        what += " warm-up" if row["repetition"] < 0 else f" rep {int(row['repetition']) + 1}"
    if row.get("label"):
        what += f" ({row['label']})"
    return what.strip() or f"call {row.get('call', '?')}"


def replay_frames(links: pd.DataFrame, run: int, call: int) -> list[dict]:
    """The samples of one call in time order: {t_s, links: link_values}."""
    d = links[links.call == call]
    if "run" in d.columns:
        d = d[d.run == run]
    if d.empty:
        raise ValueError(f"links.csv has no samples of run {run}, call {call}")
    return [{"t_s": float(t), "links": link_values(group.to_dict("records"))}
            for t, group in d.groupby("t_s", sort=True)]


def finished_calls(collectives: pd.DataFrame | None, links: pd.DataFrame | None) -> list[dict]:
    """collectives.csv's rows as the page's call table, each with the
    links.csv call that replays it, if any."""
    if collectives is None:
        return []
    index = {}
    if links is not None and {"run", "size_bytes", "repetition"} <= set(links.columns):
        index = {(int(r.run), int(r.size_bytes), int(r.repetition)): int(r.call)
                 for r in links.drop_duplicates(["run", "call"]).itertuples()}
    out = []
    for r in collectives.to_dict("records"):
        run, rep = int(r.get("run", 0)), int(r.get("repetition", 0))
        measured, model = (_busbw(r["collective"], r["ranks"], r["size_bytes"], r[k]) for k in ("time_s", "model_time_s"))
        out.append(call_row(run, index.get((run, int(r["size_bytes"]), rep)), call_name(r), measured, model,
                            r.get("fidelity", "")))
    return out


# --- a results folder, read as the report reads it ---------------------------------------------

def folder_messages(folder: str) -> list[dict]:
    """What `bigraph-emu report --web` shows of a folder: its fabric, its
    finished calls, and its end (the demo's story for a demo's folder, and
    the plots)."""
    from emulator.results import damage
    from emulator.results.report import demo_story
    from emulator.records.tables import read_fabric, read_table
    damage.check(folder)   # a damaged folder is refused, as `report` refuses it
    fabric = read_fabric(os.path.join(folder, "fabric.json"))
    if fabric is None:
        raise ValueError(f"{folder} has no fabric.json: there is nothing to draw")
    links = _links(folder)
    calls = finished_calls(read_table(os.path.join(folder, "collectives.csv")), links)
    is_demo = _spec_name(folder) == "demo"
    story = demo_story(folder) if is_demo and os.path.exists(os.path.join(folder, "link_loads.csv")) else ""
    return [fabric_message(fabric), *calls, end_message(story, plots_of(os.listdir(folder)))]


def _spec_name(folder: str) -> str:
    """The experiment's name in spec.json ('demo' for the demo's folder)."""
    doc = json.loads(read_bytes(os.path.join(folder, "spec.json")))   # read_runs has checked it is JSON
    return str(doc.get("name", "")) if isinstance(doc, dict) else ""


def folder_calls(folder: str) -> dict:
    """The replayable calls of a folder, on the fabric it holds."""
    from emulator.records.tables import read_fabric
    links = _links(folder)
    fabric = read_fabric(os.path.join(folder, "fabric.json"))
    if links is None or fabric is None:
        raise ValueError("no links.csv and fabric.json (yet): nothing to replay")
    return {"calls": replay_calls(links, fabric.topology)}


def folder_frames(folder: str, run: int, call: int) -> dict:
    links = _links(folder)
    if links is None:
        raise ValueError("no links.csv (yet): nothing to replay")
    return {"run": run, "call": call, "frames": replay_frames(links, run, call)}


def _links(folder: str) -> pd.DataFrame | None:
    """links.csv, read once per version of the file (a run appends to it)."""
    path = os.path.join(folder, "links.csv")
    if not os.path.exists(path):
        return None
    st = os.stat(path)
    return _read_links(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=2)
def _read_links(path: str, mtime_ns: int, size: int) -> pd.DataFrame | None:
    from emulator.records.tables import read_table
    return read_table(path)
