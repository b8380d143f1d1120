"""Analysis of a results folder (pure, no root): the comparison table of
busbw against size per fabric, algorithm and mapping, the plot, and the
per-step link loads of every run."""
from __future__ import annotations

import csv
import os

import pandas as pd

from emulator.metrics import busbw_mbps
from emulator.model import link_loads_per_step

KEYS = ["topology", "policy", "algorithm", "mapping"]
# runs that differ in any of these are different runs, even on one topology
RUN_KEYS = KEYS + ["collective", "ranks", "host_rate_mbps", "switch_rate_mbps", "mtu", "label"]


def summary(collectives_csv: str) -> pd.DataFrame:
    """Median time and busbw per run and size, the model beside them."""
    return summarise(pd.read_csv(collectives_csv, keep_default_na=False))


def summarise(d: pd.DataFrame) -> pd.DataFrame:
    """summary() of rows already in memory (collectives.csv's columns)."""
    g = d.groupby(RUN_KEYS + ["size_bytes"], sort=False)
    out = g.agg(time_s=("time_s", "median"), model_time_s=("model_time_s", "first"),
                bytes_ok=("bytes_ok", "all")).reset_index()
    out["busbw_mbps"] = [busbw_mbps(r.collective, r.ranks, r.size_bytes, r.time_s) for r in out.itertuples()]
    out["model_busbw_mbps"] = [busbw_mbps(r.collective, r.ranks, r.size_bytes, r.model_time_s)
                               for r in out.itertuples()]
    out["rate_mbps"] = out.host_rate_mbps
    out["meas_over_model"] = out.time_s / out.model_time_s
    return out


def format_summary(s: pd.DataFrame) -> str:
    lines = [f"{'topology':34} {'policy':8} {'algorithm':16} {'mapping':7} {'size':>10} "
             f"{'time(ms)':>9} {'busbw':>8} {'model':>8} {'meas/model':>10}"]
    for r in s.itertuples():
        lines.append(f"{r.topology:34} {r.policy:8} {r.algorithm:16} {r.mapping:7} {r.size_bytes:10d} "
                     f"{r.time_s * 1e3:9.1f} {r.busbw_mbps:8.2f} {r.model_busbw_mbps:8.2f} {r.meas_over_model:10.2f}")
    return "\n".join(lines)


def plot(s: pd.DataFrame, path: str) -> None:
    """busbw against size, one line per run, measured solid, model dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, (key, run) in enumerate(s.groupby(RUN_KEYS, sort=False)):
        color = f"C{i % 10}"
        label = f"{key[0]} {key[2]} {key[3]} ({key[1]})"
        ax.plot(run.size_bytes, run.busbw_mbps, "o-", color=color, label=label)
        ax.plot(run.size_bytes, run.model_busbw_mbps, "--", color=color, alpha=0.6)
    rate = s.rate_mbps.max()
    ax.axhline(rate, color="grey", lw=0.8)
    ax.text(s.size_bytes.min(), rate, " link rate", va="bottom", color="grey")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (Mbit/s)")
    ax.set_title("busbw against size: measured (solid) and flow model (dashed)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def link_load_rows(plan) -> list[dict]:
    """Per step of the run's schedule: the most flows on one directed link
    and which link that is (static, from the routes)."""
    sched = plan.schedules[max(plan.schedules)]
    rows = []
    for k, loads in enumerate(link_loads_per_step(plan.fabric, plan.table, sched, plan.hosts)):
        if not loads:
            continue
        (node, port), flows = max(loads.items(), key=lambda kv: (kv[1], kv[0]))
        switch_loads = [n for (nd, _), n in loads.items() if plan.fabric.is_switch(nd)]
        rows.append({"topology": plan.fabric.topology, "policy": plan.spec.policy,
                     "algorithm": plan.spec.algorithm, "mapping": plan.spec.mapping, "step": k,
                     "phase": sched.steps[0][k].phase if k < len(sched.steps[0]) else "",
                     "max_flows_per_link": flows, "busiest_link": f"{node}:{port}",
                     "links_with_2plus_flows": sum(1 for n in switch_loads if n >= 2)})
    return rows


LINK_LOAD_COLUMNS = ["topology", "policy", "algorithm", "mapping", "step", "phase", "max_flows_per_link",
                     "busiest_link", "links_with_2plus_flows"]


def write_report(out_dir: str, plans) -> str:
    """Write summary.txt, busbw.png and link_loads.csv; return the summary."""
    s = summary(os.path.join(out_dir, "collectives.csv"))
    text = format_summary(s)
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    plot(s, os.path.join(out_dir, "busbw.png"))
    with open(os.path.join(out_dir, "link_loads.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=LINK_LOAD_COLUMNS)
        w.writeheader()
        for plan in plans:
            w.writerows(link_load_rows(plan))
    return text
