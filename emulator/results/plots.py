"""Plots of one results folder (pure, no root, matplotlib's Agg backend):
link utilisation over time, the fabric coloured by its busiest moments, and
the step timeline of one call.

Each plot keeps its data shaping in a pure function (`utilisation_matrix`,
`layout`, `link_peaks`, `timeline_bars`) so tests check numbers, not pixels.

Inputs: `links.csv` (the link monitor: one row per sample per directed link,
columns in emulator.records.links.LINK_COLUMNS, optionally the run keys of steps.csv),
`steps.csv` (emulator.results.calls.STEP_COLUMNS) and `fabric.json`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from emulator.fabric.files import DEFAULT_ROLE
from emulator.fabric.graph import Fabric
from emulator.fabric.topology import dragonfly_group, torus_coordinates, torus_sizes
from emulator.records.links import link_label

# the keys that tell runs apart in steps.csv and links.csv written before their `run` column
RUN_COLUMNS = ["topology", "policy", "algorithm", "mapping"]
MAX_HEATMAP_ROWS = 40
# switch tiers from the top of a drawing down (emulator/fabric/topology.py names them)
TIER_ORDER = ["upper", "lower", "core", "agg", "spine", "edge", "leaf", "rail",
              "nvswitch", "pcieroot", "pcie"]   # a node's switches below the network's


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: str) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)


def run_keys(df: pd.DataFrame) -> list[str]:
    """The columns that tell the runs of a table apart: `run` (its place in
    the experiment: two runs that differ only in, say, connections stay
    apart), or in older folders the run keys it has."""
    return ["run"] if "run" in df.columns else [c for c in RUN_COLUMNS if c in df.columns]


def runs_of(df: pd.DataFrame) -> list[pd.DataFrame]:
    """The table's rows per run, in the order the runs first appear."""
    keys = run_keys(df)
    return [run for _, run in df.groupby(keys, sort=False)] if keys and not df.empty else [df]


