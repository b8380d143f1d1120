"""Planning a run (pure): fabric, routes, rank placement, the calls the
agents will replay and the model's prediction for each, all computed and
checked before anything touches the network."""
from __future__ import annotations

from dataclasses import dataclass

from controller.routing import POLICIES, ForwardingTable, demands_from_schedule, forwarding_table
from emulator.fabric import Fabric
from emulator.mapping import hosts_for_ranks
from emulator.metrics import payload_efficiency
from emulator.model import Prediction, predict
from emulator.schedule import Schedule, build_schedule, over_connections
from emulator.spec import RunSpec, SpecError
from emulator.topology import build


@dataclass
class Call:
    """One collective call the agents replay; repetition < 0 is warm-up."""
    index: int
    size_bytes: int
    repetition: int


@dataclass
class RunPlan:
    spec: RunSpec
    fabric: Fabric
    table: ForwardingTable
    hosts: list[str]                      # hosts[rank]
    calls: list[Call]
    schedules: dict[int, Schedule]        # by size
    predictions: dict[int, Prediction]    # by size

    @property
    def ranks(self) -> int:
        return len(self.hosts)


def plan_run(spec: RunSpec, fabric: Fabric | None = None) -> RunPlan:
    try:
        fabric = fabric or build(spec.topology, spec.link_profile())
        hosts = hosts_for_ranks(fabric, spec.mapping, spec.ranks or None, spec.seed)
        schedules = {s: over_connections(build_schedule(spec.collective, spec.algorithm, len(hosts), s),
                                         spec.connections) for s in spec.sizes}
        table = forwarding_table(fabric, spec.policy, route_demands(spec, schedules, hosts), spec.seed)
    except ValueError as e:
        raise SpecError(str(e)) from None
    efficiency = payload_efficiency(spec.mtu)
    predictions = {s: predict(fabric, table, sched, hosts, spec.model_alpha_us * 1e-6, efficiency)
                   for s, sched in schedules.items()}
    calls = []
    for size in spec.sizes:
        for rep in range(-spec.warmup, spec.repetitions):
            calls.append(Call(len(calls), size, rep))
    return RunPlan(spec, fabric, table, hosts, calls, schedules, predictions)


def route_demands(spec: RunSpec, schedules: dict[int, Schedule], hosts: list[str]) -> dict | None:
    """What a policy that routes demands places: the largest size's
    host-pair demands (every size has the same pattern); None for others."""
    if not POLICIES[spec.policy].needs_demands:
        return None
    return demands_from_schedule(schedules[max(schedules)], hosts)
