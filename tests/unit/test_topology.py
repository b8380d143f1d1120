"""Unit tests of the pure topology builders (emulator/fabric/topology.py) and of the
Fabric data structure they return (emulator/fabric/graph.py). No root needed."""
from __future__ import annotations

import ipaddress
import json
import math
import re
from collections import Counter

import pytest

from emulator.fabric.graph import HOST_PORT, HOST_PREFIX, SWITCH_PREFIX, Fabric, Link, Switch
from emulator.fabric.topology import (MAX_HOSTS, LinkProfile, bigraph, build, fattree, leafspine,
                               parse_topology)

NET = ipaddress.ip_network("198.18.0.0/15")

# (m, n): 1:1 shapes from the design note, plus undersubscribed (m < n/2)
# and oversubscribed (m > n/2) ones.
BIGRAPH_SHAPES = [(1, 2), (2, 2), (1, 4), (2, 4), (3, 4), (2, 8), (4, 8), (5, 8),
                  (1, 6), (3, 6), (7, 6), (4, 16), (8, 16), (12, 16)]


# --- helpers ----------------------------------------------------------------

def switch_links(f: Fabric):
    return [l for l in f.links if l.kind == "switch"]


def host_links(f: Fabric):
    return [l for l in f.links if l.kind == "host"]


def check_fabric_invariants(f: Fabric):
    """What every builder must guarantee, whatever the topology."""
    names = [s.name for s in f.switches] + [h.name for h in f.hosts]
    assert len(names) == len(set(names)), "node names must be unique"
    assert all(s.name.startswith(SWITCH_PREFIX) for s in f.switches)
    assert all(h.name.startswith(HOST_PREFIX) for h in f.hosts)
    dpids = [s.dpid for s in f.switches]
    assert len(set(dpids)) == len(dpids) and min(dpids) >= 1
    # hosts numbered 0.. in order
    assert [h.index for h in f.hosts] == list(range(len(f.hosts)))
    # addresses: unique, inside 198.18.0.0/15, not the network/broadcast address
    ips = [ipaddress.ip_address(h.ip) for h in f.hosts]
    assert len(set(ips)) == len(ips)
    for ip in ips:
        assert ip in NET
        assert ip not in (NET.network_address, NET.broadcast_address)
    macs = [h.mac for h in f.hosts]
    assert len(set(macs)) == len(macs)
    for mac in macs:
        assert re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", mac)
        first = int(mac[:2], 16)
        assert first & 1 == 0, "unicast"
        assert first & 2 == 2, "locally administered"
    # every host has exactly one link, on its NIC port 0, to the switch/port it names
    for h in f.hosts:
        assert f.ports(h.name) == [HOST_PORT]
        peer, peer_port, link = f.peer(h.name, HOST_PORT)
        assert (peer, peer_port) == (h.switch, h.port)
        assert link.kind == "host"
        assert f.is_switch(h.switch)
    # link kinds agree with their ends; ports are distinct per node (Fabric checks)
    for l in f.links:
        if l.kind == "host":
            assert (not f.is_switch(l.a)) and f.is_switch(l.b)
        else:
            assert l.kind == "switch" and f.is_switch(l.a) and f.is_switch(l.b)
            assert l.a != l.b
    # switch ports are numbered 1..P without gaps
    for s in f.switches:
        ports = f.ports(s.name)
        assert ports == list(range(1, len(ports) + 1)), (s.name, ports)


def roundtrip(f: Fabric) -> Fabric:
    return Fabric.from_dict(json.loads(json.dumps(f.to_dict())))


# --- BiGraph ----------------------------------------------------------------

@pytest.mark.parametrize("m,n", BIGRAPH_SHAPES)
def test_bigraph_counts_and_ports(m, n):
    f = bigraph(m, n)
    check_fabric_invariants(f)
    half = n // 2
    assert len(f.switches) == n
    assert len(f.hosts) == n * m
    assert len(switch_links(f)) == n * n // 4
    assert len(host_links(f)) == n * m
    assert len(f.links) == n * m + n * n // 4
    for s in f.switches:
        assert len(f.ports(s.name)) == m + half
        assert len(f.hosts_on(s.name)) == m
        assert len(f.switch_neighbours(s.name)) == half
    assert f.params == {"kind": "bigraph", "m": m, "n": n}
    assert f.topology == f"bigraph:m={m},n={n}"