def one_run(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the last run in a table that may hold several; a call
    index or a rank means something only inside one run. The last run is the
    one on the fabric fabric.json holds (the emulator rewrites it per fabric)."""
    keys = run_keys(df)
    if df.empty or not keys:
        return df
    last = df.iloc[-1]
    return df[(df[keys] == last[keys]).all(axis=1)]


def run_name(df: pd.DataFrame) -> str:
    """'topology algorithm mapping (policy), label' of a one-run table, or ''."""
    if df.empty or not all(c in df.columns for c in RUN_COLUMNS):
        return ""
    r = df.iloc[0]
    label = r.get("label", "")
    return f"{r.topology} {r.algorithm} {r.mapping} ({r.policy})" + (f", {label}" if isinstance(label, str) and label else "")


def repetition_name(repetition: int, repetitions: int | None = None) -> str:
    """'rep 2/3' as the progress line counts repetitions (from 1), or 'warm-up'."""
    if repetition < 0:
        return "warm-up"
    return f"rep {repetition + 1}" + (f"/{repetitions}" if repetitions else "")


def call_name(df: pd.DataFrame, call: int) -> str:
    """'8M rep 2/2 (call 7)' of a call in a links.csv table (of one run), as far as it has the columns."""
    from emulator.inputs import size_name
    d = df[df.call == call]
    parts = []
    if "size_bytes" in d.columns and d.size_bytes.nunique() == 1:
        size = int(d.size_bytes.iloc[0])
        parts.append(size_name(size) if size else "workload")   # a workload file's calls have size 0
        if "repetition" in d.columns and d.repetition.nunique() == 1:
            counted = df[(df.size_bytes == size) & (df.repetition >= 0)].repetition
            parts.append(repetition_name(int(d.repetition.iloc[0]), int(counted.max()) + 1 if len(counted) else None))
    return " ".join(parts + [f"(call {call})" if parts else f"call {call}"])


# --- link utilisation over time ------------------------------------------------------------

def default_call(links: pd.DataFrame) -> int:
    """The last counted call: the largest size, after the warm-ups
    (the emulator orders calls by size, warm-ups first)."""
    if "repetition" in links.columns and (links.repetition >= 0).any():
        links = links[links.repetition >= 0]
    return int(links.call.max())


def utilisation_matrix(links: pd.DataFrame, call: int, limit: int | None = None):
    """(link labels, sample times, util[link, time]) of one call.

    Switch-switch links only (host links mirror the schedule; congestion
    shows between switches), all links if the fabric has none. Rows: the
    busiest link (highest mean util) first, ties by label; at most `limit`.
    A link without a sample at some time gets NaN there."""
    d = links[links.call == call]
    if d.empty:
        raise ValueError(f"links.csv has no samples of call {call}")
    if (d.kind == "switch").any():
        d = d[d.kind == "switch"]
    grid = d.pivot_table(index="link", columns="t_s", values="util", aggfunc="mean", dropna=False)
    order = sorted(grid.index, key=lambda link: (-np.nan_to_num(grid.loc[link].mean(), nan=-1.0), link))
    grid = grid.loc[order[:limit] if limit else order]
    return list(grid.index), np.asarray(grid.columns, dtype=float), grid.to_numpy(dtype=float)


def _edges(times: np.ndarray) -> np.ndarray:
    """Cell edges for samples that each end at `times` (the first starts at
    0, or one interval earlier if it ends at 0)."""
    if len(times) == 0:
        return np.array([0.0, 1.0])
    first = 0.0 if times[0] > 0 else times[0] - (times[1] - times[0] if len(times) > 1 else 1.0)
    return np.concatenate([[first], times])


def heatmap_extent(runs: list[pd.DataFrame]) -> tuple[float, float]:
    """(end of the time axis, top of the colour scale) that the heatmaps of
    several runs share, each of its default call: the longest call and the
    highest utilisation of any (at least 1), so that a run twice as fast
    shows half as long, in the same colours."""
    ends, tops = [0.0], [1.0]
    for run in runs:
        _, times, util = utilisation_matrix(run, default_call(run))
        ends.append(float(times.max()) if len(times) else 0.0)
        tops.append(float(np.nanmax(util)) if np.isfinite(util).any() else 1.0)
    return max(ends), max(tops)


def sample_ms(links: pd.DataFrame, call: int) -> float:
    """The monitor's sampling period, from the sample times of a call (ms; NaN: one sample)."""
    times = np.sort(links[links.call == call].t_s.unique())
    return float(np.median(np.diff(times))) * 1e3 if len(times) > 1 else float("nan")


def explain_above_one(colorbar, label: str, sample: float = float("nan")) -> None:
    """Mark 1 (the link's rate) on a utilisation colour bar that goes past
    it, and say under `label` why a sample can: HTB lets a link send a
    burst, at more than its rate, within one sample (`sample` ms long)."""
    colorbar.ax.axhline(1.0, color="cyan", lw=1.5)
    period = f"{sample:.0f} ms " if sample == sample else ""
    colorbar.set_label(f"{label}\nabove 1 (cyan line): HTB bursts\nwithin one {period}sample", fontsize=8)


def utilisation_heatmap(links: pd.DataFrame, path: str, call: int | None = None,
                        extent: tuple[float, float] | None = None) -> int:
    """Links x time coloured by utilisation, for one call; returns the call.
    The hot rows at the top show where a step's flows pile up. `extent`:
    (end of the time axis, top of the colour scale) shared with other runs'."""
    links = one_run(links)
    call = default_call(links) if call is None else call
    labels, times, util = utilisation_matrix(links, call)
    shown = labels[:MAX_HEATMAP_ROWS]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 1.5 + 0.22 * max(len(shown), 4)))
    cmap = plt.get_cmap("inferno").with_extremes(bad="lightgrey")   # no sample: grey
    vmax = max(1.0, float(np.nanmax(util))) if np.isfinite(util).any() else 1.0
    if extent:
        vmax = max(vmax, extent[1])
    mesh = ax.pcolormesh(_edges(times), np.arange(len(shown) + 1), np.ma.masked_invalid(util[:len(shown)]),
                         cmap=cmap, vmin=0.0, vmax=vmax)
    ax.set_yticks(np.arange(len(shown)) + 0.5, shown, fontsize=7)
    ax.invert_yaxis()
    if extent:
        ax.set_xlim(0.0, max(extent[0], float(times.max()) if len(times) else 0.0))
    ax.set_xlabel("time since the call started (s)" + (", the same axis for every run" if extent else ""))
    label = "utilisation (fraction of link rate)"
    colorbar = fig.colorbar(mesh, ax=ax, label=label)
    if vmax > 1.0:
        explain_above_one(colorbar, label, sample_ms(links, call))
    title = f"link utilisation, {call_name(links, call)}"
    name = run_name(links)
    ax.set_title(title + (f"\n{name}" if name else ""), fontsize=10)
    if len(labels) > len(shown):
        ax.text(1.0, -0.08, f"busiest {len(shown)} of {len(labels)} links shown", transform=ax.transAxes,
                ha="right", va="top", fontsize=8, color="grey")
    _save(fig, path)
    return call


