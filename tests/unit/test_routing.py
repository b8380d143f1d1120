"""Unit tests of the pure routing policies (emulator/routes/routing.py)."""
from __future__ import annotations

from collections import Counter, deque

import numpy as np
import pytest

from emulator.routes import routing
from emulator.fabric.graph import HOST_PORT
from emulator.fabric.mapping import hosts_for_ranks
from emulator.model.simulation import link_loads_per_step, max_flows_per_step, predict
from emulator.workloads.schedule import build_schedule
from emulator.fabric.topology import LinkProfile, bigraph, fattree, leafspine

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
        for port in table[s.name].values():
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
        routing.policy_record("")
    for name, record in routing.POLICIES.items():
        assert routing.policy_record(name) is record and record.name == name


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


# --- per-pair policies: bigraph, valiant, traffic-aware, adaptive ----------------------

def uniform_demands(fabric, nbytes=1000):
    return {(s.name, d.name): nbytes for s in fabric.hosts for d in fabric.hosts if s.name != d.name}


def table_for(fabric, policy, **kw):
    if policy == "traffic-aware" and "demands" not in kw:
        kw["demands"] = uniform_demands(fabric)
    return routing.forwarding_table(fabric, policy, **kw)


def check_arrives_without_loop(fabric, table):
    """Every pair's path is connected, crosses no switch twice and ends at
    its destination's downlink; returns the switch paths."""
    paths = routing.pair_paths(fabric, table)
    assert len(paths) == len(fabric.hosts) * (len(fabric.hosts) - 1)
    for (src, dst), switches in paths.items():
        hops = routing.path(fabric, table, src, dst)
        assert hops[0] == (src, HOST_PORT)
        for (node, port), (nxt, _) in zip(hops, hops[1:]):
            assert fabric.peer(node, port)[0] == nxt
        d = fabric.host(dst)
        assert hops[-1] == (d.switch, d.port)
        assert switches[0] == fabric.host(src).switch
        assert len(switches) == len(set(switches)), (src, dst, switches)
    return paths


PER_PAIR = ("valiant", "traffic-aware", "adaptive")


@pytest.mark.parametrize("policy", PER_PAIR)
@pytest.mark.parametrize("name", list(FABRICS))
def test_per_pair_policies_arrive_without_loops(name, policy):
    f = FABRICS[name]()
    table = table_for(f, policy)
    paths = check_arrives_without_loop(f, table)
    if policy != "valiant":     # the others only choose among shortest paths
        hops = {s.name: bfs_switch_hops(f, s.name) for s in f.switches}
        for (src, dst), switches in paths.items():
            assert len(switches) == hops[f.host(src).switch][f.host(dst).switch] + 1


@pytest.mark.parametrize("name", [n for n in FABRICS if n.startswith("bigraph")])
def test_bigraph_policy_arrives_shortest_without_loops(name):
    f = FABRICS[name]()
    table = routing.forwarding_table(f, "bigraph")
    tier = {s.name: s.tier for s in f.switches}
    for (src, dst), sp in check_arrives_without_loop(f, table).items():
        a, b = f.host(src).switch, f.host(dst).switch
        if a == b:
            assert sp == [a]
        elif tier[a] != tier[b]:
            assert sp == [a, b]               # the unique direct link
        else:
            assert len(sp) == 3 and tier[sp[1]] != tier[a]


@pytest.mark.parametrize("fabric", [fattree(4), leafspine(2, 2, 2), leafspine(1, 1, 3)], ids=lambda f: f.topology)
def test_bigraph_policy_needs_a_bigraph_fabric(fabric):
    with pytest.raises(ValueError, match="policy bigraph needs a BiGraph fabric"):
        routing.forwarding_table(fabric, "bigraph")


