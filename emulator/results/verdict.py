"""The fidelity verdict (pure): whether a measured call can be trusted, from
its time against the model and what the machine's and the links' counters
say about it; and the likely cause when it cannot.

The model is max-min sharing, or max-min with congested steps stretched
by TCP's sharing as measured on this machine (emulator.model.sharing). A
call slower than the model is the network's own doing, not an artefact,
when the model put several flows on a link, TCP's retransmissions repaired
real losses (not spurious ones, unless the machine was quiet enough for
them to be the queues' RTT jumps), the machine kept up (its CPU, Open
vSwitch's thread and the saturated links), and either queues dropped
packets or nothing was lost and the saturated links were measured at their
rate: TCP's loss recovery, incast on a drop-tail queue and flows sharing a
queue unevenly are what a real fabric does, and max-min leaves them out.
So is an iteration of a workload's job that ran ahead of its model or fell
behind it while the whole workload kept to its model: TCP gave the jobs
sharing its links unequal shares, where max-min keeps them in step.
Such a verdict starts with NETWORK and counts as trusted, but only as far
as what was measured explains the call (held_to_bound): max-min's time
times the TCP-sharing factor calibrated for its flows on a link, within
TOLERANCE, and RTO_MIN_S for every retransmission timeout counted; beyond
that the call fails, naming the seconds left unexplained."""
from __future__ import annotations

from emulator.model.sharing import RTO_MIN_S, NetworkBound

# what the machine's and the links' counters say about a call (CallRecord.counters)
COUNTER_COLUMNS = ["cpu_busy", "cpu_stolen", "ovs_cpu", "ovs_wait", "queue_drops", "queue_marks", "most_drops_port", "tcp_retrans", "tcp_spurious",
                   "tcp_timeouts", "tcp_reordered", "tcp_loss_probes", "max_link_util", "mean_link_util", "saturated_util"]

# The verdict's thresholds (Mininet-HiFi's practice: trust a run only if
# the machine kept up and the shaped links ran at their rate).
TOLERANCE = 0.15       # measured time within 15% of the model
MAX_CPU_BUSY = 0.90    # the machine kept at least 10% idle
MIN_LINK_RATE = 0.90   # saturated links sent at least 90% of their rate
MIN_WINDOW_S = 1.0     # exec: a program shorter than this is judged by its links alone, not the machine
BUSY_SWITCHES = 0.85   # ovs-vswitchd's thread on its core or waiting for one: a likely cause
QUIET_CPU = 0.50       # a machine at least half idle: its RTT jumps are the queues' (spurious retransmissions
                       # came at 2-5 a run in 1.01x uncongested calls there: a probe that was not needed costs no time)
STOLEN_CPU = 0.05      # a hypervisor ran something else 5% of the cores' time: named as a likely cause, not
                       # judged by (calls with 17-26% stolen kept their verdict: docs/capacity.md)
LATENCY_BOUND = 0.5    # per-message latency and least step times are this share of the model's time: the
                       # call measures the emulator's own hosts and switches more than the links (a 32 KiB ring
                       # ran 0.50x its model and halving-doubling 1.19x there: docs/model.md)
NETWORK = "network: "  # a trusted verdict of a call that missed max-min for the network's own reasons
EXPLAINED = "within what was measured"   # in a network verdict held to the bound (report re-judges those without)
# the reasons that blame the machine, not the network
BUSY, SLOW_LINKS, CPU_BOUND, STOLEN = "machine busy", "saturated links ran", "switches CPU-bound", "a hypervisor took"


def trusted(verdict: str) -> bool:
    """A measurement to trust: "ok" (with what was not judged, said), or off
    max-min for the network's own reasons."""
    return verdict == "ok" or verdict.startswith(("ok (", NETWORK))


