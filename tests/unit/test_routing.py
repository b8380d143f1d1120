"""Unit tests of the pure routing policies (controller/routing.py)."""
from __future__ import annotations

from collections import deque

import pytest

from controller import routing
from emulator.fabric import HOST_PORT
from emulator.topology import bigraph, fattree, leafspine

POLICIES = ("shortest", "spread")

FABRICS = {
    "bigraph:m=2,n=4": lambda: bigraph(2, 4),
    "bigraph:m=2,n=8": lambda: bigraph(2, 8),
    "bigraph:m=4,n=8": lambda: bigraph(4, 8),
    "bigraph:m=1,n=8": lambda: bigraph(1, 8),
    "bigraph:m=5,n=6": lambda: bigraph(5, 6),       # oversubscribed, n/2 odd
    "bigraph:m=1,n=2": lambda: bigraph(1, 2),
    "fattree:k=4": lambda: fattree(4),
    "fattree:k=2": lambda: fattree(2),
    "leafspine:4,2,2": lambda: leafspine(4, 2, 2),
    "leafspine:3,3,2,uplinks=2": lambda: leafspine(3, 3, 2, 2),
    "leafspine:1,1,3": lambda: leafspine(1, 1, 3),
}


def bfs_switch_hops(fabric, start):
    """Independent BFS over switch-switch links (not routing._hops_to)."""
    adj = {s.name: set() for s in fabric.switches}
    for l in fabric.links:
        if l.kind == "switch":
            adj[l.a].add(l.b)
            adj[l.b].add(l.a)
    dist = {start: 0}
    q = deque([start])
    while q:
        s = q.popleft()
        for nb in adj[s]:
            if nb not in dist:
                dist[nb] = dist[s] + 1
                q.append(nb)
    return dist


def all_paths(fabric, table):
    for src in fabric.hosts:
        for dst in fabric.hosts:
            if src.name != dst.name:
                yield src, dst, routing.path(fabric, table, src.name, dst.name)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", list(FABRICS))
def test_every_path_is_valid_and_shortest(name, policy):
    f = FABRICS[name]()
    table = routing.forwarding_table(f, policy)
    # a complete table: every switch has an output port for every host
    assert set(table) == {s.name for s in f.switches}
    for s in f.switches:
        assert set(table[s.name]) == {h.name for h in f.hosts}
        for dst, port in table[s.name].items():
            assert port in f.ports(s.name)
    hops = {s.name: bfs_switch_hops(f, s.name) for s in f.switches}
    for src, dst, p in all_paths(f, table):
        assert p[0] == (src.name, HOST_PORT)
        # hops are connected: each egress leads to the next node on the path
        for (node, port), (nxt, _) in zip(p, p[1:]):
            assert f.peer(node, port)[0] == nxt
        last_node, last_port = p[-1]
        assert f.peer(last_node, last_port)[0] == dst.name
        assert last_node == dst.switch and last_port == dst.port
        switches = routing.switch_path(f, table, src.name, dst.name)
        assert switches == [node for node, _ in p[1:]]
        assert all(f.is_switch(s) for s in switches)
        assert len(switches) == len(set(switches)), "no loops"
        assert len(switches) == hops[src.switch][dst.switch] + 1, (src.name, dst.name, switches)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("m,n", [(2, 4), (2, 8), (4, 8), (1, 8), (6, 8), (3, 6), (4, 16)])
def test_bigraph_path_lengths(m, n, policy):
    f = bigraph(m, n)
    table = routing.forwarding_table(f, policy)
    part = {s.name: s.tier for s in f.switches}
    for src, dst, _ in all_paths(f, table):
        sp = routing.switch_path(f, table, src.name, dst.name)
        assert sp[0] == src.switch and sp[-1] == dst.switch
        if src.switch == dst.switch:
            assert len(sp) == 1
        elif part[src.switch] != part[dst.switch]:
            assert len(sp) == 2            # the unique direct link
        else:
            assert len(sp) == 3            # through one switch of the other part
            assert part[sp[1]] != part[src.switch]


