"""Token buckets on the links (pure): the model of the emulator's shaping.

An emulated link is an HTB class (emulator/net/shaping.py): while it sends
less than its rate it saves tokens, up to a burst, and spends them at once.
So a link that waited sends a step's first bytes faster than its rate (at
50 Mbit/s the burst is 62.5 KB: steps of 8-64 KB ran up to 0.73x the time
of the rate alone, docs/model.md). Here a link whose bucket holds tokens
runs at a peak rate until they are spent, then at its rate; tokens come
back at the rate less what the link carries.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# A link resumes its peak once its bucket holds this share of a burst again:
# a bucket refilled by a crumb would switch a link back and forth per event.
RESUME_SHARE = 0.01


@dataclass(frozen=True)
class Burst:
    """Every link saves up to `seconds` of its rate and spends it at up to
    `peak_mbps` (what the machine forwards for one host while all burst)."""
    seconds: float
    peak_mbps: float

    def __post_init__(self):
        if not (self.seconds >= 0 and self.peak_mbps > 0):
            raise ValueError(f"a burst needs seconds >= 0 and a peak > 0 Mbit/s, got {self}")


class Buckets:
    """The buckets of every directed link (rates in bytes/s; an infinite
    rate is a link that shapes nothing, as the model's pad link)."""

    def __init__(self, rate: np.ndarray, burst: Burst, efficiency: float, level: np.ndarray | None = None):
        """level: the bytes every bucket holds at first (None: full)."""
        shaped = np.isfinite(rate)
        self.rate = rate
        self.size = np.where(shaped, rate * burst.seconds, 0.0)
        self.peak = np.where(shaped, np.maximum(rate, burst.peak_mbps * 1e6 / 8 * efficiency), math.inf)
        self.level = self.size.copy() if level is None else level.copy()
        self.load = np.zeros(len(rate))
        self.spending = self.level > 0

    def capacity(self) -> np.ndarray:
        """Every link's rate now: its peak while it spends tokens."""
        return np.where(self.spending, self.peak, self.rate)

    def resume(self) -> None:
        """Links that refilled enough spend again."""
        self.spending |= (self.level >= RESUME_SHARE * self.size) & (self.size > 0)

    def carry(self, route: np.ndarray, rates: np.ndarray) -> None:
        """The flows on `route` (rows of link ids) now send at `rates`."""
        self.load = np.bincount(route.ravel(), weights=np.repeat(rates, route.shape[1]), minlength=len(self.rate))

    def empty_in(self) -> float:
        """Seconds until the first spending link runs out of tokens."""
        draining = self.spending & (self.load > self.rate)
        if not draining.any():
            return math.inf
        return float((self.level[draining] / (self.load[draining] - self.rate[draining])).min())

    def elapse(self, seconds: float, tol: float) -> bool:
        """Tokens `seconds` later; links out of them fall back to their
        rate. Whether any did. tol: seconds that count as now."""
        gain = np.where(np.isfinite(self.rate), (self.rate - self.load) * seconds, 0.0)
        self.level = np.clip(self.level + gain, 0.0, self.size)
        spent = self.spending & (self.load > self.rate) & (self.level <= (self.load - self.rate) * tol)
        self.level[spent] = 0.0
        self.spending &= ~spent
        return bool(spent.any())


@dataclass(frozen=True)
class EmulatedLinks:
    """What the model of a run adds for links emulated on a machine: the
    links' token buckets; the least time a step takes however little it
    moves: every agent needs the machine's cores to end a step and start the
    next, and the agents of a step share them (a floor, not a latency: steps
    that move more hide it); and what every switch crossed adds to a
    message (the userspace datapath forwards a packet on the next turn of a
    loop over every port of every switch). `basis` says where they come from."""
    burst: Burst | None      # None: every link at its rate
    step_floor_s: float
    basis: str
    switch_latency_s: float = 0.0
