"""Unit tests of the adaptive (Hedera-style) routing decisions
(emulator/routes/adaptive.py) and of the controller's counter readings they
are made from (emulator/routes/readings.py), without os-ken."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import fields

import pytest

from emulator.records.links import PORT_READING_COLUMNS
from emulator.routes import adaptive, routing
from emulator.routes import readings as readings_module
from emulator.routes.adaptive import Move, apply_moves, capacities, pairs_on_links, plan_moves
from emulator.routes.readings import PortReading, Readings, adapt
from emulator.routes.state import RouteState
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


# --- the controller's readings: counters at given times in, moves out (emulator/routes/readings.py) -----

class Switches:
    """The counters OVS keeps while pairs send along the routes of `state`:
    port bytes only grow; a flow rule counts the bytes it forwarded since it
    was installed, so a rule the controller replaces starts from zero (rules
    that stay the same keep counting). They answer stats requests as the app
    passes them on: (port, tx, rx, dropped) and (source ip, destination ip,
    bytes) per rule."""

    def __init__(self, state):
        self.state = state
        self.tx, self.rx, self.rule_bytes = Counter(), Counter(), Counter()

    def send(self, rates, seconds):
        f = self.state.fabric
        for (src, dst), rate in rates.items():
            for node, port in routing.path(f, self.state.table, src, dst):
                peer, peer_port, _ = f.peer(node, port)
                self.tx[(node, port)] += rate * seconds
                self.rx[(peer, peer_port)] += rate * seconds
                if f.is_switch(node):
                    self.rule_bytes[(node, self._rule(node, src, dst))] += rate * seconds

    def _rule(self, switch, src, dst):
        """The rule that forwards the pair: its per-pair rule, else its destination's."""
        src_ip, dst_ip = self.state.fabric.host(src).ip, self.state.fabric.host(dst).ip
        return max((r for r in self.state.rules(switch) if r.ipv4_dst == dst_ip and r.ipv4_src in (src_ip, None)),
                   key=lambda r: r.priority)

    def answer(self, readings, now):
        """Every switch answers a port and a flow stats request at `now`,
        with every port it was built with (those of links that are down too)."""
        f = self.state.full
        for s in (s.name for s in f.switches):
            readings.read_ports(s, now, [(p, self.tx[(s, p)], self.rx[(s, p)], 0) for p in f.ports(s)])
            readings.read_pairs(s, now, [(r.ipv4_src, r.ipv4_dst, self.rule_bytes[(s, r)])
                                         for r in self.state.rules(s)])


@pytest.fixture
def ecmp_collision():
    """leafspine(2,2,2) with "adaptive": ecmp hashes bgh0 -> bgh2 and
    bgh1 -> bgh2 both onto leaf bgs0's uplink to spine bgs3 (port 4), where
    bgs0 holds a per-pair rule for each."""
    f = leafspine(2, 2, 2)
    state = RouteState(f, "adaptive")
    for src in ("bgh0", "bgh1"):
        assert routing.path(f, state.table, src, "bgh2")[1:3] == [("bgs0", 4), ("bgs3", 2)]
    return f, state, Readings(f), Switches(state)


HALF_EACH = {("bgh0", "bgh2"): LINE / 2, ("bgh1", "bgh2"): LINE / 2}   # the uplink full


def test_port_readings_are_controller_ports_rows():
    f = leafspine(2, 2, 2)
    readings = Readings(f)
    local = 0xfffffffe   # OFPP_LOCAL: the bridge's own port, not a fabric link
    rows = readings.read_ports("bgs0", 1.5, [(3, 10, 20, 0), (local, 7, 7, 0), (9, 1, 1, 0), (1, 30, 40, 2)])
    assert [r.port for r in rows] == [3, 1]
    assert [r.csv_line() for r in rows] == ["1.500000,bgs0,3,10,20,0\n", "1.500000,bgs0,1,30,40,2\n"]
    assert [field.name for field in fields(PortReading)] == PORT_READING_COLUMNS
    assert rows[0] == PortReading(1.5, "bgs0", 3, 10, 20, 0)