# --- the fabric ------------------------------------------------------------------------------

def _tiers(fabric: Fabric) -> list[str]:
    """The fabric's tier names, top row first; unknown tiers go last."""
    present = {s.tier for s in fabric.switches}
    rank = {t: i for i, t in enumerate(TIER_ORDER)}
    return sorted(present, key=lambda t: (rank.get(t, len(TIER_ORDER)), t))


def layout(fabric: Fabric) -> dict[str, tuple[float, float]]:
    """{node: (x, y)}: one row per switch tier (top tier highest), each row
    spread over the same width, hosts in a row next to their switch.

    Hosts hang below their switch, except those of the top row of a fabric
    with several rows (BiGraph's upper part): they go above it, so the
    bipartite links between the parts stay clear, as in the EFLOPS figure.
    A dragonfly (`_group_layout`) and a torus (`_grid_layout`) have
    their own."""
    own = {"torus": _grid_layout, "dragonfly": _group_layout}.get(fabric.params.get("kind"))
    if own:
        return own(fabric)
    tiers = _tiers(fabric)
    if tiers == [DEFAULT_ROLE] and len(fabric.switches) > 2:
        return _ring_layout(fabric)
    rows = {t: sorted((s for s in fabric.switches if s.tier == t), key=lambda s: s.index) for t in tiers}
    width = max([len(r) for r in rows.values()] +
                [sum(len(fabric.hosts_on(s.name)) for s in r) for r in rows.values()])
    pos = {}
    for i, tier in enumerate(tiers):
        y = float(len(tiers) - i)
        slot = width / len(rows[tier])
        for j, s in enumerate(rows[tier]):
            x = (j + 0.5) * slot - 0.5
            pos[s.name] = (x, y)
            hosts = fabric.hosts_on(s.name)
            hy = y + 0.6 if (i == 0 and len(tiers) > 1) else y - 0.6
            for h, host in enumerate(hosts):
                pos[host.name] = (x + (h - (len(hosts) - 1) / 2) * slot / len(hosts), hy)
    return pos


def _ring_layout(fabric: Fabric) -> dict[str, tuple[float, float]]:
    """Switches of a topology file without roles (a WAN's PoPs, a mesh) on
    a circle, their hosts outside it: no row order to show, and no link
    hidden behind a row of switches."""
    n = len(fabric.switches)
    radius = max(n, len(fabric.hosts)) / (2 * math.pi) + 0.5
    pos = {}
    for i, s in enumerate(fabric.switches):
        angle = math.pi / 2 - 2 * math.pi * i / n
        pos[s.name] = (radius * math.cos(angle), radius * math.sin(angle))
        hosts = fabric.hosts_on(s.name)
        for h, host in enumerate(hosts):
            a = angle + (h - (len(hosts) - 1) / 2) * (math.pi / n) / max(len(hosts), 1)
            pos[host.name] = ((radius + 0.6) * math.cos(a), (radius + 0.6) * math.sin(a))
    return pos


GRID_STEP = 2.0   # between neighbouring torus switches, in layout units