@pytest.mark.parametrize("m,n", [(2, 4), (2, 8), (4, 8), (1, 8), (8, 8), (3, 6), (4, 16)])
def test_bigraph_shortest_uses_one_fixed_middle_switch(m, n):
    """'shortest': all destinations on one same-part switch are reached
    through the same middle switch (the lowest-numbered port)."""
    f = bigraph(m, n)
    table = routing.forwarding_table(f, "shortest")
    half = n // 2
    for part in (f.switches[:half], f.switches[half:]):
        other = f.switches[half:] if part[0].tier == "upper" else f.switches[:half]
        for s in part:
            for t in part:
                if s is t:
                    continue
                middles = {routing.switch_path(f, table, src.name, dst.name)[1]
                           for src in f.hosts_on(s.name) for dst in f.hosts_on(t.name)}
                # one middle switch: the first of the other part (lowest port)
                assert middles == {other[0].name}


@pytest.mark.parametrize("m,n", [(2, 4), (2, 8), (4, 8), (1, 8), (8, 8), (3, 6), (4, 16), (8, 16)])
def test_bigraph_spread_uses_all_middle_switches(m, n):
    """'spread' uses all n/2 middle switches across destinations: from every
    source switch over all same-part destinations (when it has at least n/2
    of them), and between one switch pair min(m, n/2) of them."""
    f = bigraph(m, n)
    table = routing.forwarding_table(f, "spread")
    half = n // 2
    used_total = {}
    for part in (f.switches[:half], f.switches[half:]):
        other = {o.name for o in (f.switches[half:] if part[0].tier == "upper" else f.switches[:half])}
        for s in part:
            used_from_s = set()
            for t in part:
                if s is t:
                    continue
                middles = {routing.switch_path(f, table, src.name, dst.name)[1]
                           for src in f.hosts_on(s.name) for dst in f.hosts_on(t.name)}
                assert middles <= other
                assert len(middles) == min(m, half), (s.name, t.name, middles)
                used_from_s |= middles
            if m * (half - 1) >= half:
                assert used_from_s == other, s.name
            used_total.setdefault(part[0].tier, set()).update(used_from_s)
        if half > 1:
            assert used_total[part[0].tier] == other


def test_spread_route_independent_of_source_host():
    """Forwarding is by destination only: hosts on one switch share routes."""
    f = bigraph(4, 8)
    for policy in POLICIES:
        table = routing.forwarding_table(f, policy)
        for dst in f.hosts:
            for s in f.switches:
                srcs = [h for h in f.hosts_on(s.name) if h.name != dst.name]
                paths = {tuple(routing.path(f, table, h.name, dst.name)[1:]) for h in srcs}
                assert len(paths) == 1


