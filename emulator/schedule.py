"""Collective schedules (pure): what every rank sends and receives, step by step.

A `Schedule` lists, for each rank, its ordered steps. In a step a rank sends
some bytes to some peers and receives some bytes from some peers, all at
once; it starts step k+1 only after step k's sends and receives are done
(the data dependency of a real collective). The host agents replay exactly
this over TCP and the flow model predicts it.
"""
from __future__ import annotations

import dataclasses
import random as _random
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


COLLECTIVES = ("allreduce", "reduce-scatter", "allgather", "broadcast", "all-to-all", "parameter-server",
               "stride")
ALGORITHMS = ("ring", "halving-doubling")
USES_ALGORITHM = ("allreduce", "reduce-scatter", "allgather")   # the others have one algorithm each

# nccl-tests' busbw = algbw * factor(n): the traffic each rank's link must carry,
# relative to S, for a bandwidth-optimal algorithm.
def busbw_factor(collective: str, ranks: int) -> float:
    n = ranks
    if collective == "allreduce":
        return 2 * (n - 1) / n
    if collective in ("reduce-scatter", "allgather", "all-to-all"):
        return (n - 1) / n
    if collective in ("broadcast", "stride"):
        return 1.0
    if collective == "parameter-server":
        # Push S to the server and pull S back: like allreduce through one
        # rank, each worker link carries S each way; the server's link is the
        # bottleneck, so busbw is reported per worker link.
        return 1.0
    raise ValueError(f"unknown collective {collective!r}; choose one of: {', '.join(COLLECTIVES)}")