def _grid_layout(fabric: Fabric) -> dict[str, tuple[float, float]]:
    """A torus: x across, y down, the z planes side by side (one grid
    step apart); each switch's hosts in a short row under it. Wraparound
    links are drawn straight across their row or column."""
    width = torus_sizes(fabric)[0] + 1   # a plane and the step between planes
    pos = {}
    for s in fabric.switches:
        x, y, z = torus_coordinates(fabric, s.name)
        sx, sy = (z * width + x) * GRID_STEP, -y * GRID_STEP
        pos[s.name] = (sx, sy)
        hosts = fabric.hosts_on(s.name)
        for h, host in enumerate(hosts):
            pos[host.name] = (sx + (h - (len(hosts) - 1) / 2) * 0.8 / len(hosts), sy - 0.6)
    return pos


def _group_layout(fabric: Fabric) -> dict[str, tuple[float, float]]:
    """A dragonfly: its groups side by side, each group's routers on an
    arc (so that the local links between them show), the hosts in one row
    below, each router's under it."""
    a, p = fabric.params["a"], fabric.params["p"]
    width = max(a, 2) * max(p, 2) * 0.5 + 2.0   # a group and the gap after it
    pos = {}
    for s in fabric.switches:
        r = s.index % a
        t = r / (a - 1) if a > 1 else 0.5
        sx = dragonfly_group(fabric, s.name) * width + t * (width - 2.0)
        sy = math.sin(math.pi * t) * 0.8
        pos[s.name] = (sx, sy)
        hosts = fabric.hosts_on(s.name)
        for h, host in enumerate(hosts):
            pos[host.name] = (sx + (h - (len(hosts) - 1) / 2) * 0.3, -0.7)
    return pos


NODE_PAD = 0.3   # around a node's box, in layout units


def node_boxes(fabric: Fabric, pos: dict[str, tuple[float, float]]) -> list[tuple[tuple[float, float], float, float]]:
    """((x, y) of the lower left corner, width, height) of a box around each
    node of accelerators: its accelerators and its own switches ([] for a
    fabric without nodes)."""
    if fabric.node_shape() is None:
        return []
    inside: dict[int, list[tuple[float, float]]] = {}
    for item in (*fabric.hosts, *fabric.switches):
        if item.node >= 0:
            inside.setdefault(item.node, []).append(pos[item.name])
    boxes = []
    for points in inside.values():
        xs, ys = [x for x, _ in points], [y for _, y in points]
        boxes.append(((min(xs) - NODE_PAD, min(ys) - NODE_PAD), max(xs) - min(xs) + 2 * NODE_PAD,
                      max(ys) - min(ys) + 2 * NODE_PAD))
    return boxes


def link_peaks(fabric: Fabric, peak_util: dict[str, float]) -> list[float | None]:
    """Per fabric link (fabric.links order): the higher peak of its two
    directions, None if the monitor has neither."""
    out = []
    for link in fabric.links:
        (a, ap), (b, bp) = link.ends()
        values = [peak_util[k] for k in (link_label(a, ap, b), link_label(b, bp, a))
                  if k in peak_util and pd.notna(peak_util[k])]
        out.append(max(values) if values else None)
    return out


def call_use(links: pd.DataFrame, call: int | None = None) -> tuple[dict[str, float], dict[str, float], int]:
    """({link: peak}, {link: mean}, call): each directed link's highest and
    mean utilisation over the samples of one call of one run (default: the
    heatmap's, the last counted call)."""
    call = default_call(links) if call is None else call
    util = links[links.call == call].groupby("link").util
    return ({k: float(v) for k, v in util.max().dropna().items()},
            {k: float(v) for k, v in util.mean().dropna().items()}, call)


IDLE_UTIL = 0.05   # a link used less than this at its peak was idle


