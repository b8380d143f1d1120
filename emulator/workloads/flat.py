"""Schedules as arrays (pure): what the flow model reads.

A `Schedule` holds a Python object per step per rank, which is what the
agents replay; a 1024-rank ring has two million of them. The model needs
only numbers, so it reads a `Flat`: every rank's steps numbered rank by
rank (step ids), and their sends and receives in contiguous arrays.
`flatten` converts any schedule; the records of collectives and algorithms
build some straight into arrays with `one_each` and `round_of`
(emulator.workloads.schedule.flat_schedule picks), the same numbers
`build_schedule` gives.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulator.workloads.steps import Schedule


@dataclass(frozen=True)
class Transfers:
    """The transfers of step id s are peer[first[s]:first[s+1]] (and nbytes)."""
    first: np.ndarray
    peer: np.ndarray
    nbytes: np.ndarray


@dataclass(frozen=True)
class Flat:
    ranks: int
    step_base: np.ndarray        # rank r's steps are step ids step_base[r]..step_base[r+1]-1
    sends: Transfers
    recvs: Transfers
    compute_s: np.ndarray        # per step id
    waits: tuple[np.ndarray, np.ndarray] | None   # (step, the later step that waits for it);
                                                  # None: one chain per rank, each step after the one before

    @property
    def steps(self) -> int:
        return int(self.step_base[-1])


def _ints(values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def flatten(schedule: Schedule) -> Flat:
    """Any schedule as arrays, a few passes over its steps."""
    if len(schedule.steps) != schedule.ranks:
        raise ValueError(f"schedule of {schedule.ranks} ranks lists steps of {len(schedule.steps)}")
    steps = [step for rank_steps in schedule.steps for step in rank_steps]
    sides = {}
    for side in ("sends", "recvs"):
        lists = [getattr(step, side) for step in steps]
        first = np.zeros(len(steps) + 1, dtype=np.int64)
        np.cumsum([len(transfers) for transfers in lists], out=first[1:])
        sides[side] = Transfers(first, _ints([t.peer for transfers in lists for t in transfers]),
                                _ints([t.nbytes for transfers in lists for t in transfers]))
    base = np.zeros(schedule.ranks + 1, dtype=np.int64)
    np.cumsum([len(rank_steps) for rank_steps in schedule.steps], out=base[1:])
    channel = _ints([step.channel for step in steps])
    after = {k: step.after for k, step in enumerate(steps) if step.after}   # step id -> the earlier steps it names
    simple = not after and not channel.any()
    return Flat(schedule.ranks, base, sides["sends"], sides["recvs"], np.array([step.compute_s for step in steps], dtype=float),
                None if simple else _waits(base, channel, after))


def ranks_alone(flat: Flat, first: int, count: int) -> Flat:
    """Ranks first..first+count-1 by themselves, renumbered from 0: one job
    of a workload (whose ranks talk only among themselves), without the
    step objects of its schedule."""
    lo, hi = int(flat.step_base[first]), int(flat.step_base[first + count])

    def side(t: Transfers) -> Transfers:
        a, b = t.first[lo], t.first[hi]
        return Transfers(t.first[lo:hi + 1] - a, t.peer[a:b] - first, t.nbytes[a:b])
    waits = flat.waits
    if waits is not None:
        mine = (lo <= waits[0]) & (waits[0] < hi)
        waits = (waits[0][mine] - lo, waits[1][mine] - lo)
    return Flat(count, flat.step_base[first:first + count + 1] - lo, side(flat.sends), side(flat.recvs),
                flat.compute_s[lo:hi], waits)


def _waits(step_base: np.ndarray, channel: np.ndarray, after: dict) -> tuple[np.ndarray, np.ndarray]:
    """(earlier step id, later step id) for every wait, by later step and
    then earlier: the step before on the same channel and every `after`
    step (indices into the rank's steps)."""
    ids = np.arange(len(channel))
    rank = np.repeat(np.arange(len(step_base) - 1), np.diff(step_base))
    order = np.lexsort((ids, channel, rank))   # each rank's channels, each in step order
    same = (rank[order][1:] == rank[order][:-1]) & (channel[order][1:] == channel[order][:-1])
    later = _ints([k for k, named in after.items() for _ in named])
    local = _ints([j for named in after.values() for j in named])
    bad = np.flatnonzero((local < 0) | (local >= later - step_base[rank[later]]))
    if bad.size:
        k = int(later[bad[0]])
        raise ValueError(f"rank {rank[k]} step {k - step_base[rank[k]]} waits for a step that is not before it: "
                         f"{after[k]}")
    src = np.concatenate((order[:-1][same], local + step_base[rank[later]]))
    dst = np.concatenate((order[1:][same], later))
    by_later = np.lexsort((src, dst))
    src, dst = src[by_later], dst[by_later]
    repeated = np.zeros(len(src), dtype=bool)   # a step named in `after` that is also the one before
    repeated[1:] = (src[1:] == src[:-1]) & (dst[1:] == dst[:-1])
    return src[~repeated], dst[~repeated]


def one_each(ranks: int, per_rank: int, send_peer, send_bytes, recv_peer, recv_bytes) -> Flat:
    """A schedule whose every step sends one transfer and receives one,
    the arrays given step id by step id."""
    n = ranks * per_rank
    first = np.arange(n + 1, dtype=np.int64)
    return Flat(ranks, np.arange(ranks + 1, dtype=np.int64) * per_rank,
                Transfers(first, send_peer, send_bytes), Transfers(first, recv_peer, recv_bytes),
                np.zeros(n), None)


def round_of(ranks: int, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> Flat:
    """One step per rank, holding the transfers src[i] -> dst[i] of nbytes[i]."""
    steps = np.arange(ranks + 1)
    by_src, by_dst = np.argsort(src, kind="stable"), np.argsort(dst, kind="stable")
    nbytes = np.asarray(nbytes, dtype=np.int64)
    return Flat(ranks, steps, Transfers(np.searchsorted(src[by_src], steps), dst[by_src], nbytes[by_src]),
                Transfers(np.searchsorted(dst[by_dst], steps), src[by_dst], nbytes[by_dst]), np.zeros(ranks), None)