def chunks(size: int, parts: int) -> list[int]:
    """Split `size` bytes into `parts` chunks whose sizes differ by at most 1."""
    base, extra = divmod(size, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _exchange(peer_send: int, nsend: int, peer_recv: int, nrecv: int, phase: str) -> Step:
    return Step((Transfer(peer_send, nsend),), (Transfer(peer_recv, nrecv),), phase)


# --- ring ------------------------------------------------------------------

def _ring_phase(p: int, rank: int, sizes: list[int], phase: str, shift: int) -> list[Step]:
    """p-1 steps: send chunk (rank+shift-k) to rank+1, receive chunk
    (rank+shift-k-1) from rank-1."""
    nxt, prev = (rank + 1) % p, (rank - 1) % p
    made: dict[tuple[int, int], Step] = {}   # chunks differ by a byte at most: a few distinct steps, each made once
    steps = []
    for k in range(p - 1):
        key = (sizes[(rank + shift - k) % p], sizes[(rank + shift - k - 1) % p])
        if key not in made:
            made[key] = _exchange(nxt, key[0], prev, key[1], phase)
        steps.append(made[key])
    return steps


def ring_reduce_scatter(p: int, rank: int, size: int) -> list[Step]:
    return _ring_phase(p, rank, chunks(size, p), "reduce-scatter", 0)


def ring_allgather(p: int, rank: int, size: int) -> list[Step]:
    # After reduce-scatter, rank r owns chunk r+1; allgather circulates it.
    return _ring_phase(p, rank, chunks(size, p), "allgather", 1)


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
            steps.append(_exchange(rank ^ (1 << k), give, rank ^ (1 << k), keep, "reduce-scatter"))
    if doubling:
        for k in reversed(range(d)):
            lo_k, hi_k, mid, keep_low = segments[k]
            mine, theirs = (mid - lo_k, hi_k - mid) if keep_low else (hi_k - mid, mid - lo_k)
            steps.append(_exchange(rank ^ (1 << k), mine, rank ^ (1 << k), theirs, "allgather"))
    return steps


def _halving_doubling(p: int, rank: int, size: int, halving: bool, doubling: bool) -> list[Step]:
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


# --- the other collectives -------------------------------------------------

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


def _parameter_server(p: int, rank: int, size: int) -> list[Step]:
    """Rank 0 is the server: every worker pushes S bytes of gradients, the
    server answers each with S bytes of parameters after all pushes arrived."""
    if rank == 0:
        workers = range(1, p)
        return [Step((), tuple(Transfer(w, size) for w in workers), "push"),
                Step(tuple(Transfer(w, size) for w in workers), (), "pull")]
    return [Step((Transfer(0, size),), (), "push"), Step((), (Transfer(0, size),), "pull")]


def _stride(p: int, rank: int, size: int) -> list[Step]:
    """Hedera's stride(p/2) permutation: rank r sends S to rank r + p/2 and
    receives S from rank r - p/2 (mod p), all at once. With consecutive
    ranks on consecutive hosts every flow crosses the middle of the fabric."""
    half = p // 2
    return [_exchange((rank + half) % p, size, (rank - half) % p, size, "stride")]


def _rank_steps(collective: str, algorithm: str, p: int, rank: int, size: int) -> list[Step]:
    if collective in ("allreduce", "reduce-scatter", "allgather"):
        halving = collective in ("allreduce", "reduce-scatter")
        doubling = collective in ("allreduce", "allgather")
        if algorithm == "ring":
            return ((ring_reduce_scatter(p, rank, size) if halving else [])
                    + (ring_allgather(p, rank, size) if doubling else []))
        return _halving_doubling(p, rank, size, halving, doubling)
    return {"broadcast": _broadcast, "all-to-all": _all_to_all, "parameter-server": _parameter_server,
            "stride": _stride}[collective](p, rank, size)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def build_schedule(collective: str, algorithm: str, ranks: int, size_bytes: int) -> Schedule:
    """The schedule of one collective call of `size_bytes` on `ranks` ranks.

    `algorithm` matters for allreduce, reduce-scatter and allgather; the
    other collectives have one algorithm each and ignore it."""
    check_collective(collective, algorithm, ranks, size_bytes)
    steps = tuple(tuple(_rank_steps(collective, algorithm, ranks, r, size_bytes)) for r in range(ranks))
    return Schedule(collective, algorithm, ranks, size_bytes, steps)


def check_collective(collective: str, algorithm: str, ranks: int, size_bytes: int) -> None:
    """ValueError unless `build_schedule` can build this collective."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}; choose one of: {', '.join(COLLECTIVES)}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of: {', '.join(ALGORITHMS)}")
    if not _is_int(ranks) or ranks < 2:
        raise ValueError(f"a collective needs at least 2 ranks (an integer), got {ranks!r}")
    if not _is_int(size_bytes) or size_bytes < 1:
        raise ValueError(f"message size must be >= 1 byte (an integer), got {size_bytes!r}")
    power_of_two = ranks & (ranks - 1) == 0
    if algorithm == "halving-doubling" and collective in ("reduce-scatter", "allgather") and not power_of_two:
        raise ValueError(f"halving-doubling {collective} needs a power-of-two rank count, got {ranks} "
                         "(allreduce handles any count with pre/post steps; or use algorithm ring)")


def over_connections(schedule: Schedule, connections: int) -> Schedule:
    """The same schedule with every transfer split over `connections` TCP
    connections (as NCCL spreads a peer's traffic over several): each
    becomes that many transfers of near-equal parts, sent at once."""
    if connections == 1:
        return schedule

    def split(transfers):
        return tuple(Transfer(t.peer, n) for t in transfers for n in chunks(t.nbytes, connections))
    steps = tuple(tuple(dataclasses.replace(s, sends=split(s.sends), recvs=split(s.recvs)) for s in rank_steps)
                  for rank_steps in schedule.steps)
    return dataclasses.replace(schedule, steps=steps)


def jittered(schedule: Schedule, amplitude: float, seed: int = 0) -> Schedule:
    """The same schedule with every transfer `1 + amplitude * U(0,1)` times
    longer (sender and receiver agree), as seeded noise. The flow model on it
    shows how sensitive a collective is to flows that run a little slow:
    a schedule whose ranks must stay in step amplifies the noise."""
    if not 0 <= amplitude <= 10:
        raise ValueError(f"jitter amplitude must be between 0 and 10, got {amplitude}")
    rnd = _random.Random(seed)
    factor: dict[tuple[int, int, int], float] = {}   # (src, dst, n-th transfer) -> factor
    sent: dict[tuple[int, int], int] = {}
    got: dict[tuple[int, int], int] = {}

    def scaled(src: int, dst: int, t: Transfer, seen: dict) -> Transfer:
        n = seen.get((src, dst), 0)
        seen[(src, dst)] = n + 1
        f = factor.setdefault((src, dst, n), 1 + amplitude * rnd.random())
        return Transfer(t.peer, int(t.nbytes * f))

    steps = []
    for rank, mine in enumerate(schedule.steps):
        steps.append([Step(tuple(scaled(rank, t.peer, t, sent) for t in s.sends), s.recvs, s.phase) for s in mine])
    for rank, mine in enumerate(steps):
        mine[:] = [Step(s.sends, tuple(scaled(t.peer, rank, t, got) for t in s.recvs), s.phase) for s in mine]
    return dataclasses.replace(schedule, steps=tuple(tuple(s) for s in steps))


# --- steps as data (what the agents receive) ------------------------------------

def steps_to_data(steps) -> list:
    """A rank's steps as JSON-ready lists: [sends, recvs, compute_s, channel, after, phase]."""
    return [[[[t.peer, t.nbytes] for t in s.sends], [[t.peer, t.nbytes] for t in s.recvs],
             s.compute_s, s.channel, list(s.after), s.phase] for s in steps]


def steps_from_data(data: list) -> tuple[Step, ...]:
    return tuple(Step(tuple(Transfer(p, n) for p, n in sends), tuple(Transfer(p, n) for p, n in recvs),
                      phase, compute_s, channel, tuple(after))
                 for sends, recvs, compute_s, channel, after, phase in data)