def test_bigraph_policy_by_hand_m2_n4():
    """h = 2 middles, m = 2: the four pairs of bgs0 -> bgs1 alternate over
    bgs2, bgs3 with c = src slot * 2 + dst slot; bgs1 -> bgs0 starts at bgs3."""
    f = bigraph(2, 4)      # upper bgs0 (bgh0,1), bgs1 (bgh2,3); lower bgs2 (bgh4,5), bgs3 (bgh6,7)
    table = routing.forwarding_table(f, "bigraph")

    def sp(s, d):
        return routing.switch_path(f, table, s, d)

    assert sp("bgh0", "bgh2") == ["bgs0", "bgs2", "bgs1"]
    assert sp("bgh0", "bgh3") == ["bgs0", "bgs3", "bgs1"]
    assert sp("bgh1", "bgh2") == ["bgs0", "bgs2", "bgs1"]
    assert sp("bgh1", "bgh3") == ["bgs0", "bgs3", "bgs1"]
    assert sp("bgh2", "bgh0") == ["bgs1", "bgs3", "bgs0"]
    assert sp("bgh3", "bgh1") == ["bgs1", "bgs2", "bgs0"]   # L(1,0) = 1, c = 3: (1 + 3) mod 2 = 0
    assert sp("bgh4", "bgh6") == ["bgs2", "bgs0", "bgs3"]
    assert sp("bgh0", "bgh5") == ["bgs0", "bgs2"]
    assert sp("bgh0", "bgh1") == ["bgs0"]


def test_bigraph_policy_by_hand_m2_n8():
    """h = 4 (even): the square of order 3 prolonged. L(0,1) = 3 (the
    transversal cell), L(0,2) = (0+2)/2 mod 3 = 1, L(0,3) = (2*0+1)/2 mod 3 = 2."""
    f = bigraph(2, 8)      # upper bgs0..3 (bgh0..7), lower bgs4..7
    table = routing.forwarding_table(f, "bigraph")

    def sp(s, d):
        return routing.switch_path(f, table, s, d)

    assert sp("bgh0", "bgh2") == ["bgs0", "bgs7", "bgs1"]    # middle 3 + c 0
    assert sp("bgh1", "bgh3") == ["bgs0", "bgs6", "bgs1"]    # (3 + 3) mod 4 = 2
    assert sp("bgh0", "bgh4") == ["bgs0", "bgs5", "bgs2"]    # 1 + 0
    assert sp("bgh0", "bgh6") == ["bgs0", "bgs6", "bgs3"]    # 2 + 0
    assert sp("bgh0", "bgh9") == ["bgs0", "bgs4"]


@pytest.mark.parametrize("h", range(2, 20))
def test_middle_square_rows_columns_and_middles(h):
    """Dropping the diagonal leaves every row and column one middle short
    and every middle used h-1 times: the property the balance rests on."""
    L = {(s, t): routing._middle_square(h, s, t) for s in range(h) for t in range(h) if s != t}
    for s in range(h):
        assert len({L[s, t] for t in range(h) if t != s}) == h - 1
        assert len({L[t, s] for t in range(h) if t != s}) == h - 1
    assert sorted(L.values()) == sorted(list(range(h)) * (h - 1))


@pytest.mark.parametrize("m,n", [(1, 4), (2, 4), (1, 8), (2, 8), (3, 8), (4, 8), (8, 8),
                                 (3, 6), (5, 6), (1, 10), (2, 12), (4, 16), (5, 16)])