def program_fidelity(figures: dict, window_s: float, program_cpu_s: float, core_s: float) -> str:
    """exec's verdict, which has no model: the machine kept up beside the
    program, and saturated links ran at their rate. `figures`: the
    machine's and the links' over the window (`window_s` seconds);
    `program_cpu_s`: the CPU seconds of the ranks on this machine, taken
    off the machine's busy share (`core_s`: every core's seconds over the
    window): a program is the load it measures, not a load beside it (a
    0.24 s program's 8 ranks starting at once left a 2-core machine 6%
    idle). A window under MIN_WINDOW_S is its ranks' start and end, too
    short to judge the machine by: said, and the verdict stays trusted."""
    links = fidelity(1.0, {k: v for k, v in figures.items() if k != "cpu_busy"})
    reasons = [] if links == "ok" else [links.removeprefix("FAIL: ")]
    busy = figures.get("cpu_busy", 0.0)
    program = min(busy, program_cpu_s / core_s) if core_s > 0 else 0.0
    if window_s < MIN_WINDOW_S:
        said = f"window {window_s:.2f} s too short to judge the machine"
        return f"FAIL: {'; '.join(reasons)}; {said}" if reasons else f"ok ({said})"
    if busy - program > MAX_CPU_BUSY:
        reasons.insert(0, f"{BUSY} beside the program (CPU idle {1 - busy:.0%}, the ranks' own processes "
                          f"{program:.0%} of it{_stolen(figures, '; ')})")
    return "FAIL: " + "; ".join(reasons) if reasons else "ok"


def fidelity(time_over_model: float, counters: dict, shared_flows: int = 1, model: str = "max-min sharing",
             model_s: float = 0.0, latency_share: float = 0.0, workload_over_model: float | None = None,
             max_min_s: float | None = None, bound: NetworkBound | None = None) -> str:
    """"ok", NETWORK and why the call was slower (or, out of step, faster)
    than the model, or "FAIL: " and every reason not to trust the
    measurement. `shared_flows`: the most flows the model put on one link
    at once; `model`: how it shared links; `model_s`: the model's time the
    call is compared with (0: none, and nothing is the network's);
    `latency_share`: the share of the model's time that is per-message
    latency and least step times (RunPlan.latency_share);
    `workload_over_model`: for an iteration of a job that shares links with
    others, the whole workload's time over its model (None: not such);
    `max_min_s`: max-min's time, where the model stretched it (None: the
    model is max-min); `bound`: the TCP-sharing factors network verdicts are
    held to (RunPlan.bound; None: a factor of 1)."""
    reasons = []
    if counters.get("cpu_busy", 0) > MAX_CPU_BUSY:
        reasons.append(f"{BUSY} (CPU idle {1 - counters['cpu_busy']:.0%}{_stolen(counters, '; ')})")
    saturated = counters.get("saturated_util")
    if saturated is not None and saturated != "" and saturated < MIN_LINK_RATE:
        reasons.append(f"{SLOW_LINKS} at {saturated:.0%} of their rate")
    if abs(time_over_model - 1) > TOLERANCE:
        time_s = time_over_model * model_s
        why = None if reasons or model_s <= 0 else (
            _tcp_sharing(time_over_model, counters, shared_flows, time_s - model_s)
            or _out_of_step(counters, workload_over_model))
        if why:
            return held_to_bound(f"{NETWORK}{time_over_model:.2f}x {model}: {why}; the machine kept up", time_s,
                                 model_s, model_s if max_min_s is None else max_min_s, shared_flows,
                                 counters.get("tcp_timeouts"), counters.get("queue_drops"), bound)
        reasons.append(f"{time_over_model:.2f}x the model" + _likely_cause(time_over_model, counters, latency_share))
    return "FAIL: " + "; ".join(reasons) if reasons else "ok"


