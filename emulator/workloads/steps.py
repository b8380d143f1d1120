"""Steps and schedules (pure): what every rank sends and receives, step by step.

A `Schedule` lists, for each rank, its ordered steps. In a step a rank sends
some bytes to some peers and receives some bytes from some peers, all at
once; it starts step k+1 only after step k's sends and receives are done
(the data dependency of a real collective). The host agents replay exactly
this over TCP and the flow model predicts it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Transfer:
    peer: int      # the other rank
    nbytes: int


@dataclass(frozen=True)
class Step:
    """What a rank does at once: sends and receives, or compute.

    A step starts once the step before it on the same channel has ended and
    every step listed in `after` (indices into the rank's steps) has too. A
    collective is steps on one channel; compute on another channel lets
    communication issued before it overlap it (non-blocking issue), and
    `after` is the wait."""
    sends: tuple[Transfer, ...] = ()
    recvs: tuple[Transfer, ...] = ()
    phase: str = ""    # e.g. "reduce-scatter", "allgather", "push", "compute"
    compute_s: float = 0.0             # time the rank computes (already scaled by its host's speed)
    channel: int = 0                   # steps of one channel run in order; channels run side by side
    after: tuple[int, ...] = ()        # earlier steps of this rank (on other channels) it waits for
    op: int = 0                        # the op of the rank's program this step belongs to


@dataclass(frozen=True)
class Schedule:
    collective: str
    algorithm: str
    ranks: int
    size_bytes: int
    steps: tuple[tuple[Step, ...], ...]   # steps[rank] = that rank's steps

    def bytes_sent(self, rank: int) -> int:
        return sum(t.nbytes for s in self.steps[rank] for t in s.sends)

    def bytes_received(self, rank: int) -> int:
        return sum(t.nbytes for s in self.steps[rank] for t in s.recvs)


def chunks(size: int, parts: int) -> list[int]:
    """Split `size` bytes into `parts` chunks whose sizes differ by at most 1."""
    base, extra = divmod(size, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _exchange(peer_send: int, nsend: int, peer_recv: int, nrecv: int, phase: str) -> Step:
    return Step((Transfer(peer_send, nsend),), (Transfer(peer_recv, nrecv),), phase)


def exchange(peer_send: int, nsend: int, peer_recv: int, nrecv: int, phase: str) -> Step:
    return Step((Transfer(peer_send, nsend),), (Transfer(peer_recv, nrecv),), phase)


# --- steps as data (what the agents receive) ------------------------------------

def steps_to_data(steps) -> list:
    """A rank's steps as JSON-ready lists: [sends, recvs, compute_s, channel, after, phase]."""
    return [[[[t.peer, t.nbytes] for t in s.sends], [[t.peer, t.nbytes] for t in s.recvs],
             s.compute_s, s.channel, list(s.after), s.phase] for s in steps]


def steps_from_data(data: list) -> tuple[Step, ...]:
    return tuple(Step(tuple(Transfer(p, n) for p, n in sends), tuple(Transfer(p, n) for p, n in recvs),
                      phase, compute_s, channel, tuple(after))
                 for sends, recvs, compute_s, channel, after, phase in data)
