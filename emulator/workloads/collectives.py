"""Collectives (pure): one record each, the only place a collective is named.

A collective either runs halves an algorithm chooses how to run
(reduce-scatter, allgather, or both for allreduce: emulator.workloads.algorithms)
or has steps of its own (broadcast, all-to-all, parameter-server, stride).
Its record also holds nccl-tests' busbw factor and, where it has one, its
schedule built straight as arrays for the model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from emulator.workloads.flat import Flat, Transfers
from emulator.workloads.steps import Step, Transfer, chunks, exchange


@dataclass(frozen=True)
class Collective:
    name: str
    help: str
    # nccl-tests' busbw = algbw * busbw(n): the traffic each rank's link must
    # carry, relative to S, for a bandwidth-optimal algorithm
    busbw: Callable[[int], float]
    reduce_scatter: bool = False   # runs the reduce-scatter half of an algorithm
    allgather: bool = False        # runs the allgather half
    # one algorithm of its own: (ranks, rank, bytes) -> that rank's steps
    rank_steps: Callable[[int, int, int], list[Step]] | None = None
    flat: Callable[[int, int], Flat] | None = None   # (ranks, bytes) -> the schedule as arrays

    @property
    def uses_algorithm(self) -> bool:
        return self.reduce_scatter or self.allgather

    @property
    def halves(self) -> int:
        return self.reduce_scatter + self.allgather


def _broadcast(p: int, rank: int, size: int) -> list[Step]:
    """Pipelined chain broadcast from rank 0 in 4p chunks (NCCL's ring
    broadcast): rank r forwards chunk c to r+1 in the step after it
    received it, while receiving chunk c+1."""
    parts = chunks(size, 4 * p)
    recv = [(Transfer(rank - 1, n),) for n in parts] if rank > 0 else [()] * len(parts)
    send = [(Transfer(rank + 1, n),) for n in parts] if rank < p - 1 else [()] * len(parts)
    if rank == 0:
        return [Step(s, (), "broadcast") for s in send]
    # step i receives chunk i and sends chunk i-1 (chunk -1 and chunk C are empty)
    return [Step(send[i - 1] if i > 0 else (), recv[i] if i < len(parts) else (), "broadcast")
            for i in range(len(parts) + (1 if rank < p - 1 else 0))]


def _all_to_all(p: int, rank: int, size: int) -> list[Step]:
    """Every rank sends S/p to every other rank at once (the MoE dispatch)."""
    part = chunks(size, p)
    others = [r for r in range(p) if r != rank]
    return [Step(tuple(Transfer(r, part[r]) for r in others),
                 tuple(Transfer(r, part[rank]) for r in others), "all-to-all")]


def _all_to_all_flat(p: int, size: int) -> Flat:
    """_all_to_all: one step per rank, sending chunk r to every other rank r
    and receiving its own chunk from each, in rank order."""
    sizes = np.array(chunks(size, p), dtype=np.int64)
    rank = np.repeat(np.arange(p), p - 1)
    other = np.tile(np.arange(p - 1), p)
    other += other >= rank   # every rank but itself, in order
    first = np.arange(p + 1, dtype=np.int64) * (p - 1)
    return Flat(p, np.arange(p + 1, dtype=np.int64), Transfers(first, other, sizes[other]),
                Transfers(first, other.copy(), sizes[rank]), np.zeros(p), None)


def _parameter_server(p: int, rank: int, size: int) -> list[Step]:
    """Rank 0 is the server: every worker pushes S bytes of gradients, the
    server answers each with S bytes of parameters after all pushes arrived."""
    if rank == 0:
        workers = range(1, p)
        return [Step((), tuple(Transfer(w, size) for w in workers), "push"),
                Step(tuple(Transfer(w, size) for w in workers), (), "pull")]
    return [Step((Transfer(0, size),), (), "push"), Step((), (Transfer(0, size),), "pull")]


def _incast(p: int, rank: int, size: int) -> list[Step]:
    """Every rank but 0 sends S to rank 0 at once: the many-to-one of a
    storage read or a gradient push, whose flows all meet in the receiver's
    switch port queue."""
    if rank == 0:
        return [Step((), tuple(Transfer(r, size) for r in range(1, p)), "incast")]
    return [Step((Transfer(0, size),), (), "incast")]


def _stride(p: int, rank: int, size: int) -> list[Step]:
    """Hedera's stride(p/2) permutation: rank r sends S to rank r + p/2 and
    receives S from rank r - p/2 (mod p), all at once. With consecutive
    ranks on consecutive hosts every flow crosses the middle of the fabric."""
    half = p // 2
    return [exchange((rank + half) % p, size, (rank - half) % p, size, "stride")]


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    Collective("allreduce", "every rank ends with the sum of all ranks' S bytes (reduce-scatter, then allgather)",
               lambda n: 2 * (n - 1) / n, reduce_scatter=True, allgather=True),
    Collective("reduce-scatter", "every rank ends with its 1/p of the sum", lambda n: (n - 1) / n,
               reduce_scatter=True),
    Collective("allgather", "every rank ends with every rank's 1/p", lambda n: (n - 1) / n, allgather=True),
    Collective("broadcast", "rank 0's S bytes to every rank, pipelined along a chain", lambda n: 1.0,
               rank_steps=_broadcast),
    Collective("all-to-all", "every rank sends S/p to every other rank at once (the MoE dispatch)",
               lambda n: (n - 1) / n, rank_steps=_all_to_all, flat=_all_to_all_flat),
    # Push S to the server and pull S back: like allreduce through one rank,
    # each worker link carries S each way; the server's link is the
    # bottleneck, so busbw is reported per worker link.
    Collective("parameter-server", "rank 0 serves: every worker pushes S bytes and pulls S back", lambda n: 1.0,
               rank_steps=_parameter_server),
    Collective("stride", "Hedera's stride(p/2): rank r sends S to rank r + p/2, all at once", lambda n: 1.0,
               rank_steps=_stride),
    # busbw: what the receiver's link carries, relative to S
    Collective("incast", "every rank but 0 sends S to rank 0 at once (many-to-one into one switch port)",
               lambda n: n - 1, rank_steps=_incast),
)}


def collective(name: str) -> Collective:
    try:
        return COLLECTIVES[name]
    except KeyError:
        raise ValueError(f"unknown collective {name!r}; choose one of: {', '.join(COLLECTIVES)}") from None


def busbw_factor(name: str, ranks: int) -> float:
    return collective(name).busbw(ranks)