@pytest.mark.parametrize("m,n", BIGRAPH_SHAPES)
def test_bigraph_parts_complete_bipartite(m, n):
    f = bigraph(m, n)
    half = n // 2
    tiers = [s.tier for s in f.switches]
    assert tiers == ["upper"] * half + ["lower"] * half
    assert [s.index for s in f.switches] == list(range(half)) * 2
    upper = {s.name for s in f.switches if s.tier == "upper"}
    lower = {s.name for s in f.switches if s.tier == "lower"}
    pairs = Counter()
    for l in switch_links(f):
        # no same-part link
        assert (l.a in upper) != (l.b in upper), l
        u, lo = (l.a, l.b) if l.a in upper else (l.b, l.a)
        assert lo in lower
        pairs[(u, lo)] += 1
    # exactly one link between every upper and every lower switch
    assert set(pairs) == {(u, lo) for u in upper for lo in lower}
    assert set(pairs.values()) == {1}
    for s in f.switches:
        other = lower if s.name in upper else upper
        assert {nb for _, nb in f.switch_neighbours(s.name)} == other


@pytest.mark.parametrize("m,n", BIGRAPH_SHAPES)
def test_bigraph_port_numbering(m, n):
    """Ports 1..m face hosts (host j of a switch on port j+1); ports
    m+1..m+n/2 face the other part, in switch order."""
    f = bigraph(m, n)
    half = n // 2
    for i, s in enumerate(f.switches):
        hosts = f.hosts_on(s.name)
        assert [h.port for h in hosts] == list(range(1, m + 1))
        assert [h.index for h in hosts] == list(range(i * m, (i + 1) * m))
        for j, h in enumerate(hosts):
            assert f.peer(s.name, j + 1)[0] == h.name
        nbs = f.switch_neighbours(s.name)
        assert [p for p, _ in nbs] == list(range(m + 1, m + half + 1))
        other = f.switches[half:] if s.tier == "upper" else f.switches[:half]
        assert [nb for _, nb in nbs] == [o.name for o in other]


@pytest.mark.parametrize("m,n", BIGRAPH_SHAPES)
def test_bigraph_json_roundtrip(m, n, tmp_path):
    f = bigraph(m, n)
    g = roundtrip(f)
    assert g.switches == f.switches
    assert g.hosts == f.hosts
    assert g.links == f.links
    assert g.params == f.params and g.topology == f.topology
    path = tmp_path / "fabric.json"
    f.save(path)
    h = Fabric.load(path)
    assert (h.switches, h.hosts, h.links, h.params, h.topology) == \
        (f.switches, f.hosts, f.links, f.params, f.topology)
    # lookups rebuilt from JSON agree
    for s in f.switches:
        assert h.switch_neighbours(s.name) == f.switch_neighbours(s.name)
        assert h.hosts_on(s.name) == f.hosts_on(s.name)


@pytest.mark.parametrize("m,n", [(2, 3), (2, 5), (1, 7), (2, 1), (2, 0), (2, -2), (0, 4), (-1, 4),
                                 (2.0, 4), (2, 4.0), ("2", 4), (2, "4"), (None, 4), (2, None)])
def test_bigraph_rejects_bad_shapes(m, n):
    with pytest.raises(ValueError) as e:
        bigraph(m, n)
    assert "bigraph" in str(e.value)


def test_bigraph_error_names_the_parameter():
    with pytest.raises(ValueError, match=r"n=5"):
        bigraph(2, 5)
    with pytest.raises(ValueError, match=r"m=0"):
        bigraph(0, 4)


def test_too_many_hosts_rejected():
    with pytest.raises(ValueError, match=str(MAX_HOSTS)):
        bigraph(MAX_HOSTS, 4)
    with pytest.raises(ValueError, match=str(MAX_HOSTS)):
        leafspine(MAX_HOSTS, 1, 2)


# --- fat-tree ---------------------------------------------------------------