def fabric_story(fabric: Fabric, peak_util: dict[str, float], mean_util: dict[str, float]) -> str:
    """One line on what the drawing shows: the busiest switch link (both
    ways counted apart) with its peak and mean use, the mean over all of
    them, and how many stayed idle; '' without samples."""
    kind = "switch" if any(l.kind == "switch" for l in fabric.links) else "host"
    labels = [link_label(n, p, peer) for l in fabric.links if l.kind == kind
              for n, p, peer in ((l.a, l.a_port, l.b), (l.b, l.b_port, l.a))]
    seen = [k for k in labels if k in peak_util and k in mean_util]
    if not seen:
        return ""
    busiest = max(seen, key=lambda k: (mean_util[k], peak_util[k]))
    idle = sum(peak_util[k] < IDLE_UTIL for k in seen)
    return (f"busiest {kind} link {busiest}: mean {mean_util[busiest]:.0%}, peak {peak_util[busiest]:.0%}; "
            f"{kind} links {np.mean([mean_util[k] for k in seen]):.0%} used on average, "
            f"{idle} of {len(seen)} directions idle")


MAX_HOST_LABELS = 64


def fabric_drawing(fabric: Fabric, peak_util: dict[str, float], path: str, title: str = "",
                   mean_util: dict[str, float] | None = None) -> None:
    """The fabric, each link coloured by its peak utilisation (grey: no data)
    and, given `mean_util`, as thick as its mean use: which links a run
    loaded, for how long, and which it left idle. Hosts are named while they fit."""
    from matplotlib.collections import LineCollection
    plt = _pyplot()
    pos = layout(fabric)
    peaks = link_peaks(fabric, peak_util)
    means = link_peaks(fabric, mean_util) if mean_util else [None] * len(fabric.links)
    xs = [x for x, _ in pos.values()]
    fig, ax = plt.subplots(figsize=(min(max(9.0, 0.4 * (max(xs) - min(xs) + 2)), 20.0), 6.0))
    cmap = plt.get_cmap("plasma")
    vmax = max([1.0] + [p for p in peaks if p is not None])
    norm = plt.Normalize(0.0, vmax)
    segments = [(pos[l.a], pos[l.b]) for l in fabric.links]
    colours = [cmap(norm(p)) if p is not None else (0.75, 0.75, 0.75, 1.0) for p in peaks]
    widths = [(1.8 if l.kind == "switch" else 0.8) if m is None else
              (0.6 + (4.0 if l.kind == "switch" else 1.5) * min(m, 1.0)) for l, m in zip(fabric.links, means)]
    ax.add_collection(LineCollection(segments, colors=colours, linewidths=widths, zorder=1))
    switches = [pos[s.name] for s in fabric.switches]
    hosts = [pos[h.name] for h in fabric.hosts]
    if hosts:
        ax.scatter(*zip(*hosts), marker="o", s=12, color="black", zorder=2)
    if len(fabric.hosts) <= MAX_HOST_LABELS:
        upright = len(fabric.hosts) > 16   # side by side, names would overlap
        for h in fabric.hosts:
            x, y = pos[h.name]
            above = y > pos[h.switch][1]
            ax.text(x, y + (0.06 if above else -0.06), h.name, fontsize=6, rotation=90 if upright else 0, zorder=3,
                    ha="center", va="bottom" if above else "top")
    if len(fabric.switches) <= 40:   # named boxes while they fit
        for s in fabric.switches:
            ax.text(*pos[s.name], s.name, fontsize=7, ha="center", va="center", zorder=3,
                    bbox={"boxstyle": "square,pad=0.3", "fc": "white", "ec": "black", "lw": 0.8})
    else:
        ax.scatter(*zip(*switches), marker="s", s=40, color="white", edgecolors="black", zorder=2)
    for corner, width, height in node_boxes(fabric, pos):
        ax.add_patch(plt.Rectangle(corner, width, height, fill=False, ls="--", lw=0.8, ec="tab:blue", zorder=0))
    label = "peak utilisation (grey: no data)" + ("; width: mean use" if mean_util else "")
    colorbar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=label)
    if vmax > 1.0:
        explain_above_one(colorbar, label)
    ax.set_title(title or f"{fabric.topology}: peak link utilisation", fontsize=9)
    ax.autoscale()
    ax.margins(0.05)
    ax.axis("off")
    _save(fig, path)


# --- step timeline ---------------------------------------------------------------------------

