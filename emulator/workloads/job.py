"""A workload's data (pure): jobs, each a program of ops per rank, on one fabric.

A workload is one or more jobs sharing one fabric. A job has a name, a
rank count, a placement on the hosts (emulator.fabric.mapping.place), a start
time, a number of iterations and a per-iteration program: ops per rank,
written out or emitted by a template (emulator.workloads.templates).
emulator.workloads.workload reads them from TOML; emulator.workloads.program
compiles them into the steps the agents run and the model predicts. A sweep
of one collective is a one-job workload too."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from emulator.workloads.collectives import COLLECTIVES

COMMUNICATION = (*COLLECTIVES, "send", "recv")


OP_KINDS = ("compute", "wait") + COMMUNICATION


GROUPS = ("world", "dp", "tp", "pp")


MAX_ITERATIONS = 10_000


MAX_JOBS = 64


class WorkloadError(ValueError):
    pass


@dataclass(frozen=True)
class Op:
    kind: str                       # one of OP_KINDS
    ms: float = 0.0                 # compute: milliseconds at speed 1
    nbytes: int = 0                 # collectives: the size, as nccl-tests counts it; send/recv: the message
    group: str = "world"            # the ranks a communication op spans (GROUPS)
    algorithm: str = ""             # "": the run's (-a), so that compare can vary it
    peer: str = ""                  # send/recv: "next"/"prev" in the group, or a group index
    nonblocking: bool = False       # issued, waited for later by a `wait` (or the iteration's end)
    tag: str = ""                   # the name a wait uses
    matrix: tuple[tuple[int, ...], ...] | None = None   # all-to-all: bytes group rank i sends to j


@dataclass(frozen=True)
class Job:
    name: str
    ranks: int                      # 0: the run's ranks (default: every host left free)
    placement: str | tuple = ""     # a mapping name, a host list, or "" for the run's mapping
    seed: int = 1
    start_s: float = 0.0
    iterations: int = 1
    duration_s: float = 0.0         # > 0: as many iterations as the job alone fits in it (by the model)
    tp: int = 1
    pp: int = 1
    template: str = ""
    params: tuple = ()              # a template's keys, as sorted (key, value) pairs
    ops: tuple[Op, ...] = ()        # written out: the same ops on every rank, every iteration

    @property
    def dp(self) -> int:
        return self.ranks // (self.tp * self.pp)


@dataclass(frozen=True)
class Workload:
    jobs: tuple[Job, ...]
    speeds: tuple = ()              # (host, factor): compute on that host takes 1/factor as long
    share_hosts: bool = False       # jobs may share hosts (otherwise each job gets hosts of its own)
    source: str = ""                # the file it came from

    def speed(self, host: str) -> float:
        return dict(self.speeds).get(host, 1.0)


def sweep_job(collective: str, algorithm: str, ranks: int, size: int, placement, seed: int) -> Workload:
    """One collective call as a one-job workload (what `run -c ... -b ...` replays per size)."""
    op = Op(collective, nbytes=size, algorithm=algorithm)
    return Workload((Job(collective, ranks, placement, seed, ops=(op,)),))


def fit_iterations(job: Job, iteration_s: float) -> Job:
    """A job given a duration gets as many iterations as fit in it, an
    iteration taking `iteration_s` (the model's, of the job alone)."""
    if not job.duration_s:
        return job
    return dataclasses.replace(job, iterations=max(1, int(job.duration_s / iteration_s)) if iteration_s > 0 else 1)


def group_of(job: Job, rank: int, name: str) -> tuple[list[int] | range, int]:
    """The job-local ranks of `rank`'s group `name`, in group order, and
    its index in it (Megatron: tp varies fastest, then dp, then pp)."""
    tp, dp = job.tp, job.dp
    t, d, p = rank % tp, (rank // tp) % dp, rank // (tp * dp)
    if name == "world":
        return range(job.ranks), rank
    if name == "tp":
        return range(p * tp * dp + d * tp, p * tp * dp + d * tp + tp), t
    if name == "dp":
        return range(p * tp * dp + t, (p + 1) * tp * dp, tp), d
    return range(d * tp + t, job.ranks, tp * dp), p


def groups(job: Job, rank: int) -> dict[str, list[int]]:
    """Every group of `rank` (see `group_of`)."""
    return {name: list(group_of(job, rank, name)[0]) for name in GROUPS}
