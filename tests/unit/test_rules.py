"""Unit tests of what the network adapters are told to install: flow rules
(controller/rules.py), tc shaping commands (emulator/net/shaping.py) and the
datapath choice (emulator/net/dataplane.py). Nothing here touches the kernel."""
from __future__ import annotations

import dataclasses

import pytest

from emulator.routes import routing
from emulator.routes.routing import forwarding_table
from emulator.routes.rules import PAIR_PRIORITY, ROUTE_PRIORITY, FlowRule, switch_rules
from emulator.net import dataplane, shaping
from emulator.net.dataplane import Dataplane
from emulator.fabric.topology import bigraph, build, fattree, leafspine

# --- flow rules -----------------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    fabric = bigraph(2, 4)
    return fabric, forwarding_table(fabric, "shortest")


def test_bigraph_m2_n4_rule_counts(small):
    fabric, table = small
    assert len(fabric.switches) == 4 and len(fabric.hosts) == 8
    for sw in fabric.switches:
        rules = switch_rules(fabric, table, sw.name)
        assert len(rules) == 9
        routes = [r for r in rules if r.ipv4_dst is not None]
        assert len(routes) == 8
        assert all(r.priority == ROUTE_PRIORITY and r.priority > 0 for r in routes)
        assert sorted(r.ipv4_dst for r in routes) == sorted(h.ip for h in fabric.hosts)


def test_table_miss_rule_drops_at_priority_0(small):
    fabric, table = small
    for sw in fabric.switches:
        misses = [r for r in switch_rules(fabric, table, sw.name) if r.ipv4_dst is None]
        assert misses == [FlowRule(0, None, None)]


def test_rule_ports_match_forwarding_table(small):
    fabric, table = small
    for sw in fabric.switches:
        for r in switch_rules(fabric, table, sw.name):
            if r.ipv4_dst is None:
                continue
            dst = next(h for h in fabric.hosts if h.ip == r.ipv4_dst)
            assert r.out_port == table[sw.name][dst.name]
            assert r.out_port in fabric.ports(sw.name)


def test_local_hosts_use_their_host_facing_port(small):
    fabric, table = small
    for sw in fabric.switches:
        by_ip = {r.ipv4_dst: r.out_port for r in switch_rules(fabric, table, sw.name)}
        local = fabric.hosts_on(sw.name)
        assert len(local) == 2
        for h in local:
            assert by_ip[h.ip] == h.port
            peer, _, link = fabric.peer(sw.name, h.port)
            assert peer == h.name and link.kind == "host"
        for h in fabric.hosts:
            if h.switch != sw.name:   # remote hosts leave through a switch-switch port
                peer, _, link = fabric.peer(sw.name, by_ip[h.ip])
                assert fabric.is_switch(peer) and link.kind == "switch"


def test_rules_ordered_by_host_index(small):
    fabric, table = small
    ips = [r.ipv4_dst for r in switch_rules(fabric, table, "bgs0")[:-1]]
    assert ips == [h.ip for h in sorted(fabric.hosts, key=lambda h: h.index)]


def test_rules_are_deterministic(small):
    fabric, table = small
    for sw in fabric.switches:
        assert switch_rules(fabric, table, sw.name) == switch_rules(fabric, table, sw.name)
    # an independently built fabric and table give the same rules
    f2 = bigraph(2, 4)
    t2 = forwarding_table(f2, "shortest")
    for sw in fabric.switches:
        assert switch_rules(f2, t2, sw.name) == switch_rules(fabric, table, sw.name)


@pytest.mark.parametrize("fabric", [fattree(4), leafspine(4, 2, 2), bigraph(4, 8)], ids=lambda f: f.topology)
@pytest.mark.parametrize("policy", ["shortest", "spread"])
def test_one_rule_per_host_on_other_fabrics(fabric, policy):
    table = forwarding_table(fabric, policy)
    for sw in fabric.switches:
        rules = switch_rules(fabric, table, sw.name)
        assert len(rules) == len(fabric.hosts) + 1
        assert len({r.ipv4_dst for r in rules[:-1]}) == len(fabric.hosts)
        assert rules[-1] == FlowRule(0, None, None)


