"""Before the network (orchestration): the plans of a run, and every check
a run makes before anything is built: the machine's capacity, the kernel's
congestion controls and queue disciplines, the servers, the calibration
this machine's model uses, the results folder."""
from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time

from emulator.fabric.queues import DISCIPLINES
from emulator.results.verdict import LATENCY_BOUND
from emulator.inputs import size_name
from emulator.progress import duration
from emulator.spec.experiment import Experiment, RunSpec, SpecError
from emulator.plan import capacity
from emulator.plan.folders import PARTIAL, check_out_folder   # a run writes OUT.partial/, renamed when done
from emulator.plan.capacity import MAX_EMULATED_HOSTS, MAX_EMULATED_SWITCHES

MAX_UNASKED_S = 3600   # a run the model predicts to be longer needs --yes


def prepare(experiment: Experiment, out: str | None):
    """Every error before the network: plans, machine limits, the results
    folder; then what each run asks of this machine's dataplane (a warning
    if more than it emulates faithfully)."""
    plans = [dataclasses.replace(plan_emulated(spec), run=i) for i, spec in enumerate(experiment.runs)]
    if any(spec.capture for spec in experiment.runs) and shutil.which("tcpdump") is None:
        raise SpecError("capture: records with tcpdump, which is not installed (apt-get install tcpdump; "
                        "vm/provision.sh installs it)")
    announce_duration(plans, experiment.yes)
    folder = results_dir(out, experiment.name)
    for plan, check in zip(plans, capacity_checks(plans)):
        if plan.spec.servers:
            print("# capacity: checked per server, with the placement, before anything is built")
        else:
            print(check.describe(plan.spec.host_rate_mbps))
    plans = with_sharing(plans)
    for line in filter(None, [f(plan) for plan in plans for f in (latency_bound, shallow_queue)]):
        print(line)
    return plans, folder


def latency_bound(plan) -> str:
    """A line naming the sizes whose model is mostly per-message latency
    and least step times, which the verdict names for a call that misses
    it; "" if none (or a workload)."""
    if plan.is_workload:
        return ""
    bound = [f"{size_name(size)} ({share:.0%})" for size in sorted(plan.schedules)
             if (share := plan.latency_share(size)) >= LATENCY_BOUND]
    return (f"# latency-bound: per-message latency and least step times are most of the model's time at "
            f"{', '.join(bound)}; those calls measure this machine's hosts and switches more than the links "
            f"(larger messages or slower links measure the links)") if bound else ""


def shallow_queue(plan) -> str:
    """A line naming the shallowest switch port queue when it drains before
    its discipline would mark (fq_codel marks only packets that waited its
    target): there the run sees drops, not marks; "" otherwise."""
    chosen = DISCIPLINES[plan.spec.queue_discipline]
    frame = plan.spec.mtu + 14
    link = min(plan.fabric.links, key=lambda l: l.queue_packets / l.rate_mbps)
    held_ms = link.queue_packets * frame * 8 / (link.rate_mbps * 1000)
    if held_ms >= chosen.target_ms:
        return ""
    deep = math.ceil(chosen.target_ms * link.rate_mbps * 1000 / (frame * 8))
    return (f"# queue: {chosen.name} marks packets that waited {chosen.target_ms:g} ms, but link {link.a}-{link.b}'s "
            f"queue of {link.queue_packets} packets ({frame} bytes) drains in {held_ms:.1f} ms at "
            f"{link.rate_mbps:g} Mbit/s: it drops before it marks (a queue of {deep} packets or more marks)")


def with_sharing(plans) -> list:
    """Each plan with the TCP sharing its model stretches congested steps
    by (spec key sharing "tcp", where measured) and the one its verdict holds
    network verdicts to, and says which model runs."""
    calibration = loaded_calibration()
    shared = []
    for plan in plans:
        found, model = capacity.sharing_of(plan.spec, calibration)
        print(f"# model: {model}")
        if plan.links:
            print(f"# model's links: {plan.links.basis}")
        shared.append(dataclasses.replace(capacity.with_bounds(plan, calibration), sharing=found))
    return shared


def loaded_calibration():
    """This machine's calibration (capacity.load); an unreadable file is bad input."""
    try:
        return capacity.load()
    except ValueError as e:
        raise SpecError(str(e)) from None


def predicted_calls(plans) -> list[float]:
    """The model's time of every call the plans replay, warm-ups included, in order."""
    return [plan.predictions[call.size_bytes].time_s for plan in plans for call in plan.calls]


def announce_duration(plans, yes: bool) -> None:
    """Print the model's total before anything starts; a run longer than
    MAX_UNASKED_S stops here (SpecError) unless the user said yes."""
    total = sum(predicted_calls(plans))
    print(f"# the model predicts {duration(total)} of calls ({len(predicted_calls(plans))} calls; "
          "bring-up and setup come on top)", flush=True)
    if total > MAX_UNASKED_S and not yes:
        raise SpecError(f"the model predicts this run takes {duration(total)}, more than "
                        f"{duration(MAX_UNASKED_S)}: give --yes (or yes = true in the experiment file) to run it "
                        "anyway, or ask for fewer repetitions, sizes or hosts")


