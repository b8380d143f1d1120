"""Bandwidth arithmetic and the nccl-tests style table (pure)."""
from __future__ import annotations

import collections

from emulator.workloads.collectives import busbw_factor


def algbw_mbps(size_bytes: int, time_s: float) -> float:
    """nccl-tests algbw = S / t, here in Mbit/s (10^6 bit/s)."""
    return size_bytes * 8 / time_s / 1e6


def busbw_mbps(collective: str, ranks: int, size_bytes: int, time_s: float) -> float:
    """busbw = algbw * factor: comparable with the link rate for any rank count."""
    return algbw_mbps(size_bytes, time_s) * busbw_factor(collective, ranks)


def payload_efficiency(mtu: int) -> float:
    """Share of the wire rate HTB grants that is TCP payload: HTB counts
    Ethernet frames (14 B header + MTU); TCP with timestamps carries
    MTU - 20 (IP) - 32 (TCP) bytes of data per frame."""
    return (mtu - 52) / (mtu + 14)


def header(columns) -> str:
    """nccl-tests' two header lines: the names, then the units in brackets
    below them; `columns` are (name, unit, width) with the widths the rows
    use; the first line's first character is '#', as nccl-tests has it."""
    names = "".join(name.rjust(width) for name, _, width in columns)
    units = "".join((f"({unit})" if unit else "").rjust(width) for _, unit, width in columns)
    return "#" + names[1:] + "\n" + "#" + units[1:].rstrip()


def avg_busbw_line(busbw_mbps) -> str:
    """nccl-tests' last line: the mean busbw over the sizes (Mb/s here, as the table)."""
    values = list(busbw_mbps)
    return f"# Avg bus bandwidth    : {sum(values) / len(values) if values else float('nan'):.6g}"


# (name, unit, width) of the columns table_row and model_row print
SWEEP_COLUMNS = (("size", "B", 12), ("time", "ms", 12), ("algbw", "Mb/s", 14), ("busbw", "Mb/s", 14))
TABLE_HEADER = header(SWEEP_COLUMNS + (("model", "ms", 13), ("meas/model", "", 12)))
MODEL_HEADER = header(SWEEP_COLUMNS + (("   max flows on a link, per step", "", 0),))


def model_row(size_bytes: int, time_s: float, algbw: float, busbw: float, flows_per_step: list[int]) -> str:
    return (f"{size_bytes:12d}  {time_s * 1e3:10.1f}  {algbw:12.2f}  {busbw:12.2f}   "
            + flows_summary(flows_per_step))


SHOWN_STEPS = 16   # past this many steps a model row gives the histogram, not every step


def flows_summary(flows_per_step: list[int]) -> str:
    """The busiest link's flows per step: each step's for a few steps; for
    many, how many steps had each count ('2046 steps: 1 in 2040, 2 in 6')."""
    if len(flows_per_step) <= SHOWN_STEPS:
        return " ".join(map(str, flows_per_step))
    counts = sorted(collections.Counter(flows_per_step).items())
    return f"{len(flows_per_step)} steps: " + ", ".join(f"{n} in {steps}" for n, steps in counts)


def table_row(size_bytes: int, time_s: float, algbw: float, busbw: float, model_s: float | None) -> str:
    model = f"{model_s * 1e3:11.1f}  {time_s / model_s:10.2f}" if model_s else f"{'-':>11}  {'-':>10}"
    return f"{size_bytes:12d}  {time_s * 1e3:10.1f}  {algbw:12.2f}  {busbw:12.2f}  {model}"
