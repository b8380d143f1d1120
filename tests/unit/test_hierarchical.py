"""The hierarchical allreduce (emulator/workloads/algorithms.py), which
reads the node of every rank from the placement: its steps (peers, bytes,
order) on L ranks in each of M nodes, the bytes every rank moves, what it
refuses, how the nodes reach it (a workload's groups, the model, the
spec), the hybrid template's groups on a fabric with nodes, and the model
of hierarchical against ring where accelerators share a NIC."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from emulator.fabric.mapping import hosts_for_ranks, rank_nodes
from emulator.fabric.nodes import NodeShape
from emulator.fabric.topology import LinkProfile, build
from emulator.model.simulation import link_bytes, predict, predict_collective
from emulator.routes.routing import forwarding_table
from emulator.workloads.algorithms import ALGORITHMS, node_positions
from emulator.workloads.flat import flatten
from emulator.workloads.job import Job, Op, Workload, group_of
from emulator.workloads.program import compile_workload
from emulator.workloads.schedule import (algorithm_need, alpha_beta_time, build_schedule, flat_schedule,
                                         lockstep_rounds, nodes_for, reads_nodes)
from emulator.workloads.steps import Step, Transfer

MiB = 1 << 20
SHAPES = [(2, 2), (4, 4), (2, 8)]   # (M nodes, L ranks a node): 2x2, 4x4, 2 nodes of 8


def grid(nodes: int, local: int):
    """Ranks node by node: rank r on node r // L, local index r % L (naive on a node fabric)."""
    return tuple((r // local, r % local) for r in range(nodes * local))


def hier(nodes: int, local: int, size: int, collective: str = "allreduce", placement=None):
    return build_schedule(collective, "hierarchical", nodes * local, size, placement or grid(nodes, local))


# --- the steps -----------------------------------------------------------------

def test_two_nodes_of_two_by_hand():
    """S = 8: a ring of two in the node swaps halves (4 bytes), the ring of two
    across swaps halves of that half (2 bytes) twice, the node swaps halves again."""
    s = hier(2, 2, 8)
    assert s.algorithm == "hierarchical"
    assert s.steps[0] == (Step((Transfer(1, 4),), (Transfer(1, 4),), "reduce-scatter"),
                          Step((Transfer(2, 2),), (Transfer(2, 2),), "inter-node reduce-scatter"),
                          Step((Transfer(2, 2),), (Transfer(2, 2),), "inter-node allgather"),
                          Step((Transfer(1, 4),), (Transfer(1, 4),), "allgather"))
    assert [t.peer for st in s.steps[3] for t in st.sends] == [2, 1, 1, 2]


@pytest.mark.parametrize("nodes,local", SHAPES)
def test_peers_and_order(nodes, local):
    """L-1 steps in the node (to the next local, from the previous), M-1 and
    M-1 across (to the same local of the next node, from the previous), L-1
    in the node again, in that order."""
    p = nodes * local
    s = hier(nodes, local, 1 << 20)
    phases = (["reduce-scatter"] * (local - 1) + ["inter-node reduce-scatter"] * (nodes - 1)
              + ["inter-node allgather"] * (nodes - 1) + ["allgather"] * (local - 1))
    for r in range(p):
        g, l = divmod(r, local)
        steps = s.steps[r]
        assert [st.phase for st in steps] == phases
        assert all(len(st.sends) == len(st.recvs) == 1 for st in steps)
        for st in steps:
            if st.phase.startswith("inter-node"):
                want = (((g + 1) % nodes) * local + l, ((g - 1) % nodes) * local + l)
            else:
                want = (g * local + (l + 1) % local, g * local + (l - 1) % local)
            assert (st.sends[0].peer, st.recvs[0].peer) == want, (r, st)
        assert all(st.channel == 0 and st.after == () for st in steps)   # each after the one before


def bytes_per_phase(steps):
    out = defaultdict(int)
    for st in steps:
        out[st.phase] += sum(t.nbytes for t in st.sends)
    return out


@pytest.mark.parametrize("nodes,local", SHAPES)
def test_every_ranks_bytes_add_up(nodes, local):
    """Per rank: (L-1)/L of S in the node, 2(M-1)/M of S/L across, (L-1)/L
    of S in the node again: (p-1)/p of S per half, as ring."""
    p, size = nodes * local, 3 << 20   # divisible by every p here
    s = hier(nodes, local, size)
    for r in range(p):
        got = bytes_per_phase(s.steps[r])
        assert got["reduce-scatter"] == got["allgather"] == (local - 1) * size // local
        assert got["inter-node reduce-scatter"] == got["inter-node allgather"] == (nodes - 1) * size // (local * nodes)
        assert s.bytes_sent(r) == s.bytes_received(r) == 2 * (p - 1) * size // p


@pytest.mark.parametrize("nodes,local", SHAPES + [(3, 5), (5, 1), (1, 6)])
@pytest.mark.parametrize("size", [1, 7, 1000, 999_983])
def test_any_size_matches_and_runs_to_the_end(nodes, local, size):
    """Uneven chunks: every send meets a receive of the same bytes, in order,
    and the steps run to the end in lock-step (no rank waits for a step
    that never comes); a rank moves its (p-1)/p of S per half to a byte
    per step."""
    p = nodes * local
    s = hier(nodes, local, size)
    sent, got = defaultdict(list), defaultdict(list)
    for r in range(p):
        for k, st in enumerate(s.steps[r]):
            for t in st.sends:
                sent[(r, t.peer)].append((t.nbytes, k))
            for t in st.recvs:
                got[(t.peer, r)].append((t.nbytes, k))
    assert sent == got   # same bytes in the same step of both ends: lock-step, no deadlock
    steps = len(s.steps[0])
    for r in range(p):
        assert abs(s.bytes_sent(r) - 2 * (p - 1) * size / p) <= steps


@pytest.mark.parametrize("collective", ["reduce-scatter", "allgather"])
@pytest.mark.parametrize("nodes,local", SHAPES)
def test_halves_alone(collective, nodes, local):
    """Reduce-scatter: the node's ring, then across; allgather: across, then
    the node's. (p-1)/p of S each."""
    p, size = nodes * local, 1 << 20
    s = hier(nodes, local, size, collective)
    order = ["reduce-scatter", "inter-node reduce-scatter"] if collective == "reduce-scatter" else \
        ["inter-node allgather", "allgather"]
    for r in range(p):
        assert list(dict.fromkeys(st.phase for st in s.steps[r])) == order
        assert s.bytes_sent(r) == (p - 1) * size // p


def test_ranks_in_any_order_follow_their_nodes_and_local_indices():
    """The rings follow the placement: ranks scattered over nodes 7 and 3 (in
    any rank order) ring in the node by local index and across between equal
    local positions."""
    placement = ((7, 2), (3, 0), (7, 0), (3, 2), (3, 1), (7, 1))
    assert node_positions(placement) == ((1, 2), (0, 0), (1, 0), (0, 2), (0, 1), (1, 1))
    s = build_schedule("allreduce", "hierarchical", 6, 6000, placement)
    # node 7 by local index: ranks 2, 5, 0; node 3: 1, 4, 3
    assert [st.sends[0].peer for st in s.steps[2] if st.phase == "reduce-scatter"] == [5, 5]
    assert [st.sends[0].peer for st in s.steps[0] if st.phase == "reduce-scatter"] == [2, 2]
    assert {st.sends[0].peer for st in s.steps[0] if st.phase.startswith("inter")} == {3}
    assert {st.sends[0].peer for st in s.steps[4] if st.phase.startswith("inter")} == {5}


@pytest.mark.parametrize("nodes,local", SHAPES + [(3, 5), (4, 1), (1, 4)])
@pytest.mark.parametrize("collective", ["allreduce", "reduce-scatter", "allgather"])
def test_the_fast_paths_give_the_steps(nodes, local, collective):
    """The arrays (flat) are the steps flattened; the lock-step rounds move
    the same bytes per rank (exactly, when p divides S)."""
    p, size = nodes * local, 12 * 5 << 10
    placement = grid(nodes, local)
    want = flatten(hier(nodes, local, size, collective))
    got = flat_schedule(collective, "hierarchical", p, size, placement)
    assert np.array_equal(got.step_base, want.step_base)
    for side in ("sends", "recvs"):
        for field in ("first", "peer", "nbytes"):
            assert np.array_equal(getattr(getattr(got, side), field), getattr(getattr(want, side), field))
    rounds, note = lockstep_rounds(collective, "hierarchical", p, size, placement)
    assert note == ""
    per_rank = sum(r.sends.nbytes.sum() * times for r, times in rounds) / p
    assert per_rank == hier(nodes, local, size, collective).bytes_sent(0)


def test_closed_form_counts_the_latencies_of_both_levels():
    """L-1 + M-1 messages per half and (p-1)/p of S (every link at one rate)."""
    t = alpha_beta_time("allreduce", "hierarchical", 16, 1 << 20, 50.0, 1e-3, grid(2, 8))
    ring = alpha_beta_time("allreduce", "ring", 16, 1 << 20, 50.0, 1e-3)
    assert t == pytest.approx(ring - 2 * (15 - 8) * 1e-3)


# --- what it refuses -------------------------------------------------------------

def test_refuses_without_the_nodes():
    assert "hierarchical" in ALGORITHMS and reads_nodes("hierarchical") and not reads_nodes("ring")
    assert "the nodes its ranks run on" in algorithm_need("allreduce", "hierarchical", 8)
    with pytest.raises(ValueError, match="hierarchical allreduce needs the nodes its ranks run on"):
        build_schedule("allreduce", "hierarchical", 8, MiB)


def test_refuses_plain_hosts():
    plain = ((-1, 0),) * 8
    with pytest.raises(ValueError, match="a fabric with nodes .*not plain hosts, where it would be ring"):
        build_schedule("allreduce", "hierarchical", 8, MiB, plain)
    fabric = build("bigraph:m=2,n=4")
    assert "a fabric with nodes" in algorithm_need("allreduce", "hierarchical", 8,
                                                   rank_nodes(fabric, hosts_for_ranks(fabric, "naive")))


@pytest.mark.parametrize("placement", [((0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)),
                                       ((0, 0), (0, 1), (0, 2), (1, 0))])
def test_refuses_unequal_groups(placement):
    with pytest.raises(ValueError, match="the same number of its ranks on every node"):
        build_schedule("allreduce", "hierarchical", len(placement), MiB, placement)


def test_refuses_nodes_of_another_count():
    with pytest.raises(ValueError, match="the node of each of its ranks"):
        build_schedule("allreduce", "hierarchical", 8, MiB, grid(2, 2))


def test_other_algorithms_ignore_the_nodes():
    assert nodes_for("ring", grid(2, 4)) is None
    assert nodes_for("hierarchical", ((5, 1), (5, 0))) == ((0, 1), (0, 0))
    assert build_schedule("allreduce", "ring", 8, MiB, grid(2, 4)) == build_schedule("allreduce", "ring", 8, MiB)


# --- on a fabric with nodes --------------------------------------------------------

def node_fabric(topology: str, accelerators: int, nics: int, interconnect: str = "pcie"):
    return build(topology, LinkProfile(host_rate_mbps=50.0, switch_rate_mbps=50.0),
                 NodeShape(accelerators, nics, interconnect))


def test_the_placement_gives_the_nodes():
    f = node_fabric("bigraph:m=2,n=4", 4, 2)   # 4 nodes of 4 accelerators, 2 NICs each
    naive = hosts_for_ranks(f, "naive")
    assert rank_nodes(f, naive) == grid(4, 4)
    assert build_schedule("allreduce", "hierarchical", 16, MiB, rank_nodes(f, naive)) == hier(4, 4, MiB)
    # round-robin: one accelerator per switch in turn, so 4 nodes of 4 ranks each, in another order
    spread = rank_nodes(f, hosts_for_ranks(f, "round-robin"))
    assert sorted(spread) == sorted(grid(4, 4)) and spread != grid(4, 4)
    assert not algorithm_need("allreduce", "hierarchical", 16, spread)


def test_a_workload_passes_each_groups_nodes():
    """A job's collective on a group gets that group's nodes: the same steps
    as the schedule built with them; on plain hosts the job is refused."""
    f = node_fabric("bigraph:m=2,n=4", 4, 1)   # 8 nodes of 4
    ops = (Op("allreduce", nbytes=MiB, algorithm="hierarchical"),)
    compiled = compile_workload(Workload((Job("j", 16, "naive", ops=ops),)), f)
    assert compiled.schedule.steps == hier(4, 4, MiB).steps
    with pytest.raises(ValueError, match="a fabric with nodes"):
        compile_workload(Workload((Job("j", 8, "naive", ops=ops),)), build("bigraph:m=2,n=4"))


def test_the_hybrid_template_puts_tensor_parallel_groups_in_a_node():
    """tp varies fastest (Megatron order): with naive placement on a fabric
    with nodes, a tp group of tp <= N accelerators (tp dividing N) is inside
    one node and a dp group has N/tp ranks on each node it spans; the
    gradient allreduce runs hierarchical on it (L = N/tp a node)."""
    f = node_fabric("bigraph:m=4,n=8", 8, 2)   # 16 nodes of 8
    job = Job("h", 64, "naive", tp=4, pp=2, template="hybrid", params=(("algorithm", "hierarchical"),))
    compiled = compile_workload(Workload((job,)), f)
    node = {h.name: h.node for h in f.hosts}
    hosts = compiled.hosts
    for rank in range(64):
        tp, _ = group_of(job, rank, "tp")
        assert len({node[hosts[r]] for r in tp}) == 1
        dp, _ = group_of(job, rank, "dp")
        per_node = defaultdict(int)
        for r in dp:
            per_node[node[hosts[r]]] += 1
        assert len(per_node) == 4 and set(per_node.values()) == {2}
    # rank 0's gradient allreduce: hierarchical on its dp group (2 ranks on each of 4 nodes)
    dp = list(group_of(job, 0, "dp")[0])
    phases = {st.phase for st in compiled.schedule.steps[0] if st.sends and dp[1] in {t.peer for t in st.sends}}
    assert phases == {"reduce-scatter", "allgather"}   # its node neighbour in the dp group


def nic_bytes(fabric, schedule, hosts) -> float:
    """Bytes on the busiest NIC cable, both directions counted apart."""
    table = forwarding_table(fabric, "shortest")
    cables = {l for l in fabric.links if l.nic >= 0}
    loads = link_bytes(fabric, table, schedule, hosts)
    return max(v for link, v in loads.items() if _link(fabric, link) in cables)


def _link(fabric, key):
    if hasattr(key, "nic"):
        return key
    node, port = key
    return fabric.peer(node, port)[2]


@pytest.mark.parametrize("accelerators,nics", [(4, 1), (8, 2), (4, 2)])
def test_hierarchical_puts_less_on_a_shared_nic_than_ring(accelerators, nics):
    """With K < N NICs a node, ring's neighbours across a node boundary and
    every accelerator's share cross the shared NIC; hierarchical sends only
    each node's 1/L shards across: less on the busiest NIC cable, in the
    steps and in the model's prediction of the same call."""
    f = node_fabric("bigraph:m=2,n=4", accelerators, nics)
    hosts = hosts_for_ranks(f, "naive")
    p, size = len(hosts), 4 * MiB
    placement = rank_nodes(f, hosts)
    ring = build_schedule("allreduce", "ring", p, size)
    hierarchical = build_schedule("allreduce", "hierarchical", p, size, placement)
    assert nic_bytes(f, hierarchical, hosts) < nic_bytes(f, ring, hosts)
    table = forwarding_table(f, "shortest")
    a = predict_collective(f, table, "allreduce", "hierarchical", hosts, size, method="exact")
    b = predict(f, table, hierarchical, hosts)
    assert a.time_s == pytest.approx(b.time_s)
    lock = predict_collective(f, table, "allreduce", "hierarchical", hosts, size, method="lockstep")
    assert lock.time_s >= a.time_s * 0.999 and lock.approximation


def test_the_model_refuses_hierarchical_on_plain_hosts():
    f = build("bigraph:m=2,n=4")
    with pytest.raises(ValueError, match="a fabric with nodes"):
        predict_collective(f, forwarding_table(f, "shortest"), "allreduce", "hierarchical",
                           hosts_for_ranks(f, "naive"), MiB)
