"""What `bigraph-emu topo` says (pure): a fabric's switches, hosts and links,
and the route a policy gives between two hosts."""
from __future__ import annotations

from emulator.routes.routing import policy_record
from emulator.spec.experiment import RunSpec, SpecError, switch_links


def _names(names: list[str], limit: int = 16) -> str:
    shown = " ".join(names[:limit])
    return shown + (f" ... ({len(names) - limit} more)" if len(names) > limit else "")


def describe_fabric(fabric) -> str:
    """Switches per tier, hosts, links with their rates and queues."""
    lines = [f"# {fabric.topology}: {len(fabric.switches)} switches, {len(fabric.hosts)} hosts, "
             f"{len(fabric.links)} links"]
    shape = fabric.node_shape()
    if shape:
        cables = [l for l in fabric.links if l.nic >= 0]
        rates = "/".join(f"{r:g}" for r in sorted({l.rate_mbps for l in cables}))
        lines.append(f"# nodes: {len(fabric.hosts) // shape.accelerators}, each {shape.describe()}; the hosts are "
                     f"their accelerators, node by node; {len(cables)} NIC cables at {rates} Mbit/s to the "
                     f"network's {sum(s.node < 0 for s in fabric.switches)} switches")
    for tier in dict.fromkeys(s.tier for s in fabric.switches):
        names = [s.name for s in fabric.switches if s.tier == tier]
        per = "/".join(str(n) for n in sorted({len(fabric.hosts_on(n)) for n in names}))
        hosts = "no hosts" if per == "0" else f"{per} hosts each"
        lines.append(f"{tier} switches: {len(names)}, {hosts}: {_names(names)}")
    lines.append(f"hosts: {fabric.hosts[0].name} .. {fabric.hosts[-1].name}")
    labels = fabric.params.get("labels")
    if labels:   # a topology file's own names (emulator/fabric/files.py)
        lines.append(f"names in {fabric.params['path']}: {_names([f'{n}={l}' for n, l in labels.items()], 32)}")
    for kind in ("host", "switch"):
        links = [l for l in fabric.links if l.kind == kind]
        rates = "/".join(f"{r:g}" for r in sorted({l.rate_mbps for l in links}))
        queues = "/".join(str(q) for q in sorted({l.queue_packets for l in links}))
        lines.append(f"{kind} links: {len(links)} at {rates} Mbit/s, queues {queues} packets")
    lines.append(f"switch links by name (for --link-event): {_names(switch_links(fabric), 32)}")
    return "\n".join(lines)


def _host_name(fabric, text: str) -> str:
    from emulator.fabric.graph import HOST_PREFIX
    name = HOST_PREFIX + text if text.isdigit() else text
    if name not in {h.name for h in fabric.hosts}:
        raise SpecError(f"--path: no host {text!r} in {fabric.topology}; hosts are "
                        f"{fabric.hosts[0].name}..{fabric.hosts[-1].name} (or their numbers)")
    return name


def routes_of(spec: RunSpec, fabric):
    """The forwarding table of the spec's policy; a policy that routes the
    workload's demands gets its table from the run's plan."""
    from emulator.routes.routing import forwarding_table
    from emulator.plan.run_plan import plan_run
    try:
        if policy_record(spec.policy).sees_demands:
            return plan_run(spec, fabric).table
        return forwarding_table(fabric, spec.policy)
    except ValueError as e:
        raise SpecError(f"policy: {e}") from None


def route_hops(fabric, table, src: str, dst: str) -> tuple[str, str, list[tuple[str, int]]]:
    """(source, destination, hops) of the route between two hosts given by
    name or number: each hop a node and its egress port."""
    from emulator.routes.routing import path
    src, dst = _host_name(fabric, src), _host_name(fabric, dst)
    if src == dst:
        raise SpecError(f"--path: source and destination are both {src}")
    return src, dst, path(fabric, table, src, dst)


def describe_path(policy: str, src: str, dst: str, hops: list[tuple[str, int]]) -> str:
    """The route from host src to host dst: each node with its egress port."""
    route = " > ".join(f"{node}:{port}" for node, port in hops)
    return f"path {src} -> {dst}, policy {policy}: {route} > {dst}  ({len(hops) - 1} switches; node:egress port)"


def fabric_data(fabric) -> dict:
    """What describe_fabric says, as data (topo --json): fabric.json's
    switches, hosts and links, the switches per tier, the switch links by name."""
    tiers = {tier: [s.name for s in fabric.switches if s.tier == tier] for tier in dict.fromkeys(s.tier for s in fabric.switches)}
    return {**fabric.to_dict(), "tiers": tiers, "switch_links": switch_links(fabric)}
