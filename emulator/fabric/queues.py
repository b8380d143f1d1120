"""Switch queue disciplines (pure): one record each, the only place a
discipline is named. A switch port's egress is HTB at the link rate with
the discipline's queue under it (emulator.net.shaping); a discipline that
marks makes the hosts negotiate ECN (net.ipv4.tcp_ecn), and the link
monitor counts its marks beside its drops.

`red-ecn` marks as DCTCP wants (Alizadeh et al., SIGCOMM 2010): every
ECN-capable packet that arrives while the queue holds at least K packets,
on the instantaneous queue (RED's average with the fastest weight tc
allows, min K and max K+1 packets, probability 1). `fq_codel` is Linux's
flow-queue CoDel with ECN: it marks a flow's packets once they have
waited longer than its target (5 ms) for an interval (100 ms).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# The burst HTB may send at line speed above every queue: at least two full
# frames, and 10 ms of traffic at the link rate. On a loaded 2-core machine
# HTB's timer fires late: with a 1 ms burst, saturated links lost the time it
# was late and ran at 82-86% of their rate at 191 Mbit/s (MTU 9000), 91% at
# 12.9 Mbit/s (MTU 1500); with 10 ms they ran at 99-100% (bigraph-emu
# calibrate measures it). The model spends it too (emulator.model.buckets).
BURST_MS = 10.0
NETEM, NETEM_CONFIG = "sch_netem", "CONFIG_NET_SCH_NETEM"   # delay and loss on a link


@dataclass(frozen=True)
class Discipline:
    name: str
    help: str
    module: str                 # the kernel's qdisc module (sch_NAME): a kernel without it refuses the run
    config: str                 # its kernel config option
    marks: bool                 # marks ECN: the hosts switch ECN on, the monitor counts marks
    # (queue packets, frame bytes, rate Mbit/s, marking threshold K packets, TSO segments) -> tc qdisc arguments
    qdisc: Callable[[int, int, float, int, bool], list[str]]
    kinds: tuple[str, ...]      # the kinds `tc -s qdisc` reports for it
    marks_field: str = ""       # its count of ECN marks in `tc -s -j qdisc`
    threshold: bool = False     # marks from a threshold the run may set (ecn_threshold_packets)
    target_ms: float = 0.0      # marks only after packets waited this long: a shallower queue drops first


def _fifo(packets: int, frame: int, rate_mbps: float, threshold: int, tso: bool) -> list[str]:
    # TSO segments are up to a burst long: count bytes (`packets` full
    # frames), as a switch's buffer would
    return ["bfifo", "limit", str(packets * frame)] if tso else ["pfifo", "limit", str(packets)]


def _red_ecn(packets: int, frame: int, rate_mbps: float, threshold: int, tso: bool) -> list[str]:
    low = threshold * frame
    # burst: the fewest packets tc accepts for min/avpkt, which makes RED's
    # average follow the instantaneous queue as closely as it can
    return ["red", "limit", str(packets * frame), "min", str(low), "max", str(low + 1), "avpkt", str(frame),
            "burst", str(threshold + 1), "bandwidth", f"{rate_mbps}mbit", "probability", "1.0", "ecn"]


def _fq_codel(packets: int, frame: int, rate_mbps: float, threshold: int, tso: bool) -> list[str]:
    # its limit counts packets, and a TSO segment is up to a burst of frames:
    # bound its bytes too, as fifo and red do (memory_limit counts each
    # packet's buffer, a little over its bytes: at most the queue asked for)
    memory = ["memory_limit", str(packets * frame)] if tso else []
    return ["fq_codel", "limit", str(packets), *memory, "ecn"]


FIFO = Discipline("fifo", "fifo: a packet FIFO of the queue's depth, drop-tail (a plain switch port)",
                  "sch_fifo", "CONFIG_NET_SCHED", False, _fifo, ("pfifo", "bfifo"))
RED_ECN = Discipline("red-ecn", "red-ecn: drop-tail FIFO that marks ECN on every packet arriving while K or more "
                                "wait (DCTCP's step marking; K: ecn_threshold_packets)",
                     "sch_red", "CONFIG_NET_SCH_RED", True, _red_ecn, ("red",), "marked", threshold=True)
FQ_CODEL = Discipline("fq_codel", "fq_codel: flow-queue CoDel with ECN (marks after 5 ms of standing queue)",
                      "sch_fq_codel", "CONFIG_NET_SCH_FQ_CODEL", True, _fq_codel, ("fq_codel",),
                      "ecn_mark", target_ms=5.0)

DISCIPLINES: dict[str, Discipline] = {d.name: d for d in (FIFO, RED_ECN, FQ_CODEL)}


def default_threshold(queue_packets: int) -> int:
    """DCTCP's K when none is given: a fifth of the queue (at least 2
    packets), leaving room for a burst above it before the queue drops."""
    return max(2, queue_packets // 5)


def discipline(name: str) -> Discipline:
    try:
        return DISCIPLINES[name]
    except KeyError:
        raise ValueError(f"unknown queue discipline {name!r}; choose one of: {', '.join(DISCIPLINES)}") from None
