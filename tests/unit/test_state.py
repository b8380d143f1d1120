"""Unit tests of the controller's routing state (controller/state.py)."""
from __future__ import annotations

from emulator.routes.routing import path, switch_path
from emulator.routes.rules import FlowRule
from emulator.routes.state import RouteState, link_loads, rule_changes
from emulator.fabric.topology import bigraph, fattree


def cross_link(fabric):
    return next(l for l in fabric.links if l.kind == "switch")


def test_a_failed_link_is_routed_around_and_restored():
    fabric = bigraph(2, 4)
    state = RouteState(fabric, "shortest")
    link = cross_link(fabric)
    users = [(a.name, b.name) for a in fabric.hosts for b in fabric.hosts
             if a.name != b.name and (link.a, link.a_port) in path(fabric, state.table, a.name, b.name)]
    assert users
    before = {s.name: state.rules(s.name) for s in fabric.switches}
    assert state.port_changed(link.a, link.a_port, up=False)
    assert not state.port_changed(link.b, link.b_port, up=False)   # the other end of the same failure
    for a, b in users:
        route = path(state.fabric, state.table, a, b)
        assert (link.a, link.a_port) not in route and route[-1][0] in {s.name for s in fabric.switches}
    assert any(state.rules(s) != before[s] for s in before)
    assert state.port_changed(link.a, link.a_port, up=True)
    assert {s.name: state.rules(s.name) for s in fabric.switches} == before


def test_bigraph_policy_falls_back_when_a_direct_link_is_gone():
    fabric = bigraph(2, 4)
    state = RouteState(fabric, "bigraph")
    link = cross_link(fabric)
    assert state.port_changed(link.a, link.a_port, up=False)
    assert "bigraph cannot route" in state.fallback
    a = next(h for h in fabric.hosts if h.switch == link.a)
    b = next(h for h in fabric.hosts if h.switch == link.b)
    assert len(switch_path(state.fabric, state.table, a.name, b.name)) == 4   # the detour through the other part


def test_host_ports_do_not_reroute():
    fabric = fattree(4)
    state = RouteState(fabric, "ecmp")
    h = fabric.hosts[0]
    assert not state.port_changed(h.switch, h.port, up=False)


def test_rule_changes_touch_only_what_differs():
    keep, old, new = FlowRule(100, "a", 1), FlowRule(100, "b", 2), FlowRule(100, "b", 3)
    assert rule_changes({keep, new}, {keep, old}) == ([old], [new])
    assert rule_changes({keep}, {keep}) == ([], [])


def test_link_loads_from_switch_port_rates():
    fabric = bigraph(2, 4)
    h = fabric.hosts[0]
    link = cross_link(fabric)
    load = link_loads(fabric, {(h.switch, h.port): 10.0, (link.a, link.a_port): 20.0}, {(h.switch, h.port): 5.0})
    assert load == {(h.switch, h.port): 10.0, (h.name, 0): 5.0, (link.a, link.a_port): 20.0}


def test_adaptive_moves_pairs_off_a_hot_link():
    fabric = fattree(4)
    state = RouteState(fabric, "adaptive")
    pairs = [(fabric.hosts[i].name, fabric.hosts[i + 8].name) for i in range(8)]
    routes = {p: path(state.fabric, state.table, *p) for p in pairs}
    # every switch-switch link the pairs cross is loaded at line rate
    rate = fabric.links[0].rate_mbps * 1e6 / 8
    hot = {hop: rate for r in routes.values() for hop in r[1:-1]}
    moves, switches = state.move({p: rate for p in pairs}, hot)
    assert moves and switches
    for m in moves:
        assert path(state.fabric, state.table, *m.pair) == list(m.new)