def test_bigraph_policy_balances_all_to_all_inside_a_part(m, n):
    """All-to-all among the hosts of one part: every middle switch carries
    the same number of flows, and the links between the parts carry loads
    within one flow of each other ('shortest' piles them on one middle)."""
    f = bigraph(m, n)
    table = routing.forwarding_table(f, "bigraph")
    for tier in ("upper", "lower"):
        part = {s.name for s in f.switches if s.tier == tier}
        pairs = [(s, d) for s in f.hosts for d in f.hosts
                 if s.switch in part and d.switch in part and s.switch != d.switch]
        per_middle, per_link = Counter(), Counter()
        for s, d in pairs:
            hops = routing.path(f, table, s.name, d.name)
            per_middle[hops[2][0]] += 1
            per_link.update(hops[1:3])        # up to the middle, down from it
        middles = [s.name for s in f.switches if s.tier != tier]
        assert [per_middle[x] for x in middles] == [len(pairs) // len(middles)] * len(middles)
        between = [(a, p) for a in part for p, _ in f.switch_neighbours(a)] + \
                  [(x, p) for x in middles for p, nb in f.switch_neighbours(x) if nb in part]
        loads = [per_link[link] for link in between]
        assert max(loads) - min(loads) <= 1, (tier, sorted(loads))


@pytest.mark.parametrize("m,n", [(2, 8), (4, 8), (4, 16)])
def test_bigraph_policy_eases_naive_halving_doubling(m, n):
    """The EFLOPS effect seen from routing: with the naive mapping, a fixed
    middle switch piles 2m flows on a link; spreading same-part pairs over
    the middles lowers every step's busiest link. HDRM needs no middle."""
    f = bigraph(m, n)
    best = {}
    for mapping in ("naive", "hdrm"):
        hosts = hosts_for_ranks(f, mapping)
        sched = build_schedule("allreduce", "halving-doubling", len(hosts), 1 << 20)
        best[mapping] = {p: max_flows_per_step(f, routing.forwarding_table(f, p), sched, hosts)
                         for p in ("shortest", "bigraph")}
    assert all(b <= s for b, s in zip(best["naive"]["bigraph"], best["naive"]["shortest"]))
    assert max(best["naive"]["bigraph"]) < max(best["naive"]["shortest"])
    assert set(best["hdrm"]["bigraph"]) == {1}


# --- valiant ---------------------------------------------------------------------------

def test_cut_loops():
    route = [("h", 0), ("a", 1), ("b", 2), ("c", 3), ("b", 4), ("d", 5)]
    assert routing.cut_loops(route) == [("h", 0), ("a", 1), ("b", 4), ("d", 5)]
    assert routing.cut_loops(route[:3]) == route[:3]
    twice = [("h", 0), ("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("d", 6)]
    assert routing.cut_loops(twice) == [("h", 0), ("a", 3), ("c", 4), ("b", 5), ("d", 6)]


def test_valiant_route_by_hand():
    f = bigraph(2, 4)     # bgs0 ports: 1,2 hosts, 3 -> bgs2, 4 -> bgs3; bgs1: 3 -> bgs2, 4 -> bgs3
    # to bgs1 through bgs2, then back to bgs2: the loop bgs2 -> bgs1 -> bgs2 is cut
    assert routing.valiant_route(f, "bgh0", "bgh4", "bgs1") == [("bgh0", 0), ("bgs0", 3), ("bgs2", 1)]
    # to bgs1 through bgs2, then on to bgs3: a 4-switch detour
    assert routing.valiant_route(f, "bgh0", "bgh6", "bgs1") == \
        [("bgh0", 0), ("bgs0", 3), ("bgs2", 4), ("bgs1", 4), ("bgs3", 1)]
    # through the pair's own switches: the shortest route
    assert routing.valiant_route(f, "bgh0", "bgh2", "bgs0") == [("bgh0", 0), ("bgs0", 3), ("bgs2", 4), ("bgs1", 1)]
    ft = fattree(4)   # through a core of the other half: edge, agg, core, agg, edge
    sp = [n for n, _ in routing.valiant_route(ft, "bgh0", "bgh15", "bgs19")[1:]]
    assert [ft.switch(s).tier for s in sp] == ["edge", "agg", "core", "agg", "edge"] and sp[2] == "bgs19"


def test_valiant_is_deterministic_per_seed_and_differs_across_seeds():
    f = fattree(4)
    one = routing.pair_paths(f, routing.forwarding_table(f, "valiant"))
    assert one == routing.pair_paths(f, routing.forwarding_table(f, "valiant", seed=1))
    assert one == routing.pair_paths(f, routing.forwarding_table(fattree(4), "valiant", seed=1))
    two = routing.pair_paths(f, routing.forwarding_table(f, "valiant", seed=2))
    assert two == routing.pair_paths(f, routing.forwarding_table(f, "valiant", seed=2))
    assert sum(one[p] != two[p] for p in one) > len(one) // 4


def test_valiant_detours_on_bigraph():
    f = bigraph(2, 8)
    paths = routing.pair_paths(f, routing.forwarding_table(f, "valiant"))
    shortest = routing.pair_paths(f, routing.forwarding_table(f, "shortest"))
    assert sum(len(paths[p]) > len(shortest[p]) for p in paths) > len(paths) // 4


def test_valiant_spreads_over_the_cores_of_a_fattree():
    """A detour that goes up and comes back the same way loses its loop, so
    on a fat-tree valiant paths stay shortest, but through random cores."""
    f = fattree(4)
    paths = routing.pair_paths(f, routing.forwarding_table(f, "valiant"))
    shortest = routing.pair_paths(f, routing.forwarding_table(f, "shortest"))
    assert all(len(paths[p]) == len(shortest[p]) for p in paths)
    cores = {s for sp in paths.values() for s in sp if f.switch(s).tier == "core"}
    assert cores == {s.name for s in f.switches if s.tier == "core"}


# --- traffic-aware -----------------------------------------------------------------------

def test_traffic_aware_needs_demands():
    f = leafspine(2, 2, 2)
    with pytest.raises(ValueError, match="policy traffic-aware needs demands"):
        routing.forwarding_table(f, "traffic-aware")
    with pytest.raises(ValueError, match="bgh99"):
        routing.forwarding_table(f, "traffic-aware", demands={("bgh0", "bgh99"): 1})
    with pytest.raises(ValueError, match=">= 0"):
        routing.forwarding_table(f, "traffic-aware", demands={("bgh0", "bgh2"): -1})


def test_traffic_aware_by_hand_leafspine():
    """bgh0,1 on bgs0; bgh2,3 on bgs1; spines bgs2, bgs3. Largest first:
    bgh0->bgh2 (10) takes the first spine, bgh1->bgh3 (5) the empty one,
    bgh0->bgh3 (1) the one carrying 5 rather than 10. bgh1->bgh2 has no
    demand and keeps the shortest route."""
    f = leafspine(2, 2, 2)
    demands = {("bgh1", "bgh3"): 5, ("bgh0", "bgh3"): 1, ("bgh0", "bgh2"): 10, ("bgh2", "bgh2"): 7}
    table = routing.forwarding_table(f, "traffic-aware", demands=demands)

    def sp(s, d):
        return routing.switch_path(f, table, s, d)

    assert sp("bgh0", "bgh2") == ["bgs0", "bgs2", "bgs1"]
    assert sp("bgh1", "bgh3") == ["bgs0", "bgs3", "bgs1"]
    assert sp("bgh0", "bgh3") == ["bgs0", "bgs3", "bgs1"]
    assert sp("bgh1", "bgh2") == ["bgs0", "bgs2", "bgs1"]
    assert sp("bgh2", "bgh0") == ["bgs1", "bgs2", "bgs0"]


def max_flows_per_link(fabric, table, pairs):
    return max(Counter(link for s, d in pairs for link in routing.path(fabric, table, s, d)).values())


@pytest.mark.parametrize("stride", [1, 2, 4, 8])
def test_traffic_aware_beats_shortest_and_ecmp_on_a_fattree_permutation(stride):
    """Stride permutation (host i -> host i+stride) on a k=4 fat-tree:
    placing the pairs greedily leaves no directed link with two flows."""
    f = fattree(4)
    hosts = [h.name for h in f.hosts]
    pairs = [(hosts[i], hosts[(i + stride) % len(hosts)]) for i in range(len(hosts))]
    aware = routing.forwarding_table(f, "traffic-aware", demands={p: 1 << 20 for p in pairs})
    load = {p: max_flows_per_link(f, routing.forwarding_table(f, p), pairs) for p in ("shortest", "ecmp")}
    mine = max_flows_per_link(f, aware, pairs)
    assert mine <= load["shortest"] and mine <= load["ecmp"]
    assert mine == 1


def test_traffic_aware_weighs_links_by_rate():
    """Load is time on the link: a slower switch layer counts more, and with
    uneven demands the largest pair gets a link of its own."""
    f = leafspine(2, 3, 3, profile=LinkProfile(switch_rate_mbps=10))
    demands = {("bgh0", "bgh3"): 9, ("bgh1", "bgh4"): 5, ("bgh2", "bgh5"): 4, ("bgh0", "bgh4"): 3}
    table = routing.forwarding_table(f, "traffic-aware", demands=demands)
    spines = [routing.switch_path(f, table, s, d)[1] for s, d in demands]
    assert spines == ["bgs2", "bgs3", "bgs4", "bgs4"]   # 9 | 5 | 4+3 beats 5+3 and 9+3


def test_demands_from_schedule():
    """Ring allreduce on 4 ranks of 4000 bytes: each rank sends 6 chunks of
    1000 to the next. Ranks 2 and 3 share a host: their pair is loopback."""
    sched = build_schedule("allreduce", "ring", 4, 4000)
    hosts = ["bgh0", "bgh1", "bgh2", "bgh2"]
    assert routing.demands_from_schedule(sched, hosts) == {
        ("bgh0", "bgh1"): 6000, ("bgh1", "bgh2"): 6000, ("bgh2", "bgh0"): 6000}
    with pytest.raises(ValueError, match="3 hosts given for 4 ranks"):
        routing.demands_from_schedule(sched, hosts[:3])


def test_traffic_aware_from_a_schedule_runs_through_the_model():
    """Demands of naive halving-doubling on BiGraph: the placed routes keep
    the model working and never load a step's links more than 'shortest'."""
    f = bigraph(4, 8)
    hosts = hosts_for_ranks(f, "naive")
    sched = build_schedule("allreduce", "halving-doubling", len(hosts), 1 << 20)
    aware = routing.forwarding_table(f, "traffic-aware", demands=routing.demands_from_schedule(sched, hosts))
    shortest = routing.forwarding_table(f, "shortest")
    mine, base = (max_flows_per_step(f, t, sched, hosts) for t in (aware, shortest))
    assert all(a <= b for a, b in zip(mine, base)) and max(mine) < max(base)
    assert predict(f, aware, sched, hosts).time_s < predict(f, shortest, sched, hosts).time_s


# --- adaptive, per-pair tables ---------------------------------------------------------------

def test_adaptive_starts_as_ecmp():
    f = fattree(4)
    assert routing.forwarding_table(f, "adaptive") == routing.forwarding_table(f, "ecmp")


def test_per_pair_entry_falls_back_to_any_source():
    f = bigraph(2, 4)
    table = routing.forwarding_table(f, "bigraph")
    entry = table["bgs0"]["bgh3"]
    assert isinstance(entry, dict) and set(entry) == {routing.ANY_SOURCE, "bgh0", "bgh1"}
    assert routing.out_port(table, "bgs0", "bgh0", "bgh3") == entry["bgh0"]
    # a source the entry does not name takes the 'shortest' port
    shortest = routing.forwarding_table(f, "shortest")
    assert routing.out_port(table, "bgs0", "bgh6", "bgh3") == shortest["bgs0"]["bgh3"] == entry[routing.ANY_SOURCE]


def test_set_route_pins_one_pair_and_keeps_the_others():
    f = leafspine(4, 2, 2)
    table = routing.forwarding_table(f, "ecmp")
    before = routing.pair_paths(f, table)
    src, dst = "bgh0", "bgh2"
    other = [r for r in routing.ShortestRoutes(f).between(src, dst)
             if r != routing.path(f, table, src, dst)][0]
    changed = routing.set_route(f, table, src, dst, other)
    assert changed == ["bgs0"] and isinstance(table["bgs0"][dst], dict)
    assert routing.path(f, table, src, dst) == other
    after = routing.pair_paths(f, table)
    assert {p for p in before if before[p] != after[p]} == {(src, dst)}
    assert routing.set_route(f, table, src, dst, other) == []   # already there


def test_set_route_refuses_bad_routes():
    f = bigraph(2, 4)
    table = routing.forwarding_table(f, "shortest")
    with pytest.raises(ValueError, match="twice"):
        routing.set_route(f, table, "bgh0", "bgh4",
                          [("bgh0", 0), ("bgs0", 3), ("bgs2", 4), ("bgs1", 3), ("bgs2", 1)])
    with pytest.raises(ValueError, match="does not lead"):
        routing.set_route(f, table, "bgh0", "bgh4", [("bgh0", 0), ("bgs0", 4), ("bgs3", 1)])
    with pytest.raises(ValueError, match="starts with"):
        routing.set_route(f, table, "bgh0", "bgh4", [("bgs0", 3), ("bgs2", 1)])
    assert table == routing.forwarding_table(f, "shortest")


def test_shortest_routes_include_parallel_links():
    f = leafspine(2, 2, 1, uplinks=2)     # 2 spines x 2 links up x 2 links down
    routes = routing.ShortestRoutes(f).between("bgh0", "bgh1")
    assert len(routes) == 8 and len({tuple(r) for r in routes}) == 8
    assert routes[0] == routing.path(f, routing.forwarding_table(f, "shortest"), "bgh0", "bgh1")


@pytest.mark.parametrize("policy", ["bigraph", "valiant", "traffic-aware", "adaptive"])
def test_model_follows_per_pair_tables(policy):
    """The model routes every flow with routing.path, so its link loads are
    the per-pair paths of the table."""
    f = bigraph(2, 4)
    hosts = [h.name for h in f.hosts]
    sched = build_schedule("all-to-all", "ring", len(hosts), 8000)
    table = table_for(f, policy)
    loads = link_loads_per_step(f, table, sched, hosts)
    expected = Counter()
    for rank, steps in enumerate(sched.steps):
        for t in steps[0].sends:
            if t.nbytes and hosts[rank] != hosts[t.peer]:
                expected.update(routing.path(f, table, hosts[rank], hosts[t.peer]))
    assert loads[0] == dict(expected)
    assert predict(f, table, sched, hosts).time_s > 0


def test_table_from_switch_paths_reproduces_every_route():
    fabric = fattree(4)
    for policy in ("ecmp", "spread"):
        table = routing.forwarding_table(fabric, policy)
        paths = routing.pair_paths(fabric, table)
        rebuilt = routing.table_from_switch_paths(fabric, paths)
        assert routing.pair_paths(fabric, rebuilt) == paths


@pytest.mark.parametrize("topology", ["bigraph:m=2,n=6", "fattree:k=4", "fattree:k=6", "leafspine:leaves=4,spines=3,hosts=2"])
@pytest.mark.parametrize("policy", ["shortest", "spread", "ecmp", "adaptive"])
def test_the_model_table_holds_the_full_tables_entries(topology, policy):
    from emulator.fabric.topology import build
    fabric = build(topology)
    full = routing.forwarding_table(fabric, policy)
    lazy = routing.model_table(fabric, policy)
    assert isinstance(lazy, routing.HopTable)
    for switch, row in full.items():
        assert {dst: lazy[switch][dst] for dst in row} == row


@pytest.mark.parametrize("topology", ["bigraph:m=2,n=6", "bigraph:m=3,n=4", "fattree:k=4", "fattree:k=6",
                                      "leafspine:leaves=4,spines=3,hosts=2", "leafspine:leaves=5,spines=2,hosts=3"])
@pytest.mark.parametrize("policy", ["shortest", "spread", "ecmp"])
def test_the_model_tables_paths_at_once_are_path_pair_by_pair(topology, policy):
    from emulator.fabric.topology import build
    fabric = build(topology)
    table = routing.model_table(fabric, policy)
    pairs = [(a, b) for a in range(len(fabric.hosts)) for b in range(len(fabric.hosts)) if a != b]
    switch, port = table.paths([a for a, _ in pairs], [b for _, b in pairs])
    for (a, b), sw, pt in zip(pairs, switch.tolist(), port.tolist()):
        hops = [(table.names[s], p) for s, p in zip(sw, pt) if s >= 0]
        src, dst = fabric.hosts[a].name, fabric.hosts[b].name
        assert [(src, routing.HOST_PORT)] + hops == routing.path(fabric, table, src, dst)
        assert all(s < 0 for s in sw[len(hops):])
    assert [a.shape for a in table.paths([], [])] == [(0, 0), (0, 0)]
    assert table.paths([0], [0])[1].tolist() == [[fabric.hosts[0].port]]   # one host: its own downlink


def test_the_model_table_of_other_policies_is_the_full_table():
    fabric = bigraph(2, 4)
    assert routing.model_table(fabric, "bigraph") == routing.forwarding_table(fabric, "bigraph")


def test_ecmp_hashes_at_once_are_ecmp_hash_pair_by_pair():
    hosts = [f"bgh{i}" for i in range(1200)] + ["h", "a-much-longer-host-name", "hôte"]
    switches = [f"bgs{i}" for i in range(150)] + ["s", "spine-switch-07"]
    rng = np.random.default_rng(4)
    src, dst, via = (rng.integers(0, len(names), 3000) for names in (hosts, hosts, switches))
    hashes = routing.EcmpHashes(hosts, switches)(src, dst, via)
    assert hashes.tolist() == [routing.ecmp_hash(hosts[a], hosts[b], switches[w])
                               for a, b, w in zip(src.tolist(), dst.tolist(), via.tolist())]
