"""The controller's routing state (pure): the table it wants installed, how
it changes when links fail or come back, and what an adaptive decision
needs from counters. The os-ken app only feeds it events and counters and
sends the rule changes it returns."""
from __future__ import annotations

from dataclasses import replace

from emulator.routes import adaptive
from emulator.routes.routing import ForwardingTable, Policy, forwarding_table, path
from emulator.routes.rules import FlowRule, switch_rules
from emulator.fabric.graph import Fabric

Pair = tuple[str, str]


class RouteState:
    def __init__(self, fabric: Fabric, policy: "str | Policy", demands: dict | None = None, seed: int = 1):
        self.full = fabric                   # every link, as built
        self.fabric = fabric                 # the links that are up
        self.record = policy                 # a name, or a record (a file policy's routes: fixed_policy)
        self.policy = policy.name if isinstance(policy, Policy) else policy
        self.demands = demands
        self.seed = seed
        self.down: set[frozenset] = set()    # failed links, as {(switch, port), (peer, port)}
        self.table: ForwardingTable = forwarding_table(fabric, self.record, demands, seed)
        self.fallback = ""                   # why the policy could not route the fabric that is left

    def rules(self, switch: str) -> set[FlowRule]:
        return set(switch_rules(self.fabric, self.table, switch))

    def port_changed(self, switch: str, port: int, up: bool) -> bool:
        """A switch port went down or up; True if the routes changed.
        Only switch-switch links reroute: a host's own link has no detour."""
        peer, peer_port, link = self.full.peer(switch, port)
        if link.kind != "switch":
            return False
        ends = frozenset(((switch, port), (peer, peer_port)))
        if up == (ends not in self.down):
            return False
        (self.down.discard if up else self.down.add)(ends)
        self._reroute()
        return True

    def _reroute(self) -> None:
        """Route the fabric that is left; a policy that cannot (BiGraph's
        routing needs every direct link) falls back to shortest paths."""
        links = [l for l in self.full.links if frozenset(l.ends()) not in self.down]
        self.fabric = replace(self.full, links=links)
        try:
            self.table = forwarding_table(self.fabric, self.record, self.demands, self.seed)
            self.fallback = ""
        except (ValueError, RuntimeError, KeyError) as e:   # KeyError: a link the policy relies on is gone
            self.table = forwarding_table(self.fabric, "shortest")
            self.fallback = f"{self.policy} cannot route with {len(self.down)} link(s) down ({e}); using shortest"

    def move(self, pair_rates: dict[Pair, float], link_load: dict, threshold: float = adaptive.THRESHOLD):
        """One adaptive decision from measured rates: the moves made and the
        switches whose rules changed."""
        routes = {pair: path(self.fabric, self.table, *pair) for pair in pair_rates}
        active = adaptive.pairs_on_links(routes)
        moves = adaptive.plan_moves(self.fabric, routes, link_load, active, threshold)
        return moves, adaptive.apply_moves(self.fabric, self.table, moves)


def rule_changes(want: set[FlowRule], have: set[FlowRule]) -> tuple[list[FlowRule], list[FlowRule]]:
    """(rules to delete, rules to add) that turn `have` into `want`; rules
    already right are left alone, so their traffic never notices."""
    def order(r):
        return (r.priority, r.ipv4_dst or "", r.ipv4_src or "", r.out_port or 0)
    return sorted(have - want, key=order), sorted(want - have, key=order)


def link_loads(fabric: Fabric, tx_rate: dict[tuple[str, int], float], rx_rate: dict[tuple[str, int], float]) -> dict:
    """Bytes/s per directed link from switch port counters: a switch port's
    transmit rate is its egress; a host's egress is its switch port's
    receive rate."""
    load = {}
    for (switch, port), rate in tx_rate.items():
        load[(switch, port)] = rate
        peer, _, link = fabric.peer(switch, port)
        if link.kind == "host" and (switch, port) in rx_rate:
            load[(peer, 0)] = rx_rate[(switch, port)]
    return load
