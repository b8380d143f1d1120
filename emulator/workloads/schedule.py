"""Collective schedules (pure): what every rank sends and receives, step by
step, built from the records of emulator.workloads.collectives and
emulator.workloads.algorithms; and the same schedule in the forms the model
reads (arrays, lock-step rounds), through each record's fast path where it
has one and by flattening the steps where it does not. An algorithm that
picks per call (auto) is resolved here, in one place (chosen_algorithm):
every form is built from the algorithm it picked. So is one that reads the
node of every rank (hierarchical): every function takes `nodes`, the
(node, local index) of each rank from the placement
(emulator.fabric.mapping.rank_nodes), None where no placement is known.

The host agents replay a Schedule exactly over TCP and the flow model
predicts it.
"""
from __future__ import annotations

import re

import dataclasses
import random as _random

from emulator.workloads.algorithms import Nodes, node_positions
from emulator.workloads.algorithms import algorithm as algorithm_record
from emulator.workloads.collectives import collective as collective_record
from emulator.workloads.flat import Flat, flatten, round_of
from emulator.workloads.steps import Schedule, Step, Transfer, chunks


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _rank_steps(collective: str, algorithm: str, p: int, rank: int, size: int, nodes: Nodes | None) -> list[Step]:
    c = collective_record(collective)
    if c.uses_algorithm:
        return algorithm_record(algorithm, nodes).rank_steps(p, rank, size, c.reduce_scatter, c.allgather)
    return c.rank_steps(p, rank, size)


def build_schedule(collective: str, algorithm: str, ranks: int, size_bytes: int,
                   nodes: Nodes | None = None) -> Schedule:
    """The schedule of one collective call of `size_bytes` on `ranks` ranks,
    named after the algorithm that runs it (chosen_algorithm).

    `algorithm` matters for the collectives that run an algorithm's halves;
    the others have one algorithm each and ignore it. `nodes`: where the
    ranks run, for an algorithm that reads it (module docstring)."""
    algorithm = checked_algorithm(collective, algorithm, ranks, size_bytes, nodes)
    steps = tuple(tuple(_rank_steps(collective, algorithm, ranks, r, size_bytes, nodes)) for r in range(ranks))
    return Schedule(collective, algorithm, ranks, size_bytes, steps)


def check_collective(collective: str, algorithm: str, ranks: int, size_bytes: int,
                     nodes: Nodes | None = None) -> None:
    """ValueError unless `build_schedule` can build this collective."""
    checked_algorithm(collective, algorithm, ranks, size_bytes, nodes)


def reads_nodes(algorithm: str) -> bool:
    """Whether `algorithm` reads the node of every rank (its schedule differs by placement)."""
    return algorithm_record(algorithm).placed is not None


def nodes_for(algorithm: str, nodes: Nodes | None) -> Nodes | None:
    """`nodes` as `algorithm` reads them: None for one that does not read
    them, else each rank's (node, local) position, the same for every
    placement of the same shape (a key for schedules kept for reuse)."""
    return node_positions(tuple(nodes)) if nodes is not None and reads_nodes(algorithm) else None


def checked_algorithm(collective: str, algorithm: str, ranks: int, size_bytes: int,
                      nodes: Nodes | None = None) -> str:
    """chosen_algorithm, after check_collective's checks."""
    collective_record(collective)   # each raises naming the unknown name and the known ones
    alg = algorithm_record(algorithm)
    if not _is_int(ranks) or ranks < 2:
        raise ValueError(f"a collective needs at least 2 ranks (an integer), got {ranks!r}")
    if not _is_int(size_bytes) or size_bytes < 1:
        raise ValueError(f"message size must be >= 1 byte (an integer), got {size_bytes!r}")
    need = algorithm_need(collective, algorithm, ranks, nodes)
    if need:
        raise ValueError(f"{alg.name} {collective} needs {need_said(need, ranks)}")
    chosen = chosen_algorithm(collective, algorithm, ranks, size_bytes)
    need = algorithm_need(collective, chosen, ranks, nodes)
    if need:   # an algorithm that picks must pick one that runs
        raise ValueError(f"{alg.name} picked {chosen}, which for {collective} needs {need_said(need, ranks)}")
    return chosen


def need_said(need: str, ranks: int) -> str:
    """What an algorithm needs, with the rank count beside it only where the
    need is about ranks (tree's allgather is not: no count would do)."""
    return f"{need}; got {ranks} ranks" if re.search(r"\brank count|\branks\b", need) else need


def chosen_algorithm(collective: str, algorithm: str, ranks: int, size_bytes: int) -> str:
    """The algorithm that runs this call: `algorithm`, or the one it picks
    for this collective, rank count and size (auto)."""
    c = collective_record(collective)
    picks = algorithm_record(algorithm).picks
    return picks(ranks, size_bytes, c.reduce_scatter, c.allgather) if c.uses_algorithm and picks else algorithm


def algorithm_need(collective: str, algorithm: str, ranks: int, nodes: Nodes | None = None) -> str:
    """What the algorithm needs to run this collective on `ranks` ranks ("": nothing more)."""
    c = collective_record(collective)
    return algorithm_record(algorithm, nodes).needs(ranks, c.reduce_scatter, c.allgather) if c.uses_algorithm else ""


def flat_schedule(collective: str, algorithm: str, ranks: int, size_bytes: int, nodes: Nodes | None = None) -> Flat:
    """flatten(build_schedule(...)), straight as arrays where the record has a fast path."""
    algorithm = checked_algorithm(collective, algorithm, ranks, size_bytes, nodes)
    c = collective_record(collective)
    if c.uses_algorithm:
        fast = algorithm_record(algorithm, nodes).flat
        made = fast(ranks, size_bytes, c.reduce_scatter, c.allgather) if fast else None
    else:
        made = c.flat(ranks, size_bytes) if c.flat else None
    return made if made is not None else flatten(build_schedule(collective, algorithm, ranks, size_bytes, nodes))


def lockstep_rounds(collective: str, algorithm: str, ranks: int, size_bytes: int, nodes: Nodes | None = None):
    """The collective as rounds all ranks run in lock-step: ([(one step per
    rank as a Flat, how many times it repeats)], what is approximated beyond
    the lock-step), or None where its algorithm gives no rounds."""
    algorithm = checked_algorithm(collective, algorithm, ranks, size_bytes, nodes)
    c = collective_record(collective)
    rounds = algorithm_record(algorithm, nodes).rounds if c.uses_algorithm else None
    made = rounds(ranks, size_bytes, c.reduce_scatter, c.allgather) if rounds else None
    if made is None:
        return None
    listed, note = made
    return [(round_of(ranks, src, dst, nbytes), repeats) for src, dst, nbytes, repeats in listed], note


def alpha_beta_time(collective: str, algorithm: str, ranks: int, size_bytes: float,
                    rate_mbps: float, alpha_s: float, nodes: Nodes | None = None) -> float:
    """Closed-form alpha-beta time (docs/eflops.md) of a congestion-free
    collective: the halves it runs, as the record of the algorithm that
    runs it has them (every link at `rate_mbps`, a node's interconnect too)."""
    c = collective_record(collective)
    if not c.uses_algorithm:
        raise ValueError(f"no alpha-beta formula for collective {collective!r}")
    chosen = algorithm_record(chosen_algorithm(collective, algorithm, ranks, size_bytes), nodes)
    return chosen.alpha_beta_s(c.halves, ranks, size_bytes, rate_mbps, alpha_s)


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