def test_port_rates_between_the_last_two_readings():
    readings = Readings(leafspine(2, 2, 2))
    readings.read_ports("bgs0", 10.0, [(3, 1000, 500, 0)])
    assert readings.port_rates() == ({}, {})                 # a first reading is no rate
    readings.read_ports("bgs0", 10.5, [(3, 6000, 1500, 0)])
    assert readings.port_rates() == ({("bgs0", 3): 10000.0}, {("bgs0", 3): 2000.0})
    readings.read_ports("bgs0", 11.5, [(3, 6000, 3500, 0)])  # only the last two count
    assert readings.port_rates() == ({("bgs0", 3): 0.0}, {("bgs0", 3): 2000.0})


def test_pair_rates_from_per_pair_rules():
    f = leafspine(2, 2, 2)
    readings = Readings(f)
    a, b, c = (f.host(h).ip for h in ("bgh0", "bgh2", "bgh3"))
    readings.read_pairs("bgs0", 1.0, [(a, b, 1000)])
    assert readings.pair_rates() == {("bgh0", "bgh2"): 0.0}  # seen, but a first reading is no rate
    readings.read_pairs("bgs0", 1.5, [(a, b, 6000)])
    assert readings.pair_rates() == {("bgh0", "bgh2"): 10000.0}
    readings.read_pairs("bgs0", 2.0, [(a, b, 500)])          # the rule was reinstalled: it counts from zero
    assert readings.pair_rates() == {("bgh0", "bgh2"): 0.0}
    readings.read_pairs("bgs0", 2.5, [(a, b, 3500)])         # ... and from the new count on
    assert readings.pair_rates() == {("bgh0", "bgh2"): 6000.0}
    # a pair's rate is the most any of its switches counted
    readings.read_pairs("bgs1", 2.0, [(a, b, 0), (a, c, 0)])
    readings.read_pairs("bgs1", 2.5, [(a, b, 4000), (a, c, 100)])
    assert readings.pair_rates() == {("bgh0", "bgh2"): 8000.0, ("bgh0", "bgh3"): 200.0}


def test_flow_entries_of_no_pair_are_left_out():
    """Destination rules and the table-miss rule name no source; an address
    outside the fabric is no host."""
    f = leafspine(2, 2, 2)
    readings = Readings(f)
    a, b = f.host("bgh0").ip, f.host("bgh2").ip
    for n in (1000, 2000):
        readings.read_pairs("bgs0", n / 1000, [(None, b, n), (None, None, n), ("10.0.0.1", b, n), (a, "10.0.0.2", n)])
    assert readings.pair_rates() == {}


def test_readings_at_the_same_instant_do_not_divide_by_zero():
    f = leafspine(2, 2, 2)
    readings = Readings(f)
    a, b = f.host("bgh0").ip, f.host("bgh2").ip
    for count in (0, 1):
        readings.read_pairs("bgs0", 3.0, [(a, b, count)])
        readings.read_ports("bgs0", 3.0, [(3, count, count, 0)])
    assert readings.pair_rates()[("bgh0", "bgh2")] == 1e6
    assert readings.port_rates()[0][("bgs0", 3)] == 1e6


def test_adapt_moves_a_pair_off_a_full_uplink(ecmp_collision):
    f, state, readings, switches = ecmp_collision
    switches.send(HALF_EACH, 0.5)
    switches.answer(readings, 100.0)
    assert adapt(state, readings) == ([], [])     # a first reading is no rate: nothing to decide on
    switches.send(HALF_EACH, 0.5)
    switches.answer(readings, 100.5)
    moves, changed = adapt(state, readings)
    assert moves == [Move(("bgh0", "bgh2"),
                          old=(("bgh0", 0), ("bgs0", 4), ("bgs3", 2), ("bgs1", 1)),
                          new=(("bgh0", 0), ("bgs0", 3), ("bgs2", 2), ("bgs1", 1)))]
    assert changed == ["bgs0"]                    # only the leaf's rules change
    assert routing.path(f, state.table, "bgh0", "bgh2") == list(moves[0].new)
    assert moves[0].event() == {"pair": ["bgh0", "bgh2"],
                                "old": [["bgh0", 0], ["bgs0", 4], ["bgs3", 2], ["bgs1", 1]],
                                "new": [["bgh0", 0], ["bgs0", 3], ["bgs2", 2], ["bgs1", 1]]}
    json.dumps(moves[0].event())


