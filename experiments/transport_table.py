"""The transport experiment's table and plots, from its results folder:

    python3 experiments/transport_table.py RESULTS_FOLDER

Per run (congestion control and queue discipline) and size: the median
completion time and its ratio to cubic over drop-tail in the same
collective and size (software-emulated times: compare ratios, not
seconds), queue drops and ECN marks summed over the counted calls, TCP
retransmissions, and the busiest switch port's queue (largest and mean
backlog in packets of 1,514 bytes over the samples of the counted calls).
Writes transport.md and transport-queues.png beside the results.
"""
from __future__ import annotations

import os
import sys

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FRAME = 1514
BASELINE = ("cubic", "fifo")


def table(folder: str) -> pd.DataFrame:
    calls = pd.read_csv(os.path.join(folder, "collectives.csv"))
    links = pd.read_csv(os.path.join(folder, "links.csv"))
    # the busiest switch port of each run and size: the most bytes queued over its samples (only a
    # switch's egress queue is sampled: the port towards the incast's receiver is on a host link)
    switch = links[links["backlog_bytes"].notna()]
    busiest = (switch.groupby(["run", "size_bytes", "link"])["backlog_bytes"].sum().reset_index()
               .sort_values("backlog_bytes").groupby(["run", "size_bytes"]).tail(1)[["run", "size_bytes", "link"]])
    queue = switch.merge(busiest).groupby(["run", "size_bytes"]).agg(
        port=("link", "first"), max_queue=("backlog_bytes", "max"), mean_queue=("backlog_bytes", "mean"))
    rows = calls.groupby(["run", "collective", "tcp", "queue_discipline", "size_bytes"]).agg(
        time_s=("time_s", "median"), calls=("time_s", "size"), drops=("queue_drops", "sum"),
        marks=("queue_marks", "sum"), retrans=("tcp_retrans", "sum"),
        fidelity_ok=("fidelity", lambda f: int((f == "ok").sum()))).reset_index()
    rows = rows.merge(queue.reset_index(), on=["run", "size_bytes"], how="left")
    base = rows[(rows["tcp"] == BASELINE[0]) & (rows["queue_discipline"] == BASELINE[1])]
    rows = rows.merge(base[["collective", "size_bytes", "time_s"]].rename(columns={"time_s": "base_s"}),
                      on=["collective", "size_bytes"], how="left")
    rows["time_vs_cubic_fifo"] = rows["time_s"] / rows["base_s"]
    rows["max_queue_pkts"] = rows["max_queue"] / FRAME
    rows["mean_queue_pkts"] = rows["mean_queue"] / FRAME
    return rows.drop(columns=["base_s", "max_queue", "mean_queue"])


def markdown(rows: pd.DataFrame) -> str:
    head = ("| collective | size | tcp | queue | time (s) | vs cubic/fifo | drops | marks | retrans | busiest port "
            "| max queue (pkts) | mean queue (pkts) | verdict ok |\n|" + "---|" * 13 + "\n")
    body = "".join(
        f"| {r.collective} | {r.size_bytes >> 20} MiB | {r.tcp} | {r.queue_discipline} | {r.time_s:.2f} "
        f"| {r.time_vs_cubic_fifo:.2f} | {r.drops:.0f} | {r.marks:.0f} | {r.retrans:.0f} | {r.port} "
        f"| {r.max_queue_pkts:.1f} | {r.mean_queue_pkts:.1f} | {r.fidelity_ok}/{r.calls} |\n"
        for r in rows.sort_values(["collective", "size_bytes", "run"]).itertuples())
    return head + body


def plot(folder: str, rows: pd.DataFrame, path: str) -> None:
    """The busiest port's queue over the first counted call of the largest size, per transport."""
    links = pd.read_csv(os.path.join(folder, "links.csv"))
    collectives = sorted(rows["collective"].unique())
    fig, axes = plt.subplots(1, len(collectives), figsize=(6 * len(collectives), 3.5), squeeze=False)
    for ax, collective in zip(axes[0], collectives):
        mine = rows[rows["collective"] == collective]
        size = mine["size_bytes"].max()
        for r in mine[mine["size_bytes"] == size].itertuples():
            port = links[(links["run"] == r.run) & (links["size_bytes"] == size) & (links["link"] == r.port)]
            counted = port[port["repetition"] >= 0]
            first = counted[counted["call"] == counted["call"].min()]
            ax.plot(first["t_s"], first["backlog_bytes"] / FRAME, label=f"{r.tcp} / {r.queue_discipline}")
        ax.set_title(f"{collective}, {size >> 20} MiB: busiest switch port")
        ax.set_xlabel("time in the call (s)")
        ax.set_ylabel("queue (packets)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not os.path.isfile(os.path.join(argv[0], "collectives.csv")):
        print("usage: transport_table.py RESULTS_FOLDER (a folder of the transport experiment)", file=sys.stderr)
        return 2
    folder = argv[0]
    rows = table(folder)
    text = markdown(rows)
    with open(os.path.join(folder, "transport.md"), "w") as f:
        f.write(text)
    plot(folder, rows, os.path.join(folder, "transport-queues.png"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