def held_to_bound(verdict: str, time_s: float, model_s: float, max_min_s: float, flows: int, timeouts, drops,
                  bound: NetworkBound | None) -> str:
    """A network verdict of a call slower than its model, held to what was
    measured explains of it: max-min's time times the TCP-sharing factor
    for its most flows on a link, within TOLERANCE; where a queue dropped
    (`drops`), one loss recovered at the call's tail, its resent segment
    behind a full queue (the bound's drain_s); and for each retransmission
    timeout counted (`timeouts`; blank: none counted) Linux's least one,
    RTO_MIN_S over the RTT, which a full queue stretches by drain_s. Within
    that it says so; beyond, the call fails naming the seconds unexplained.
    Any other verdict, a call not slower than its model (an iteration ahead,
    out of step) and a verdict already held to it stay as they are."""
    if not verdict.startswith(NETWORK) or EXPLAINED in verdict or not 0 < model_s < time_s:
        return verdict
    bound = bound or NetworkBound(None)
    known = timeouts not in (None, "") and timeouts == timeouts   # NaN: a blank read by pandas
    counted = int(timeouts) if known else 0
    sharing_s = max_min_s * bound.factor(flows) * (1 + TOLERANCE)
    recovery_s = bound.drain_s if drops and drops == drops else 0.0
    timeouts_s = counted * (RTO_MIN_S + bound.drain_s)
    said = f"{counted} timeout{'' if counted == 1 else 's'} {timeouts_s:.1f} s" if known else "no timeouts counted"
    recovered = f", a loss recovered behind a full queue {recovery_s:.2f} s" if recovery_s else ""
    explains = f"sharing explains {sharing_s / model_s:.2f}x ({bound.describe(flows)}){recovered} and {said}"
    unexplained = time_s - sharing_s - recovery_s - timeouts_s
    if unexplained <= 0:
        return f"{verdict}; {EXPLAINED}: {explains}"
    return (f"FAIL: {NETWORK}{time_s / model_s:.2f}x, {explains}: {unexplained:.3g} s unexplained "
            f"({verdict[len(NETWORK):]})")


def machine_failed(verdict: str) -> bool:
    """Whether a verdict blames the machine (its measurement says nothing of the network)."""
    return any(cause in verdict for cause in (BUSY, SLOW_LINKS, CPU_BOUND, STOLEN))


def _tcp_sharing(time_over_model: float, counters: dict, shared_flows: int, beyond_s: float) -> str | None:
    """How TCP shared congested links its own way, if that made the call
    slower than the model (None if not): several flows met on a link, the
    machine's switches kept up, the retransmissions were mostly real, and
    either queues dropped packets (loss recovery) or nothing was lost and
    the saturated links were measured at their rate (the flows' shares of
    busy links uneven; below MIN_LINK_RATE is already a reason). Losses
    without a queue drop are the machine's; so are mostly spurious
    retransmissions, unless the machine was quiet (QUIET_CPU)."""
    retrans, spurious = counters.get("tcp_retrans") or 0, counters.get("tcp_spurious") or 0
    cpu = counters.get("cpu_busy")
    quiet = cpu not in (None, "") and cpu <= QUIET_CPU
    if not (time_over_model > 1 and shared_flows > 1 and not _switches_busy(counters)
            and (spurious <= retrans / 2 or quiet)):
        return None
    drops, saturated = counters.get("queue_drops") or 0, counters.get("saturated_util")
    if drops:
        timeout = _timeouts(counters.get("tcp_timeouts"), beyond_s)
        return f"TCP recovered from {drops} queue drops with up to {shared_flows} flows on a link{timeout}"
    if retrans <= spurious and saturated not in (None, ""):   # nothing lost
        probes = f", {spurious} spurious retransmissions as queues filled" if spurious else ""
        return (f"TCP shared the links unevenly, up to {shared_flows} flows on a link without a queue drop"
                f"{probes}, the saturated links at {saturated:.0%} of their rate")
    return None


def _out_of_step(counters: dict, workload_over_model: float | None) -> str | None:
    """Why an iteration of a job that shares links with others missed the
    model while the whole workload kept to it (None if not so): TCP gave
    the jobs unequal shares, so one ran ahead while another fell behind,
    where the model keeps them in step; a machine behind would slow the
    whole workload (two tenants' iterations ran 0.53-1.54x the model in
    workloads of 1.02-1.04x: docs/results.md)."""
    if workload_over_model is None or abs(workload_over_model - 1) > TOLERANCE or _switches_busy(counters):
        return None
    return (f"jobs out of step: TCP gave the jobs sharing its links unequal shares, and the whole workload "
            f"took {workload_over_model:.2f}x its model")


