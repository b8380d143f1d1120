"""The controller's counter readings (pure), and the adaptive policy's
decision from them.

Switches answer port and flow stats requests with byte counters. The os-ken
app hands each answer here with the time it arrived (`now`, in
time.monotonic(), the clock every process of the machine shares) and gets
back the rows it appends to controller-ports.csv; with the "adaptive"
policy it then asks `adapt` for the moves to make and the switches whose
rules to send again. A rate is taken between a counter's last two readings:
what the switch counted in the last poll period.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from emulator.fabric.graph import Fabric
from emulator.routes.adaptive import Move
from emulator.routes.state import RouteState, link_loads

ACTIVE_BYTES_PER_S = 1e4   # a pair sending less than this is idle

Pair = tuple[str, str]
PortCounts = tuple[int, int, int, int]        # (port, tx bytes, rx bytes, tx dropped), as a port stats entry has them
PairCount = tuple[str | None, str | None, int]  # (ipv4 source, ipv4 destination, bytes) of a flow stats entry
Count = tuple[float, int]                     # (when read, bytes counted)


@dataclass(frozen=True)
class PortReading:
    """One switch port's counters as read. Its fields are the columns of
    controller-ports.csv (PORT_READING_COLUMNS of emulator.results.linkstats,
    which this stage may not import), in order."""
    t: float
    switch: str
    port: int
    tx_bytes: int
    rx_bytes: int
    tx_dropped: int

    def csv_line(self) -> str:
        """Its row of controller-ports.csv; `t` to the microsecond."""
        return f"{self.t:.6f},{self.switch},{self.port},{self.tx_bytes},{self.rx_bytes},{self.tx_dropped}\n"


class Readings:
    """The last two readings of every fabric port's counters and of every
    per-pair rule's byte counter, per switch."""

    def __init__(self, fabric: Fabric):
        self.fabric = fabric   # every link as built: a port whose link is down is still read
        self.host_by_ip = {h.ip: h.name for h in fabric.hosts}
        self.ports: dict[tuple[str, int], tuple[PortReading | None, PortReading]] = {}
        self.pairs: dict[tuple[str, str, str], tuple[Count | None, Count]] = {}   # key: (switch, src, dst)

    def read_ports(self, switch: str, now: float, counts: Iterable[PortCounts]) -> list[PortReading]:
        """A port stats reply of `switch`: the readings of its fabric ports
        (the local port and others are left out), kept for the rates and
        returned as controller-ports.csv rows."""
        fabric_ports = set(self.fabric.ports(switch))
        rows = [PortReading(now, switch, *c) for c in counts if c[0] in fabric_ports]
        for row in rows:
            key = (switch, row.port)
            self.ports[key] = (self._latest(self.ports, key), row)
        return rows

    def read_pairs(self, switch: str, now: float, counts: Iterable[PairCount]) -> None:
        """A flow stats reply of `switch`. Only per-pair rules (a source and a
        destination host) say which pairs send; destination rules and the
        table-miss rule are left out."""
        for src, dst, count in counts:
            if src in self.host_by_ip and dst in self.host_by_ip:
                key = (switch, self.host_by_ip[src], self.host_by_ip[dst])
                self.pairs[key] = (self._latest(self.pairs, key), (now, count))

    def port_rates(self) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], float]]:
        """(transmit, receive) bytes/s per (switch, port) read at least twice."""
        tx, rx = {}, {}
        for key, (old, new) in self.ports.items():
            if old is not None:
                tx[key] = _rate((old.t, old.tx_bytes), (new.t, new.tx_bytes))
                rx[key] = _rate((old.t, old.rx_bytes), (new.t, new.rx_bytes))
        return tx, rx

    def pair_rates(self) -> dict[Pair, float]:
        """Each pair's rate: the most any of its switches counted. Counted per
        switch, as a pair has rules on several; a first reading, or a counter
        that went back (a rule reinstalled after a move starts again from
        zero), counts nothing."""
        rates: dict[Pair, float] = {}
        for (_, src, dst), (old, new) in self.pairs.items():
            rate = _rate(old, new) if old is not None and new[1] >= old[1] else 0.0
            rates[(src, dst)] = max(rate, rates.get((src, dst), 0.0))
        return rates

    @staticmethod
    def _latest(kept: dict, key):
        return kept[key][1] if key in kept else None


def adapt(state: RouteState, readings: Readings) -> tuple[list[Move], list[str]]:
    """One adaptive decision: the pairs moved off overloaded links (`state`'s
    table already follows them) and the switches whose rules changed, in the
    order to send them. Only pairs sending faster than ACTIVE_BYTES_PER_S
    can be moved; with none, nothing is decided."""
    active = {pair: rate for pair, rate in readings.pair_rates().items() if rate > ACTIVE_BYTES_PER_S}
    if not active:
        return [], []
    tx, rx = (_links_up(state.fabric, rates) for rates in readings.port_rates())
    moves, switches = state.move(active, link_loads(state.fabric, tx, rx))
    return moves, sorted(switches)


def _links_up(fabric: Fabric, rates: dict[tuple[str, int], float]) -> dict[tuple[str, int], float]:
    """The rates of the ports `fabric` (the links that are up) cables: a
    switch still reports the port of a link that is down, and a load on a
    link the decision does not know is refused."""
    return {(switch, port): rate for (switch, port), rate in rates.items() if port in fabric.ports(switch)}


def _rate(before: Count, after: Count) -> float:
    """Bytes/s between two readings; two readings at the same instant do not divide by zero."""
    return (after[1] - before[1]) / max(1e-6, after[0] - before[0])
