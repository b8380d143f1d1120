"""Route verification (pure): do the routes arrive without a loop (and,
on a fabric with nodes, keep a node's traffic inside it and send the rest
out by the right NIC), does every switch hold exactly the rules the policy
computed, and do probe packets cross exactly the switches the routes say?
The adapters read `ovs-ofctl dump-flows`; this module parses and judges
what they read."""
from __future__ import annotations

import re
from dataclasses import dataclass

from emulator.routes.routing import ForwardingTable, NodeRoutes, path, policy_record, switch_path
from emulator.routes.rules import FlowRule, switch_rules
from emulator.fabric.graph import Fabric

_FIELD = re.compile(r"(\w+)=([^,\s]+)")


@dataclass(frozen=True)
class InstalledRule:
    rule: FlowRule
    packets: int


def parse_flow(line: str) -> InstalledRule | None:
    """One line of `ovs-ofctl -O OpenFlow13 dump-flows` as a FlowRule with
    its packet counter; None for lines that are not rules."""
    if "actions=" not in line:
        return None
    match, actions = line.split("actions=", 1)
    fields = dict(_FIELD.findall(match))
    out = re.fullmatch(r"output:(\d+)", actions.strip())
    return InstalledRule(FlowRule(int(fields.get("priority", 32768)), fields.get("nw_dst"),
                                  int(out.group(1)) if out else None, fields.get("nw_src")),
                         int(fields.get("n_packets", 0)))


def parse_flows(text: str) -> list[InstalledRule]:
    return [r for r in map(parse_flow, text.splitlines()) if r is not None]


def route_problems(fabric: Fabric, table: ForwardingTable, policy: str = "shortest", limit: int = 5) -> list[str]:
    """What is wrong with a table's routes (empty: nothing): every ordered
    pair of hosts must arrive, without a loop. On a fabric with nodes also:
    a pair inside a node crosses only its node's switches, and any other
    pair leaves its node by the NIC the policy's nic_rule names (its own,
    or PXN's) and enters the destination's by the destination's NIC, each
    once. At most `limit` problems are named."""
    nodes = NodeRoutes(fabric, policy_record(policy)) if fabric.node_shape() else None
    problems: list[str] = []
    for src in fabric.hosts:
        for dst in fabric.hosts:
            if src.name == dst.name:
                continue
            try:
                hops = path(fabric, table, src.name, dst.name)
            except (RuntimeError, KeyError) as e:
                problems.append(f"{src.name}->{dst.name}: does not arrive ({e})")
            else:
                if nodes:
                    problems += _node_route_problems(fabric, nodes, src, dst, hops)
            if len(problems) >= limit:
                return problems[:limit]
    return problems


def _node_route_problems(fabric: Fabric, nodes: NodeRoutes, src, dst, hops) -> list[str]:
    pair = f"{src.name}->{dst.name}"
    if src.node == dst.node:
        out = [node for node, _ in hops[1:] if fabric.switch(node).node != src.node]
        return [f"{pair}: leaves its node through {out[0]}"] if out else []
    nics = [fabric.peer(node, port)[2].nic for node, port in hops[1:]]
    crossed = [nic for nic in nics if nic >= 0]
    want = [nodes.source_nic(src, dst), fabric.nic_endpoint(dst.name)]
    if crossed != want:
        return [f"{pair}: crosses NICs {crossed}, should leave by NIC {want[0]} and arrive by NIC {want[1]}"]
    return []


def rule_differences(fabric: Fabric, table: ForwardingTable, installed: dict[str, list[InstalledRule]]) -> list[str]:
    """What each switch holds that the policy did not compute, and what it
    lacks; empty when OVS holds exactly the computed rules."""
    problems = []
    for s in fabric.switches:
        want = set(switch_rules(fabric, table, s.name))
        have = {r.rule for r in installed.get(s.name, [])}
        problems += [f"{s.name} lacks {r}" for r in sorted(want - have, key=str)[:3]]
        problems += [f"{s.name} holds unexpected {r}" for r in sorted(have - want, key=str)[:3]]
    return problems


def _matches(rule: FlowRule, src_ip: str, dst_ip: str) -> bool:
    return rule.ipv4_dst == dst_ip and rule.ipv4_src in (None, src_ip)


def switches_crossed(fabric: Fabric, before: dict[str, list[InstalledRule]], after: dict[str, list[InstalledRule]],
                     src: str, dst: str, probes: int) -> list[str]:
    """Switches whose rules for src->dst counted at least `probes` more
    packets between two dumps (only the probe traffic ran in between)."""
    src_ip, dst_ip = fabric.host(src).ip, fabric.host(dst).ip
    crossed = []
    for s in fabric.switches:
        counted = {r.rule: r.packets for r in before.get(s.name, [])}
        grew = sum(r.packets - counted.get(r.rule, 0) for r in after.get(s.name, [])
                   if _matches(r.rule, src_ip, dst_ip))
        if grew >= probes:
            crossed.append(s.name)
    return crossed


def path_mismatch(fabric: Fabric, table: ForwardingTable, src: str, dst: str, crossed: list[str]) -> str | None:
    """None if the probes crossed exactly the switches of the route."""
    want = switch_path(fabric, table, src, dst)
    if sorted(crossed) == sorted(want):
        return None
    return f"{src}->{dst}: probes crossed {sorted(crossed)}, the routes say {want}"


def probe_rounds(fabric: Fabric, table: ForwardingTable) -> list[list[tuple[str, str]]]:
    """Rounds of probe pairs whose routes together cross every directed
    switch-switch link some route uses (the rules themselves are all read
    back; probes check that packets follow them). No host appears twice in a
    round, so one reading of the counters before and after a round tells its
    pairs apart (destination rules count every source, and echo replies
    travel back). Each round is filled from candidates that come as
    permutations (every host to the host `offset` further), taking a pair
    whose hosts are still free in the round and whose route crosses a link
    not yet covered: few rounds, and each round costs a counter reading."""
    hosts = fabric.hosts
    candidates = [(src, hosts[(i + offset) % len(hosts)]) for offset in range(1, len(hosts))
                  for i, src in enumerate(hosts)]
    candidates = [(src.name, dst.name) for src, dst in candidates if src.switch != dst.switch]
    hops: dict[tuple[str, str], set] = {}
    covered, rounds = set(), []
    while True:
        busy, pairs = set(), []
        for src, dst in candidates:
            if src in busy or dst in busy:
                continue
            if (src, dst) not in hops:
                hops[(src, dst)] = set(path(fabric, table, src, dst)[1:-1])   # the switch-switch hops
            if not hops[(src, dst)] <= covered:
                covered |= hops[(src, dst)]
                busy.update((src, dst))
                pairs.append((src, dst))
        if not pairs:
            return rounds
        rounds.append(pairs)
