"""Jobs in lock-step (pure): a workload's model without its step objects.

Where every rank of a job runs the same ops (written out, or from a
template that emits the same for every rank) over groups spanning the
job, at one compute speed, and its every collective has lock-step rounds
(flat.lockstep_rounds), one rank's program stands for all: each
collective is one step as long as its lock-step prediction
(model.predict_lockstep, once per distinct call), compute its duration.
Jobs whose flows share no link cannot slow each other down, so each is
predicted by itself; jobs that share links need the exact simulation, and
so does background traffic (it is there to share them). An elastic job's
collectives are those of each iteration's group, on its first hosts.
"""
from __future__ import annotations

import functools

from emulator.workloads.schedule import lockstep_rounds, reads_nodes
from emulator.model.iterations import iterations, modelled
from emulator.model.simulation import predict, predict_lockstep
from emulator.workloads.program import representative
from emulator.workloads.job import group_of
from emulator.workloads.templates import TEMPLATES, job_ops
from emulator.workloads.job import fit_length, length_trial

JOBS_LOCKSTEP = "lock-step: all ranks of a job run each op together, each collective round by round"


class NotLockstep(Exception):
    """Why a workload needs the exact simulation ("": it is cheap enough)."""


_rounds = functools.lru_cache(maxsize=64)(lockstep_rounds)


def collectives(job, algorithm: str) -> list[tuple]:
    """(collective, algorithm, ranks, bytes) of every collective `job`
    runs, iteration by iteration; NotLockstep where its ranks differ."""
    if job.template and not TEMPLATES[job.template].same_on_every_rank:
        raise NotLockstep(f"job {job.name!r}: template {job.template} gives its ranks different ops")
    if job.rank_ops:
        raise NotLockstep(f"job {job.name!r}: its ranks run different ops (written out per rank)")
    out = []
    for i in range(job.iterations):
        phase = job.at(i)
        for op in job_ops(phase, i, 0):
            if op.kind in ("compute", "wait"):
                continue
            group = len(group_of(phase, 0, op.group)[0])
            if group == 1:
                continue
            call = (op.kind, op.algorithm or algorithm, phase.ranks, op.nbytes)
            if reads_nodes(call[1]):   # its schedule depends on the placement: the exact simulation has it
                raise NotLockstep(f"job {job.name!r}: {call[1]} reads the nodes of its ranks")
            if group < phase.ranks:
                raise NotLockstep(f"job {job.name!r}: {op.kind} on group {op.group}, a part of the job's ranks")
            if op.kind in ("send", "recv") or op.matrix is not None or not _rounds(*call):
                raise NotLockstep(f"job {job.name!r}: {op.kind} ({call[1]}) has no lock-step rounds")
            out.append(call)
    return out


class LockstepJob:
    """One job in lock-step on its hosts (a job given a duration or a stop
    time: the iterations that fit, job.fit_length), its collectives'
    predictions made as its program asks for them."""

    def __init__(self, fabric, table, job, hosts, speed: float, algorithm: str, alpha_s: float, efficiency: float):
        self.fabric, self.table, self.hosts, self.speed = fabric, table, hosts, speed
        self.algorithm, self.alpha_s, self.efficiency = algorithm, alpha_s, efficiency
        self.predictions: dict[tuple, object] = {}
        self.job, self.calls = job, collectives(job, algorithm)
        if job.duration_s or job.stop_s:
            self.job = fit_length(job, [it["end_s"] for it in self.iterations(length_trial(job))])
            self.calls = collectives(self.job, algorithm)

    @property
    def flows(self) -> int:
        """Flows of the exact simulation (sends of every rank and step)."""
        return sum(r.sends.peer.size * n for call in self.calls for r, n in _rounds(*call)[0])

    def block_s(self, *call) -> float:
        if call not in self.predictions:
            rounds, note = _rounds(*call)
            self.predictions[call] = predict_lockstep(self.fabric, self.table, rounds, self.hosts[:call[2]],
                                                      self.alpha_s, self.efficiency, note)
        return self.predictions[call].time_s

    def iterations(self, job=None) -> list[dict]:
        """The model's iterations of `job` (default: this one) on these hosts."""
        rank = representative(job or self.job, self.hosts[0], self.speed, self.algorithm, self.block_s)
        return iterations(rank.jobs[0], *modelled(predict(self.fabric, self.table, rank.schedule, rank.hosts)))

    def links(self) -> set:
        return {link for p in self.predictions.values() for link in p.link_max_flows}

    def notes(self) -> set[str]:
        return {_rounds(*call)[1] for call in self.predictions} - {""}


def predict_jobs(fabric, table, workload, placed, algorithm: str, alpha_s: float = 0.0, efficiency: float = 1.0,
                 exact_flows: int = 0) -> tuple[list[tuple], str]:
    """(job, the model's iterations, those of the job alone) of every
    (job, hosts) of `placed`, in lock-step, and the approximation.
    NotLockstep says why not, or (empty) that the exact simulation has at
    most `exact_flows` flows."""
    background = [job.name for job, _ in placed if job.background]
    if background:
        raise NotLockstep(f"background {background[0]!r} is load on the jobs' links")
    jobs = [LockstepJob(fabric, table, job, hosts, _speed(job, hosts, workload), algorithm, alpha_s, efficiency)
            for job, hosts in placed]
    if sum(j.flows for j in jobs) <= exact_flows:
        raise NotLockstep("")
    modelled_jobs = [(j.job, j.iterations()) for j in jobs]
    _apart(jobs)
    notes = sorted(set().union(*(j.notes() for j in jobs)))
    if len(jobs) > 1:
        notes.insert(0, "no two jobs' flows share a link: each job by itself")
    return [(job, its, its) for job, its in modelled_jobs], "; ".join([JOBS_LOCKSTEP, *notes])


def _speed(job, hosts, workload) -> float:
    speeds = {workload.speed(h) for h in hosts}
    if len(speeds) > 1:
        raise NotLockstep(f"job {job.name!r}: its hosts compute at different speeds")
    return speeds.pop()


def _apart(jobs: list[LockstepJob]) -> None:
    """NotLockstep naming two jobs whose flows cross a link both use."""
    owner = {}
    for j in jobs:
        for link in j.links():
            other = owner.setdefault(link, j.job.name)
            if other != j.job.name:
                raise NotLockstep(f"jobs {other!r} and {j.job.name!r} share link {link[0]} port {link[1]}")
