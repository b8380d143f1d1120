"""A workload's data (pure): jobs, each a program of ops per rank, on one fabric.

A workload is one or more jobs sharing one fabric. A job has a name, a
rank count, a placement on the hosts (emulator.fabric.mapping.place), a start
time, a number of iterations and a per-iteration program: ops per rank,
written out or emitted by a template (emulator.workloads.templates).
emulator.workloads.workload reads them from TOML; emulator.workloads.program
compiles them into the steps the agents run and the model predicts. A sweep
of one collective is a one-job workload too.

An elastic job changes its rank count at iteration boundaries (`resize`):
its ranks are its largest group's, those beyond an iteration's count idle
in it. Background traffic is load between two hosts, not a job: it
compiles into a two-rank job (`background_job`) whose sends are paced by
compute, and is reported apart, never judged against the model."""
from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass

from emulator.workloads.collectives import COLLECTIVES

COMMUNICATION = (*COLLECTIVES, "send", "recv")


OP_KINDS = ("compute", "wait") + COMMUNICATION


GROUPS = ("world", "dp", "tp", "pp")


MAX_ITERATIONS = 10_000


MAX_COMPUTE_MS = 1e7           # one compute op: under three hours


MAX_JOBS = 64


MAX_RANKS = 1 << 20            # of one job


MAX_BACKGROUND = 64


MAX_CHUNKS = 10_000            # periods of one background flow: a step each on both its ranks


PACE_S = 0.01                  # a steady background flow sends a chunk every 10 ms


TOKEN_BYTES = 1                # a resize's rendezvous message (0 bytes would not make the receiver wait)


# a TCP congestion control as the kernel names them (16 bytes)
CONGESTION_CONTROL = re.compile(r"^[a-z][a-z0-9_]{0,15}$")


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
    rank_ops: tuple[tuple[Op, ...], ...] = ()   # written out per rank (an imported trace): rank r runs rank_ops[r]
    resize: tuple[tuple[int, int], ...] = ()    # (iteration, ranks from it on), by iteration: an elastic job
    stop_s: float = 0.0             # > 0: it leaves then: only the iterations that end by then (the model, alone)
    background: Background | None = None        # load, not a job: reported apart, never judged
    tcp: str = ""                   # its connections' TCP congestion control ("": the run's, every host's)

    @property
    def dp(self) -> int:
        return self.ranks // (self.tp * self.pp)

    def ranks_in(self, iteration: int) -> int:
        """The ranks that run iteration `iteration` (the first `ranks`, then each resize's)."""
        ranks = self.ranks
        for at, count in self.resize:
            if at <= iteration:
                ranks = count
        return ranks

    @property
    def most_ranks(self) -> int:
        """Every rank the job ever has: its agents, each on a host of its own."""
        return max([self.ranks, *(count for _, count in self.resize)])

    def resizes_at(self, iteration: int) -> bool:
        return any(at == iteration for at, _ in self.resize)

    def at(self, iteration: int) -> Job:
        """The job as iteration `iteration` runs it: with that iteration's
        ranks (its groups and its template's shape follow them)."""
        ranks = self.ranks_in(iteration)
        return self if ranks == self.ranks else dataclasses.replace(self, ranks=ranks)


@dataclass(frozen=True)
class Background:
    """Load from host `src` to host `dst`: a chunk of `chunk` bytes at the
    start of every period of `period_s` (a steady rate: a chunk every
    PACE_S; a storage-like burst: the burst every its period), for
    `duration_s` from its start; with `on_s`, only in the first `on_s` of
    every `on_s + off_s`."""
    src: str
    dst: str
    chunk: int
    period_s: float
    duration_s: float
    on_s: float = 0.0
    off_s: float = 0.0
    asked: str = ""                 # what the file said, e.g. "rate_mbps = 20": errors and results name it

    def sends(self) -> list[bool]:
        """Per period from the start, whether a chunk goes (in microseconds:
        no float drift over thousands of periods); quiet periods at the end left out."""
        period, cycle, on = (round(x * 1e6) for x in (self.period_s, self.on_s + self.off_s, self.on_s))
        out = [not cycle or (k * period) % cycle < on for k in range(round(self.duration_s * 1e6) // period)]
        while out and not out[-1]:
            out.pop()
        return out

    @property
    def sending_mbps(self) -> float:
        """The rate while it sends."""
        return self.chunk * 8 / self.period_s / 1e6

    @property
    def mean_mbps(self) -> float:
        """Its bytes over the time it compiles to: its first chunk to the end of its last chunk's period."""
        sends = self.sends()
        return self.chunk * sum(sends) * 8 / (len(sends) * self.period_s) / 1e6


def background_job(name: str, flow: Background, start_s: float) -> Job:
    """A background flow as a job of two ranks on its hosts: rank 0 sends
    every chunk, non-blocking, after the compute of the periods before it
    (so a chunk starts on time, or when the one before it has gone), rank
    1 receives them; the iteration ends with the last chunk's period."""
    send = Op("send", nbytes=flow.chunk, group="world", peer="next", nonblocking=True)
    recv = Op("recv", nbytes=flow.chunk, group="world", peer="prev", nonblocking=True)
    ops, quiet = [], 0
    for sends in flow.sends():
        if sends:
            if quiet:
                ops.append(Op("compute", ms=quiet * flow.period_s * 1e3))
            ops += [send, recv]
            quiet = 0
        quiet += 1
    ops.append(Op("compute", ms=quiet * flow.period_s * 1e3))
    return Job(name, 2, (flow.src, flow.dst), start_s=start_s, ops=tuple(ops), background=flow)


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
    fits = job.duration_s / iteration_s if iteration_s > 0 else 1
    if fits >= MAX_ITERATIONS + 1:   # a duration of iterations the model would take hours to run
        raise WorkloadError(f"job {job.name!r}: duration_ms = {job.duration_s * 1e3:g} fits {fits:.3g} iterations "
                            f"of {iteration_s * 1e3:.3g} ms; at most {MAX_ITERATIONS}: give a shorter duration_ms")
    return dataclasses.replace(job, iterations=max(1, int(fits)))


def length_trial(job: Job) -> Job:
    """What the model runs of `job` alone to fit its length (fit_length):
    every iteration from its start for a stop time, else one iteration from 0."""
    return job if job.stop_s else dataclasses.replace(job, iterations=1, start_s=0.0)


def fit_length(job: Job, ends_s: list[float]) -> Job:
    """`job` given a duration or a stop time, with the iterations that fit,
    from the ends of its length_trial's iterations (the model's, alone):
    as many as fit in the duration; those that end by the stop time (at
    least the first), and the resizes among them."""
    if job.duration_s:
        return fit_iterations(job, ends_s[0])
    if not job.stop_s:
        return job
    kept = max(1, sum(1 for _ in itertools.takewhile(lambda end: end <= job.stop_s * (1 + 1e-9), ends_s)))
    return dataclasses.replace(job, iterations=kept, resize=tuple((at, n) for at, n in job.resize if at < kept))


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
