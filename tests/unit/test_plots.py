"""Unit tests of the plots of a results folder (emulator/results/plots.py): the pure
data shaping is checked value by value on small hand-made tables, the
drawings only for writing a PNG."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from emulator.results.plots import (MAX_HEATMAP_ROWS, default_call, default_size_repetition, fabric_drawing, layout,
                            link_label, link_peaks, one_run, step_timeline, timeline_bars, utilisation_heatmap,
                            utilisation_matrix)
from emulator.fabric.topology import bigraph, fattree, leafspine

NAN = float("nan")


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def sample(call, t, link, util, kind="switch", **extra):
    """One links.csv row as the monitor writes it (rate 8 Mbit/s)."""
    return {"call": call, "t_s": t, "link": link, "kind": kind, "rate_mbps": 8.0,
            "tx_bytes": int(util * 8e6 / 8 * 0.5), "util": util, "backlog_bytes": 0, "drops": 0, **extra}


@pytest.fixture
def links():
    """Call 1 of bigraph:m=2,n=4: three switch links and one host link over
    three 0.5 s samples; bgs1:4>bgs3 missed its first sample."""
    rows = [sample(0, 0.5, "bgs0:3>bgs2", 1.0)]   # another call: must not count
    for t, a, b, c in [(0.5, 0.2, 0.9, NAN), (1.0, 0.4, 0.9, 0.6), (1.5, 0.0, 0.6, 0.6)]:
        rows.append(sample(1, t, "bgs0:3>bgs2", a))
        rows.append(sample(1, t, "bgs2:3>bgs0", b))
        if not math.isnan(c):
            rows.append(sample(1, t, "bgs1:4>bgs3", c))
        rows.append(sample(1, t, "bgh0:0>bgs0", 1.0, kind="host"))
    return pd.DataFrame(rows)


# --- utilisation over time ----------------------------------------------------------------

def test_utilisation_matrix_busiest_first(links):
    labels, times, util = utilisation_matrix(links, 1)
    # means: bgs2:3>bgs0 0.8, bgs1:4>bgs3 0.6, bgs0:3>bgs2 0.2; the host link is left out
    assert labels == ["bgs2:3>bgs0", "bgs1:4>bgs3", "bgs0:3>bgs2"]
    assert list(times) == [0.5, 1.0, 1.5]
    np.testing.assert_array_equal(util, [[0.9, 0.9, 0.6], [NAN, 0.6, 0.6], [0.2, 0.4, 0.0]])


def test_utilisation_matrix_limit_and_ties(links):
    labels, _, util = utilisation_matrix(links, 1, limit=2)
    assert labels == ["bgs2:3>bgs0", "bgs1:4>bgs3"] and util.shape == (2, 3)
    tie = pd.DataFrame([sample(0, 1.0, "b", 0.5), sample(0, 1.0, "a", 0.5)])
    assert utilisation_matrix(tie, 0)[0] == ["a", "b"]


def test_utilisation_matrix_host_links_when_no_switch_links():
    d = pd.DataFrame([sample(0, 1.0, "bgh0:0>bgs0", 0.3, kind="host"),
                      sample(0, 1.0, "bgh1:0>bgs0", 0.7, kind="host")])
    labels, _, util = utilisation_matrix(d, 0)
    assert labels == ["bgh1:0>bgs0", "bgh0:0>bgs0"]
    np.testing.assert_array_equal(util, [[0.7], [0.3]])


def test_utilisation_matrix_unknown_call(links):
    with pytest.raises(ValueError, match="call 7"):
        utilisation_matrix(links, 7)


def test_default_call_is_last_counted():
    d = pd.DataFrame([sample(c, 1.0, "x", 0.1) for c in (0, 1, 2)])
    assert default_call(d) == 2
    d["repetition"] = [-1, 0, -1]     # a warm-up is never the default
    assert default_call(d) == 1


def test_one_run_keeps_the_last_run():
    d = pd.DataFrame([sample(0, 1.0, "x", u, topology="t", policy="shortest", algorithm=a, mapping="naive")
                      for a, u in (("ring", 0.1), ("halving-doubling", 0.2), ("halving-doubling", 0.3))])
    assert list(one_run(d).util) == [0.2, 0.3]
    assert len(one_run(d.drop(columns=["topology", "policy", "algorithm", "mapping"]))) == 3


def test_heatmap_writes_png(tmp_path, links):
    assert utilisation_heatmap(links, str(tmp_path / "h.png")) == 1
    assert_png(tmp_path / "h.png")
    assert utilisation_heatmap(links, str(tmp_path / "h0.png"), call=0) == 0
    assert_png(tmp_path / "h0.png")


def test_heatmap_caps_rows(tmp_path):
    many = pd.DataFrame([sample(3, t, f"bgs{i}:1>bgs{i + 1}", (i % 7) / 7, size_bytes=1024)
                         for i in range(MAX_HEATMAP_ROWS + 10) for t in (0.5, 1.0)])
    assert utilisation_heatmap(many, str(tmp_path / "h.png")) == 3
    assert_png(tmp_path / "h.png")


# --- the fabric ------------------------------------------------------------------------------

FABRICS = {"bigraph": bigraph(2, 4), "fattree": fattree(4), "leafspine": leafspine(2, 2, 2)}
TIERS = {"bigraph": ["upper", "lower"], "fattree": ["core", "agg", "edge"], "leafspine": ["spine", "leaf"]}


def test_layout_bigraph_exact():
    pos = layout(bigraph(2, 4))
    # 4 hosts per row set the width: switch slots 2 wide, hosts 1 apart
    assert pos["bgs0"] == (0.5, 2.0) and pos["bgs1"] == (2.5, 2.0)
    assert pos["bgs2"] == (0.5, 1.0) and pos["bgs3"] == (2.5, 1.0)
    assert pos["bgh0"] == (0.0, 2.6) and pos["bgh1"] == (1.0, 2.6)    # upper part: hosts above
    assert pos["bgh4"] == (0.0, 0.4) and pos["bgh5"] == (1.0, 0.4)    # lower part: hosts below
    assert pos["bgh7"] == (3.0, 0.4)


@pytest.mark.parametrize("kind", FABRICS)
def test_layout_places_every_node_in_tier_order(kind):
    fabric = FABRICS[kind]
    pos = layout(fabric)
    assert set(pos) == {s.name for s in fabric.switches} | {h.name for h in fabric.hosts}
    assert len(set(pos.values())) == len(pos)                          # no two nodes on one spot
    ys = [{pos[s.name][1] for s in fabric.switches if s.tier == t} for t in TIERS[kind]]
    assert all(len(y) == 1 for y in ys)                                # a tier is one row
    rows = [next(pos[s.name][1] for s in fabric.switches if s.tier == t) for t in TIERS[kind]]
    assert rows == sorted(rows, reverse=True) and len(set(rows)) == len(rows)   # top tier first
    for t in TIERS[kind]:
        xs = [pos[s.name][0] for s in sorted(fabric.switches, key=lambda s: s.index) if s.tier == t]
        assert xs == sorted(xs)                                        # by index, left to right
    for h in fabric.hosts:
        hx, hy = pos[h.name]
        sx, sy = pos[h.switch]
        outside = hy > sy if sy == rows[0] and kind == "bigraph" else hy < sy
        assert outside and abs(hx - sx) < 2.0


def test_link_peaks_takes_the_busier_direction():
    fabric = bigraph(2, 4)
    host = fabric.links[0]                   # bgh0 on bgs0 port 1
    up = next(l for l in fabric.links if l.kind == "switch")
    peaks = {link_label(host.a, host.a_port, host.b): 0.3,
             link_label(up.a, up.a_port, up.b): 0.5, link_label(up.b, up.b_port, up.a): 0.9}
    got = link_peaks(fabric, peaks)
    assert len(got) == len(fabric.links)
    assert got[0] == 0.3 and got[fabric.links.index(up)] == 0.9
    assert sum(v is not None for v in got) == 2                        # the others: no data
    assert link_peaks(fabric, {link_label(host.b, host.b_port, host.a): NAN})[0] is None


@pytest.mark.parametrize("kind", FABRICS)
def test_fabric_drawing_writes_png(tmp_path, kind):
    fabric = FABRICS[kind]
    l = fabric.links[-1]
    fabric_drawing(fabric, {link_label(l.a, l.a_port, l.b): 0.8}, str(tmp_path / "f.png"))
    assert_png(tmp_path / "f.png")
    fabric_drawing(fabric, {}, str(tmp_path / "grey.png"))
    assert_png(tmp_path / "grey.png")


# --- step timeline ---------------------------------------------------------------------------

def step(size, rep, rank, k, start, end, model_end="", algorithm="ring"):
    return {"topology": "bigraph:m=1,n=2", "policy": "shortest", "algorithm": algorithm, "mapping": "naive",
            "size_bytes": size, "repetition": rep, "rank": rank, "host": f"bgh{rank}", "step": k,
            "phase": "reduce-scatter" if k == 0 else "allgather", "start_s": start, "end_s": end,
            "bytes_sent": 1, "bytes_received": 1, "model_end_s": model_end}


@pytest.fixture
def steps():
    rows = []
    for size, rep, t0 in ((8192, 0, 10.0), (16384, 0, 20.0), (16384, 1, 30.0)):
        rows += [step(size, rep, 1, 0, t0 + 0.5, t0 + 1.0, 0.4), step(size, rep, 1, 1, t0 + 1.0, t0 + 3.0, 1.8),
                 step(size, rep, 0, 0, t0, t0 + 1.5, 0.4), step(size, rep, 0, 1, t0 + 1.5, t0 + 2.0)]
    # read back as steps.csv is: the missing model end is NaN
    return pd.DataFrame(rows).replace({"model_end_s": {"": NAN}})


def test_default_call_of_timeline_is_largest_size_first_counted(steps):
    assert default_size_repetition(steps) == (16384, 0)


def test_timeline_bars_relative_to_call_start(steps):
    bars = timeline_bars(steps)
    assert list(bars["rank"]) == [0, 0, 1, 1] and list(bars.step) == [0, 1, 0, 1]
    assert list(bars.start) == [0.0, 1.5, 0.5, 1.0]
    assert list(bars.end) == [1.5, 2.0, 1.0, 3.0]
    assert list(bars.phase) == ["reduce-scatter", "allgather"] * 2
    np.testing.assert_array_equal(bars.model_end, [0.4, NAN, 0.4, 1.8])
    assert set(bars.size_bytes) == {16384} and set(bars.repetition) == {0}


def test_timeline_bars_chosen_call(steps):
    bars = timeline_bars(steps, size=16384, repetition=1)
    assert list(bars.start) == [0.0, 1.5, 0.5, 1.0] and set(bars.repetition) == {1}
    assert set(timeline_bars(steps, size=8192).size_bytes) == {8192}
    with pytest.raises(ValueError, match="repetition 5"):
        timeline_bars(steps, size=8192, repetition=5)


def test_timeline_bars_of_the_last_run(steps):
    other = steps.assign(algorithm="halving-doubling", start_s=steps.start_s + 100, end_s=steps.end_s + 100)
    bars = timeline_bars(pd.concat([other, steps.assign(end_s=steps.end_s + 1)]))
    assert list(bars.end) == [2.5, 3.0, 2.0, 4.0]       # the ring run, not the first one


def test_step_timeline_writes_png(tmp_path, steps):
    assert step_timeline(steps, str(tmp_path / "t.png")) == (16384, 0)
    assert_png(tmp_path / "t.png")
    assert step_timeline(steps.assign(model_end_s=NAN), str(tmp_path / "t2.png"), 8192, 0) == (8192, 0)
    assert_png(tmp_path / "t2.png")


def test_job_plots_draw_the_last_run_of_a_folder(tmp_path):
    import pandas as pd
    from emulator.results.plots import job_link_bars, job_timeline, last_run
    keys = {"topology": "t", "policy": "p", "mapping": "naive", "label": ""}
    ops = pd.DataFrame([{**keys, "job": j, "repetition": rep, "iteration": 0, "rank": r, "host": f"bgh{r}",
                         "op": k, "kind": kind, "start_s": k * 0.5, "end_s": k * 0.5 + 0.4,
                         "bytes_sent": 0, "bytes_received": 0}
                        for j in ("a", "b") for rep in (0, 1) for r in (0, 1)
                        for k, kind in enumerate(("compute", "allreduce"))])
    ops = pd.concat([ops.assign(mapping="random"), ops])   # an earlier run, then the last one
    assert len(last_run(ops)) == len(ops) // 2 and set(last_run(ops).mapping) == {"naive"}
    assert job_timeline(ops, str(tmp_path / "jobs.png")) == 1
    links = pd.DataFrame([{**keys, "link": "bgs0:3>bgs2", "job": "a", "bytes": 1 << 20},
                          {**keys, "link": "bgs0:3>bgs2", "job": "b", "bytes": 2 << 20}])
    job_link_bars(links, str(tmp_path / "links.png"))
    assert (tmp_path / "jobs.png").stat().st_size > 1000 and (tmp_path / "links.png").stat().st_size > 1000


# --- runs side by side, scales explained, repetitions counted from 1 ------------------------

def drawn(monkeypatch):
    """The figure a plot function saves, instead of saving it."""
    import emulator.results.plots as plots
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig))
    return figures


def test_runs_are_told_apart_by_their_place_in_the_experiment():
    keys = {"topology": "t", "policy": "shortest", "algorithm": "ring", "mapping": "naive"}
    d = pd.DataFrame([sample(0, 1.0, "x", u, run=r, **keys) for r, u in ((0, 0.1), (0, 0.2), (1, 0.3))])
    from emulator.results.plots import run_keys, runs_of
    assert run_keys(d) == ["run"] and [list(r.util) for r in runs_of(d)] == [[0.1, 0.2], [0.3]]
    assert list(one_run(d).util) == [0.3]
    assert run_keys(d.drop(columns="run")) == ["topology", "policy", "algorithm", "mapping"]


def test_repetitions_are_named_as_the_progress_line_counts_them():
    from emulator.results.plots import call_name, repetition_name
    assert [repetition_name(-1), repetition_name(0), repetition_name(1, 2)] == ["warm-up", "rep 1", "rep 2/2"]
    d = pd.DataFrame([sample(c, 1.0, "x", 0.1, size_bytes=size, repetition=rep)
                      for c, size, rep in ((0, 8192, -1), (1, 8192, 0), (2, 8192, 1), (3, 1 << 20, 0))])
    assert [call_name(d, c) for c in range(4)] == ["8K warm-up (call 0)", "8K rep 1/2 (call 1)", "8K rep 2/2 (call 2)",
                                                   "1M rep 1/1 (call 3)"]
    assert call_name(d.drop(columns=["size_bytes", "repetition"]), 2) == "call 2"


def test_heatmaps_of_several_runs_share_the_time_axis_and_the_colour_scale(links, monkeypatch, tmp_path):
    from emulator.results.plots import heatmap_extent
    fast = links.assign(t_s=links.t_s / 2, util=links.util.clip(upper=0.5))   # the same call, twice as fast
    assert heatmap_extent([links, fast]) == (1.5, 1.0)
    hot = links.assign(util=links.util * 1.3)                                 # HTB bursts: 0.9 x 1.3 = 1.17
    assert heatmap_extent([fast, hot]) == pytest.approx((1.5, 1.17))
    figures = drawn(monkeypatch)
    utilisation_heatmap(fast, str(tmp_path / "h.png"), extent=heatmap_extent([fast, hot]))
    ax, colorbar = figures[0].axes
    assert ax.get_xlim() == (0.0, 1.5) and colorbar.get_ylim()[1] == pytest.approx(1.17)
    assert "above 1 (cyan line): HTB bursts\nwithin one 250 ms sample" in colorbar.get_ylabel()   # its samples
    utilisation_heatmap(fast, str(tmp_path / "h.png"))                      # alone: its own axis, scale up to 1
    ax, colorbar = figures[1].axes
    assert ax.get_xlim()[1] == 0.75 and "HTB" not in colorbar.get_ylabel()


def test_the_timeline_legend_stands_beside_the_ranks(steps, monkeypatch, tmp_path):
    figures = drawn(monkeypatch)
    step_timeline(steps, str(tmp_path / "t.png"), t_end=10.0)
    ax = figures[0].axes[0]
    anchor = ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.x0 > 1.0                                                   # right of the axes, not over a rank
    assert ax.get_xlim() == (0.0, 10.0) and "repetition 0" not in ax.get_title()
    assert "16384 bytes, rep 1/2" in ax.get_title()


def test_the_fabric_drawing_names_hosts_and_tells_peak_and_mean_use(monkeypatch, tmp_path):
    from emulator.results.plots import call_use, fabric_story
    fabric = bigraph(2, 4)
    up = next(l for l in fabric.links if l.kind == "switch")
    a, b = link_label(up.a, up.a_port, up.b), link_label(up.b, up.b_port, up.a)
    rows = pd.DataFrame([sample(0, t, label, u) for t, u_a, u_b in ((0.1, 1.2, 0.0), (0.2, 0.4, 0.02))
                         for label, u in ((a, u_a), (b, u_b))])
    peaks, means, call = call_use(rows)
    assert (peaks, call) == ({a: 1.2, b: 0.02}, 0) and means == pytest.approx({a: 0.8, b: 0.01})
    assert fabric_story(fabric, peaks, means) == (f"busiest switch link {a}: mean 80%, peak 120%; "
                                                  "switch links 40% used on average, 1 of 2 directions idle")
    assert fabric_story(fabric, {}, {}) == ""
    figures = drawn(monkeypatch)
    fabric_drawing(fabric, peaks, str(tmp_path / "f.png"), "t", means)
    ax, colorbar = figures[0].axes
    texts = {t.get_text() for t in ax.texts}
    assert {h.name for h in fabric.hosts} <= texts
    widths = ax.collections[0].get_linewidths()
    assert widths[fabric.links.index(up)] == pytest.approx(0.6 + 4.0 * 0.8)   # as thick as its mean use
    assert "width: mean use" in colorbar.get_ylabel() and "HTB bursts" in colorbar.get_ylabel()


@pytest.mark.parametrize("topology,interconnect,nics", [("bigraph:m=2,n=4", "pcie", 2),
                                                        ("rail:nodes=4,rails=2,spines=1", "nvlink", 2)])
def test_the_fabric_drawing_boxes_each_node_around_its_own(tmp_path, topology, interconnect, nics):
    from emulator.fabric.nodes import NodeShape
    from emulator.fabric.topology import build
    from emulator.results.plots import node_boxes
    fabric = build(topology, node=NodeShape(4, nics, interconnect))
    pos = layout(fabric)
    boxes = node_boxes(fabric, pos)
    assert len(boxes) == 4
    for i, ((x0, y0), w, h) in enumerate(boxes):
        mine = [h_.name for h_ in fabric.hosts if h_.node == i] + [s.name for s in fabric.switches if s.node == i]
        others = [s.name for s in fabric.switches if s.node < 0] + [h_.name for h_ in fabric.hosts if h_.node != i]
        inside = [n for n in pos if x0 <= pos[n][0] <= x0 + w and y0 <= pos[n][1] <= y0 + h]
        assert set(mine) <= set(inside) and not set(others) & set(inside), (i, inside)
    fabric_drawing(fabric, {}, str(tmp_path / "nodes.png"))
    assert_png(tmp_path / "nodes.png")
    assert node_boxes(bigraph(2, 4), layout(bigraph(2, 4))) == []
