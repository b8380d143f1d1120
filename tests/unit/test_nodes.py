"""Unit tests of nodes of accelerators inside the fabric: the fabric with
nodes (emulator/fabric/topology.py, nodes.py, graph.py), the rail fabric,
the routes lifted from the network (emulator/routes/routing.py), their
checks (verification.py), the model on such fabrics, and the node keys of
specs, files and flags."""
from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from emulator import cli
from emulator.fabric.graph import HOST_PORT, HOST_PREFIX, SWITCH_PREFIX, Fabric
from emulator.fabric.nodes import (LINK_NETWORK, LINK_NODE, NVLINK_RATE_FACTOR, PCIE_RATE_FACTOR, NodeShape,
                                   default_interconnect_mbps)
from emulator.fabric.topology import LinkProfile, build, rail, with_nodes
from emulator.plan.describe import describe_fabric
from emulator.routes import routing, verification
from emulator.routes.rules import switch_rules
from emulator.routes.state import RouteState
from emulator.spec.experiment import RunSpec, SpecError, experiment_toml, load_experiment, make_run, switch_links

PROFILE = LinkProfile(host_rate_mbps=50.0, switch_rate_mbps=40.0)


def nodes_of(topology: str, accelerators: int, nics: int = 1, interconnect: str = "pcie", rate=None) -> Fabric:
    return build(topology, PROFILE, NodeShape(accelerators, nics, interconnect, rate))


def nic_cables(fabric: Fabric) -> dict[int, tuple[str, str, int]]:
    """NIC endpoint -> (its node switch, the fabric switch, that switch's port)."""
    out = {}
    for link in fabric.links:
        if link.nic >= 0:
            (a, ap), (b, bp) = link.ends()
            node_end, (far, port) = (a, (b, bp)) if fabric.switch(a).node >= 0 else (b, (a, ap))
            out[link.nic] = (node_end, far, port)
    return out


# --- the fabric with nodes --------------------------------------------------------------------

def test_pcie_with_one_shared_nic():
    """8 nodes of 4 accelerators, one PCIe switch each holding them and the NIC."""
    base = build("bigraph:m=1,n=8", PROFILE)
    fabric = nodes_of("bigraph:m=1,n=8", 4, 1)
    tiers = Counter(s.tier for s in fabric.switches)
    assert tiers == {"upper": 4, "lower": 4, "pcie": 8}
    assert len(fabric.hosts) == 32 and [h.name for h in fabric.hosts] == [f"{HOST_PREFIX}{i}" for i in range(32)]
    assert all(s.name.startswith(SWITCH_PREFIX) for s in fabric.switches)
    assert fabric.switches[:8] == base.switches                   # the network's switches keep their names
    scopes = Counter((l.kind, l.scope) for l in fabric.links)
    assert scopes == {("host", LINK_NODE): 32, ("switch", LINK_NETWORK): 16 + 8}
    rate = PCIE_RATE_FACTOR * PROFILE.host_rate_mbps
    assert {l.rate_mbps for l in fabric.links if l.scope == LINK_NODE} == {rate}
    assert {l.rate_mbps for l in fabric.links if l.nic >= 0} == {PROFILE.host_rate_mbps}   # the NIC cable
    assert fabric.node_shape() == NodeShape(4, 1, "pcie", rate)
    for h in fabric.hosts:
        assert (h.node, h.local) == divmod(h.index, 4)
        assert fabric.switch(h.switch).tier == "pcie" and fabric.switch(h.switch).node == h.node
        assert fabric.nic_of(h.name) == f"nic{h.node}"
    assert fabric.nodes() == [[f"{HOST_PREFIX}{i * 4 + a}" for a in range(4)] for i in range(8)]


