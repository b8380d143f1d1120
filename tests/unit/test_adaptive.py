"""Unit tests of the adaptive (Hedera-style) routing decisions (emulator/routes/adaptive.py)."""
from __future__ import annotations

from collections import Counter

import pytest

from emulator.routes import adaptive, routing
from emulator.routes.adaptive import Move, apply_moves, capacities, pairs_on_links, plan_moves
from emulator.fabric.topology import fattree, leafspine

LINE = 50e6 / 8    # bytes/s of the default 50 Mbit/s links


def measure(fabric, table, rates):
    """Routes of the sending pairs, and the link loads they make: every
    pair adds its rate (bytes/s) to each link of its route."""
    routes = {pair: routing.path(fabric, table, *pair) for pair in rates}
    load = Counter()
    for pair, route in routes.items():
        for link in route:
            load[link] += rates[pair]
    return routes, dict(load)


@pytest.fixture
def two_on_one_spine():
    """leafspine(2,2,2): bgh0,1 on leaf bgs0, bgh2,3 on leaf bgs1, spines
    bgs2 (port 3 of a leaf) and bgs3 (port 4). With 'shortest' both pairs
    cross bgs2 at half the line rate each: bgs0 -> bgs2 -> bgs1 is full."""
    f = leafspine(2, 2, 2)
    table = routing.forwarding_table(f, "shortest")
    routes, load = measure(f, table, {("bgh0", "bgh2"): LINE / 2, ("bgh1", "bgh3"): LINE / 2})
    return f, table, routes, load


def test_moves_a_pair_off_a_full_link(two_on_one_spine):
    f, table, routes, load = two_on_one_spine
    assert load[("bgs0", 3)] == LINE and load[("bgs2", 2)] == LINE
    moves = plan_moves(f, routes, load, pairs_on_links(routes))
    # one move frees both full links; the first pair by host order moves to the idle spine
    assert moves == [Move(("bgh0", "bgh2"),
                          old=(("bgh0", 0), ("bgs0", 3), ("bgs2", 2), ("bgs1", 1)),
                          new=(("bgh0", 0), ("bgs0", 4), ("bgs3", 2), ("bgs1", 1)))]


def test_apply_moves_changes_only_the_moved_pair(two_on_one_spine):
    f, table, routes, load = two_on_one_spine
    before = routing.pair_paths(f, table)
    moves = plan_moves(f, routes, load, pairs_on_links(routes))
    assert apply_moves(f, table, moves) == ["bgs0"]   # only the first switch's choice changes
    assert routing.path(f, table, "bgh0", "bgh2") == list(moves[0].new)
    after = routing.pair_paths(f, table)
    assert {p for p in before if before[p] != after[p]} == {("bgh0", "bgh2")}
    # measured again, nothing is overloaded: no more moves
    routes, load = measure(f, table, {("bgh0", "bgh2"): LINE / 2, ("bgh1", "bgh3"): LINE / 2})
    assert plan_moves(f, routes, load, pairs_on_links(routes)) == []


def test_no_move_below_the_threshold():
    f = leafspine(2, 2, 2)
    table = routing.forwarding_table(f, "shortest")
    routes, load = measure(f, table, {("bgh0", "bgh2"): 0.4 * LINE, ("bgh1", "bgh3"): 0.4 * LINE})
    assert plan_moves(f, routes, load, pairs_on_links(routes)) == []          # 0.8 of the rate
    moves = plan_moves(f, routes, load, pairs_on_links(routes), threshold=0.75)
    assert [m.pair for m in moves] == [("bgh0", "bgh2")]


def test_no_move_for_a_pair_alone_on_its_link():
    """One pair filling a link would fill any other link just as much."""
    f = leafspine(2, 2, 2)
    table = routing.forwarding_table(f, "shortest")
    routes, load = measure(f, table, {("bgh0", "bgh2"): LINE})
    assert plan_moves(f, routes, load, pairs_on_links(routes)) == []


def test_no_move_when_every_alternative_is_as_full():
    """Two pairs on each spine: moving one would only overload the other."""
    f = leafspine(2, 2, 2)
    table = routing.forwarding_table(f, "shortest")
    for pair in (("bgh0", "bgh3"), ("bgh1", "bgh2")):      # onto spine bgs3
        routing.set_route(f, table, *pair, routing.ShortestRoutes(f).between(*pair)[1])
    rates = dict.fromkeys([("bgh0", "bgh2"), ("bgh1", "bgh3"), ("bgh0", "bgh3"), ("bgh1", "bgh2")], LINE / 2)
    routes, load = measure(f, table, rates)
    assert [load[l] for l in [("bgs0", 3), ("bgs0", 4), ("bgs2", 2), ("bgs3", 2)]] == [LINE] * 4
    assert plan_moves(f, routes, load, pairs_on_links(routes)) == []