def default_size_repetition(steps: pd.DataFrame) -> tuple[int, int]:
    """The largest size and its first counted repetition: the call where
    bandwidth, not latency, sets the pace."""
    size = int(steps.size_bytes.max())
    reps = steps[steps.size_bytes == size].repetition
    counted = reps[reps >= 0]
    return size, int((counted if len(counted) else reps).min())


def timeline_bars(steps: pd.DataFrame, size: int | None = None, repetition: int | None = None) -> pd.DataFrame:
    """One row per (rank, step) of one call of one run: start and end
    relative to the call's earliest start, the model's predicted step end
    (NaN if absent), sorted by rank and step."""
    steps = one_run(steps)
    if size is None or repetition is None:
        dsize, drep = default_size_repetition(steps if size is None else steps[steps.size_bytes == size])
        size = dsize if size is None else size
        repetition = drep if repetition is None else repetition
    d = steps[(steps.size_bytes == size) & (steps.repetition == repetition)]
    if d.empty:
        raise ValueError(f"steps.csv has no call of {size} bytes, repetition {repetition}")
    t0 = d.start_s.min()
    return pd.DataFrame({
        "rank": d["rank"].astype(int), "step": d.step.astype(int), "phase": d.phase.astype(str),
        "start": d.start_s - t0, "end": d.end_s - t0,
        "model_end": pd.to_numeric(d.model_end_s, errors="coerce"),
        "size_bytes": size, "repetition": repetition,
    }).sort_values(["rank", "step"]).reset_index(drop=True)


def step_timeline(steps: pd.DataFrame, path: str, size: int | None = None,
                  repetition: int | None = None, t_end: float | None = None) -> tuple[int, int]:
    """Each rank's steps as bars over time, the model's step ends as ticks;
    returns (size, repetition). Shows which step stretched and who waited.
    `t_end`: the end of a time axis shared with other runs' timelines."""
    bars = timeline_bars(steps, size, repetition)
    size, repetition = int(bars.size_bytes.iloc[0]), int(bars.repetition.iloc[0])
    plt = _pyplot()
    ranks = bars["rank"].nunique()
    fig, ax = plt.subplots(figsize=(12, min(max(3.0, 1.5 + 0.25 * ranks), 30.0)))
    phases = list(dict.fromkeys(bars.phase))
    colour = {p: f"C{i % 10}" for i, p in enumerate(phases)}
    for phase in phases:
        b = bars[bars.phase == phase]
        ax.barh(b["rank"], b.end - b.start, left=b.start, height=0.7, color=colour[phase],
                edgecolor="white", linewidth=0.5, label=phase)
    model = bars.dropna(subset=["model_end"])
    if len(model):
        ax.scatter(model.model_end, model["rank"], marker="|", s=90, color="black", label="model step end")
    ax.set_yticks(sorted(bars["rank"].unique()))
    ax.tick_params(axis="y", labelsize=7)
    ax.invert_yaxis()
    ax.set_ylabel("rank")
    ax.set_xlabel("time since the call started (s)")
    run = one_run(steps)
    name = run_name(run)
    counted = run[(run.size_bytes == size) & (run.repetition >= 0)].repetition
    what = repetition_name(repetition, int(counted.max()) + 1 if len(counted) else None)
    ax.set_title(f"steps of one call: {size} bytes, {what}" + (f"\n{name}" if name else ""), fontsize=10)
    if t_end:
        ax.set_xlim(0.0, max(t_end, float(bars.end.max())))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)   # beside the ranks
    ax.grid(axis="x", alpha=0.3)
    _save(fig, path)
    return size, repetition


