"""Planning a run (pure): fabric, routes, rank placement, the calls the
agents will replay and the model's prediction for each, all computed and
checked before anything touches the network.

Every run is a workload (emulator.workloads.workload): a sweep of one collective is
a one-job workload per size (its calls keyed by size), a workload file one
program replayed `warmup + repetitions` times (its calls keyed 0).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from emulator.routes.routing import ForwardingTable, demands_from_schedule, forwarding_table, model_table, policy_record
from emulator.fabric.graph import Fabric
from emulator.fabric.mapping import hosts_for_ranks
from emulator.records.metrics import payload_efficiency
from emulator.plan.modelled_jobs import iteration_rows, model_rows
from emulator.model.buckets import EmulatedLinks
from emulator.model.lockstep import NotLockstep, predict_jobs
from emulator.model.sharing import NetworkBound, Sharing
from emulator.model.simulation import EXACT_FLOWS, METHODS, Prediction, predict, predict_collective
from emulator.workloads.flat import flatten, ranks_alone
from emulator.workloads.program import Compiled, JobLayout, compile_workload, place_jobs
from emulator.workloads.schedule import over_connections
from emulator.workloads.steps import Schedule
from emulator.spec.experiment import RunSpec, SpecError, load_workload
from emulator.workloads.job import Workload, fit_length, length_trial, sweep_job
from emulator.model import iterations as job_iterations


@dataclass
class Call:
    """One call the agents replay (a collective of one size, or a workload
    file's whole program); repetition < 0 is warm-up."""
    index: int
    size_bytes: int                       # the schedule's key: its size, or WORKLOAD_KEY
    repetition: int


WORKLOAD_KEY = 0   # the key of a workload file's one program (sizes are >= 1)


@dataclass
class RunPlan:
    spec: RunSpec
    fabric: Fabric
    table: ForwardingTable
    hosts: list[str]                      # hosts[rank]
    calls: list[Call]
    schedules: dict[int, Schedule]        # by size (WORKLOAD_KEY for a workload file)
    predictions: dict[int, Prediction]    # by the same key
    programs: dict[int, Compiled] = field(default_factory=dict)   # the jobs behind each schedule
    alone: list[Prediction] = field(default_factory=list)   # a workload's jobs, each by itself
    run: int = 0                          # its place in the experiment: the `run` column of every table
    sharing: Sharing | None = None        # TCP's measured sharing the model stretches steps by (None: max-min)
    bound: NetworkBound | None = None     # TCP's measured sharing the verdict holds network verdicts to (None: none)
    job_bounds: dict[str, NetworkBound] = field(default_factory=dict)   # the same for jobs' own congestion controls
    links: EmulatedLinks | None = None    # what the model adds for links emulated on this machine (None: the network alone)
    _latency: dict[int, float] = field(default_factory=dict, init=False, repr=False)   # latency_share's, by key

    @property
    def ranks(self) -> int:
        return len(self.hosts)

    @property
    def is_workload(self) -> bool:
        return bool(self.spec.workload)

    def latency_share(self, key: int) -> float:
        """The share of the predicted time of schedule `key` that is
        per-message latency and least step times (--alpha-us and the emulated
        links' step and switch latencies), not bytes on the links: one less the
        model without them over the model."""
        if key not in self._latency:
            links = self.links and dataclasses.replace(self.links, step_floor_s=0.0, switch_latency_s=0.0)
            bare = model_for(self.fabric, self.table, dataclasses.replace(self.spec, model_alpha_us=0.0), links)
            full = self.predictions[key].time_s
            left = bare(flatten(self.schedules[key]), self.hosts).time_s
            self._latency[key] = max(0.0, 1 - left / full) if full else 0.0
        return self._latency[key]

    def bound_of(self, tcp: str) -> NetworkBound | None:
        """The bound of a job's own congestion control `tcp` ("": the run's)."""
        return self.job_bounds.get(tcp, self.bound)

    def congestion_controls(self) -> list[str]:
        """Each rank's TCP congestion control: its job's own, or "" (the run's, every host's)."""
        per_rank = [""] * self.ranks
        for compiled in self.programs.values():
            for layout in compiled.jobs:
                for rank in layout.ranks:
                    per_rank[rank] = layout.job.tcp
        return per_rank


def plan_run(spec: RunSpec, fabric: Fabric | None = None, links: EmulatedLinks | None = None) -> RunPlan:
    """links: predict the calls as emulated on this machine (capacity.emulated_links)."""
    try:
        fabric = fabric or spec.fabric()
        programs = {key: compile_workload(w, fabric, spec.mapping, spec.algorithm, spec.ranks)
                    for key, w in workloads(spec, fabric).items()}
        schedules = {key: over_connections(p.schedule, spec.connections) for key, p in programs.items()}
        hosts = next(iter(programs.values())).hosts
        table = forwarding_table(fabric, spec.policy, route_demands(spec, schedules, hosts), spec.seed)
    except ValueError as e:
        raise SpecError(str(e)) from None
    model = model_for(fabric, table, spec, links)
    flats = {key: flatten(sched) for key, sched in schedules.items()}
    predictions = {key: model(flat, hosts) for key, flat in flats.items()}
    calls = [Call(i, key, rep) for i, (key, rep) in
             enumerate((key, rep) for key in schedules for rep in range(-spec.warmup, spec.repetitions))]
    alone = []
    if spec.workload and len(programs[WORKLOAD_KEY].jobs) > 1:
        alone = [model(*job_alone(flats[WORKLOAD_KEY], layout)) for layout in programs[WORKLOAD_KEY].jobs]
    return RunPlan(spec, fabric, table, hosts, calls, schedules, predictions, programs, alone, links=links)


def job_alone(flat, layout: JobLayout):
    """The schedule (as arrays) and hosts of one job of a workload by itself."""
    return ranks_alone(flat, layout.offset, len(layout.hosts)), layout.hosts


class SharedRoutes:
    """The model's routes of recent topologies and policies, kept for the
    next spec that shares them (a sweep's points on one worker): a next-hop
    table works its entries out once. Routes read the fabric's shape only
    (switches, ports, hosts), never a link's rate, delay or loss, so specs
    that differ only there share them."""

    def __init__(self, size: int = 8):
        self.size = size
        self._tables: dict[tuple, ForwardingTable] = {}

    def get(self, spec: RunSpec) -> tuple[Fabric, ForwardingTable]:
        fabric = spec.fabric()
        key = (spec.topology, spec.policy, spec.seed)
        if key not in self._tables:
            while self._tables and len(self._tables) >= self.size:   # the oldest goes
                self._tables.pop(next(iter(self._tables)))
            self._tables[key] = model_table(fabric, spec.policy, spec.seed)
        return fabric, self._tables[key]


def model_sweep(spec: RunSpec, method: str = "auto", progress=None, shared: SharedRoutes | None = None,
                links: EmulatedLinks | None = None) -> tuple[list[str], dict[int, Prediction]]:
    """Hosts and the model's prediction of every size of a sweep (a spec
    without a workload file), as plan_run predicts them but without the
    step objects the agents need (model.predict_collective; `method` says
    whether lock-step rounds may stand in for the exact simulation).
    Several connections per pair and policies that route the demands
    need the step objects: plan_run, exact. `shared`: routes kept from
    earlier specs; `links`: as this machine emulates them (plan_run)."""
    if spec.connections > 1 or policy_record(spec.policy).sees_demands:
        plan = plan_run(spec, links=links)
        return plan.hosts, plan.predictions
    try:
        fabric, table = (shared or SharedRoutes(0)).get(spec)
        hosts = hosts_for_ranks(fabric, spec.mapping, spec.ranks or None, spec.seed)
        return hosts, {size: predict_collective(fabric, table, spec.collective, spec.algorithm, hosts, size,
                                                spec.model_alpha_us * 1e-6, payload_efficiency(spec.mtu), method,
                                                progress and functools.partial(progress, size), links and links.burst,
                                                links.step_floor_s if links else 0.0,
                                                links.switch_latency_s if links else 0.0)
                       for size in spec.sizes}
    except ValueError as e:
        raise SpecError(str(e)) from None


def model_for(fabric: Fabric, table: ForwardingTable, spec: RunSpec, links: EmulatedLinks | None = None):
    """predict(schedule, hosts) on these routes, with the spec's latency and
    header overhead, and the emulated links' burst, least step time and
    switch latency if given."""
    return functools.partial(predict, fabric, table, alpha_s=spec.model_alpha_us * 1e-6,
                             efficiency=payload_efficiency(spec.mtu), burst=links and links.burst,
                             min_step_s=links.step_floor_s if links else 0.0,
                             switch_latency_s=links.switch_latency_s if links else 0.0)


def workloads(spec: RunSpec, fabric: Fabric) -> dict[int, Workload]:
    """The workload file's, or one one-job workload per size of the sweep."""
    if spec.workload:
        return {WORKLOAD_KEY: fit_durations(load_workload(spec.workload), fabric, spec)}
    hosts = tuple(hosts_for_ranks(fabric, spec.mapping, spec.ranks or None, spec.seed))
    return {size: sweep_job(spec.collective, spec.algorithm, len(hosts), size, hosts, spec.seed)
            for size in spec.sizes}


def route_demands(spec: RunSpec, schedules: dict[int, Schedule], hosts: list[str]) -> dict | None:
    """What a policy that routes demands places: the largest size's
    host-pair demands (every size has the same pattern); None for others."""
    if not policy_record(spec.policy).sees_demands:
        return None
    return demands_from_schedule(schedules[max(schedules)], hosts)


def fit_durations(workload: Workload, fabric: Fabric, spec: RunSpec) -> Workload:
    """A job given a duration gets as many iterations as fit in it, one
    given a stop time those that end by then (job.fit_length): by the
    model of the job alone, on the run's routes."""
    if not any(job.duration_s or job.stop_s for job in workload.jobs):
        return workload
    once = dataclasses.replace(workload, jobs=tuple(length_trial(j) for j in workload.jobs))
    program = compile_workload(once, fabric, spec.mapping, spec.algorithm, spec.ranks)
    table = forwarding_table(fabric, spec.policy, route_demands(spec, {WORKLOAD_KEY: program.schedule},
                                                                program.hosts), spec.seed)
    model = model_for(fabric, table, spec)
    flat = flatten(program.schedule)
    jobs = [fit_length(job, _iteration_ends(layout, model(*job_alone(flat, layout))))
            if job.duration_s or job.stop_s else job for layout, job in zip(program.jobs, workload.jobs)]
    return dataclasses.replace(workload, jobs=tuple(jobs))


def _iteration_ends(layout: JobLayout, alone: Prediction) -> list[float]:
    """When each iteration of a job ends in the model of the job alone."""
    its = job_iterations.iterations(layout, *job_iterations.modelled(alone, layout.offset))
    return [it["end_s"] for it in its]


def model_workload(spec: RunSpec, method: str = "auto",
                   links: EmulatedLinks | None = None) -> tuple[int, list[dict], str, str]:
    """The rank count and the model's per-job iterations of a workload
    (modelled_jobs.iteration_rows), without step objects where it can: in lock-step
    (emulator.model.lockstep; `method` as model_sweep's, "auto" past EXACT_FLOWS
    flows), then with its approximation; else plan_run's exact simulation,
    and why not lock-step where that was asked for or due ("" otherwise).
    `links`: as this machine emulates them, simulated exactly."""
    if method not in METHODS:
        raise SpecError(f"unknown model method {method!r}; choose one of: {', '.join(METHODS)}")
    why = ""
    if method != "exact" and links:
        why = "as emulated, the links' token buckets are simulated exactly"
    elif method != "exact":
        try:
            return _lockstep_workload(spec, method)
        except NotLockstep as e:
            why = str(e)
        except ValueError as e:
            raise SpecError(str(e)) from None
    plan = plan_run(spec, links=links)
    return plan.ranks, model_rows(plan), "", why


def _lockstep_workload(spec: RunSpec, method: str) -> tuple[int, list[dict], str, str]:
    if spec.connections > 1 or policy_record(spec.policy).sees_demands:
        raise NotLockstep("several connections per pair and policies that route the demands need the step objects")
    fabric = spec.fabric()
    workload = load_workload(spec.workload)
    placed = place_jobs(workload, fabric, spec.mapping, spec.ranks)
    modelled, approximation = predict_jobs(fabric, model_table(fabric, spec.policy, spec.seed), workload, placed,
                                           spec.algorithm, spec.model_alpha_us * 1e-6, payload_efficiency(spec.mtu),
                                           EXACT_FLOWS if method == "auto" else 0)
    return sum(job.most_ranks for job, _ in placed), iteration_rows(modelled, spec.mapping), approximation, ""
