"""Bandwidth arithmetic and the nccl-tests style table (pure)."""
from __future__ import annotations

import collections
import math

from emulator.schedule import busbw_factor


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


def parse_size(text) -> int:
    """'64K', '1M', '2G' (binary units, as nccl-tests) or a plain integer."""
    bad = ValueError(f"size {text!r} is not a whole byte count like 65536, 64K, 1M or 1G")
    if isinstance(text, bool):
        raise bad
    if isinstance(text, int):
        value = text
    else:
        t = str(text).strip().upper().removesuffix("B")
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
        digits = t[:-1] if scale > 1 else t
        try:
            exact = float(digits) * scale
        except ValueError:
            raise bad from None
        if not math.isfinite(exact) or exact != int(exact):
            raise bad
        value = int(exact)
    if value < 1:
        raise ValueError(f"size {text!r} must be at least 1 byte")
    return value


def size_sweep(begin: int, end: int, factor: float) -> list[int]:
    """nccl-tests -b/-e/-f: begin, begin*f, ... up to end."""
    if not math.isfinite(factor):
        raise ValueError(f"sweep factor must be a finite number, got {factor}")
    if begin > end:
        raise ValueError(f"sweep begins at {begin} bytes, after its end {end}")
    if factor <= 1 and begin != end:
        raise ValueError(f"sweep factor must be > 1, got {factor}")
    sizes, s = [], begin
    while s <= end:
        sizes.append(int(s))
        if factor <= 1:
            break
        s *= factor
    return sizes


TABLE_HEADER = ("#       size    time(ms)   algbw(Mb/s)   busbw(Mb/s)   model(ms)  meas/model")


MODEL_HEADER = "#       size    time(ms)   algbw(Mb/s)   busbw(Mb/s)   max flows on a link, per step"


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