@pytest.mark.parametrize("policy", POLICIES)
def test_fattree_paths_up_then_down(policy):
    f = fattree(4)
    table = routing.forwarding_table(f, policy)
    level = {"edge": 0, "agg": 1, "core": 2}
    tier = {s.name: s.tier for s in f.switches}
    pod = {s.name: s.index // 2 for s in f.switches if s.tier != "core"}
    lengths = set()
    for src, dst, _ in all_paths(f, table):
        sp = routing.switch_path(f, table, src.name, dst.name)
        lengths.add(len(sp))
        assert len(sp) <= 5
        assert tier[sp[0]] == "edge" and tier[sp[-1]] == "edge"
        lv = [level[tier[s]] for s in sp]
        top = lv.index(max(lv))
        # strictly up to the top, then strictly down
        assert all(a + 1 == b for a, b in zip(lv[:top], lv[1:top + 1])), lv
        assert all(a - 1 == b for a, b in zip(lv[top:], lv[top + 1:])), lv
        if src.switch == dst.switch:
            assert len(sp) == 1
        elif pod[src.switch] == pod[dst.switch]:
            assert len(sp) == 3 and tier[sp[1]] == "agg"
        else:
            assert len(sp) == 5 and tier[sp[2]] == "core"
    assert lengths == {1, 3, 5}


def cores_used(f, policy):
    """The core switches some inter-pod path crosses, and all cores."""
    table = routing.forwarding_table(f, policy)
    used = {sp[2] for src, dst, _ in all_paths(f, table)
            if len(sp := routing.switch_path(f, table, src.name, dst.name)) == 5}
    return used, {s.name for s in f.switches if s.tier == "core"}


def test_fattree_shortest_uses_few_cores():
    used, cores = cores_used(fattree(4), "shortest")
    assert used and len(used) < len(cores)


@pytest.mark.parametrize("k", [4, 6])
def test_fattree_spread_uses_every_core(k):
    used, cores = cores_used(fattree(k), "spread")
    assert used == cores


@pytest.mark.parametrize("policy", POLICIES)
def test_leafspine_paths(policy):
    f = leafspine(4, 3, 2, uplinks=2)
    table = routing.forwarding_table(f, policy)
    tier = {s.name: s.tier for s in f.switches}
    spines_used = set()
    for src, dst, _ in all_paths(f, table):
        sp = routing.switch_path(f, table, src.name, dst.name)
        if src.switch == dst.switch:
            assert len(sp) == 1
        else:
            assert len(sp) == 3 and tier[sp[1]] == "spine"
            spines_used.add(sp[1])
    assert len(spines_used) == (3 if policy == "spread" else 1)


def test_unknown_policy():
    f = bigraph(2, 4)
    with pytest.raises(ValueError, match=r"unknown routing policy 'wcmp'.*shortest.*spread.*ecmp"):
        routing.forwarding_table(f, "wcmp")
    with pytest.raises(ValueError, match="unknown routing policy"):
        routing.check_policy("")
    for p in POLICIES:
        routing.check_policy(p)


def test_default_policy_is_shortest():
    f = bigraph(2, 8)
    assert routing.forwarding_table(f) == routing.forwarding_table(f, "shortest")


# --- ecmp ------------------------------------------------------------------------------

def test_ecmp_paths_are_shortest_and_deterministic():
    f = leafspine(8, 4, 4)
    table = routing.forwarding_table(f, "ecmp")
    again = routing.forwarding_table(f, "ecmp")
    for src in f.hosts:
        for dst in f.hosts:
            if src.name == dst.name:
                continue
            hops = routing.switch_path(f, table, src.name, dst.name)
            assert hops == routing.switch_path(f, again, src.name, dst.name)
            assert len(hops) == (1 if src.switch == dst.switch else 3)


def test_ecmp_hashes_pairs_onto_every_spine_and_collides():
    """Flow hashing uses all spines, but not evenly: some leaf uplink carries
    two pairs' flows toward one destination leaf while another carries none."""
    f = leafspine(8, 4, 4)
    table = routing.forwarding_table(f, "ecmp")
    leaves = [s.name for s in f.switches if s.tier == "leaf"]
    collided = 0
    for a in leaves:
        for b in leaves:
            if a != b:   # host i of leaf a talks to host i of leaf b: 4 flows, 4 spines
                spines = [routing.switch_path(f, table, s.name, d.name)[1]
                          for s, d in zip(f.hosts_on(a), f.hosts_on(b))]
                collided += len(set(spines)) < len(spines)
    assert collided > 0
    all_spines = {routing.switch_path(f, table, s.name, d.name)[1] for s in f.hosts for d in f.hosts
                  if s.switch != d.switch}
    assert all_spines == {s.name for s in f.switches if s.tier == "spine"}


def test_ecmp_choice_depends_on_the_source():
    f = bigraph(4, 8)
    table = routing.forwarding_table(f, "ecmp")
    middles = {routing.switch_path(f, table, src.name, "bgh4")[1] for src in f.hosts_on("bgs0")}
    assert len(middles) > 1       # same destination, different sources, different middles
    assert isinstance(table["bgs0"]["bgh4"], tuple) and isinstance(table["bgs0"]["bgh16"], int)
