"""Collective algorithms (pure): one record each, the only place an
algorithm is named.

An algorithm says how the ranks run the two halves of the collectives that
have a choice: the reduce-scatter half and the allgather half (allreduce
runs both, emulator.workloads.collectives says which a collective has). Its
record holds the steps of every rank, the rank counts it takes, its
closed-form alpha-beta time and, where it has them, two fast paths the
model reads instead of step objects: the whole schedule as arrays (`flat`)
and the collective as lock-step rounds (`rounds`). Without them the model
flattens the steps (emulator.workloads.schedule does the choosing).

To add an algorithm, write one record and put it in ALGORITHMS.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from emulator.workloads.flat import Flat, one_each
from emulator.workloads.steps import Step, Transfer, chunks, exchange

# A round of a lock-step collective, as the fast path gives it: transfers
# src[i] -> dst[i] of nbytes[i], one step of every rank that takes part,
# repeated `repeats` times.
Round = tuple[np.ndarray, np.ndarray, np.ndarray, int]


@dataclass(frozen=True)
class Algorithm:
    name: str
    help: str
    # (ranks, rank, bytes, reduce_scatter, allgather) -> that rank's steps
    rank_steps: Callable[[int, int, int, bool, bool], list[Step]]
    # messages each rank sends in one half on p ranks: the alpha term of the
    # closed form (0: no closed form on p ranks)
    half_messages: Callable[[int], int]
    # (ranks, reduce_scatter, allgather) -> "" if it runs on that many ranks, else what it needs
    needs: Callable[[int, bool, bool], str] = lambda ranks, rs, ag: ""
    # (ranks, bytes, reduce_scatter, allgather) -> the schedule as arrays, or None: flatten the steps
    flat: Callable[[int, int, bool, bool], Flat | None] | None = None
    # (ranks, bytes, reduce_scatter, allgather) -> ([Round], what the rounds approximate), or None
    rounds: Callable[[int, int, bool, bool], tuple[list[Round], str] | None] | None = None

    def alpha_beta_s(self, halves: int, ranks: int, size_bytes: float, rate_mbps: float, alpha_s: float) -> float:
        """Closed-form time of a congestion-free call (docs/eflops.md): each
        half is `half_messages` messages and (p-1)/p * S bytes per rank link."""
        messages = self.half_messages(ranks)
        if messages < 1:
            raise ValueError(f"no alpha-beta formula for {self.name} on {ranks} ranks")
        beta = 8 / (rate_mbps * 1e6)   # seconds per byte
        return halves * (messages * alpha_s + (ranks - 1) / ranks * size_bytes * beta)


def _power_of_two(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


# --- ring ------------------------------------------------------------------

def _ring_half(p: int, rank: int, sizes: list[int], phase: str, shift: int) -> list[Step]:
    """p-1 steps: send chunk (rank+shift-k) to rank+1, receive chunk
    (rank+shift-k-1) from rank-1."""
    nxt, prev = (rank + 1) % p, (rank - 1) % p
    made: dict[tuple[int, int], Step] = {}   # chunks differ by a byte at most: a few distinct steps, each made once
    steps = []
    for k in range(p - 1):
        key = (sizes[(rank + shift - k) % p], sizes[(rank + shift - k - 1) % p])
        if key not in made:
            made[key] = exchange(nxt, key[0], prev, key[1], phase)
        steps.append(made[key])
    return steps


def _ring_steps(p: int, rank: int, size: int, reduce_scatter: bool, allgather: bool) -> list[Step]:
    # After reduce-scatter, rank r owns chunk r+1; allgather circulates it.
    sizes = chunks(size, p)
    return ((_ring_half(p, rank, sizes, "reduce-scatter", 0) if reduce_scatter else [])
            + (_ring_half(p, rank, sizes, "allgather", 1) if allgather else []))


def _ring_flat(p: int, size: int, reduce_scatter: bool, allgather: bool) -> Flat:
    """_ring_half for every rank and half at once."""
    sizes = np.array(chunks(size, p), dtype=np.int64)
    shifts = [s for s, on in ((0, reduce_scatter), (1, allgather)) if on]
    per_rank = len(shifts) * (p - 1)
    rank = np.repeat(np.arange(p), per_rank)
    k = np.tile(np.arange(p - 1), p * len(shifts))
    shift = np.tile(np.repeat(shifts, p - 1), p)
    chunk = rank + shift - k
    return one_each(p, per_rank, (rank + 1) % p, sizes[chunk % p], (rank - 1) % p, sizes[(chunk - 1) % p])


def _ring_rounds(p: int, size: int, reduce_scatter: bool, allgather: bool):
    """Every step the same pattern: one round, repeated."""
    rank = np.arange(p)
    chunk = -(-size // p)
    note = "" if size % p == 0 else f"ring chunks taken as {chunk} bytes (at most 1 byte more each)"
    return [(rank, (rank + 1) % p, np.full(p, chunk), (reduce_scatter + allgather) * (p - 1))], note


RING = Algorithm(
    "ring", "ring: p-1 steps per half, each rank sending to the next (bandwidth-optimal, p-1 latencies)",
    _ring_steps, half_messages=lambda p: p - 1, flat=_ring_flat, rounds=_ring_rounds)


# --- recursive halving-doubling -------------------------------------------

def _hd_core(p: int, rank: int, size: int, halving: bool, doubling: bool) -> list[Step]:
    """Halving-doubling on p = 2^d ranks (Rabenseifner).

    Reduce-scatter: at step k partner = rank ^ 2^k; the current segment is
    split in two, the lower-bit rank keeps the low half and sends the high
    half. Allgather: the same partners in reverse order, segments doubling.
    """
    d = p.bit_length() - 1
    lo, hi = 0, size
    segments = []
    for k in range(d):
        mid = (lo + hi) // 2
        keep_low = not (rank >> k) & 1
        segments.append((lo, hi, mid, keep_low))
        lo, hi = (lo, mid) if keep_low else (mid, hi)
    steps = []
    if halving:
        for k, (lo_k, hi_k, mid, keep_low) in enumerate(segments):
            give, keep = (hi_k - mid, mid - lo_k) if keep_low else (mid - lo_k, hi_k - mid)
            steps.append(exchange(rank ^ (1 << k), give, rank ^ (1 << k), keep, "reduce-scatter"))
    if doubling:
        for k in reversed(range(d)):
            lo_k, hi_k, mid, keep_low = segments[k]
            mine, theirs = (mid - lo_k, hi_k - mid) if keep_low else (hi_k - mid, mid - lo_k)
            steps.append(exchange(rank ^ (1 << k), mine, rank ^ (1 << k), theirs, "allgather"))
    return steps


def _hd_steps(p: int, rank: int, size: int, halving: bool, doubling: bool) -> list[Step]:
    """Halving-doubling for any p: when p is not a power of two, the first
    2r ranks (r = p - 2^floor(log2 p)) pair up, even ranks hand their data to
    the odd neighbour before the core and get the result back after it
    (the standard pre/post step)."""
    core = 1 << (p.bit_length() - 1)
    extra = p - core
    if rank < 2 * extra and rank % 2 == 0:   # sits out the core
        steps = []
        if halving:
            steps.append(Step((Transfer(rank + 1, size),), (), "pre"))
        if doubling:
            steps.append(Step((), (Transfer(rank + 1, size),), "post"))
        return steps
    virtual = rank // 2 if rank < 2 * extra else rank - extra

    def real(v: int) -> int:
        return 2 * v + 1 if v < extra else v + extra

    steps = []
    if halving and rank < 2 * extra:
        steps.append(Step((), (Transfer(rank - 1, size),), "pre"))
    for s in _hd_core(core, virtual, size, halving, doubling):
        steps.append(Step(tuple(Transfer(real(t.peer), t.nbytes) for t in s.sends),
                          tuple(Transfer(real(t.peer), t.nbytes) for t in s.recvs), s.phase))
    if doubling and rank < 2 * extra:
        steps.append(Step((Transfer(rank - 1, size),), (), "post"))
    return steps


def _hd_columns(p: int, size: int, halving: bool, doubling: bool):
    """_hd_core on p = 2^d ranks for every rank at once: per step, in step
    order, (peer, bytes sent, bytes received) arrays over ranks."""
    d = p.bit_length() - 1
    rank = np.arange(p)
    lo, hi = np.zeros(p, dtype=np.int64), np.full(p, size, dtype=np.int64)
    halves = []
    for k in range(d):
        mid = (lo + hi) // 2
        keep_low = (rank >> k) & 1 == 0
        give, keep = np.where(keep_low, hi - mid, mid - lo), np.where(keep_low, mid - lo, hi - mid)
        halves.append((rank ^ (1 << k), give, keep))
        lo, hi = np.where(keep_low, lo, mid), np.where(keep_low, mid, hi)
    # doubling: the same partners in reverse, each side sending what it kept
    return (halves if halving else []) + ([(peer, keep, give) for peer, give, keep in reversed(halves)]
                                          if doubling else [])


def _hd_flat(p: int, size: int, halving: bool, doubling: bool) -> Flat | None:
    if not _power_of_two(p):
        return None   # the pre/post steps: flattened from the steps
    peer, send, recv = (np.stack(c, axis=1).ravel() for c in zip(*_hd_columns(p, size, halving, doubling)))
    return one_each(p, len(peer) // p, peer, send, peer, recv)


def _hd_rounds(p: int, size: int, halving: bool, doubling: bool):
    """The core's rounds on the ranks that take part; with p not a power of
    two, the first 2*extra ranks pair up (the odd one of each pair in the
    core) and the pre and post steps are a round each."""
    core = 1 << (p.bit_length() - 1)
    extra = p - core
    virtual = np.arange(core)
    real = np.where(virtual < extra, 2 * virtual + 1, virtual + extra)
    rounds = [(real, real[peer], send, 1) for peer, send, _ in _hd_columns(core, size, halving, doubling)]
    if extra:
        evens = 2 * np.arange(extra)
        whole = np.full(extra, size)
        rounds = [(evens, evens + 1, whole, 1)] + rounds + [(evens + 1, evens, whole, 1)]
    return rounds, ""


def _hd_needs(p: int, reduce_scatter: bool, allgather: bool) -> str:
    """Allreduce takes any count (pre/post steps); its halves alone do not."""
    if reduce_scatter and allgather or _power_of_two(p):
        return ""
    return "a power-of-two rank count (allreduce handles any count with pre/post steps; or use algorithm ring)"


HALVING_DOUBLING = Algorithm(
    "halving-doubling", "recursive halving-doubling (Rabenseifner): log2(p) steps per half, partners "
                        "rank ^ 2^k (EFLOPS' choice on BiGraph, with HDRM)",
    _hd_steps, half_messages=lambda p: p.bit_length() - 1 if _power_of_two(p) else 0, needs=_hd_needs,
    flat=_hd_flat, rounds=_hd_rounds)


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (RING, HALVING_DOUBLING)}


def algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; choose one of: {', '.join(ALGORITHMS)}") from None