def test_pcie_with_two_nics_has_a_root_between_them():
    fabric = nodes_of("bigraph:m=2,n=8", 4, 2)
    assert Counter(s.tier for s in fabric.switches) == {"upper": 4, "lower": 4, "pcie": 16, "pcieroot": 8}
    assert len(fabric.hosts) == 32
    uplinks = [l for l in fabric.links if l.kind == "switch" and l.scope == LINK_NODE]
    assert len(uplinks) == 16
    assert all({fabric.switch(l.a).tier, fabric.switch(l.b).tier} == {"pcie", "pcieroot"} for l in uplinks)
    assert {l.rate_mbps for l in uplinks} == {PCIE_RATE_FACTOR * PROFILE.host_rate_mbps}
    for h in fabric.hosts:   # accelerator a under the PCIe switch of NIC floor(a*K/N), with that NIC
        node_switch = nic_cables(fabric)[fabric.nic_endpoint(h.name)][0]
        assert h.switch == node_switch
        assert fabric.nic_endpoint(h.name) == h.node * 2 + h.local * 2 // 4


def test_nvlink_one_nvswitch_with_every_nic():
    fabric = nodes_of("bigraph:m=4,n=8", 4, 4, "nvlink")
    assert Counter(s.tier for s in fabric.switches) == {"upper": 4, "lower": 4, "nvswitch": 8}
    assert len(fabric.links) == 16 + 8 * (4 + 4)
    assert {l.rate_mbps for l in fabric.links if l.scope == LINK_NODE} == {NVLINK_RATE_FACTOR * PROFILE.host_rate_mbps}
    cables = nic_cables(fabric)
    for h in fabric.hosts:
        assert fabric.switch(h.switch).tier == "nvswitch"
        assert fabric.nic_of(h.name) == f"nic{h.node * 4 + h.local}"   # a NIC each
        assert cables[h.node * 4 + h.local][0] == h.switch


@pytest.mark.parametrize("topology,shape", [
    ("bigraph:m=2,n=8", NodeShape(8, 1)), ("bigraph:m=2,n=8", NodeShape(4, 2)), ("fattree:k=4", NodeShape(4, 4)),
    ("leafspine:leaves=4,spines=2,hosts=4", NodeShape(8, 2, "nvlink")),
    ("rail:nodes=4,rails=4,spines=2", NodeShape(4, 4, "nvlink"))])
def test_nic_j_of_node_i_is_endpoint_i_k_plus_j(topology, shape):
    base = build(topology, PROFILE)
    fabric = with_nodes(base, shape, PROFILE)
    cables = nic_cables(fabric)
    assert sorted(cables) == list(range(len(base.hosts)))
    assert len(fabric.hosts) == len(base.hosts) // shape.nics * shape.accelerators
    for e, (node_switch, switch, port) in cables.items():
        endpoint = base.hosts[e]
        assert (switch, port) == (endpoint.switch, endpoint.port)   # the endpoint's port, taken in order
        assert fabric.switch(node_switch).node == e // shape.nics