def test_flow_rule_is_frozen():
    r = FlowRule(ROUTE_PRIORITY, "198.18.0.1", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.out_port = 2


# --- tc shaping ------------------------------------------------------------------


def test_tc_commands_htb_class_and_fifo():
    cmds = shaping.tc_commands("bgs0-eth1", 50.0, 100, 1500)
    assert len(cmds) == 3
    root, cls, fifo = cmds
    assert root[:3] == ["tc", "qdisc", "replace"]
    assert root[root.index("dev") + 1] == "bgs0-eth1"
    assert root[root.index("root") + 1:] == ["handle", "1:", "htb", "default", "1"]

    assert cls[:3] == ["tc", "class", "add"] and cls[cls.index("dev") + 1] == "bgs0-eth1"
    assert cls[cls.index("parent") + 1] == "1:" and cls[cls.index("classid") + 1] == "1:1"
    assert "htb" in cls
    assert cls[cls.index("rate") + 1] == "50.0mbit"
    assert cls[cls.index("ceil") + 1] == "50.0mbit"
    burst = str(shaping.burst_bytes(50.0, 1500))
    assert cls[cls.index("burst") + 1] == burst and cls[cls.index("cburst") + 1] == burst

    assert fifo[:3] == ["tc", "qdisc", "add"] and fifo[fifo.index("dev") + 1] == "bgs0-eth1"
    assert fifo[fifo.index("parent") + 1] == "1:1"   # under the HTB class
    assert "pfifo" in fifo
    assert fifo[fifo.index("limit") + 1] == "100"


def test_tc_commands_follow_arguments():
    cls, fifo = shaping.tc_commands("x", 12, 30, 9000)[1:]
    assert cls[cls.index("rate") + 1] == "12mbit"
    assert fifo[fifo.index("limit") + 1] == "30"
    assert all(isinstance(a, str) for cmd in shaping.tc_commands("x", 12.5, 30, 9000) for a in cmd)


@pytest.mark.parametrize("rate", [0.5, 1, 12, 50, 100, 1000, 10000])
@pytest.mark.parametrize("mtu", [576, 1500, 9000])
def test_burst_at_least_two_frames_and_ten_milliseconds(rate, mtu):
    b = shaping.burst_bytes(rate, mtu)
    assert isinstance(b, int)
    ten_ms = rate * 1e6 / 8 * shaping.BURST_MS / 1000
    assert b == max(2 * (mtu + 14), int(ten_ms))


def test_burst_hand_values():
    assert shaping.BURST_MS == 10.0
    assert shaping.burst_bytes(50, 1500) == 62500       # 10 ms at 50 Mbit/s
    assert shaping.burst_bytes(1, 9000) == 18028        # two jumbo frames > 1250 B in 10 ms
    assert shaping.burst_bytes(1000, 1500) == 1250000


def test_tso_segments_are_a_burst_at_most_and_never_above_gso():
    assert shaping.segment_bytes(1, 9000, 100) == 18028      # two frames
    assert shaping.segment_bytes(40, 9000, 100) == 50000     # 10 ms at 40 Mbit/s
    assert shaping.segment_bytes(1000, 9000, 100) == 65536   # GSO's limit
    assert shaping.segment_bytes(1000, 1500, 100) == 18750   # an eighth of the queue
    assert shaping.segment_bytes(1000, 1500, 2) == 1500      # at least a frame


# --- dataplane detection -----------------------------------------------------------


@pytest.fixture
def no_modules(monkeypatch):
    """A kernel without openvswitch or netem; records modprobe attempts."""
    probes = []
    monkeypatch.setattr(dataplane, "_module_loaded", lambda name: False)
    monkeypatch.setattr(dataplane, "_try_modprobe", lambda name: probes.append(name) or False)
    return probes


@pytest.fixture
def ovs_module(monkeypatch):
    monkeypatch.setattr(dataplane, "_module_loaded", lambda name: name == "openvswitch")
    monkeypatch.setattr(dataplane, "_try_modprobe", lambda name: False)


def test_force_user(no_modules):
    d = dataplane.detect(force="user")
    assert d.datapath == "user" and d.tso is False


def test_force_user_even_with_kernel_module(ovs_module):
    d = dataplane.detect(force="user")
    assert d.datapath == "user" and d.tso is False
    assert "forced" in d.reason


def test_auto_with_kernel_module(ovs_module):
    for force in (None, "auto", "kernel"):
        d = dataplane.detect(force)
        assert d.datapath == "kernel" and d.tso is False


def test_auto_without_kernel_module_falls_back_to_user(no_modules):
    for force in (None, "auto"):
        d = dataplane.detect(force)
        assert d.datapath == "user" and d.tso is False


def test_force_kernel_without_module_raises(no_modules):
    with pytest.raises(RuntimeError, match="openvswitch"):
        dataplane.detect("kernel")


@pytest.mark.parametrize("bad", ["bogus", "Kernel", "userspace", ""])
def test_bad_force_value_raises_naming_it(no_modules, bad):
    with pytest.raises(ValueError) as e:
        dataplane.detect(force=bad)
    assert repr(bad) in str(e.value)


def test_bad_force_value_refused_before_probing(no_modules):
    with pytest.raises(ValueError):
        dataplane.detect(force="bogus")
    assert no_modules == []


def test_bad_offload_value_raises_naming_it(no_modules):
    with pytest.raises(ValueError, match="'gso'"):
        dataplane.detect(offload="gso")


def test_tso_on_userspace_needs_open_vswitchs_userspace_tso(no_modules, monkeypatch):
    monkeypatch.setattr(dataplane, "userspace_tso_enabled", lambda: False)
    with pytest.raises(RuntimeError, match="userspace-tso on"):
        dataplane.detect("user", "tso")
    monkeypatch.setattr(dataplane, "userspace_tso_enabled", lambda: True)
    assert dataplane.detect("user", "tso").tso is True


def test_auto_offload_takes_tso_only_on_the_userspace_datapath_where_it_is_on(no_modules, ovs_module, monkeypatch):
    for enabled in (True, False):
        monkeypatch.setattr(dataplane, "userspace_tso_enabled", lambda enabled=enabled: enabled)
        assert dataplane.detect("user", "auto").tso is enabled
        assert dataplane.resolve_offload("user", "auto") == ("tso" if enabled else "off")
        assert dataplane.detect("auto", "auto").tso is False   # the module is there: kernel datapath, frames
        assert dataplane.resolve_offload("user", "off") == "off"


def test_tso_on_kernel_datapath_needs_nothing_more(ovs_module, monkeypatch):
    monkeypatch.setattr(dataplane, "userspace_tso_enabled", lambda: False)
    d = dataplane.detect("auto", "tso")
    assert d.datapath == "kernel" and d.tso is True


def test_real_detection_is_kernel_or_user():
    d = dataplane.detect()
    assert d.datapath in ("kernel", "user") and d.tso is False


def test_describe():
    assert dataplane.Dataplane("user", False, "why").describe() == \
        "OVS userspace datapath, host tx/TSO/GSO offload off (why)"
    assert Dataplane("kernel", True, "module").describe() == \
        "OVS kernel datapath, host TSO on, segments capped at the HTB burst and an eighth of a queue (module)"


def test_build_used_by_rules_matches_named_fabric():
    # rules are computed on the fabric built from the user-facing name
    f = build("bigraph:m=2,n=4")
    assert [h.ip for h in f.hosts] == [h.ip for h in bigraph(2, 4).hosts]


def test_ecmp_rules_match_source_and_destination_where_there_is_a_choice():
    f = bigraph(2, 4)
    table = forwarding_table(f, "ecmp")
    rules = switch_rules(f, table, "bgs0")
    # local hosts (2) and the lower part (4): one rule each; bgs1's hosts (2)
    # can be reached over either lower switch: one rule per source (7 each)
    assert len(rules) == 2 + 4 + 2 * 7 + 1
    for r in rules:
        if r.ipv4_src is not None:
            src = next(h for h in f.hosts if h.ip == r.ipv4_src)
            dst = next(h for h in f.hosts if h.ip == r.ipv4_dst)
            assert r.out_port == routing.out_port(table, "bgs0", src.name, dst.name)


# --- per-pair (dict) entries ------------------------------------------------------------

def matching_port(rules, src_ip, dst_ip):
    """What an OpenFlow table does: the highest-priority matching rule wins;
    two matching rules at the top priority would be ambiguous."""
    matches = [r for r in rules if r.ipv4_dst in (None, dst_ip) and r.ipv4_src in (None, src_ip)]
    top = max(r.priority for r in matches)
    winners = [r for r in matches if r.priority == top]
    assert len(winners) == 1, winners
    return winners[0].out_port


def per_pair_tables():
    yield "bigraph", bigraph(2, 4), forwarding_table(bigraph(2, 4), "bigraph")
    yield "bigraph", bigraph(3, 6), forwarding_table(bigraph(3, 6), "bigraph")
    yield "valiant", fattree(4), forwarding_table(fattree(4), "valiant", seed=3)
    ls = leafspine(3, 3, 2, 2)
    demands = {(s.name, d.name): 1 + s.index * d.index for s in ls.hosts for d in ls.hosts}
    yield "traffic-aware", ls, forwarding_table(ls, "traffic-aware", demands=demands)
    yield "ecmp", bigraph(2, 4), forwarding_table(bigraph(2, 4), "ecmp")
    moved = forwarding_table(leafspine(4, 2, 2), "adaptive")
    ls2 = leafspine(4, 2, 2)
    route = routing.ShortestRoutes(ls2).between("bgh0", "bgh7")[1]
    routing.set_route(ls2, moved, "bgh0", "bgh7", route)
    yield "adaptive, one pair moved", ls2, moved


@pytest.mark.parametrize("policy,fabric,table", list(per_pair_tables()), ids=lambda x: x if isinstance(x, str) else "")
def test_rules_forward_every_pair_as_the_table_does(policy, fabric, table):
    for sw in fabric.switches:
        rules = switch_rules(fabric, table, sw.name)
        assert rules[-1] == FlowRule(0, None, None)
        for src in fabric.hosts:
            for dst in fabric.hosts:
                if src.name != dst.name:
                    assert matching_port(rules, src.ip, dst.ip) == routing.out_port(table, sw.name, src.name, dst.name)


def test_bigraph_policy_rules_by_hand():
    """bgs0 of bigraph(2,4): one rule per host, and for bgh3 (on bgs1, the
    same part) the two local sources leave over bgs3 instead of the default
    bgs2 (port 3): two pair rules above the destination rule. bgh2's pairs
    both use bgs2, the default: no pair rule."""
    f = bigraph(2, 4)
    table = forwarding_table(f, "bigraph")
    rules = switch_rules(f, table, "bgs0")
    pair = [r for r in rules if r.ipv4_src is not None]
    ip = {h.name: h.ip for h in f.hosts}
    assert pair == [FlowRule(PAIR_PRIORITY, ip["bgh3"], 4, ip["bgh0"]),
                    FlowRule(PAIR_PRIORITY, ip["bgh3"], 4, ip["bgh1"])]
    dst_rules = [r for r in rules if r.ipv4_src is None and r.ipv4_dst is not None]
    assert [r.ipv4_dst for r in dst_rules] == [h.ip for h in f.hosts]
    assert all(r.priority == ROUTE_PRIORITY for r in dst_rules)
    assert FlowRule(ROUTE_PRIORITY, ip["bgh3"], 3) in dst_rules
    assert len(rules) == 8 + 2 + 1
    assert PAIR_PRIORITY > ROUTE_PRIORITY


def test_per_pair_rules_skip_sources_on_the_default_port():
    f = bigraph(2, 4)
    table = forwarding_table(f, "shortest")
    table["bgs0"]["bgh3"] = {routing.ANY_SOURCE: 3, "bgh0": 3, "bgh1": 4, "bgh3": 4}
    rules = [r for r in switch_rules(f, table, "bgs0") if r.ipv4_dst == f.host("bgh3").ip]
    assert rules == [FlowRule(ROUTE_PRIORITY, f.host("bgh3").ip, 3),
                     FlowRule(PAIR_PRIORITY, f.host("bgh3").ip, 4, f.host("bgh1").ip)]


def test_tc_commands_with_tso_queue_bytes_of_full_frames():
    fifo = shaping.tc_commands("x", 12, 30, 9000, tso=True)[2]
    assert fifo[-3:] == ["bfifo", "limit", str(30 * 9014)]


def test_tc_batch_lines_drop_the_program_name():
    cmds = shaping.tc_commands("bgs0-eth1", 50.0, 100, 1500)
    lines = shaping.tc_batch(cmds)
    assert lines == [" ".join(c[1:]) for c in cmds] and lines[0].startswith("qdisc replace dev bgs0-eth1 root")


def test_tc_commands_put_netem_in_the_fifos_place_for_delay_or_loss():
    fifo = shaping.tc_commands("x", 12, 30, 9000)[2]
    assert fifo[-3:] == ["pfifo", "limit", "30"]
    netem = shaping.tc_commands("x", 12, 30, 9000, delay_ms=2.5, loss_pct=0.1)[2]
    assert netem[-7:] == ["netem", "limit", "30", "delay", "2.5ms", "loss", "0.1%"]
    assert shaping.tc_commands("x", 12, 30, 9000, loss_pct=1)[2][-7:-5] == ["netem", "limit"]
    # the loss comes later, replacing the same queue (a pfifo when there is no delay)
    (later,) = shaping.loss_commands("x", 30, 9000, 0.0, 10.0)
    assert later[:9] == ["tc", "qdisc", "replace", "dev", "x", "parent", "1:1", "handle", "10:"]
    assert later[9:] == ["netem", "limit", "30", "delay", "0.0ms", "loss", "10.0%"]
