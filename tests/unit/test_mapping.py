"""Unit tests of rank mappings (emulator/fabric/mapping.py), including THE property
the project rests on (docs/eflops.md, "Halving-doubling and HDRM"):

    On every supported BiGraph shape, with the "hdrm" mapping and the
    halving-doubling allreduce, every exchange crosses between the two parts
    and, at every step, each directed switch-switch link carries at most one
    flow.
"""
from __future__ import annotations

import math
from collections import Counter

import pytest

from emulator.routes import routing
from emulator.fabric.mapping import MAPPINGS, hdrm_switch_slot, hosts_for_ranks, place, rank_nodes
from emulator.fabric.nodes import NodeShape
from emulator.workloads.schedule import build_schedule
from emulator.fabric.topology import bigraph, build, fattree, leafspine


def supported_shapes():
    """All even n in 2..64 and m in 1..n/2 with n*m a power of two."""
    shapes = []
    for n in range(2, 65, 2):
        for m in range(1, n // 2 + 1):
            p = n * m
            if p & (p - 1) == 0:
                shapes.append((m, n))
    return shapes


SHAPES = supported_shapes()


def test_supported_shapes_enumeration():
    # n must itself be a power of two, m a power of two <= n/2
    assert len(SHAPES) == 21
    assert (1, 2) in SHAPES and (2, 4) in SHAPES and (4, 8) in SHAPES and (32, 64) in SHAPES
    assert (2, 6) not in SHAPES and (3, 8) not in SHAPES and (8, 8) not in SHAPES


def step_loads(fabric, table, hosts, schedule, switch_links_only=True):
    """For each step index k: Counter of flows per directed link (node, egress
    port) over all ranks' k-th step sends."""
    cache = {}

    def links(src, dst):
        key = (src, dst)
        if key not in cache:
            hops = routing.path(fabric, table, src, dst)   # NIC egress, then one per switch
            if switch_links_only:
                hops = [(node, port) for node, port in hops
                        if fabric.is_switch(node) and fabric.is_switch(fabric.peer(node, port)[0])]
            cache[key] = hops
        return cache[key]

    nsteps = {len(s) for s in schedule.steps}
    assert len(nsteps) == 1, "power-of-two halving-doubling: every rank has the same steps"
    loads = []
    for k in range(nsteps.pop()):
        c = Counter()
        for r, steps in enumerate(schedule.steps):
            for t in steps[k].sends:
                c.update(links(hosts[r], hosts[t.peer]))
        loads.append(c)
    return loads


def check_hdrm_property(m, n, policy="shortest", size=1 << 20):
    f = bigraph(m, n)
    p = m * n
    hosts = hosts_for_ranks(f, "hdrm", p)
    assert sorted(hosts) == sorted(h.name for h in f.hosts), "hdrm must be a permutation"
    tier = {h.name: f.switch(h.switch).tier for h in f.hosts}
    s = build_schedule("allreduce", "halving-doubling", p, size)
    d = p.bit_length() - 1
    for r in range(p):
        assert len(s.steps[r]) == 2 * d
        for step in s.steps[r]:
            for t in step.sends + step.recvs:
                # partners in opposite parts: one on an upper, one on a lower switch
                assert {tier[hosts[r]], tier[hosts[t.peer]]} == {"upper", "lower"}, (m, n, r, t.peer)
    table = routing.forwarding_table(f, policy)
    loads = step_loads(f, table, hosts, s, switch_links_only=False)
    for k, c in enumerate(loads):
        worst = max(c.values())
        assert worst == 1, f"bigraph m={m} n={n} step {k}: a link carries {worst} flows"
        # every flow uses exactly one switch-switch link (the direct one)
        sw = sum(v for (node, port), v in c.items()
                 if f.is_switch(node) and f.is_switch(f.peer(node, port)[0]))
        assert sw == p
    return loads


@pytest.mark.parametrize("m,n", SHAPES, ids=[f"m{m}-n{n}" for m, n in SHAPES])
def test_hdrm_one_flow_per_link_every_supported_shape(m, n):
    """THE property test: exhaustive over every supported BiGraph shape."""
    check_hdrm_property(m, n)


@pytest.mark.parametrize("m,n", [(1, 2), (2, 4), (2, 8), (4, 8), (4, 16), (8, 16)])
def test_hdrm_property_independent_of_routing_policy(m, n):
    # all hdrm exchanges take the unique direct link, so "spread" changes nothing
    check_hdrm_property(m, n, policy="spread")


@pytest.mark.parametrize("size", [1, 3, 1000, 4097])
def test_hdrm_property_independent_of_size(size):
    check_hdrm_property(4, 8, size=size)


def naive_max_loads(m, n, policy):
    f = bigraph(m, n)
    p = m * n
    hosts = hosts_for_ranks(f, "naive", p)
    s = build_schedule("allreduce", "halving-doubling", p, 1 << 20)
    table = routing.forwarding_table(f, policy)
    return [max(c.values(), default=0) for c in step_loads(f, table, hosts, s)]


@pytest.mark.parametrize("m,n", [(4, 8), (2, 8), (2, 4), (4, 16), (8, 16)])
def test_naive_mapping_violates_property(m, n):
    """Naive placement piles flows on links: up to 2m on one link when
    same-part traffic takes the fixed middle switch ("shortest"), and m on
    one direct link at the last reduce-scatter step (design note)."""
    loads = naive_max_loads(m, n, "shortest")
    assert max(loads) > 1
    assert max(loads) == 2 * m
    d = (m * n).bit_length() - 1
    assert loads[d - 1] == m           # last halving step: partner r ^ (p/2), across the parts
    # spreading the middle switches does not cure it
    assert max(naive_max_loads(m, n, "spread")) > 1


@pytest.mark.parametrize("m,n", [(2, 2), (4, 2), (4, 4), (8, 4), (8, 8), (16, 8)])
def test_hdrm_oversubscribed_load_is_optimal(m, n):
    """With m > n/2 one flow per link is impossible (m flows leave a switch on
    n/2 links); hdrm still crosses the parts and reaches the lower bound
    m / (n/2) flows per link."""
    f = bigraph(m, n)
    p = m * n
    hosts = hosts_for_ranks(f, "hdrm", p)
    assert sorted(hosts) == sorted(h.name for h in f.hosts)
    s = build_schedule("allreduce", "halving-doubling", p, 1 << 16)
    table = routing.forwarding_table(f, "shortest")
    for c in step_loads(f, table, hosts, s):
        assert max(c.values()) == math.ceil(m / (n // 2))


# --- hdrm_switch_slot ---------------------------------------------------------

def test_hdrm_switch_slot_hand_computed():
    # n=4 (h=2), m=2: worked out by hand from the formula in the design note
    expected = {0: (0, 0), 1: (2, 0), 2: (3, 0), 3: (1, 0), 4: (3, 1), 5: (0, 1), 6: (1, 1), 7: (2, 1)}
    for r, sw_slot in expected.items():
        assert hdrm_switch_slot(r, 4) == sw_slot
    f = bigraph(2, 4)
    assert hosts_for_ranks(f, "hdrm") == [f"bgh{i}" for i in (0, 4, 6, 2, 7, 1, 3, 5)]


@pytest.mark.parametrize("n", [2, 4, 6, 8, 10, 16, 32])
def test_hdrm_switch_slot_parity_and_bijection(n):
    half = n // 2
    for m in range(1, n + 1):
        places = [hdrm_switch_slot(r, n) for r in range(m * n)]
        assert len(set(places)) == m * n
        assert all(0 <= sw < n and 0 <= slot < m for sw, slot in places)
        for r, (sw, _) in enumerate(places):
            upper = sw < half
            assert upper == (bin(r).count("1") % 2 == 0)
        # every switch gets exactly m ranks
        assert set(Counter(sw for sw, _ in places).values()) == {m}


# --- naive, random, hdrm as permutations ---------------------------------------

@pytest.mark.parametrize("make", [lambda: bigraph(4, 8), lambda: bigraph(3, 6), lambda: fattree(4),
                                  lambda: leafspine(3, 2, 3)])
def test_naive_is_identity(make):
    f = make()
    names = [h.name for h in f.hosts]
    assert hosts_for_ranks(f, "naive") == names
    assert hosts_for_ranks(f, "naive", 5) == names[:5]
    assert hosts_for_ranks(f, "naive", 2) == names[:2]


@pytest.mark.parametrize("make", [lambda: bigraph(4, 8), lambda: fattree(4), lambda: leafspine(4, 2, 4)])
def test_random_is_seeded_permutation(make):
    f = make()
    names = [h.name for h in f.hosts]
    a = hosts_for_ranks(f, "random", seed=7)
    assert sorted(a) == sorted(names)
    assert a == hosts_for_ranks(f, "random", seed=7)          # same seed, same result
    assert a != hosts_for_ranks(f, "random", seed=8)          # different seed, different
    assert hosts_for_ranks(f, "random") == hosts_for_ranks(f, "random", seed=0)   # default seed fixed
    assert a != names                                          # not the identity
    sub = hosts_for_ranks(f, "random", 5, seed=7)
    assert len(sub) == len(set(sub)) == 5 and set(sub) <= set(names)
    assert sub == a[:5]


def test_random_seeds_give_many_permutations():
    f = bigraph(2, 4)
    perms = {tuple(hosts_for_ranks(f, "random", seed=s)) for s in range(20)}
    assert len(perms) > 10


@pytest.mark.parametrize("m,n", [(1, 2), (2, 4), (3, 6), (4, 8), (5, 8), (2, 12), (32, 64)])
def test_hdrm_is_permutation(m, n):
    f = bigraph(m, n)
    h = hosts_for_ranks(f, "hdrm")
    assert len(h) == m * n
    assert sorted(h) == sorted(x.name for x in f.hosts)


def test_default_ranks_is_every_host():
    f = bigraph(2, 8)
    for mapping in MAPPINGS:
        assert len(hosts_for_ranks(f, mapping)) == 16


# --- errors ----------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: fattree(4), lambda: leafspine(3, 2, 4)])
def test_hdrm_rejects_fabrics_without_two_parts(make):
    f = make()
    with pytest.raises(ValueError, match="defined for BiGraph and leaf-spines with an even number of leaves"):
        hosts_for_ranks(f, "hdrm")


def test_hdrm_on_leafspine_puts_partners_on_distinct_leaves():
    """Leaves play BiGraph's switches: at every halving-doubling step each
    leaf's ranks talk to ranks on pairwise different leaves."""
    f = leafspine(8, 4, 4)
    hosts = hosts_for_ranks(f, "hdrm")
    assert sorted(hosts) == sorted(h.name for h in f.hosts)
    leaf = {h.name: h.switch for h in f.hosts}
    for k in range(5):
        partners_by_leaf = {}
        for r in range(32):
            partners_by_leaf.setdefault(leaf[hosts[r]], []).append(leaf[hosts[r ^ (1 << k)]])
        for partners in partners_by_leaf.values():
            assert len(set(partners)) == len(partners)


@pytest.mark.parametrize("ranks", [3, 15, 31])
def test_hdrm_rejects_a_rank_count_that_is_not_a_power_of_two(ranks):
    f = bigraph(4, 8)
    with pytest.raises(ValueError, match=r"'hdrm' needs a power-of-two rank count, got %d" % ranks):
        hosts_for_ranks(f, "hdrm", ranks)


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("ranks", [0, 1, -1, 33, 100])
def test_rank_count_out_of_range(mapping, ranks):
    f = bigraph(4, 8)
    with pytest.raises(ValueError, match=r"do not fit .*need 2\.\.32"):
        hosts_for_ranks(f, mapping, ranks)


@pytest.mark.parametrize("mapping", ["", "HDRM", "ring", "identity"])
def test_unknown_mapping(mapping):
    f = bigraph(2, 4)
    with pytest.raises(ValueError, match=r"unknown rank mapping .*naive.*round-robin.*random.*hdrm"):
        hosts_for_ranks(f, mapping)


@pytest.mark.parametrize("m,n", [(2, 4), (4, 8), (2, 8)])
def test_property_checker_catches_a_broken_mapping(m, n, monkeypatch):
    """Sanity check of the checker: drop the (a + j) rotation of the lower
    part from the HDRM formula. Parity (and so part crossing) and the
    permutation survive, but several partners of one switch now sit on the
    same switch, so some link carries 2 flows: the checker must notice."""
    import emulator.fabric.mapping as mapping

    def unrotated(rank, n):
        h = n // 2
        q = rank >> 1
        a, j = q % h, q // h
        return (a, j) if bin(rank).count("1") % 2 == 0 else (h + a, j)

    monkeypatch.setattr(mapping, "hdrm_switch_slot", unrotated)
    with pytest.raises(AssertionError, match="flows"):
        check_hdrm_property(m, n)


# --- on a fabric with nodes of accelerators ----------------------------------------

def node_fabric(topology, accelerators, nics, interconnect="pcie"):
    return build(topology, node=NodeShape(accelerators, nics, interconnect))


def network_loads(fabric, loads):
    """Per step, the flows on the network's directed links (NIC cables and switch links)."""
    return [{hop: v for hop, v in c.items() if fabric.peer(*hop)[2].scope == "network"} for c in loads]


@pytest.mark.parametrize("accelerators,nics", [(4, 1), (4, 2), (4, 4), (8, 2)])
def test_naive_fills_node_after_node(accelerators, nics):
    f = node_fabric("bigraph:m=2,n=4", accelerators, nics)
    hosts = hosts_for_ranks(f, "naive")
    assert [hosts[i:i + accelerators] for i in range(0, len(hosts), accelerators)] == f.nodes()
    assert rank_nodes(f, hosts) == tuple(divmod(r, accelerators) for r in range(len(hosts)))


@pytest.mark.parametrize("topology", ["bigraph:m=2,n=4", "bigraph:m=2,n=8", "bigraph:m=4,n=8"])
@pytest.mark.parametrize("accelerators,interconnect", [(2, "pcie"), (4, "nvlink"), (4, "pcie")])
def test_hdrm_with_a_nic_per_accelerator_keeps_one_flow_per_link(topology, accelerators, interconnect):
    """K = N: ranks on the NIC endpoints as without nodes, each on the
    accelerator of its NIC, and THE property holds on every link, node links
    included: at every halving-doubling step one flow per directed link."""
    f = node_fabric(topology, accelerators, accelerators, interconnect)
    plain = build(topology)
    hosts = hosts_for_ranks(f, "hdrm")
    p = len(hosts)
    assert sorted(hosts) == sorted(h.name for h in f.hosts)
    assert [f.nic_endpoint(h) for h in hosts] == [plain.host(h).index for h in hosts_for_ranks(plain, "hdrm")]
    table = routing.forwarding_table(f, "shortest")
    loads = step_loads(f, table, hosts, build_schedule("allreduce", "halving-doubling", p, 1 << 20),
                       switch_links_only=False)
    assert all(max(c.values()) == 1 for c in loads)


@pytest.mark.parametrize("topology", ["bigraph:m=2,n=4", "bigraph:m=4,n=8"])
@pytest.mark.parametrize("accelerators,nics", [(4, 1), (4, 2), (8, 2), (8, 4)])
def test_hdrm_with_shared_nics_puts_a_nics_share_on_each_link(topology, accelerators, nics):
    """K < N: the N/K accelerators of a NIC take consecutive ranks, the NICs
    placed as HDRM places hosts. The first log2(N/K) halving-doubling steps
    (and the last as many) stay inside the node; every other step puts
    exactly N/K flows on the busiest network link (one per accelerator of a
    NIC: the property cannot hold with a shared NIC, this is its least)."""
    f = node_fabric(topology, accelerators, nics)
    plain = build(topology)
    per = accelerators // nics
    hosts = hosts_for_ranks(f, "hdrm")
    p = len(hosts)
    assert sorted(hosts) == sorted(h.name for h in f.hosts)
    nic = [f.nic_endpoint(h) for h in hosts]
    assert all(len(set(nic[q:q + per])) == 1 for q in range(0, p, per))
    assert nic[::per] == [plain.host(h).index for h in hosts_for_ranks(plain, "hdrm")]
    table = routing.forwarding_table(f, "shortest")
    s = build_schedule("allreduce", "halving-doubling", p, 1 << 20)
    loads = network_loads(f, step_loads(f, table, hosts, s, switch_links_only=False))
    inside = per.bit_length() - 1
    d = p.bit_length() - 1
    for k, c in enumerate(loads):
        if k < inside or k >= 2 * d - inside:
            assert not c, (k, c)
        else:
            assert max(c.values()) == per, k


def test_hdrm_on_part_of_a_node_fabric_places_whole_nics():
    f = node_fabric("bigraph:m=4,n=8", 4, 2)   # 16 nodes of 4, 2 accelerators a NIC
    table = routing.forwarding_table(f, "shortest")
    for ranks in (4, 8, 16, 32):
        hosts = place(f, "hdrm", ranks)
        nic = [f.nic_endpoint(h) for h in hosts]
        assert all(nic[q] == nic[q + 1] for q in range(0, ranks, 2))
        s = build_schedule("allreduce", "halving-doubling", ranks, 1 << 20)
        loads = network_loads(f, step_loads(f, table, hosts, s, switch_links_only=False))
        assert max(max(c.values(), default=0) for c in loads) == 2, ranks
    assert place(f, "hdrm", 2) == ["bgh0", "bgh1"]   # one NIC's accelerators: nothing crosses the network
    taken = set(f.nodes()[0][:1])
    hosts = place(f, "hdrm", 8, free=[h.name for h in f.hosts if h.name not in taken])
    assert not taken & set(hosts) and 0 not in {f.nic_endpoint(h) for h in hosts}   # a NIC with a busy accelerator is left
    with pytest.raises(ValueError, match="places whole NICs, 4 accelerators each"):
        place(node_fabric("bigraph:m=4,n=8", 4, 1), "hdrm", 2)


def test_round_robin_with_nodes_goes_by_the_switch_of_each_nic():
    """One accelerator per network switch in turn (the switch its NIC is
    cabled to), each switch's accelerators in host order."""
    f = node_fabric("bigraph:m=2,n=4", 4, 2)   # 4 nodes, one on each switch
    hosts = hosts_for_ranks(f, "round-robin")
    switch = {}
    for link in f.links:
        if link.nic >= 0:
            switch[link.nic] = link.b
    on = [switch[f.nic_endpoint(h)] for h in hosts]
    assert on[:4] == ["bgs0", "bgs1", "bgs2", "bgs3"] and on[4:8] == on[:4]
    assert hosts[:8] == ["bgh0", "bgh4", "bgh8", "bgh12", "bgh1", "bgh5", "bgh9", "bgh13"]


def test_random_with_nodes_is_a_permutation_of_the_accelerators():
    f = node_fabric("bigraph:m=2,n=4", 4, 1)
    hosts = hosts_for_ranks(f, "random", seed=3)
    assert sorted(hosts) == sorted(h.name for h in f.hosts) and hosts != [h.name for h in f.hosts]


def test_without_nodes_each_host_is_a_plain_host():
    f = bigraph(2, 4)
    assert rank_nodes(f, hosts_for_ranks(f, "hdrm")) == ((-1, 0),) * 8