def test_after_a_move_the_replaced_rule_counts_from_zero(ecmp_collision):
    """The move gives bgs0 a new (pinned) rule for bgh1 -> bgh2: its first
    reading counts nothing. With the pairs on their own spines, nothing
    moves again."""
    f, state, readings, switches = ecmp_collision
    for now in (0.5, 1.0):
        switches.send(HALF_EACH, 0.5)
        switches.answer(readings, now)
    (move,), _ = adapt(state, readings)
    for now in (1.5, 2.0):
        switches.send(HALF_EACH, 0.5)
        switches.answer(readings, now)
        rates = readings.pair_rates()
        assert rates[("bgh1", "bgh2")] == (0.0 if now == 1.5 else LINE / 2)
        assert adapt(state, readings) == ([], [])
    assert readings.port_rates()[0][("bgs0", 3)] == readings.port_rates()[0][("bgs0", 4)] == LINE / 2
    assert routing.path(f, state.table, *move.pair) == list(move.new)


def test_adapt_moves_nothing_below_the_threshold(ecmp_collision):
    f, state, readings, switches = ecmp_collision
    for now in (1.0, 2.0):
        switches.send({("bgh0", "bgh2"): 0.45 * LINE, ("bgh1", "bgh2"): 0.45 * LINE}, 1.0)   # 0.9 of the rate
        switches.answer(readings, now)
    assert adapt(state, readings) == ([], [])


def test_adapt_moves_no_idle_pair(ecmp_collision):
    """A full uplink moves no pair that sends at most ACTIVE_BYTES_PER_S:
    with no pair sending, there is nothing to move."""
    f, state, readings, switches = ecmp_collision
    idle = dict.fromkeys(HALF_EACH, readings_module.ACTIVE_BYTES_PER_S)
    for now in (1.0, 2.0):
        switches.send(idle, 1.0)
        switches.tx[("bgs0", 4)] += LINE   # the uplink full all the same
        switches.answer(readings, now)
    assert readings.port_rates()[0][("bgs0", 4)] > LINE
    assert adapt(state, readings) == ([], [])


def test_adapt_with_a_link_down_decides_on_the_links_that_are_up():
    """The port of a link that is down is still read; the decision leaves it
    out and moves pairs over the links that are left."""
    f = leafspine(2, 3, 2)
    state, readings = RouteState(f, "adaptive"), Readings(f)
    switches = Switches(state)
    switches.answer(readings, 0.0)
    assert state.port_changed("bgs0", 3, up=False)   # bgs0-bgs2; ecmp on the rest hashes both pairs onto bgs4
    for now in (1.0, 2.0):
        switches.send(HALF_EACH, 1.0)
        switches.answer(readings, now)
    assert ("bgs0", 3) in readings.port_rates()[0]
    moves, changed = adapt(state, readings)
    assert [(m.pair, m.old[1], m.new[1]) for m in moves] == [(("bgh0", "bgh2"), ("bgs0", 5), ("bgs0", 4))]
    assert changed == ["bgs0"]


@pytest.mark.parametrize("stride", [4, 8])
def test_adapt_on_a_fattree_permutation(stride):
    """Pairs of a stride permutation on a k=4 fat-tree, read twice: moved
    pairs follow their new routes, the switches come in name order, and the
    same readings give the same decision."""
    f = fattree(4)
    hosts = [h.name for h in f.hosts]
    rates = {(hosts[i], hosts[(i + stride) % len(hosts)]): 0.5 * LINE for i in range(len(hosts))}
    decisions = []
    for _ in range(2):
        state, readings = RouteState(f, "adaptive"), Readings(f)
        switches = Switches(state)
        for now in (1.0, 2.0):
            switches.send(rates, 1.0)
            switches.answer(readings, now)
        decisions.append(adapt(state, readings))
        moves, changed = decisions[-1]
        assert moves and changed == sorted(changed)
        assert all(routing.path(f, state.table, *m.pair) == list(m.new) for m in moves)
    assert decisions[0] == decisions[1]