def job_timeline(ops: pd.DataFrame, path: str, repetition: int | None = None) -> int:
    """jobs.png: one row per job and rank, each job in its colour; compute
    as a pale bar, communication as a full bar over it (an async collective
    shows where it ran beside the compute it overlapped). Returns the
    repetition drawn (default: the last)."""
    ops = last_run(ops)
    repetition = int(ops.repetition.max()) if repetition is None else repetition
    d = ops[ops.repetition == repetition]
    rows = list(dict.fromkeys(zip(d.job, d["rank"])))
    jobs = list(dict.fromkeys(d.job))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, min(max(3.0, 1.5 + 0.25 * len(rows)), 30.0)))
    y = {row: i for i, row in enumerate(rows)}
    for job in jobs:
        mine = d[d.job == job]
        ys = [y[(job, r)] for r in mine["rank"]]
        compute = (mine.kind == "compute").to_numpy()
        colour = job_colour(job, jobs)
        ax.barh([v for v, c in zip(ys, compute) if c], (mine.end_s - mine.start_s)[compute],
                left=mine.start_s[compute], height=0.8, color=colour, alpha=0.3, label=f"{job}: compute")
        ax.barh([v for v, c in zip(ys, compute) if not c], (mine.end_s - mine.start_s)[~compute],
                left=mine.start_s[~compute], height=0.45, color=colour, label=f"{job}: communication")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{job} {rank}" for job, rank in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the call started (s)")
    ax.set_title(f"jobs over time, {repetition_name(repetition, int(ops.repetition.max()) + 1)}: pale = compute, "
                 "full = communication", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)   # beside the ranks
    ax.grid(axis="x", alpha=0.3)
    _save(fig, path)
    return repetition


def job_link_bars(link_jobs: pd.DataFrame, path: str, limit: int = 24) -> None:
    """job_links.png: the switch links that carry the most bytes, each bar
    split into the jobs whose bytes cross it (from the routes: the counters
    cannot tell jobs apart)."""
    table = last_run(link_jobs).pivot_table(index="link", columns="job", values="bytes", aggfunc="sum", fill_value=0)
    table = table.loc[table.sum(axis=1).sort_values(ascending=False).index[:limit]]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, min(max(3.0, 1.2 + 0.28 * len(table)), 20.0)))
    left = np.zeros(len(table))
    for job in table.columns:
        ax.barh(table.index, table[job] / 2**20, left=left, color=job_colour(job, table.columns), label=job)
        left += table[job].to_numpy() / 2**20
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("MiB over the whole workload, every iteration (from the routes)")
    ax.set_title("whose bytes cross each switch link", fontsize=10)
    ax.legend(fontsize=8)
    _save(fig, path)


JOB_RUN_COLUMNS = ["topology", "policy", "mapping", "workload", "label"]


def job_colour(job: str, jobs) -> str:
    """The same colour for a job in every plot: by its place among the names."""
    return f"C{sorted(jobs).index(job) % 10}"


def last_run(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of the run the table ends with (ops.csv, link_jobs.csv)."""
    last = df.iloc[-1]
    keep = np.ones(len(df), dtype=bool)
    for column in JOB_RUN_COLUMNS:
        if column in df:
            keep &= (df[column].fillna("") == ("" if pd.isna(last[column]) else last[column])).to_numpy()
    return df[keep]


# --- packet captures ------------------------------------------------------------------------

MAX_CAPTURE_PANELS = 8   # (run, link) panels in one figure
MAX_FLOWS_SHOWN = 8      # per panel, the flows that carried the most bytes


def capture_panels(flows: pd.DataFrame) -> list[tuple[pd.DataFrame, str]]:
    """capture_flows.csv's rows per panel of capture_flows.png: per run its
    last captured call (the largest size, as the heatmap's), per captured
    link of it, with the panel's title; at most MAX_CAPTURE_PANELS."""
    panels = []
    for run in runs_of(flows):
        call = default_call(run)
        d = run[run.call == call]
        for link in dict.fromkeys(d.link):
            one = d[d.link == link]
            title = (f"{link}: {one.flow.nunique()} flow directions, {int(one.retransmissions.sum())} "
                     f"retransmissions, {call_name(run, call)}")
            name = run_name(run)
            panels.append((one, title + (f"\n{name}" if name else "")))
    return panels[:MAX_CAPTURE_PANELS]


def flow_series(panel: pd.DataFrame, bin_s: float, limit: int = MAX_FLOWS_SHOWN) -> pd.DataFrame:
    """Mbit/s of a panel's busiest flows (columns, most bytes first) per bin
    (index: the bin's end), with 0 where a flow sent nothing in a bin, from
    the end of the bin before the first (a step plot starts there)."""
    ks = np.rint(panel.t_s.to_numpy() / bin_s).astype(int)
    ends = np.round(np.arange(ks.min() - 1, ks.max() + 1) * bin_s, 6)
    top = panel.groupby("flow").bytes.sum().sort_values(ascending=False).index[:limit]
    grid = panel[panel.flow.isin(top)].pivot_table(index="t_s", columns="flow", values="mbps", aggfunc="sum")
    return grid.reindex(index=ends, columns=top, fill_value=0.0).fillna(0.0)


def capture_plot(flows: pd.DataFrame, path: str, bin_s: float | None = None) -> None:
    """capture_flows.png: per captured link (and run), the throughput of
    each TCP flow over the call, from the pcap, one time axis for all;
    crosses mark the bins in which a flow retransmitted."""
    from emulator.results.captures import BIN_S
    bin_s = bin_s or BIN_S
    panels = capture_panels(flows)
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 1.0 + 2.6 * len(panels)), sharex=True, squeeze=False)
    for ax, (panel, title) in zip(axes[:, 0], panels):
        series = flow_series(panel, bin_s)
        for flow in series.columns:
            ax.plot(series.index, series[flow], drawstyle="steps-pre", lw=1.2, label=flow)
        again = panel[panel.retransmissions > 0]
        if len(again):
            ax.scatter(again.t_s, again.mbps, marker="x", color="red", s=30, zorder=3,
                       label="retransmissions in that bin")
        rate = pd.to_numeric(panel.rate_mbps, errors="coerce").max() if "rate_mbps" in panel else float("nan")
        if rate == rate:
            ax.axhline(rate, color="grey", lw=0.8)
        ax.set_ylabel(f"Mbit/s per {bin_s * 1e3:.0f} ms")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("time since the call started (s), from the pcap; grey: the link's rate")
    _save(fig, path)


