"""Adaptive routing decisions (pure), in the manner of Hedera.

The "adaptive" policy starts from the ecmp table: like Hedera, hashing
spreads the pairs from the start, and the controller only has to move the
ones that collide. Every fraction of a second the controller reads its
switches' counters; `emulator.routes.readings.adapt` makes them the load of
every directed link and the pairs that send, asks `plan_moves` which pairs
to move and applies them with `apply_moves`, and the controller reinstalls
the rules of the switches it returns. Nothing here talks to a switch.

Link = (node, egress port), as `emulator.routes.routing.path` lists them.
"""
from __future__ import annotations

from dataclasses import dataclass

from emulator.routes.routing import ForwardingTable, Route, ShortestRoutes, set_route
from emulator.fabric.graph import Fabric

THRESHOLD = 0.9   # a switch-switch link above this fraction of its rate is overloaded

Link = tuple[str, int]
Pair = tuple[str, str]   # (source host, destination host)


@dataclass(frozen=True)
class Move:
    pair: Pair
    old: tuple[Link, ...]   # the route the pair leaves
    new: tuple[Link, ...]   # the route it takes instead

    def event(self) -> dict:
        """Its details in events.jsonl (JSON has lists, not tuples)."""
        return {"pair": list(self.pair), "old": [list(hop) for hop in self.old], "new": [list(hop) for hop in self.new]}


def capacities(fabric: Fabric) -> dict[Link, float]:
    """Bytes per second every directed link can carry."""
    return {end: link.rate_mbps * 1e6 / 8 for link in fabric.links for end in link.ends()}


def pairs_on_links(routes: dict[Pair, Route]) -> dict[Link, set[Pair]]:
    """The pairs crossing every directed link, from their routes: what a
    controller that knows which pairs are active passes as `active`."""
    on: dict[Link, set[Pair]] = {}
    for pair, route in routes.items():
        for link in route:
            on.setdefault(link, set()).add(pair)
    return on


def plan_moves(fabric: Fabric, routes: dict[Pair, Route], load: dict[Link, float],
               active: dict[Link, set[Pair]], threshold: float = THRESHOLD) -> list[Move]:
    """The pairs to move off overloaded links, and where to.

    routes: the current route of every pair (at least of the active ones).
    load: measured bytes/s per directed link (missing links: idle).
    active: the pairs seen sending over each link.

    Overloaded links are the switch-switch links above `threshold` of their
    rate, busiest first (host links are left alone: every route of a pair
    crosses the same ones). From each, while it stays overloaded, its active
    pairs are taken in host order; a pair's rate is estimated as an equal
    share of the link's load, and it moves to the alternative shortest route
    whose busiest switch-switch link would then be least loaded, if that is
    below the overloaded link's load (otherwise moving only shifts the
    congestion, and the next decision would move it back). Loads are updated
    after every move, a pair moves at most once per decision, and equal
    inputs give equal moves."""
    capacity = capacities(fabric)
    unknown = set(load) - set(capacity)
    if unknown:
        raise ValueError(f"loads given for links not in {fabric.topology}: {sorted(unknown)[:3]}")
    util = {link: load.get(link, 0.0) / capacity[link] for link in capacity}
    alternatives = ShortestRoutes(fabric)
    order = {h.name: h.index for h in fabric.hosts}
    moves: list[Move] = []
    moved: set[Pair] = set()
    for hot in _overloaded(fabric, util, threshold):
        pairs = sorted((p for p in active.get(hot, ()) if p in routes and hot in routes[p]),
                       key=lambda p: (order[p[0]], order[p[1]]))
        if not pairs:
            continue
        share = load[hot] / len(pairs)
        for pair in pairs:
            if util[hot] <= threshold:
                break
            if pair in moved:
                continue
            new = _least_loaded(fabric, alternatives.between(*pair), routes[pair], share, util, capacity)
            if new is None or _bottleneck(fabric, new, routes[pair], share, util, capacity) >= util[hot]:
                continue
            _shift(util, capacity, routes[pair], new, share)
            moves.append(Move(pair, tuple(routes[pair]), tuple(new)))
            moved.add(pair)
    return moves


def apply_moves(fabric: Fabric, table: ForwardingTable, moves: list[Move]) -> list[str]:
    """Change `table` so every moved pair follows its new route; returns the
    switches whose rules must be installed again, in fabric order."""
    changed = set()
    for move in moves:
        changed.update(set_route(fabric, table, *move.pair, list(move.new)))
    return [s.name for s in fabric.switches if s.name in changed]


def _overloaded(fabric: Fabric, util: dict[Link, float], threshold: float) -> list[Link]:
    hot = [link for link, u in util.items() if u > threshold and _is_switch_link(fabric, link)]
    return sorted(hot, key=lambda link: (-util[link], link))


def _is_switch_link(fabric: Fabric, link: Link) -> bool:
    return fabric.peer(*link)[2].kind == "switch"


def _bottleneck(fabric, route, current, share, util, capacity) -> float:
    """Utilisation of `route`'s busiest switch-switch link once the pair
    (rate `share`) has left `current` for it; links both share keep theirs."""
    return max((util[l] + (0.0 if l in current else share / capacity[l])
                for l in route if _is_switch_link(fabric, l)), default=0.0)


def _least_loaded(fabric, options, current, share, util, capacity) -> Route | None:
    """The alternative to `current` with the least loaded bottleneck (ties:
    the first, i.e. lowest ports), or None if there is no alternative."""
    others = [r for r in options if r != list(current)]
    if not others:
        return None
    return min(others, key=lambda r: _bottleneck(fabric, r, current, share, util, capacity))


def _shift(util, capacity, old, new, share) -> None:
    """Move `share` bytes/s from the links only `old` uses to those only `new` uses."""
    for link in set(old) - set(new):
        util[link] -= share / capacity[link]
    for link in set(new) - set(old):
        util[link] += share / capacity[link]