def test_nic_assignment_floor():
    shape = NodeShape(8, 2)
    assert [shape.nic_index(a) for a in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [NodeShape(6, 3).nic_index(a) for a in range(6)] == [0, 0, 1, 1, 2, 2]
    fabric = nodes_of("leafspine:leaves=2,spines=1,hosts=3", 6, 3)
    for h in fabric.hosts:
        assert fabric.nic_endpoint(h.name) == h.node * 3 + h.local * 3 // 6


def test_default_and_given_interconnect_rates():
    assert default_interconnect_mbps("pcie", 50) == 100 and default_interconnect_mbps("nvlink", 50) == 200
    assert default_interconnect_mbps("nvlink", 90_000) == 100_000   # never past a link's highest rate
    fabric = nodes_of("bigraph:m=1,n=4", 2, 1, "nvlink", 75.0)
    assert {l.rate_mbps for l in fabric.links if l.scope == LINK_NODE} == {75.0}


def test_json_round_trip_and_fabrics_without_nodes_unchanged():
    for fabric in (nodes_of("bigraph:m=2,n=8", 4, 2), nodes_of("rail:nodes=2,rails=2,spines=1", 4, 2, "nvlink")):
        again = Fabric.from_dict(json.loads(json.dumps(fabric.to_dict())))
        assert again.to_dict() == fabric.to_dict()
        assert again.switches == fabric.switches and again.hosts == fabric.hosts and again.links == fabric.links
        assert again.node_shape() == fabric.node_shape() and again.nodes() == fabric.nodes()
    plain = build("bigraph:m=2,n=4")
    d = plain.to_dict()   # today's records, field for field
    assert list(d["switches"][0]) == ["name", "dpid", "tier", "index"]
    assert list(d["hosts"][0]) == ["name", "index", "ip", "mac", "switch", "port"]
    assert list(d["links"][0]) == ["a", "a_port", "b", "b_port", "rate_mbps", "queue_packets", "kind", "delay_ms",
                                   "loss_pct"]
    assert "node" not in d["params"] and plain.node_shape() is None
    assert plain.nodes() == [[h.name] for h in plain.hosts]
    assert plain.nic_of("bgh3") == "nic3"


def test_too_many_endpoints_for_the_nics_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^nics: bigraph:m=1,n=6 has 6 endpoints, not a multiple of the 4"):
        nodes_of("bigraph:m=1,n=6", 4, 4)


# --- the rail fabric --------------------------------------------------------------------------

def test_rail_without_nodes_is_hosts_node_by_node_on_their_rails():
    fabric = rail(3, 4, 2)
    assert fabric.topology == "rail:nodes=3,rails=4,spines=2"
    assert Counter(s.tier for s in fabric.switches) == {"rail": 4, "spine": 2}
    assert len(fabric.hosts) == 12 and len(fabric.links) == 12 + 8
    rails = [s.name for s in fabric.switches if s.tier == "rail"]
    for h in fabric.hosts:
        s, r = divmod(h.index, 4)
        assert h.switch == rails[r] and h.port == s + 1
    assert fabric.node_shape() is None
    assert build("rail:nodes=3,rails=4,spines=2").params == {"kind": "rail", "nodes": 3, "rails": 4, "spines": 2}


def test_rail_with_nodes_puts_nic_r_of_every_node_on_rail_r():
    fabric = nodes_of("rail:nodes=4,rails=4,spines=2", 8, 4, "nvlink")
    rails = {s.name: s.index for s in fabric.switches if s.tier == "rail"}
    for e, (node_switch, switch, _) in nic_cables(fabric).items():
        assert rails[switch] == e % 4 and fabric.switch(node_switch).node == e // 4
    with pytest.raises(ValueError, match="^nics: rail:nodes=4,rails=4,spines=2 has 4 rails"):
        nodes_of("rail:nodes=4,rails=4,spines=2", 4, 2)
    for bad in ("rail:nodes=0", "rail:spines=0", "rail:nodes=1,rails=1"):
        with pytest.raises(ValueError):
            build(bad)


# --- lifted routes ----------------------------------------------------------------------------

FABRICS = [("bigraph:m=1,n=8", 4, 1, "pcie"), ("bigraph:m=2,n=8", 4, 2, "pcie"), ("bigraph:m=4,n=8", 4, 4, "nvlink"),
           ("fattree:k=4", 8, 2, "nvlink"), ("leafspine:leaves=2,spines=2,hosts=4", 4, 4, "pcie"),
           ("rail:nodes=4,rails=2,spines=2", 4, 2, "pcie")]
POLICIES = ["shortest", "spread", "ecmp", "valiant", "adaptive"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", FABRICS, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}-{c[3]}")
def test_lifted_routes_arrive_stay_inside_and_leave_by_the_nic(case, policy):
    fabric = nodes_of(*case)
    table = routing.forwarding_table(fabric, policy)
    assert verification.route_problems(fabric, table, policy) == []
    cables = nic_cables(fabric)
    for src in fabric.hosts[::3]:
        for dst in fabric.hosts:
            if src.name == dst.name:
                continue
            hops = routing.path(fabric, table, src.name, dst.name)
            switches = [fabric.switch(node) for node, _ in hops[1:]]
            if src.node == dst.node:
                assert all(s.node == src.node for s in switches)
            else:   # the source's node, its NIC's fabric switch .. the destination NIC's, the destination's node
                network = [i for i, s in enumerate(switches) if s.node < 0]
                assert switches[network[0]].name == cables[fabric.nic_endpoint(src.name)][1]
                assert switches[network[-1]].name == cables[fabric.nic_endpoint(dst.name)][1]
                assert network == list(range(network[0], network[-1] + 1))
                assert {s.node for s in switches[:network[0]]} == {src.node}
                assert {s.node for s in switches[network[-1] + 1:]} == {dst.node}


def test_the_lifted_route_enters_the_network_where_the_network_route_starts():
    fabric = nodes_of("bigraph:m=2,n=8", 4, 2)
    network = routing.network_fabric(fabric)
    assert [h.name for h in network.hosts] == [f"nic{e}" for e in range(16)]
    assert network.params == build("bigraph:m=2,n=8").params
    table = routing.forwarding_table(fabric, "bigraph")
    base = routing.forwarding_table(network, "bigraph")
    for src in fabric.hosts:
        for dst in fabric.hosts:
            if src.node != dst.node:
                lifted = [n for n in routing.switch_path(fabric, table, src.name, dst.name)
                          if fabric.switch(n).node < 0]
                assert lifted == routing.switch_path(network, base, fabric.nic_of(src.name), fabric.nic_of(dst.name))


@pytest.mark.parametrize("interconnect", ["pcie", "nvlink"])
def test_pxn_crosses_to_the_destinations_rail_inside_the_node(interconnect):
    fabric = nodes_of("rail:nodes=4,rails=4,spines=2", 4, 4, interconnect)
    table = routing.forwarding_table(fabric, "pxn")
    assert verification.route_problems(fabric, table, "pxn") == []
    rails = {s.name: s.index for s in fabric.switches if s.tier == "rail"}
    for src in fabric.hosts:
        for dst in fabric.hosts:
            if src.node == dst.node:
                continue
            network = [n for n in routing.switch_path(fabric, table, src.name, dst.name) if n in rails]
            assert [rails[n] for n in network] == [dst.local]   # one rail switch: the destination's
    shortest = routing.forwarding_table(fabric, "shortest")
    problems = verification.route_problems(fabric, shortest, "pxn")
    assert problems and "should leave by NIC" in problems[0]    # the checks tell the two apart
    with pytest.raises(ValueError, match="routes fabrics with nodes"):
        routing.forwarding_table(build("rail:nodes=2,rails=2,spines=1"), "pxn")


def test_model_and_controller_see_the_same_lifted_routes():
    fabric = nodes_of("fattree:k=4", 4, 2, "nvlink")
    for policy in ("shortest", "ecmp", "spread", "valiant"):
        full = routing.forwarding_table(fabric, policy)
        lazy = routing.model_table(fabric, policy)
        for src in fabric.hosts[::5]:
            for dst in fabric.hosts[::3]:
                if src.name != dst.name:
                    assert routing.path(fabric, full, src.name, dst.name) == routing.path(fabric, lazy, src.name,
                                                                                         dst.name)


def test_rules_and_route_state_on_a_fabric_with_nodes_read_back_from_json():
    fabric = Fabric.from_dict(nodes_of("bigraph:m=2,n=8", 4, 2).to_dict())   # as the controller reads it
    state = RouteState(fabric, "ecmp")
    for s in fabric.switches:
        rules = switch_rules(fabric, state.table, s.name)
        assert len({r.ipv4_dst for r in rules if r.ipv4_dst}) == len(fabric.hosts)
    assert verification.route_problems(fabric, state.table, "ecmp") == []


def test_traffic_aware_routes_the_nics_demands():
    fabric = nodes_of("bigraph:m=2,n=8", 4, 2)
    demands = {("bgh0", "bgh31"): 5_000, ("bgh1", "bgh30"): 5_000, ("bgh0", "bgh1"): 9_000}
    table = routing.forwarding_table(fabric, "traffic-aware", demands)
    assert verification.route_problems(fabric, table, "traffic-aware") == []


def test_shortest_routes_between_accelerators_keep_to_their_nics():
    """What adaptive moves pairs between: every alternative leaves by the source's NIC."""
    fabric = nodes_of("bigraph:m=2,n=8", 4, 2, "nvlink")
    routes = routing.ShortestRoutes(fabric)
    cables = nic_cables(fabric)
    for src, dst in (("bgh0", "bgh12"), ("bgh2", "bgh9"), ("bgh0", "bgh3")):
        options = routes.between(src, dst)
        assert options
        for route in options:
            nics = [fabric.peer(node, port)[2].nic for node, port in route]
            crossed = [n for n in nics if n >= 0]
            s, d = fabric.host(src), fabric.host(dst)
            assert crossed == ([] if s.node == d.node else [fabric.nic_endpoint(src), fabric.nic_endpoint(dst)])
            table = routing.forwarding_table(fabric, "shortest")
            routing.set_route(fabric, table, src, dst, route)
            assert routing.path(fabric, table, src, dst) == route
            assert route[-1] == (d.switch, d.port) and cables


# --- the model on a fabric with nodes -------------------------------------------------------------

def model_time(capsys, *argv) -> float:
    assert cli.main(["model", *argv, "-b", "8M", "--json"]) == 0
    return json.loads(capsys.readouterr().out)[0]["sizes"][0]["time_s"]


@pytest.mark.parametrize("algorithm", ["halving-doubling"])
def test_a_shared_nic_is_slower_than_a_nic_each(capsys, algorithm):
    """4 nodes of 4 accelerators: one shared NIC each, or 4."""
    shared = model_time(capsys, "-t", "bigraph:m=1,n=4", "--accelerators", "4", "--nics", "1", "-a", algorithm)
    own = model_time(capsys, "-t", "bigraph:m=2,n=8", "--accelerators", "4", "--nics", "4", "-a", algorithm)
    assert shared > 1.4 * own
    rail_shared = model_time(capsys, "-t", "rail:nodes=4,rails=1,spines=1", "--accelerators", "4", "-a", algorithm)
    rail_own = model_time(capsys, "-t", "rail:nodes=4,rails=4,spines=1", "--accelerators", "4", "--nics", "4",
                          "-a", algorithm)
    assert rail_shared > 1.4 * rail_own


def test_pxn_keeps_a_rings_node_crossings_off_the_spines(capsys):
    argv = ("-t", "rail:nodes=8,rails=4,spines=2", "--accelerators", "4", "--nics", "4", "--interconnect", "nvlink",
            "-a", "ring")
    assert model_time(capsys, *argv, "-p", "shortest") > 3 * model_time(capsys, *argv, "-p", "pxn")


def test_a_packet_between_nodes_crosses_two_more_bridges():
    from emulator.model.simulation import predict
    from emulator.workloads.schedule import build_schedule
    schedule = build_schedule("stride", "ring", 2, 1 << 20)
    peaks = []
    for node in (None, NodeShape(1, 1)):
        fabric = build("bigraph:m=1,n=2", PROFILE, node)
        got = predict(fabric, routing.model_table(fabric), schedule, [h.name for h in fabric.hosts])
        peaks.append(got.peak_switch_mbps)
    assert peaks[1] == pytest.approx(2 * peaks[0])   # 4 bridges instead of 2, at the same rate


# --- spec keys, files, flags --------------------------------------------------------------------

def test_node_keys_build_the_nodes_and_round_trip():
    spec = make_run({"topology": "bigraph:m=1,n=8", "accelerators": "4", "nics": 1, "interconnect": "nvlink",
                     "interconnect_mbps": "75"})
    assert (spec.accelerators, spec.nics, spec.interconnect, spec.interconnect_mbps) == (4, 1, "nvlink", 75.0)
    assert spec.node_shape() == NodeShape(4, 1, "nvlink", 75.0)
    assert len(spec.fabric().hosts) == 32
    assert make_run(json.loads(json.dumps(dataclasses.asdict(spec)))) == spec   # spec.json, as report reads it
    assert spec.fabric_key() != make_run({"topology": "bigraph:m=1,n=8"}).fabric_key()
    plain = make_run({})
    assert plain.accelerators is None and plain.node_shape() is None and plain.fabric().node_shape() is None
    assert "accelerators" not in experiment_toml(plain, "x")      # a key not given stays out of the file
    assert make_run(json.loads(json.dumps(dataclasses.asdict(plain)))) == plain


def test_defaults_of_a_node():
    spec = make_run({"accelerators": 2})
    assert spec.node_shape() == NodeShape(2, 1, "pcie", None)
    assert spec.fabric().node_shape().interconnect_mbps == PCIE_RATE_FACTOR * RunSpec.host_rate_mbps


def test_node_table_in_an_experiment_file(tmp_path):
    path = tmp_path / "nodes.toml"
    path.write_text('[node]\naccelerators = 4\nnics = 2\n\n[defaults]\ntopology = "bigraph:m=2,n=8"\n\n'
                    '[[runs]]\n\n[[runs]]\nnode = {interconnect = "nvlink", nics = 4}\n\n'
                    '[[runs]]\ntopology = "bigraph:m=1,n=4"\naccelerators = 2\n')
    runs = load_experiment(str(path)).runs
    assert [(r.accelerators, r.nics, r.interconnect) for r in runs] == [(4, 2, None), (4, 4, "nvlink"), (2, 2, None)]
    again = tmp_path / "again.toml"
    again.write_text(experiment_toml(runs[1], "again"))
    assert load_experiment(str(again)).runs == [runs[1]]
    for text, words in (('[node]\naccelerators = 4\ncolour = "red"\n', "unknown key(s) colour"),
                        ('[node]\naccelerators = 0\n', "accelerators: must be"),
                        ('[defaults]\naccelerators = 2\nnode = {accelerators = 4}\n', "accelerators: given twice"),
                        ('node = 3\n', "expected a table")):
        path.write_text(text)
        with pytest.raises(SpecError, match="^" + str(path).replace(".", r"\.") + r": .*") as e:
            load_experiment(str(path))
        assert words in str(e.value)


def test_flags_fill_the_node_keys(capsys):
    assert cli.main(["topo", "-t", "bigraph:m=2,n=8", "--accelerators", "4", "--nics", "2", "--interconnect",
                     "nvlink", "--interconnect-mbps", "120", "--path", "0", "31"]) == 0
    out = capsys.readouterr().out
    assert "# nodes: 8, each 4 accelerators and 2 NICs, each shared by 2, on one NVSwitch at 120 Mbit/s" in out
    assert "path bgh0 -> bgh31" in out


BAD = [
    (["--accelerators", "0"], "accelerators: must be a whole number from 1"),
    (["--accelerators", "4", "--nics", "3"], "nics: 3 NICs do not divide the 4 accelerators"),
    (["--accelerators", "4", "--nics", "8"], "nics: must be a whole number from 1 to the 4 accelerators"),
    (["--accelerators", "4", "--nics", "0"], "nics: must be a whole number from 1"),
    (["--accelerators", "4", "--interconnect", "infiniband"], "interconnect: 'infiniband' is not one of: pcie, nvlink"),
    (["--accelerators", "4", "--interconnect-mbps", "0"], "interconnect_mbps: must be between 1 and 100000"),
    (["--accelerators", "4", "--interconnect-mbps", "1e9"], "interconnect_mbps: must be between"),
    (["--accelerators", "four"], "accelerators: expected int"),
    (["--nics", "2"], "nics: describes a node of accelerators; give accelerators too"),
    (["--interconnect", "nvlink"], "interconnect: describes a node"),
    (["-t", "rail:nodes=2,rails=4,spines=1", "--accelerators", "4", "--nics", "2"],
     "nics: rail:nodes=2,rails=4,spines=1 has 4 rails, one per NIC of a node, but nics is 2"),
    (["-t", "bigraph:m=1,n=6", "--accelerators", "4", "--nics", "4"],
     "nics: bigraph:m=1,n=6 has 6 endpoints, not a multiple of the 4 NICs"),
    (["-t", "rail:nodes=2,rails=2,spines=1", "-p", "pxn"], "policy: 'pxn' routes fabrics with nodes"),
    (["-t", "bigraph:m=2,n=4", "--accelerators", "2", "-p", "pxn"], "policy: 'pxn' routes rail fabrics only"),
    (["-t", "bigraph:m=1,n=4", "--accelerators", "2", "--link-event", "1:bgs4-bgs0:down"],
     "link_events: 1:bgs4-bgs0:down: bgs4-bgs0 is not a switch-switch link"),
]


@pytest.mark.parametrize("argv,words", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_node_input_exits_2_naming_the_key(capsys, argv, words):
    assert cli.main(["topo", *argv]) == 2
    err = capsys.readouterr().err
    key, rest = words.split(": ", 1)
    assert words in err or f"({key}): {rest}" in err, err   # the flag typed, then the key: "--nics (nics): ..."


@pytest.mark.parametrize("argv,words", BAD[:12], ids=[" ".join(a) for a, _ in BAD[:12]])
def test_bad_node_keys_raise_spec_errors_naming_the_key(argv, words):
    flags = dict(zip(argv[::2], argv[1::2]))
    keys = {"-t": "topology", "--accelerators": "accelerators", "--nics": "nics", "--interconnect": "interconnect",
            "--interconnect-mbps": "interconnect_mbps"}
    with pytest.raises(SpecError) as e:
        make_run({keys[f]: v for f, v in flags.items()})
    assert str(e.value).startswith(words.split(":")[0] + ":") and words in str(e.value)


def test_delay_for_every_link_is_the_networks():
    spec = make_run({"topology": "bigraph:m=1,n=4", "accelerators": 2, "link_delay_ms": 2,
                     "link_overrides": ["host-pcie:delay=1"]})
    for link in spec.fabric().links:
        assert link.delay_ms == (2.0 if link.scope == LINK_NETWORK else 1.0), link


def test_describe_says_what_a_node_is():
    text = describe_fabric(nodes_of("bigraph:m=1,n=8", 4, 1))
    assert text.splitlines()[1] == ("# nodes: 8, each 4 accelerators and one NIC shared by them, under one PCIe "
                                    "switch at 100 Mbit/s; the hosts are their accelerators, node by node; 8 NIC "
                                    "cables at 50 Mbit/s to the network's 8 switches")
    assert "# nodes" not in describe_fabric(build("bigraph:m=1,n=8"))
    assert HOST_PORT == 0


def test_a_network_link_down_reroutes_the_lifted_routes():
    fabric = nodes_of("bigraph:m=2,n=8", 4, 2)
    state = RouteState(fabric, "shortest")
    hops = routing.path(fabric, state.table, "bgh0", "bgh4")   # node 0 to node 1: bgs0 to bgs1, through a middle
    switch, port = next((n, p) for n, p in hops[1:] if fabric.switch(n).node < 0)
    assert fabric.peer(switch, port)[2].scope == LINK_NETWORK
    assert state.port_changed(switch, port, up=False) and state.fallback == ""
    assert (switch, port) not in routing.path(state.fabric, state.table, "bgh0", "bgh4")
    assert verification.route_problems(state.fabric, state.table) == []
    cable = next(l for l in fabric.links if l.nic >= 0)   # a NIC cable has no detour, as a host's link: no link event
    assert f"{cable.a}-{cable.b}" not in switch_links(fabric) and f"{cable.b}-{cable.a}" not in switch_links(fabric)
