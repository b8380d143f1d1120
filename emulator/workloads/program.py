"""Compile a workload (pure): jobs placed on hosts, ops expanded into the
steps every rank runs (emulator.workloads.schedule.Step), all jobs merged into one
schedule that the agents replay and the flow model predicts.

Channels: compute and blocking communication run on channel 0, in program
order. A non-blocking (async) op goes on channel 1, after the compute
issued before it; a `wait` is a step on channel 0 that waits for it; the
iteration's end waits for everything still in flight. A blocking op
issued while async ops are in flight queues behind them on channel 1 (as
a communicator's stream does), followed by its wait. Consecutive async
send/recv ops form one step (as a batched isend/irecv), so that the two
directions of a pipeline exchange cannot deadlock.

Elastic jobs: a job that resizes has as many ranks as its largest group,
each an agent on a host of its own from the start (the agents connect
once, before the first call); in an iteration, the ranks beyond its count
have no steps. At a resize, a rendezvous as an elastic launcher's: every
rank of the old group sends rank 0 a byte, then rank 0 sends every rank
of the new group one (steps outside any iteration). Its first ranks keep
their hosts; the ranks it adds are placed, after every job's first ranks,
on the hosts those left free, with the job's placement rule.

Background flows take no hosts from jobs: their two ranks go on the hosts
they name, beside whatever runs there, and compute at speed 1.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Callable

from emulator.fabric.graph import HOST_PORT, Fabric
from emulator.fabric.mapping import place, rank_nodes
from emulator.workloads.schedule import build_schedule, check_collective, nodes_for
from emulator.workloads.steps import Schedule, Step, Transfer
from emulator.workloads.job import TOKEN_BYTES, Job, Op, Workload, WorkloadError, group_of
from emulator.workloads.templates import job_ops

COMPUTE, COMM = 0, 1


@dataclass
class JobLayout:
    """A job in the merged schedule: global ranks offset..offset+ranks-1 on
    hosts; iterations[rank][i] = (first step, end step) of iteration i."""
    job: Job
    offset: int
    hosts: list[str]
    iterations: list[list[tuple[int, int]]] = field(default_factory=list)
    compute_s: list[list[float]] = field(default_factory=list)   # [rank][iteration], at the host's speed

    @property
    def ranks(self) -> range:
        return range(self.offset, self.offset + self.job.most_ranks)


@dataclass
class Compiled:
    schedule: Schedule
    hosts: list[str]          # hosts[global rank]
    jobs: list[JobLayout]


def compile_workload(workload: Workload, fabric: Fabric, mapping: str = "naive", algorithm: str = "ring",
                     ranks: int = 0, block_s: Callable[[str, str, int, int], float] | None = None) -> Compiled:
    """Place every job (place_jobs), expand its program, merge;
    WorkloadError names the job. What a job leaves open comes from the
    run: its collectives' `algorithm`. block_s: every collective one step
    of block_s(collective, algorithm, ranks, bytes) seconds instead of its
    steps (checked, not built)."""
    layouts, steps, hosts = [], [], []
    for job, placed in place_jobs(workload, fabric, mapping, ranks):
        layout = JobLayout(job, len(hosts), placed)
        nodes = rank_nodes(fabric, placed)
        for rank in range(job.most_ranks):
            speed = 1.0 if job.background else workload.speed(placed[rank])
            mine, bounds, compute = _rank_steps(job, rank, speed, layout.offset, algorithm, block_s, nodes=nodes)
            steps.append(tuple(mine))
            layout.iterations.append(bounds)
            layout.compute_s.append(compute)
        layouts.append(layout)
        hosts += placed
    name = layouts[0].job.name if len(layouts) == 1 else "workload"
    return Compiled(Schedule(name, "", len(hosts), 0, tuple(steps)), hosts, layouts)


def place_jobs(workload: Workload, fabric: Fabric, mapping: str = "naive", ranks: int = 0) -> list[tuple[Job, list[str]]]:
    """Every job (sized) and its hosts, in order, on hosts earlier jobs left
    free unless share_hosts: its placement, or the run's `mapping`; its
    rank count, or the run's `ranks` (0: every free host). Then the ranks
    elastic jobs add, on the hosts left free; background flows on theirs."""
    free = [h.name for h in fabric.hosts]
    out = []
    for job in workload.jobs:
        if job.background:
            out.append((job, _background_hosts(job, fabric)))
            continue
        job = _sized(job, ranks or len(free))
        listed = not isinstance(job.placement, str)   # a host list names the hosts of every rank it ever has
        placed = _placed(fabric, job, job.placement or mapping, job.most_ranks if listed else job.ranks, free,
                         "placement")
        free = _taken(workload, job, placed, free)
        out.append((job, placed))
    for i, (job, placed) in enumerate(out):
        if len(placed) < job.most_ranks:   # an elastic job grows: on the hosts left free ("leftover nodes")
            room = [h for h in free if h not in placed]
            added = _placed(fabric, job, job.placement or mapping, job.most_ranks - len(placed), room,
                            f"resize to {job.most_ranks} ranks: the {job.most_ranks - len(placed)} ranks it adds")
            free = _taken(workload, job, added, free)
            out[i] = (job, placed + added)
    return out


def _placed(fabric: Fabric, job: Job, rule, ranks: int, free: list[str], what: str) -> list[str]:
    try:
        return place(fabric, rule, ranks, job.seed, free)
    except ValueError as e:
        raise WorkloadError(f"job {job.name!r}: {what}: {e}") from None


def _taken(workload: Workload, job: Job, placed: list[str], free: list[str]) -> list[str]:
    """The hosts still free once `job` holds `placed` (all of them when jobs share hosts)."""
    if workload.share_hosts:
        return free
    taken = set(placed)
    shared = [h for h in placed if h not in free]
    if shared or len(taken) < len(placed):
        raise WorkloadError(f"job {job.name!r}: hosts {sorted(set(shared) or taken)[:4]} already carry "
                            "ranks; set share_hosts = true to let jobs share hosts")
    return [h for h in free if h not in taken]


def _background_hosts(job: Job, fabric: Fabric) -> list[str]:
    """A background flow's two hosts, checked: the fabric has them and
    their links carry the rate it sends at."""
    flow = job.background
    for key, host in (("from", flow.src), ("to", flow.dst)):
        try:
            link = fabric.peer(fabric.host(host).name, HOST_PORT)[2]
        except KeyError:
            raise WorkloadError(f"background {job.name!r}: {key} = {host!r} is not a host of {fabric.topology} "
                                f"({fabric.hosts[0].name}..{fabric.hosts[-1].name})") from None
        if flow.sending_mbps > link.rate_mbps:
            raise WorkloadError(f"background {job.name!r}: {flow.asked} sends at {flow.sending_mbps:g} Mbit/s, "
                                f"more than the link of {key} = {host!r} carries ({link.rate_mbps:g} Mbit/s)")
    return [flow.src, flow.dst]


def representative(job: Job, host: str, speed: float, algorithm: str, block_s) -> Compiled:
    """Rank 0 of `job` by itself on `host`, every collective one step of
    block_s(...) seconds: what each rank of a job that runs in lock-step
    does (its layout's job holds that one rank; a resize's rendezvous,
    two one-byte messages, is left out)."""
    steps, bounds, compute = _rank_steps(job, 0, speed, 0, algorithm, block_s, rendezvous=False)
    layout = JobLayout(dataclasses.replace(job, ranks=1, resize=()), 0, [host], [bounds], [compute])
    return Compiled(Schedule(job.name, "", 1, 0, (tuple(steps),)), [host], [layout])


# --- one rank's steps ------------------------------------------------------------

def _sized(job: Job, ranks: int) -> Job:
    if job.ranks:
        return job
    if ranks % (job.tp * job.pp):
        raise WorkloadError(f"job {job.name!r}: tp x pp = {job.tp * job.pp} does not divide the run's {ranks} ranks")
    return dataclasses.replace(job, ranks=ranks)


def _rank_steps(job: Job, rank: int, speed: float, offset: int, algorithm: str, block_s=None,
                rendezvous: bool = True, nodes=None):
    """(steps, per-iteration (first, end) step indices, per-iteration compute
    seconds); block_s as compile_workload's; an iteration `rank` has no
    part in (an elastic job's) is empty. nodes: (node, local) of every
    rank of the job (mapping.rank_nodes), None where not known."""
    builder = _Builder(offset)
    if job.start_s:
        builder.add(Step(phase="start", compute_s=job.start_s, op=-1))
    bounds, compute = [], []
    for iteration in range(job.iterations):
        phase = job.at(iteration)
        if rendezvous and job.resizes_at(iteration):
            builder.rendezvous(rank, job.ranks_in(iteration - 1), phase.ranks)
        first = len(builder.steps)
        ops = job_ops(phase, iteration, rank) if rank < phase.ranks else []
        seconds = 0.0
        for index, op in enumerate(ops):
            if op.kind == "compute":
                builder.compute(op.ms / 1e3 / speed, index)
                seconds += op.ms / 1e3 / speed
            elif op.kind == "wait":
                builder.wait(op.tag, index, job.name)
            else:
                builder.communicate(op, index, _comm_steps(phase, rank, op, algorithm, block_s, nodes))
        builder.end_iteration(len(ops))
        bounds.append((first, len(builder.steps)))
        compute.append(seconds)
    return builder.steps, bounds, compute


class _Builder:
    """Appends a rank's steps with the channel rules of the module docstring."""

    def __init__(self, offset: int):
        self.offset = offset
        self.global_transfer: dict[tuple[int, int], Transfer] = {}   # (job-local peer, bytes) -> with the offset
        self.steps: list[Step] = []
        self.in_flight: dict[str, int] = {}   # tag (or op index) -> last step of an async op
        self.batch = False                    # the last step is an open batch of async send/recv
        self.issue_point: tuple[int, ...] = ()   # the last channel-0 step: what an async op waits for

    def add(self, step: Step) -> None:
        self.steps.append(step)
        if step.channel == COMPUTE:
            self.issue_point = (len(self.steps) - 1,)

    def compute(self, seconds: float, op: int) -> None:
        self.batch = False
        self.add(Step(phase="compute", compute_s=seconds, channel=COMPUTE, op=op))

    def wait(self, tag: str, op: int, job: str) -> None:
        self.batch = False
        if tag:
            if tag not in self.in_flight:
                raise WorkloadError(f"job {job!r}: op {op + 1}: wait for {tag!r}, which is not in flight")
            targets = (self.in_flight.pop(tag),)
        else:
            targets, self.in_flight = tuple(self.in_flight.values()), {}
        if targets:
            self.add(Step(phase="wait", channel=COMPUTE, after=tuple(sorted(set(targets))), op=op))

    def globalised(self, transfers: tuple[Transfer, ...]) -> tuple[Transfer, ...]:
        """Job-local peers as global ranks (a rank's steps repeat a few transfers: each made once)."""
        if not self.offset:
            return transfers
        known = self.global_transfer
        out = []
        for t in transfers:
            key = (t.peer, t.nbytes)
            if key not in known:
                known[key] = Transfer(t.peer + self.offset, t.nbytes)
            out.append(known[key])
        return tuple(out)

    def communicate(self, op: Op, index: int, steps: list[Step]) -> None:
        parts = [(self.globalised(s.sends), self.globalised(s.recvs), s.phase, s.compute_s) for s in steps]
        if not parts:          # a group of one: nothing to send
            return
        if op.nonblocking:
            self._issue(op, index, parts)
        elif not self.in_flight:   # nothing queued ahead of it: runs in program order
            self.batch = False
            self._add_all(parts, COMPUTE, index)
        else:
            self._issue(op, index, parts)
            self.wait(op.tag or f"#{index}", index, "")

    def _add_all(self, parts: list[tuple], channel: int, op: int) -> None:
        """Steps of (sends, recvs, phase, compute_s) on `channel`; equal ones (a ring's
        steps repeat) are one object."""
        made: dict[tuple, Step] = {}
        for part in parts:
            if part not in made:
                made[part] = Step(*part, channel=channel, op=op)
            self.add(made[part])

    def _issue(self, op: Op, index: int, parts: list[tuple]) -> None:
        """Steps of (sends, recvs, phase, compute_s) on the communication channel."""
        tag = op.tag or f"#{index}"
        p2p = op.kind in ("send", "recv")
        if p2p and self.batch:   # joins the open batch: one step, both directions at once
            last, (sends, recvs, *_) = self.steps[-1], parts[0]
            self.steps[-1] = Step(last.sends + sends, last.recvs + recvs, "p2p",
                                  channel=COMM, after=last.after, op=last.op)
            self.in_flight[tag] = len(self.steps) - 1
            return
        after = self.issue_point
        self.add(Step(*parts[0], channel=COMM, after=after, op=index))
        self._add_all(parts[1:], COMM, index)
        self.in_flight[tag] = len(self.steps) - 1
        self.batch = p2p

    def end_iteration(self, ops: int) -> None:
        self.wait("", ops, "")
        self.batch = False

    def rendezvous(self, rank: int, before: int, after: int) -> None:
        """A resize from `before` to `after` ranks: the old group's ranks tell
        rank 0 they have ended, then rank 0 tells the new group's to begin."""
        def step(sends=(), recvs=()) -> None:
            def tokens(peers) -> tuple[Transfer, ...]:
                return self.globalised(tuple(Transfer(peer, TOKEN_BYTES) for peer in peers))
            self.add(Step(tokens(sends), tokens(recvs), "rendezvous", op=-1))
        if rank == 0:
            if before > 1:
                step(recvs=range(1, before))
            if after > 1:
                step(sends=range(1, after))
            return
        if rank < before:
            step(sends=[0])
        if rank < after:
            step(recvs=[0])


# --- groups and the steps of one communication op ------------------------------------


def _comm_steps(job: Job, rank: int, op: Op, algorithm: str, block_s=None, nodes=None) -> list[Step]:
    """The steps of `op` on `rank`, peers as job-local ranks (block_s, nodes: as compile_workload's
    and _rank_steps')."""
    group, me = group_of(job, rank, op.group)
    if op.kind in ("send", "recv"):
        peer = {"next": me + 1, "prev": me - 1}.get(op.peer)
        if peer is None and not 0 <= int(op.peer) < len(group):   # an index, not an edge of the pipeline
            raise WorkloadError(f"job {job.name!r}: {op.kind} {'to' if op.kind == 'send' else 'from'} group index "
                                f"{op.peer}, but its group {op.group} has ranks 0 to {len(group) - 1} only")
        if len(group) == 1:
            return []
        peer = int(op.peer) if peer is None else peer
        if not 0 <= peer < len(group) or peer == me:
            return []   # the first stage has no prev, the last no next: nothing to do
        t = (Transfer(group[peer], op.nbytes),)
        return [Step(t, ()) if op.kind == "send" else Step((), t)]
    if len(group) == 1:
        return []
    if op.matrix is not None:
        if len(op.matrix) != len(group):
            raise WorkloadError(f"job {job.name!r}: an all-to-all matrix of {len(op.matrix)} rows for a "
                                f"group of {len(group)} ranks")
        row = op.matrix[me]
        sends = tuple(Transfer(group[j], row[j]) for j in range(len(group)) if j != me and row[j])
        recvs = tuple(Transfer(group[i], op.matrix[i][me]) for i in range(len(group)) if i != me and op.matrix[i][me])
        return [Step(sends, recvs, "all-to-all")]
    collective = (op.kind, op.algorithm or algorithm, len(group), op.nbytes)
    try:
        placed = nodes_for(collective[1], None if nodes is None else tuple(nodes[g] for g in group))
        if block_s:
            check_collective(*collective, placed)
            return [Step(phase=op.kind, compute_s=block_s(*collective))]
        steps = _collective(*collective, placed)[me]
    except ValueError as e:
        raise WorkloadError(f"job {job.name!r}: {op.kind} on group {op.group} ({len(group)} ranks): {e}") from None
    if group == range(job.ranks):   # the whole job: peers are already its ranks
        return list(steps)
    return [Step(tuple(Transfer(group[t.peer], t.nbytes) for t in s.sends),
                 tuple(Transfer(group[t.peer], t.nbytes) for t in s.recvs), s.phase) for s in steps]


@functools.lru_cache(maxsize=256)
def _collective(kind: str, algorithm: str, ranks: int, nbytes: int, nodes=None):
    return build_schedule(kind, algorithm, ranks, nbytes, nodes).steps