def test_pairs_not_on_the_link_are_not_moved(two_on_one_spine):
    """Stale activity (a pair reported on a link its route no longer
    crosses) moves nothing; nor do pairs whose route is unknown."""
    f, table, routes, load = two_on_one_spine
    load[("bgs0", 4)] = LINE
    stale = {("bgs0", 4): {("bgh0", "bgh2")}, ("bgs0", 3): {("bgh0", "bgh3"), ("bgh1", "bgh2")}}
    assert plan_moves(f, routes, load, stale) == []


def test_parallel_links_are_alternatives():
    """Two uplinks from the leaf to the one spine: two pairs on the first
    parallel link, one moves to the second."""
    f = leafspine(2, 1, 2, uplinks=2)
    table = routing.forwarding_table(f, "shortest")
    routes, load = measure(f, table, {("bgh0", "bgh2"): LINE / 2, ("bgh1", "bgh3"): LINE / 2})
    (move,) = plan_moves(f, routes, load, pairs_on_links(routes))
    assert move.pair == ("bgh0", "bgh2")
    assert [n for n, _ in move.new] == [n for n, _ in move.old]   # same switches ...
    assert move.new[1] != move.old[1]                             # ... another leaf uplink


def test_loads_on_unknown_links_are_refused(two_on_one_spine):
    f, table, routes, load = two_on_one_spine
    with pytest.raises(ValueError, match="not in leafspine"):
        plan_moves(f, routes, {**load, ("bgs9", 1): 1.0}, pairs_on_links(routes))


def test_capacities():
    f = leafspine(2, 2, 2)
    cap = capacities(f)
    assert len(cap) == 2 * len(f.links)
    assert cap[("bgs0", 3)] == LINE and cap[("bgh0", 0)] == LINE


def fattree_round(f, table, pairs, demand=0.6):
    """One decision on a k=4 fat-tree where every pair wants 0.6 of the line
    rate and a link carries at most the line rate."""
    routes = {p: routing.path(f, table, *p) for p in pairs}
    count = Counter(link for r in routes.values() for link in r)
    load = {link: min(n * demand, 1.0) * LINE for link, n in count.items()}
    return routes, load, max(count.values())


@pytest.mark.parametrize("start", ["ecmp", "shortest"])
@pytest.mark.parametrize("stride", [2, 4, 8])
def test_decisions_on_a_fattree_permutation(start, stride):
    """Every decision moves a pair at most once, is deterministic (whatever
    the order of its inputs) and never makes the busiest link busier."""
    f = fattree(4)
    hosts = [h.name for h in f.hosts]
    pairs = [(hosts[i], hosts[(i + stride) % len(hosts)]) for i in range(len(hosts))]
    table = routing.forwarding_table(f, start)
    busiest = []
    for _ in range(3):
        routes, load, most = fattree_round(f, table, pairs)
        busiest.append(most)
        moves = plan_moves(f, routes, load, pairs_on_links(routes))
        assert len({m.pair for m in moves}) == len(moves)
        shuffled = {p: routes[p] for p in reversed(list(routes))}
        assert plan_moves(f, shuffled, dict(reversed(list(load.items()))), pairs_on_links(shuffled)) == moves
        for m in moves:
            assert list(m.old) == routes[m.pair] and len(m.new) == len(m.old)
        apply_moves(f, table, moves)
    assert busiest == sorted(busiest, reverse=True)
    if start == "shortest":      # everything piled on the lowest ports: enough room to spread
        assert busiest[0] > 1 and busiest[-1] == 1


def test_adaptive_policy_table_is_the_start_of_the_decisions():
    f = fattree(4)
    table = routing.forwarding_table(f, "adaptive")
    hosts = [h.name for h in f.hosts]
    pairs = [(hosts[i], hosts[(i + 8) % 16]) for i in range(16)]
    routes, load, most = fattree_round(f, table, pairs)
    assert most == 3                         # ecmp's hash collisions
    moves = plan_moves(f, routes, load, pairs_on_links(routes))
    assert moves and adaptive.THRESHOLD == 0.9
    assert apply_moves(f, table, moves)
    assert all(routing.path(f, table, *m.pair) == list(m.new) for m in moves)
    assert fattree_round(f, table, pairs)[2] < most