def test_fattree_k4():
    f = fattree(4)
    check_fabric_invariants(f)
    assert len(f.switches) == 20
    assert len(f.hosts) == 16
    assert len(f.links) == 48
    assert len(host_links(f)) == 16 and len(switch_links(f)) == 32
    for s in f.switches:
        assert len(f.ports(s.name)) == 4, s
    assert Counter(s.tier for s in f.switches) == {"edge": 8, "agg": 8, "core": 4}
    assert f.params == {"kind": "fattree", "k": 4}
    assert f.topology == "fattree:k=4"


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fattree_general(k):
    f = fattree(k)
    check_fabric_invariants(f)
    half = k // 2
    assert len(f.switches) == 5 * k * k // 4
    assert len(f.hosts) == k ** 3 // 4
    assert len(switch_links(f)) == k ** 3 // 2
    tier = {s.name: s.tier for s in f.switches}
    for s in f.switches:
        assert len(f.ports(s.name)) == k
        nbs = [tier[nb] for _, nb in f.switch_neighbours(s.name)]
        if s.tier == "edge":
            assert len(f.hosts_on(s.name)) == half and nbs == ["agg"] * half
        elif s.tier == "agg":
            assert not f.hosts_on(s.name) and Counter(nbs) == {"edge": half, "core": half}
        else:
            assert not f.hosts_on(s.name) and nbs == ["agg"] * k
    # an edge switch connects only to aggregation switches of its own pod,
    # and every core reaches each pod exactly once
    pod = {s.name: s.index // half for s in f.switches if s.tier in ("edge", "agg")}
    for s in f.switches:
        if s.tier == "edge":
            assert {pod[nb] for _, nb in f.switch_neighbours(s.name)} == {pod[s.name]}
        if s.tier == "core":
            assert sorted(pod[nb] for _, nb in f.switch_neighbours(s.name)) == list(range(k))


@pytest.mark.parametrize("k", [3, 5, 0, 1, -4, 4.0, "4"])
def test_fattree_rejects_bad_k(k):
    with pytest.raises(ValueError, match="fattree"):
        fattree(k)


# --- leaf-spine -------------------------------------------------------------

@pytest.mark.parametrize("leaves,spines,hosts,uplinks",
                         [(4, 2, 2, 1), (2, 1, 1, 1), (4, 2, 4, 2), (3, 4, 5, 3), (6, 3, 2, 1)])
def test_leafspine_counts(leaves, spines, hosts, uplinks):
    f = leafspine(leaves, spines, hosts, uplinks)
    check_fabric_invariants(f)
    assert len(f.switches) == leaves + spines
    assert len(f.hosts) == leaves * hosts
    assert len(host_links(f)) == leaves * hosts
    assert len(switch_links(f)) == leaves * spines * uplinks
    tier = {s.name: s.tier for s in f.switches}
    assert Counter(tier.values()) == {"leaf": leaves, "spine": spines}
    for s in f.switches:
        nbs = Counter(nb for _, nb in f.switch_neighbours(s.name))
        if s.tier == "leaf":
            assert len(f.ports(s.name)) == hosts + spines * uplinks
            assert len(f.hosts_on(s.name)) == hosts
            assert {tier[x] for x in nbs} == {"spine"} and set(nbs.values()) == {uplinks}
            assert len(nbs) == spines
        else:
            assert len(f.ports(s.name)) == leaves * uplinks
            assert not f.hosts_on(s.name)
            assert {tier[x] for x in nbs} == {"leaf"} and set(nbs.values()) == {uplinks}
            assert len(nbs) == leaves
    assert f.params == {"kind": "leafspine", "leaves": leaves, "spines": spines,
                        "hosts": hosts, "uplinks": uplinks}
    assert ("uplinks=" in f.topology) == (uplinks != 1)


@pytest.mark.parametrize("args,name", [((0, 2, 2), "leaves"), ((4, 0, 2), "spines"), ((4, 2, 0), "hosts"),
                                       ((4, 2, 2, 0), "uplinks"), ((4.0, 2, 2), "leaves"),
                                       ((4, 2, "2"), "hosts")])
def test_leafspine_rejects_bad_params(args, name):
    with pytest.raises(ValueError, match=name):
        leafspine(*args)


# --- parse_topology / build -------------------------------------------------

def test_parse_topology_defaults_and_values():
    assert parse_topology("bigraph") == ("bigraph", {"m": 2, "n": 4})
    assert parse_topology("bigraph:") == ("bigraph", {"m": 2, "n": 4})
    assert parse_topology("bigraph:m=4,n=8") == ("bigraph", {"m": 4, "n": 8})
    assert parse_topology("  bigraph:n=8 ") == ("bigraph", {"m": 2, "n": 8})
    assert parse_topology("bigraph:m=4, n=8,") == ("bigraph", {"m": 4, "n": 8})
    assert parse_topology("fattree:k=6") == ("fattree", {"k": 6})
    assert parse_topology("leafspine:leaves=3,uplinks=2") == \
        ("leafspine", {"leaves": 3, "spines": 2, "hosts": 2, "uplinks": 2})


@pytest.mark.parametrize("text,needles", [
    ("hypercube:k=4", ["hypercube", "bigraph", "fattree", "leafspine"]),
    ("", ["unknown topology"]),
    ("bigraph:x=3", ["'x=3'", "m=<int>", "n=<int>"]),
    ("bigraph:k=4", ["'k=4'"]),
    ("bigraph:m", ["'m'"]),
    ("fattree:m=2", ["'m=2'", "k=<int>"]),
    ("bigraph:m=two", ["m must be an integer", "'two'"]),
    ("bigraph:n=4.0", ["n must be an integer", "'4.0'"]),
    ("leafspine:hosts=", ["hosts must be an integer"]),
])
def test_parse_topology_errors_name_the_problem(text, needles):
    with pytest.raises(ValueError) as e:
        parse_topology(text)
    for needle in needles:
        assert needle in str(e.value), (needle, str(e.value))


@pytest.mark.parametrize("text", ["bigraph:m=2,n=4", "bigraph:m=3,n=8", "fattree:k=4",
                                  "leafspine:leaves=4,spines=2,hosts=2",
                                  "leafspine:leaves=3,spines=2,hosts=2,uplinks=2"])
def test_build_and_name_roundtrip(text):
    f = build(text)
    assert f.topology == text
    g = build(f.topology)        # the stored name rebuilds the same fabric
    assert (g.switches, g.hosts, g.links, g.params) == (f.switches, f.hosts, f.links, f.params)


def test_build_rejects_invalid_values_from_text():
    with pytest.raises(ValueError, match="bigraph"):
        build("bigraph:n=5")
    with pytest.raises(ValueError, match="fattree"):
        build("fattree:k=3")


# --- link profiles ----------------------------------------------------------

@pytest.mark.parametrize("make", [lambda p: bigraph(2, 4, profile=p), lambda p: fattree(4, profile=p),
                                  lambda p: leafspine(3, 2, 2, 2, profile=p),
                                  lambda p: build("bigraph:m=4,n=8", profile=p)])
def test_link_profile_tiers(make):
    p = LinkProfile(host_rate_mbps=100.0, host_queue_packets=50,
                    switch_rate_mbps=25.5, switch_queue_packets=7)
    f = make(p)
    assert host_links(f) and switch_links(f)
    for l in host_links(f):
        assert (l.rate_mbps, l.queue_packets) == (100.0, 50)
    for l in switch_links(f):
        assert (l.rate_mbps, l.queue_packets) == (25.5, 7)


def test_link_profile_default():
    f = bigraph(2, 4)
    d = LinkProfile()
    assert {(l.rate_mbps, l.queue_packets) for l in host_links(f)} == {(d.host_rate_mbps, d.host_queue_packets)}
    assert {(l.rate_mbps, l.queue_packets) for l in switch_links(f)} == \
        {(d.switch_rate_mbps, d.switch_queue_packets)}


@pytest.mark.parametrize("kw", [{"host_rate_mbps": 0}, {"host_rate_mbps": -1.0},
                                {"switch_rate_mbps": 0.0}, {"switch_rate_mbps": -50},
                                {"host_rate_mbps": math.nan}, {"switch_rate_mbps": math.nan}])
def test_link_profile_rejects_bad_rates(kw):
    name = next(iter(kw))
    with pytest.raises(ValueError, match=name):
        LinkProfile(**kw)


@pytest.mark.parametrize("kw", [{"host_queue_packets": 0}, {"host_queue_packets": -3},
                                {"switch_queue_packets": 0}, {"switch_queue_packets": 2.5},
                                {"host_queue_packets": 10.0}, {"switch_queue_packets": "100"}])
def test_link_profile_rejects_bad_queues(kw):
    name = next(iter(kw))
    with pytest.raises(ValueError, match=name):
        LinkProfile(**kw)


def test_link_profile_accepts_fractional_rates():
    p = LinkProfile(host_rate_mbps=0.5, switch_rate_mbps=1e4, host_queue_packets=1, switch_queue_packets=1)
    assert p.host_rate_mbps == 0.5


# --- Fabric structure -------------------------------------------------------

def test_fabric_rejects_port_cabled_twice():
    sws = [Switch("bgs0", 1, "leaf", 0), Switch("bgs1", 2, "leaf", 1)]
    links = [Link("bgs0", 1, "bgs1", 1, 10.0, 10, "switch"), Link("bgs0", 1, "bgs1", 2, 10.0, 10, "switch")]
    with pytest.raises(ValueError, match="cabled twice"):
        Fabric("x", sws, [], links)


def test_fabric_peer_is_symmetric():
    for f in (bigraph(3, 6), fattree(4), leafspine(3, 2, 2, 2)):
        for l in f.links:
            (a, ap), (b, bp) = l.ends()
            assert f.peer(a, ap) == (b, bp, l)
            assert f.peer(b, bp) == (a, ap, l)
