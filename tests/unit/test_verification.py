"""Unit tests of route verification (emulator/verification.py)."""
from __future__ import annotations

import pytest

from emulator.routes.routing import forwarding_table, switch_path
from emulator.routes.rules import FlowRule, switch_rules
from emulator.routes import verification
from emulator.fabric.topology import bigraph, build, fattree

DUMP = """\
 cookie=0x0, duration=3.1s, table=0, n_packets=12, n_bytes=1176, priority=100,ip,nw_dst=198.18.0.2 actions=output:1
 cookie=0x0, duration=3.1s, table=0, n_packets=0, n_bytes=0, priority=101,ip,nw_src=198.18.0.5,nw_dst=198.18.0.3 actions=output:4
 cookie=0x0, duration=3.1s, table=0, n_packets=7, n_bytes=0, priority=0 actions=drop
"""


def test_parse_flows_reads_match_action_and_counter():
    rules = verification.parse_flows("NXST_FLOW reply (xid=0x4):\n" + DUMP)
    assert rules == [
        verification.InstalledRule(FlowRule(100, "198.18.0.2", 1), 12),
        verification.InstalledRule(FlowRule(101, "198.18.0.3", 4, "198.18.0.5"), 0),
        verification.InstalledRule(FlowRule(0, None, None), 7)]


def installed_as_computed(fabric, table, packets=0):
    return {s.name: [verification.InstalledRule(r, packets) for r in switch_rules(fabric, table, s.name)]
            for s in fabric.switches}


def test_rule_differences_is_empty_only_for_exactly_the_computed_rules():
    fabric = bigraph(2, 4)
    table = forwarding_table(fabric, "shortest")
    installed = installed_as_computed(fabric, table)
    assert verification.rule_differences(fabric, table, installed) == []
    victim = fabric.switches[0].name
    wrong = installed[victim][0].rule
    installed[victim][0] = verification.InstalledRule(FlowRule(wrong.priority, wrong.ipv4_dst, 99), 0)
    problems = verification.rule_differences(fabric, table, installed)
    assert len(problems) == 2 and all(p.startswith(victim) for p in problems)
    assert "lacks" in problems[0] and "unexpected" in problems[1] and "out_port=99" in problems[1]


def test_probe_rounds_cross_every_used_switch_link_in_few_rounds():
    from emulator.routes.routing import path
    for fabric in (fattree(4), bigraph(4, 8)):
        for policy in ("shortest", "ecmp"):
            table = forwarding_table(fabric, policy)
            used = {hop for a in fabric.hosts for b in fabric.hosts if a.switch != b.switch
                    for hop in path(fabric, table, a.name, b.name)[1:-1]}
            rounds = verification.probe_rounds(fabric, table)
            pairs = [p for r in rounds for p in r]
            probed = {hop for a, b in pairs for hop in path(fabric, table, a, b)[1:-1]}
            assert probed == used
            assert len(pairs) <= len(used)
            # each round costs a reading of every switch's counters: a 32-host
            # BiGraph needs two (five when pairs were chosen before rounds)
            assert len(rounds) <= (2 if fabric.topology.startswith("bigraph") else 4)


@pytest.mark.parametrize("topology", ["bigraph:m=4,n=8", "bigraph:m=8,n=16", "fattree:k=4",
                                      "leafspine:leaves=8,spines=4,hosts=4"])
def test_probe_rounds_never_use_a_host_twice(topology):
    fabric = build(topology)
    rounds = verification.probe_rounds(fabric, forwarding_table(fabric, "ecmp"))
    assert rounds and all(rounds)
    for r in rounds:
        hosts = [h for pair in r for h in pair]
        assert len(hosts) == len(set(hosts)), r


def test_switches_crossed_and_path_mismatch():
    fabric = bigraph(2, 4)
    table = forwarding_table(fabric, "shortest")
    src, dst = fabric.hosts[0].name, fabric.hosts[-1].name
    route = switch_path(fabric, table, src, dst)
    before = installed_as_computed(fabric, table)
    after = installed_as_computed(fabric, table)
    dst_ip = fabric.host(dst).ip
    for s in route:   # 3 probes counted by the destination's rule on the route's switches only
        after[s] = [verification.InstalledRule(r.rule, 3 if r.rule.ipv4_dst == dst_ip else 0) for r in after[s]]
    crossed = verification.switches_crossed(fabric, before, after, src, dst, probes=3)
    assert sorted(crossed) == sorted(route)
    assert verification.path_mismatch(fabric, table, src, dst, crossed) is None
    other = next(s.name for s in fabric.switches if s.name not in route)
    assert "probes crossed" in verification.path_mismatch(fabric, table, src, dst, crossed + [other])
