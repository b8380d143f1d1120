"""The fidelity verdict (pure): whether a measured call can be trusted, from
its time against the model and what the machine's and the links' counters
say about it; and the likely cause when it cannot."""
from __future__ import annotations

# what the machine's and the links' counters say about a call (CallRecord.counters)
COUNTER_COLUMNS = ["cpu_busy", "ovs_cpu", "queue_drops", "queue_marks", "most_drops_port", "tcp_retrans", "tcp_spurious",
                   "max_link_util", "mean_link_util", "saturated_util"]

# The verdict's thresholds (Mininet-HiFi's practice: trust a run only if
# the machine kept up and the shaped links ran at their rate).
TOLERANCE = 0.15       # measured time within 15% of the model
MAX_CPU_BUSY = 0.90    # the machine kept at least 10% idle
MIN_LINK_RATE = 0.90   # saturated links sent at least 90% of their rate
BUSY_SWITCHES = 0.85   # ovs-vswitchd's share of its one core: a likely cause


def fidelity(time_over_model: float, counters: dict) -> str:
    """"ok", or "FAIL: " and every reason not to trust the measurement."""
    reasons = []
    if counters.get("cpu_busy", 0) > MAX_CPU_BUSY:
        reasons.append(f"machine busy (CPU idle {1 - counters['cpu_busy']:.0%})")
    saturated = counters.get("saturated_util")
    if saturated is not None and saturated != "" and saturated < MIN_LINK_RATE:
        reasons.append(f"saturated links ran at {saturated:.0%} of their rate")
    if abs(time_over_model - 1) > TOLERANCE:
        reasons.append(f"{time_over_model:.2f}x the model" + _likely_cause(time_over_model, counters))
    return "FAIL: " + "; ".join(reasons) if reasons else "ok"


def _likely_cause(time_over_model: float, counters: dict) -> str:
    if time_over_model < 1:
        return ""
    causes = []
    if counters.get("ovs_cpu", 0) >= BUSY_SWITCHES:
        causes.append("switches CPU-bound")
    spurious = counters.get("tcp_spurious") or 0
    if counters.get("queue_drops", 0) or counters.get("tcp_retrans", 0) > spurious:
        causes.append("packet losses")
    elif spurious:
        causes.append("spurious retransmissions: RTT jumps or reordering")
    return f" ({', '.join(causes)})" if causes else ""
