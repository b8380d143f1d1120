"""TCP's sharing of one queue, as measured (pure).

N TCP flows through one shaped drop-tail queue finish later than max-min
sharing says: the queue overflows, losses are recovered, shares are
unequal for a while. `bigraph-emu calibrate --tcp-sharing` measures by how
much on this machine (an incast of N flows into one host, per congestion
control, MTU and queue depth); the model then stretches every step by the
factor measured for the flows on its busiest link (the median call's: a
call whose flow lost its last packets waits for a retransmission timeout,
at least RTO_MIN_S, which is counted apart, not averaged in). One flow on a
link is what max-min gets right, so uncongested steps are left as they are."""
from __future__ import annotations

import math
from dataclasses import dataclass

RTO_MIN_S = 0.2   # Linux's least retransmission timeout
MODELS = ("tcp", "max-min")   # the spec's `sharing`: measured TCP sharing where calibrated, or plain max-min


@dataclass(frozen=True)
class SharingPoint:
    tcp: str                 # congestion control of the hosts
    mtu: int
    queue_packets: int       # depth of the one queue the flows shared
    flows: int               # N flows into that queue at once
    over_max_min: float      # the incast's time over max-min's (median of its calls)
    drops_per_call: float    # packets that queue dropped per call
    rate_mbps: float         # the link rate it was measured at
    timeouts_per_call: float = 0.0   # share of calls that waited a retransmission timeout beyond the median
    # the shared queue's mean depth during the calls, in ms at the link rate: the delay TCP keeps
    # standing there (None: not measured)
    standing_queue_ms: float | None = None

    def setting(self) -> tuple:
        return self.tcp, self.mtu, self.queue_packets

    def key(self) -> tuple:
        return (*self.setting(), self.flows)


@dataclass(frozen=True)
class Sharing:
    """The measured points of one setting (congestion control, MTU, queue)."""
    points: tuple[SharingPoint, ...]

    def factor(self, flows: int) -> float:
        """How much longer `flows` flows on one queue take than max-min:
        1 for one flow; between measured counts interpolated in log2 of the
        count; beyond them the nearest measured (never extrapolated)."""
        if flows <= 1 or not self.points:
            return 1.0
        known = sorted((p.flows, p.over_max_min) for p in self.points)
        if flows <= known[0][0]:
            low = (1, 1.0)
            return _between(low, known[0], flows) if flows < known[0][0] else known[0][1]
        for below, above in zip(known, known[1:]):
            if flows <= above[0]:
                return _between(below, above, flows)
        return known[-1][1]

    def describe(self) -> str:
        tcp, mtu, queue = self.points[0].setting()
        measured = ", ".join(f"{p.flows} flows {p.over_max_min:.2f}x ({p.timeouts_per_call:.0%} of calls a timeout)"
                             for p in sorted(self.points, key=lambda p: p.flows))
        return f"TCP sharing measured with {tcp}, MTU {mtu}, a {queue}-packet queue: {measured}"


def _between(low: tuple[int, float], high: tuple[int, float], flows: int) -> float:
    if high[0] == low[0]:
        return high[1]
    w = (math.log2(flows) - math.log2(low[0])) / (math.log2(high[0]) - math.log2(low[0]))
    return low[1] + w * (high[1] - low[1])


def for_setting(points, tcp: str, mtu: int, queue_packets: int) -> Sharing | None:
    """The points measured for exactly this setting; None if there are none."""
    mine = tuple(p for p in points if p.setting() == (tcp, mtu, queue_packets))
    return Sharing(mine) if mine else None


def stretched_time(prediction, sharing: Sharing) -> float:
    """The prediction's time with every step stretched by the measured
    factor of the most flows its busiest link carried (step k ends when the
    last rank ends its k-th step, as in the prediction)."""
    ends = prediction.step_index_end_s()
    total, start = 0.0, 0.0
    for end, flows in zip(ends, prediction.max_flows_per_step):
        total += (end - start) * sharing.factor(flows)
        start = end
    return total + (prediction.time_s - start)   # past the last step index: as predicted


def nearest_setting(points, tcp: str, mtu: int, queue_packets: int) -> Sharing | None:
    """The points of the calibrated setting nearest this one (None if none
    is calibrated): the same congestion control first, then the nearest MTU,
    then the nearest queue depth, both by ratio."""
    settings = sorted({p.setting() for p in points})
    if not settings:
        return None
    best = min(settings, key=lambda s: (s[0] != tcp, abs(math.log(s[1] / mtu)),
                                        abs(math.log(s[2] / queue_packets))))
    return for_setting(points, *best)


@dataclass(frozen=True)
class NetworkBound:
    """How much slower than max-min TCP's measured sharing lets a call be
    for the network's own reasons (the verdict holds network verdicts to
    it, emulator.results.verdict): the factors of the run's setting, or of
    the calibrated setting nearest it, said."""
    sharing: Sharing | None   # None: no setting calibrated anywhere
    stands_in: str = ""       # "": the run's own setting; else which setting stood in for it, and how to measure it
    drain_s: float = 0.0      # the deepest full queue emptied at its link's rate: the longest a resent segment
                              # waits behind it, and what a full queue adds to the RTT a timeout is set from

    def factor(self, flows: int) -> float:
        """The measured factor for `flows` flows on a link, never below 1:
        one flow is what max-min gets right, and factors under 1 (0.997) are
        the calibration's noise."""
        return max(1.0, self.sharing.factor(flows)) if self.sharing else 1.0

    def describe(self, flows: int) -> str:
        """Where the factor for `flows` flows came from, said."""
        if self.sharing is None:
            return f"no TCP-sharing calibration, {self.factor(flows):.2f}x (`bigraph-emu calibrate --tcp-sharing`)"
        tcp, mtu, queue = self.sharing.points[0].setting()
        said = f"{self.factor(flows):.2f}x for {flows} flow{'' if flows == 1 else 's'}, {tcp} MTU {mtu} {queue}-packet queue"
        return f"{said}: {self.stands_in}" if self.stands_in else said