def plan_emulated(spec: RunSpec):
    """The plan of a run to emulate; too large a fabric is refused before planning."""
    from emulator.net.dataplane import resolve_offload
    from emulator.plan.run_plan import plan_run
    spec = dataclasses.replace(spec, offload=resolve_offload(spec.datapath, spec.offload))
    fabric = spec.fabric()
    fits_the_servers(fabric, len(spec.servers) or 1)
    offers_congestion_control(spec.tcp)
    offers_queue_discipline(spec.queue_discipline)
    plan = plan_run(spec, fabric, emulated_links(spec, fabric))
    for name in sorted(set(plan.congestion_controls()) - {""}):
        offers_congestion_control(name, f"workload {spec.workload}: a job's tcp")
    return plan


def emulated_links(spec: RunSpec, fabric):
    """What the run's model adds for links emulated on this machine
    (capacity.emulated_links), for the datapath the run will get."""
    from emulator.net.dataplane import detect
    try:
        plane = detect(spec.datapath, spec.offload)
        datapath, offload = plane.datapath, plane.offload
    except RuntimeError:   # none of that kind here: bring-up says so
        datapath = "user" if spec.datapath == "auto" else spec.datapath
        offload = "off" if spec.offload == "auto" else spec.offload
    hosts = spec.ranks if spec.ranks and not spec.workload else len(fabric.hosts)   # the agents that step at once
    return capacity.emulated_links(loaded_calibration(), datapath, spec.mtu, offload, hosts,
                                   capacity.switch_ports(fabric))


def offers_congestion_control(name: str, where: str = "tcp") -> None:
    from emulator.net.capabilities import congestion_controls
    offered = congestion_controls()
    if name not in offered:
        raise SpecError(f"{where}: this kernel does not offer {name!r}; it offers {', '.join(offered) or 'none'}. A "
                        f"kernel that loads modules adds it with `modprobe tcp_{name}` (a VM's kernel does; "
                        "docs/vm.md)")


def offers_queue_discipline(name: str) -> None:
    from emulator.fabric.queues import FIFO
    from emulator.net.capabilities import qdisc_available
    wanted = DISCIPLINES[name]
    if wanted is FIFO or qdisc_available(wanted.module, wanted.config):
        return
    offered = [d.name for d in DISCIPLINES.values() if d is FIFO or qdisc_available(d.module, d.config)]
    raise SpecError(f"queue_discipline: this kernel has no {wanted.module} for {name!r}; it offers "
                    f"{', '.join(offered)}. A kernel that loads modules adds it with `modprobe {wanted.module}` "
                    "(a VM's kernel does; docs/vm.md)")


def fits_the_servers(fabric, servers: int = 1) -> None:
    """The host and switch limits are per machine: a fabric over several
    servers may have that many on each (its placement checks each one)."""
    hosts, switches = len(fabric.hosts), len(fabric.switches)
    if hosts > MAX_EMULATED_HOSTS * servers or switches > MAX_EMULATED_SWITCHES * servers:
        machines = "one machine emulates" if servers == 1 else f"{servers} servers emulate"
        raise SpecError(f"topology: {fabric.topology} has {hosts} hosts and {switches} switches; {machines} "
                        f"at most {MAX_EMULATED_HOSTS * servers} and {MAX_EMULATED_SWITCHES * servers}: "
                        "use 'bigraph-emu model' for it, or 'bigraph-emu plan' to see how many servers it needs")


def capacity_checks(plans) -> list:
    """capacity.Assessment of every plan, from this machine's calibration."""
    from emulator.plan import capacity
    from emulator.net.dataplane import detect
    try:
        calibration = capacity.load()
        planes = [detect(plan.spec.datapath, plan.spec.offload) for plan in plans]
        return [capacity.assess(plan, calibration, plane.datapath, plane.offload) for plan, plane in zip(plans, planes)]
    except (ValueError, RuntimeError) as e:
        raise SpecError(str(e)) from None


def auto_rated(spec: RunSpec) -> RunSpec:
    """The spec with host and switch rates scaled together so that the run's
    peak load is capacity.AUTO_MARGIN of what the machine emulates faithfully."""
    from emulator.plan.capacity import AUTO_MARGIN, scaled_rate
    from emulator.plan.run_plan import plan_run
    check = capacity_checks([plan_run(spec)])[0]
    if check.faithful_mbps is None:
        raise SpecError(f"--bw auto: this machine is {check.basis}")
    if not check.peak_mbps:   # nothing crosses a switch: any rate fits
        return spec
    factor = AUTO_MARGIN / check.fraction
    return dataclasses.replace(spec, host_rate_mbps=scaled_rate(spec.host_rate_mbps, factor),
                               switch_rate_mbps=scaled_rate(spec.switch_rate_mbps, factor))


def results_dir(out: str | None, name: str) -> str:
    """A new folder for this run's results: never an existing folder with
    anything in it. Checked before anything is created; not created here."""
    path = os.path.join("results", f"{time.strftime('%Y%m%d-%H%M%S')}-{name}") if out is None else out
    check_out_folder(path)
    if os.path.isdir(path) and os.listdir(path):
        raise SpecError(f"--out {path} is not empty (earlier results or other files); choose a new folder")
    if os.path.exists(path + PARTIAL):
        raise SpecError(f"--out {path}: {path + PARTIAL} holds an unfinished earlier run; move it or choose "
                        "a new folder")
    return path



