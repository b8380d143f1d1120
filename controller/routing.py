"""Routing policies (pure): a fabric in, per-switch forwarding tables out.

Forwarding is by destination host: every switch has one output port per
destination, or with "ecmp" a set of equal-cost ports among which a hash of
the (source, destination) pair picks one. A policy only decides which of the
equal-cost next hops a switch uses; the paths are always shortest. The flow
model follows the same tables, so model and emulation route every flow
identically.
"""
from __future__ import annotations

import zlib
from collections import deque

from emulator.fabric import HOST_PORT, Fabric

POLICIES = {
    "shortest": "shortest paths; among equal-cost next hops the lowest-numbered port "
                "(one fixed middle switch per switch pair)",
    "spread": "shortest paths; equal-cost next hops chosen by destination host "
              "(dst index mod choices), spreading destinations over middle switches",
    "ecmp": "shortest paths; every (source, destination) pair hashed onto one of the equal-cost "
            "next hops at every switch, as flow-hashing ECMP does, collisions included",
}

# ForwardingTable: switch name -> {destination host name -> output port, or
# with "ecmp" the equal-cost ports a pair hash chooses from}
ForwardingTable = dict[str, dict[str, "int | tuple[int, ...]"]]


def check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"unknown routing policy {policy!r}; choose one of: {', '.join(POLICIES)}")


def _hops_to(fabric: Fabric, target: str) -> dict[str, int]:
    """Switch-to-switch hop count from every switch to `target` (BFS)."""
    dist = {target: 0}
    queue = deque([target])
    while queue:
        s = queue.popleft()
        for _, nb in fabric.switch_neighbours(s):
            if nb not in dist:
                dist[nb] = dist[s] + 1
                queue.append(nb)
    return dist


def forwarding_table(fabric: Fabric, policy: str = "shortest") -> ForwardingTable:
    """Output port of every switch for every destination host."""
    check_policy(policy)
    table: ForwardingTable = {s.name: {} for s in fabric.switches}
    for target in fabric.switches:
        hops = _hops_to(fabric, target.name)
        closer = {}
        for s in fabric.switches:
            if s.name not in hops:
                raise ValueError(f"{fabric.topology}: switch {s.name} cannot reach {target.name}")
            if s.name != target.name:
                closer[s.name] = [port for port, nb in fabric.switch_neighbours(s.name)
                                  if hops.get(nb) == hops[s.name] - 1]
        weight = _digit_weights(closer, hops)
        for dst in fabric.hosts_on(target.name):
            table[target.name][dst.name] = dst.port
            for name, ports in closer.items():
                table[name][dst.name] = _choose(policy, ports, dst.index, weight[hops[name]])
    return table


def _choose(policy: str, ports: list[int], dst_index: int, weight: int):
    if policy == "shortest" or len(ports) == 1:
        return ports[0]
    if policy == "spread":
        return ports[(dst_index // weight) % len(ports)]
    return tuple(ports)   # ecmp: decided per pair by out_port


def out_port(table: ForwardingTable, switch: str, src: str, dst: str) -> int:
    """The port `switch` sends a packet from host `src` to host `dst` out of."""
    entry = table[switch][dst]
    if isinstance(entry, int):
        return entry
    return entry[zlib.crc32(f"{src}>{dst}@{switch}".encode()) % len(entry)]


def _digit_weights(closer: dict[str, list[int]], hops: dict[str, int]) -> dict[int, int]:
    """For "spread": switches at different distances from the destination
    must use different digits of the destination index, or they all make the
    same choice (a fat-tree would use only its diagonal cores). Switches at
    distance d use digit weight = product of the choice counts farther out."""
    most = {}
    for name, ports in closer.items():
        most[hops[name]] = max(most.get(hops[name], 1), len(ports))
    weight, w = {}, 1
    for d in sorted(most, reverse=True):
        weight[d] = w
        w *= most[d]
    return weight


def path(fabric: Fabric, table: ForwardingTable, src: str, dst: str) -> list[tuple[str, int]]:
    """Directed links a packet from host `src` to host `dst` leaves through,
    as (node, egress port): the source NIC first, then one per switch."""
    hops = [(src, HOST_PORT)]
    node = fabric.host(src).switch
    while True:
        port = out_port(table, node, src, dst)
        hops.append((node, port))
        nxt, _, _ = fabric.peer(node, port)
        if nxt == dst:
            return hops
        if len(hops) > len(fabric.switches) + 1:
            raise RuntimeError(f"routing loop from {src} to {dst}")
        node = nxt


def switch_path(fabric: Fabric, table: ForwardingTable, src: str, dst: str) -> list[str]:
    """The switches a packet from `src` to `dst` crosses, in order."""
    return [node for node, _ in path(fabric, table, src, dst)[1:]]