def sweep_heatmaps(rows: list[dict], pair: list[str], path: str) -> str:
    """A sweep's model time over two factors at its largest size, one panel
    per topology (the geometric mean where other factors vary)."""
    df = pd.DataFrame(rows)
    df["time"] = df["model_time_s"].astype(float)
    sized = df[df["size_bytes"].fillna("") != ""]
    if len(sized):
        df = sized[sized["size_bytes"].astype(int) == sized["size_bytes"].astype(int).max()]
    plt = _pyplot()
    topologies = sorted(df["topology"].unique())
    fig, axes = plt.subplots(1, len(topologies), figsize=(4.5 * len(topologies), 4), squeeze=False)
    for ax, topology in zip(axes[0], topologies):
        part = df[df["topology"] == topology]
        grid = part.groupby(pair)["time"].apply(lambda t: float(np.exp(np.log(t).mean()))).unstack(pair[1])
        image = ax.imshow(grid.values, cmap="viridis_r", aspect="auto")
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns], rotation=45, ha="right")
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
        ax.set_xlabel(pair[1])
        ax.set_ylabel(pair[0])
        ax.set_title(topology, fontsize=9)
        for (i, j), value in np.ndenumerate(grid.values):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.3g}", ha="center", va="center", fontsize=7, color="white")
        fig.colorbar(image, ax=ax, label="model time (s)")
    size = df["size_bytes"].iloc[0] if len(df) else ""
    fig.suptitle(f"the model's time{f' at {int(size)} bytes' if size not in ('', None) else ''}", fontsize=10)
    _save(fig, path)
    return path


def confirm_scatter(pairs: list[dict], path: str) -> str:
    """Confirmed points: the model's time of each emulated run against the
    measured one, on a line of equality."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 4))
    for p in pairs:
        ax.scatter(p["model"], p["emulated"], color="tab:blue" if p["verdict"] == "ok" else "tab:red")
    top = max(max(p["model"], p["emulated"]) for p in pairs) * 1.1
    ax.plot([0, top], [0, top], color="grey", linewidth=0.8, linestyle="--")
    ax.set_xlabel("model time of the emulated run (s)")
    ax.set_ylabel("emulated time (s)")
    ax.set_title("confirmed points (red: failed the fidelity verdict)", fontsize=9)
    _save(fig, path)
    return path