def _timeouts(counted, beyond_s: float) -> str:
    """The retransmission timeouts of a lossy call, as counted; where they
    were not (a folder from before), guessed from the time beyond the model."""
    if counted not in (None, ""):
        plural = "" if counted == 1 else "s"
        return (f" ({counted} retransmission timeout{plural}, each at least {RTO_MIN_S:g} s; {beyond_s:.2f} s "
                f"beyond the model)" if counted else "")
    return (f" ({beyond_s:.2f} s beyond the model: a retransmission timeout takes at least {RTO_MIN_S:g} s)"
            if beyond_s >= 0.75 * RTO_MIN_S else "")


def _likely_cause(time_over_model: float, counters: dict, latency_share: float = 0.0) -> str:
    """Why a call missed the model: a latency-bound one either way; a slow
    one also for the machine's and TCP's reasons."""
    causes = [_latency_bound(latency_share)]
    if time_over_model >= 1:
        causes += [_stolen(counters), _switches_busy(counters), _retransmissions(counters)]
    causes = [cause for cause in causes if cause]
    return f" ({', '.join(causes)})" if causes else ""


def _latency_bound(latency_share: float) -> str:
    """The latency-bound cause, if LATENCY_BOUND or more of the model's
    time is per-message latency and least step times; else ""."""
    if latency_share < LATENCY_BOUND:
        return ""
    return (f"latency-bound: {latency_share:.0%} of the model's time is per-message latency and least step "
            f"times, which this machine's hosts and switches set, not the links' rates")


def _retransmissions(counters: dict) -> str:
    """What the hosts' retransmissions and the queues' drops say of a slow
    call; "" if nothing was retransmitted."""
    spurious, retrans = counters.get("tcp_spurious") or 0, counters.get("tcp_retrans") or 0
    drops = counters.get("queue_drops")
    if drops or (retrans > spurious and drops in (None, "")):   # none: a folder from before drops were counted
        return "packet losses"
    if retrans > spurious:   # e.g. a flow reordered across a VM's vCPUs (docs/capacity.md)
        return "retransmissions without a queue drop: reordering, or losses outside the queues" + _tcp_saw(counters)
    if spurious:
        return "spurious retransmissions: RTT jumps or reordering" + _tcp_saw(counters)
    return ""


def _stolen(counters: dict, before: str = "") -> str:
    """What a hypervisor took of the cores (the steal time of /proc/stat),
    if STOLEN_CPU or more; else "": the machine's cores were not all its
    own while the call ran."""
    stolen = counters.get("cpu_stolen")
    if stolen in (None, "") or stolen < STOLEN_CPU:
        return ""
    return f"{before}{STOLEN} {stolen:.0%} of the cores"


def _switches_busy(counters: dict) -> str:
    """CPU_BOUND, with what Open vSwitch's forwarding thread did, if it was
    on a core or waiting for one BUSY_SWITCHES of the call; else "". A
    thread that waits forwards nothing: a 64-host ring's switch thread ran
    0.52-0.66 of its calls at 20-30 Mbit/s and waited 0.27-0.42, as
    saturated as a 64-host halving-doubling's at 0.93-0.95 on a core
    (docs/capacity.md). Folders from before the wait was read have the
    share of a core alone."""
    ran, waited = counters.get("ovs_cpu") or 0, counters.get("ovs_wait")
    if waited in (None, ""):
        return CPU_BOUND if ran >= BUSY_SWITCHES else ""
    if ran + waited < BUSY_SWITCHES:
        return ""
    return f"{CPU_BOUND}: Open vSwitch ran {ran:.0%} of the call and waited for a core {waited:.0%}"


def _tcp_saw(counters: dict) -> str:
    """What TCP itself counted of reordering and of tail-loss probes (sent
    when no ACK came for about two RTTs: a switch's delay fires them on the
    userspace datapath), where they were counted (not in folders from before)."""
    said = []
    if counters.get("tcp_reordered") not in (None, ""):
        said.append(f"TCP detected reordering {counters['tcp_reordered']} times")
    if counters.get("tcp_loss_probes") not in (None, ""):
        probes = counters["tcp_loss_probes"]
        said.append(f"sent {probes} tail-loss probe{'' if str(probes) == '1' else 's'}")
    return "; " + " and ".join(said) if said else ""
