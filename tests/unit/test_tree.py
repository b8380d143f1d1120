"""NCCL's double binary tree allreduce and `auto` (emulator/workloads/algorithms.py):
the trees' shape against NCCL's construction, the steps run on numbers,
their bytes, the model's times beside ring's, auto's choice, and the refusals."""
from __future__ import annotations

import random

import pytest

from emulator import cli
from emulator.fabric.mapping import hosts_for_ranks
from emulator.fabric.topology import build
from emulator.model.simulation import predict_collective
from emulator.plan.run_plan import plan_run
from emulator.results.calls import collective_rows
from emulator.routes.routing import forwarding_table
from emulator.spec.experiment import SpecError, make_run
from emulator.workloads.algorithms import (AUTO_ALPHA_S, AUTO_RATE_MBPS, TREE_CHUNKS, double_tree, tree_moves)
from emulator.workloads.schedule import (alpha_beta_time, build_schedule, check_collective, chosen_algorithm,
                                         flat_schedule, lockstep_rounds)
from emulator.workloads.steps import chunks
from test_results import fake_records, wrap
from test_schedule import check_matching, simulate

ALPHA = 5e-4
KiB, MiB = 1 << 10, 1 << 20


def ceil_log2(p: int) -> int:
    return (p - 1).bit_length()


# --- the trees ------------------------------------------------------------------------------

@pytest.mark.parametrize("p", range(1, 71))
def test_both_trees_span_every_rank_consistently(p):
    trees = double_tree(p)
    for tree in trees:
        assert tree.parent.count(-1) == 1 and tree.parent[tree.root] == -1
        for r in range(p):
            assert len(tree.children[r]) <= 2
            assert all(tree.parent[c] == r for c in tree.children[r])
            if r != tree.root:
                assert r in tree.children[tree.parent[r]]
            # the parents lead every rank to the root, depth edges away
            hops, up = 0, r
            while up != tree.root:
                up, hops = tree.parent[up], hops + 1
                assert hops <= p
            assert hops == tree.depth[r]
        # binary, bit-built: both trees ceil(log2 p) high
        assert tree.height[tree.root] == max(tree.depth) == ceil_log2(p)
    # NCCL's roots (ncclGetDtreeRoots): 0, and p-1 (even p) or 1 (odd p)
    assert (trees[0].root, trees[1].root) == (0, (1 if p % 2 else p - 1) if p > 1 else 0)


@pytest.mark.parametrize("p", range(1, 71))
def test_a_rank_forwards_in_at_most_one_tree(p):
    """Tree 1's inner ranks are tree 0's leaves. With an odd p the shift
    makes rank 0 inner in both, and tree 0's root has one child there."""
    inner = [{r for r in range(p) if tree.children[r]} for tree in double_tree(p)]
    both = inner[0] & inner[1]
    if p % 2 == 0 or p == 1:
        assert both == set()
    else:
        assert both == {0} and len(double_tree(p)[0].children[0]) == 1
    assert inner[0] <= {r for r in range(p) if r % 2 == 0}   # the btree's leaves are the odd ranks


def test_the_trees_are_ncclgetdtree_drawn_in_trees_cc():
    def children(tree):
        return {r: sorted(c) for r, c in enumerate(tree.children) if c}
    # src/graph/trees.cc's pictures: the btree on 14 ranks, its mirror on 12, its shift on 13
    assert children(double_tree(14)[0]) == {0: [8], 8: [4, 12], 4: [2, 6], 12: [10, 13], 2: [1, 3], 6: [5, 7],
                                            10: [9, 11]}
    assert children(double_tree(12)[1]) == {11: [3], 3: [1, 7], 1: [0, 2], 7: [5, 9], 5: [4, 6], 9: [8, 10]}
    assert children(double_tree(13)[1]) == {1: [9], 9: [0, 5], 5: [3, 7], 0: [11], 3: [2, 4], 7: [6, 8],
                                            11: [10, 12]}


# --- the steps on numbers ----------------------------------------------------------------------

def run_on_numbers(p: int, size: int, seed: int = 0):
    """Every rank runs its steps (tree_moves: each transfer with its tree,
    chunk and direction) in order on numbers: a step sends what the rank
    held when it began, and what it receives counts from its end. Chunk c
    of tree t starts as a random number on every rank; up, a parent adds
    what a child sends (and its set of contributors, which must not
    overlap: nothing counted twice); down, a rank takes its parent's whole.
    Returns, per rank, {(tree, chunk): (value, contributors)} at the end and
    the expected sums."""
    rng = random.Random(seed)
    plans = [tree_moves(p, r, size) for r in range(p)]
    keys = [(t, c) for t in (0, 1) for c in range(TREE_CHUNKS)]
    partial = [{k: (rng.randrange(1 << 40), frozenset([r])) for k in keys} for r in range(p)]
    want = {k: sum(partial[r][k][0] for r in range(p)) for k in keys}
    whole = [{} for _ in range(p)]
    roots = [tree.root for tree in double_tree(p)]
    mail: dict[tuple[int, int], list] = {}   # (src, dst) -> what src sent, in order
    taken: dict[tuple[int, int], int] = {}
    at = [0] * p

    def post(r):   # the sends of the step r begins, from what r holds now
        for peer, nbytes, t, c, kind in plans[r][at[r]][0]:
            held = partial[r][(t, c)] if kind == "reduce" or r == roots[t] else whole[r].get((t, c))
            assert held is not None, f"rank {r} sends chunk {c} of tree {t} down before it has it"
            mail.setdefault((r, peer), []).append((nbytes, t, c, kind, held))

    for r in range(p):
        if plans[r]:
            post(r)
    moved = True
    while moved:
        moved = False
        for r in range(p):
            if at[r] == len(plans[r]):
                continue
            recvs = plans[r][at[r]][1]
            counts = {}
            for peer, *_ in recvs:
                counts[peer] = counts.get(peer, 0) + 1
            if any(len(mail.get((peer, r), [])) < taken.get((peer, r), 0) + n for peer, n in counts.items()):
                continue   # a sender has not begun its step yet
            for peer, nbytes, t, c, kind in recvs:
                i = taken.get((peer, r), 0)
                taken[(peer, r)] = i + 1
                sent = mail[(peer, r)][i]
                assert sent[:4] == (nbytes, t, c, kind), (peer, r, sent[:4], (nbytes, t, c, kind))
                if kind == "reduce":
                    mine = partial[r][(t, c)]
                    assert not mine[1] & sent[4][1], f"rank {r} counts ranks {sorted(mine[1] & sent[4][1])} twice"
                    partial[r][(t, c)] = (mine[0] + sent[4][0], mine[1] | sent[4][1])
                else:
                    assert (t, c) not in whole[r]
                    whole[r][(t, c)] = sent[4]
            at[r] += 1
            moved = True
            if at[r] < len(plans[r]):
                post(r)
    assert at == [len(plan) for plan in plans], "deadlock: some rank never finished its steps"
    ends = [{k: partial[r][k] if r == roots[k[0]] else whole[r].get(k) for k in keys} for r in range(p)]
    return ends, want


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 31, 32, 33, 64, 70])
def test_every_rank_ends_with_the_full_sum(p):
    everyone = frozenset(range(p))
    for size in (1, 2 * TREE_CHUNKS + 1, 1000 * p + 7):
        ends, want = run_on_numbers(p, size, seed=p)
        for r, got in enumerate(ends):
            assert {k: v[0] for k, v in got.items()} == want, f"rank {r}"
            assert all(v[1] == everyone for v in got.values()), f"rank {r}"
        # the chunks are the buffer: tree 0 the first ceil(S/2) bytes, tree 1 the rest
        halves = (size - size // 2, size // 2)
        assert sum(sum(chunks(h, TREE_CHUNKS)) for h in halves) == size


def per_peer(moves) -> list[tuple[int, int]]:
    """A step's moves as its transfers: one per peer, their bytes summed, in first-move order."""
    total: dict[int, int] = {}
    for peer, nbytes, *_ in moves:
        total[peer] = total.get(peer, 0) + nbytes
    return list(total.items())


@pytest.mark.parametrize("p", [2, 5, 8, 13])
def test_the_steps_are_the_moves(p):
    size = 4096 * p + 3
    s = build_schedule("allreduce", "tree", p, size)
    for r in range(p):
        moves = tree_moves(p, r, size)
        assert [([(t.peer, t.nbytes) for t in st.sends], [(t.peer, t.nbytes) for t in st.recvs])
                for st in s.steps[r]] == [(per_peer(sends), per_peer(recvs)) for sends, recvs in moves]
        for st, (sends, recvs) in zip(s.steps[r], moves):
            assert st.phase == "+".join(sorted({m[4] for m in sends + recvs}, reverse=True))
        assert len(s.steps[r]) <= TREE_CHUNKS + 2 * ceil_log2(p) - 1


# --- bytes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [2, 3, 4, 7, 8, 11, 16, 21, 32, 70])
def test_bytes_match_pairwise_and_no_deadlock(p):
    for size in (1, 7, 4096 + 1, 1 << 20):
        s = build_schedule("allreduce", "tree", p, size)
        check_matching(s)   # per pair, sends and receives agree in order and bytes
        total = [len(steps) for steps in s.steps]
        assert simulate(s) == total and simulate(s, rendezvous=True) == total
        # each tree edge carries its tree's half up (reduce) and down (broadcast)
        halves = (size - size // 2, size // 2)
        want: dict[tuple[int, int], int] = {}
        for tree, half in zip(double_tree(p), halves):
            for r, up in enumerate(tree.parent):
                if up >= 0:
                    want[(r, up)] = want.get((r, up), 0) + half
                    want[(up, r)] = want.get((up, r), 0) + half
        got: dict[tuple[int, int], int] = {}
        for r, steps in enumerate(s.steps):
            for st in steps:
                for t in st.sends:
                    got[(r, t.peer)] = got.get((r, t.peer), 0) + t.nbytes
        assert got == want
        assert sum(s.bytes_sent(r) for r in range(p)) == 2 * (p - 1) * size   # as ring: 2(p-1)/p S per rank
        assert max(s.bytes_sent(r) for r in range(p)) <= 2 * size + size % 2   # tree 0 has the odd byte


# --- the model beside ring --------------------------------------------------------------------

def model(topology, policy, algorithm, size, ranks=None):
    fabric = build(topology)
    hosts = hosts_for_ranks(fabric, "naive", ranks)
    return predict_collective(fabric, forwarding_table(fabric, policy), "allreduce", algorithm, hosts, size,
                              alpha_s=ALPHA).time_s


@pytest.mark.parametrize("topology, policy", [("bigraph:m=4,n=8", "shortest"), ("fattree:k=4", "ecmp")])
def test_tree_beats_ring_on_small_messages_and_loses_on_large(topology, policy):
    # 32 and 16 ranks: ~2 log2(p) + 8 latencies against ring's 2(p-1); 2S per rank against 2(p-1)/p S
    assert model(topology, policy, "tree", 4 * KiB) < 0.75 * model(topology, policy, "ring", 4 * KiB)
    assert model(topology, policy, "tree", 16 * MiB) > 1.3 * model(topology, policy, "ring", 16 * MiB)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 16])
def test_where_no_link_is_shared_the_model_is_just_below_the_closed_form(p):
    # a leaf-spine with as many spines as hosts per leaf; the tree's flows leave every link to itself
    for size in (64 * KiB, 16 * MiB):
        closed = alpha_beta_time("allreduce", "tree", p, size, 50.0, ALPHA)
        got = model("leafspine:leaves=4,spines=4,hosts=4", "ecmp", "tree", size, p)
        assert 0.85 * closed <= got <= closed * (1 + 1e-9), (size, got / closed)


def test_the_closed_form_counts_latencies_and_bytes():
    beta = 8 / 50e6
    # 8 ranks: 8 + 2*3 - 1 = 13 latencies; 4 chunks of S/16 per step for 8 + 2.5 steps' worth: 2S * 10.5/8
    assert alpha_beta_time("allreduce", "tree", 8, 16e6, 50.0, ALPHA) == pytest.approx(13 * ALPHA + 2 * 16e6 * beta
                                                                                       * 10.5 / 8)
    # 2 ranks: each sends the other its tree's half up and the other's down, 2 chunks a step
    assert alpha_beta_time("allreduce", "tree", 2, 16e6, 50.0, 0.0) == pytest.approx(16e6 * beta * 8.5 / 8)
    with pytest.raises(ValueError, match="allreduce only"):
        alpha_beta_time("reduce-scatter", "tree", 8, 16e6, 50.0, ALPHA)


def test_tree_has_no_lockstep_rounds_and_flattens_its_steps():
    assert lockstep_rounds("allreduce", "tree", 16, MiB) is None
    flat = flat_schedule("allreduce", "tree", 16, MiB)
    assert flat.steps == sum(len(steps) for steps in build_schedule("allreduce", "tree", 16, MiB).steps)


# --- auto --------------------------------------------------------------------------------------

def closed(algorithm, p, size):
    return alpha_beta_time("allreduce", algorithm, p, size, AUTO_RATE_MBPS, AUTO_ALPHA_S)


@pytest.mark.parametrize("p", [2, 3, 8, 16, 32, 64, 128, 1000])
def test_auto_takes_the_lower_closed_form(p):
    for size in (1, 512, 4 * KiB, 64 * KiB, 256 * KiB, MiB, 16 * MiB, 1 << 30):
        want = "tree" if closed("tree", p, size) < closed("ring", p, size) else "ring"
        assert chosen_algorithm("allreduce", "auto", p, size) == want, size
        assert build_schedule("allreduce", "auto", p, size).algorithm == want
    # both ends: a large message is ring's at any rank count; a small one the tree's from 8 ranks on
    assert chosen_algorithm("allreduce", "auto", p, 1 << 30) == "ring"
    assert chosen_algorithm("allreduce", "auto", p, 1) == ("tree" if p >= 8 else "ring")


def test_auto_runs_ring_where_tree_does_not():
    for collective in ("reduce-scatter", "allgather"):
        assert chosen_algorithm(collective, "auto", 64, 1) == "ring"
        assert build_schedule(collective, "auto", 64, 100).steps == build_schedule(collective, "ring", 64, 100).steps
    assert chosen_algorithm("broadcast", "auto", 8, 1) == "auto"   # one algorithm of its own: nothing picked


def test_the_model_of_auto_is_the_model_of_what_it_picked():
    fabric = build("fattree:k=4")
    table, hosts = forwarding_table(fabric, "ecmp"), hosts_for_ranks(fabric, "naive")
    for size, picked in ((KiB, "tree"), (16 * MiB, "ring")):
        assert chosen_algorithm("allreduce", "auto", 16, size) == picked
        auto = predict_collective(fabric, table, "allreduce", "auto", hosts, size, alpha_s=ALPHA)
        assert auto == predict_collective(fabric, table, "allreduce", picked, hosts, size, alpha_s=ALPHA)
        assert alpha_beta_time("allreduce", "auto", 16, size, 50.0, ALPHA) == \
            alpha_beta_time("allreduce", picked, 16, size, 50.0, ALPHA)


def test_collectives_csv_names_the_algorithm_auto_picked():
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "algorithm": "auto", "sizes": ["1K", "16M"],
                              "repetitions": 1, "warmup": 0}))
    rows = collective_rows(plan, wrap([fake_records(plan, call, 1.0) for call in plan.calls]), "user")
    assert [(r["size_bytes"], r["algorithm"], r["algorithm_used"]) for r in rows] == \
        [(KiB, "auto", "tree"), (16 * MiB, "auto", "ring")]
    assert all(r["bytes_ok"] for r in rows)   # the agents' steps are the picked algorithm's
    assert len(plan.schedules[KiB].steps[0]) == len(build_schedule("allreduce", "tree", 8, KiB).steps[0])
    ring = plan_run(make_run({"topology": "bigraph:m=2,n=4", "sizes": ["1K"], "repetitions": 1, "warmup": 0}))
    (row,) = collective_rows(ring, wrap([fake_records(ring, ring.calls[0], 1.0)]), "user")
    assert (row["algorithm"], row["algorithm_used"]) == ("ring", "ring")


def test_a_run_plans_tree_as_any_algorithm():
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "algorithm": "tree", "sizes": ["64K"]}))
    assert plan.schedules[64 * KiB].steps == build_schedule("allreduce", "tree", 8, 64 * KiB).steps
    assert plan.predictions[64 * KiB].time_s > 0


# --- bad values ----------------------------------------------------------------------------------

def test_tree_runs_allreduce_only():
    for collective in ("reduce-scatter", "allgather"):
        with pytest.raises(ValueError, match=f"tree {collective} needs to run as allreduce"):
            check_collective(collective, "tree", 8, 1024)
        with pytest.raises(SpecError, match=f"algorithm: tree {collective} needs to run as allreduce .*use ring"):
            make_run({"algorithm": "tree", "collective": collective})


@pytest.mark.parametrize("flags, words", [
    (["-a", "tre"], ["algorithm", "'tre' is not one of", "tree", "auto"]),
    (["-a", "tree", "-c", "reduce-scatter"], ["algorithm", "tree reduce-scatter", "allreduce"]),
    (["-a", "tree", "-c", "broadcast"], ["algorithm", "broadcast has one algorithm of its own"]),
])
def test_bad_values_exit_2_naming_the_flag(capsys, flags, words):
    assert cli.main(["model", "-t", "bigraph:m=2,n=4", "-b", "64K", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bigraph-emu: error: -a/--algorithm") and "Traceback" not in err
    for w in words:
        assert w in err


def test_an_algorithm_that_picks_one_that_cannot_run_is_refused(monkeypatch):
    from emulator.workloads import algorithms
    always_hd = algorithms.Algorithm("always-hd", "halving-doubling, whatever the call",
                                     algorithms.HALVING_DOUBLING.rank_steps,
                                     picks=lambda p, size, rs, ag: "halving-doubling")
    monkeypatch.setitem(algorithms.ALGORITHMS, always_hd.name, always_hd)
    assert build_schedule("allreduce", "always-hd", 6, 600).algorithm == "halving-doubling"
    with pytest.raises(ValueError, match="always-hd picked halving-doubling, which for reduce-scatter needs a "
                                         "power-of-two rank count"):
        build_schedule("reduce-scatter", "always-hd", 6, 600)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 13, 16, 33])
def test_a_tree_step_has_one_transfer_per_peer_each_way(p):
    """The agents send the i-th transfer to a peer in a step on that peer's
    i-th connection: two to one peer would need two connections."""
    for rank in range(p):
        for step in build_schedule("allreduce", "tree", p, 1 << 20).steps[rank]:
            for side in (step.sends, step.recvs):
                peers = [t.peer for t in side]
                assert len(peers) == len(set(peers)), (rank, step)


def test_a_tree_allgather_is_refused_for_what_it_is_not_for_its_rank_count():
    from emulator.workloads.schedule import checked_algorithm
    with pytest.raises(ValueError) as refused:
        checked_algorithm("allgather", "tree", 8, 1 << 20)
    assert "allreduce only" in str(refused.value) and "got 8 ranks" not in str(refused.value)
    with pytest.raises(ValueError, match=r"power-of-two rank count .*; got 6 ranks$"):
        checked_algorithm("allgather", "halving-doubling", 6, 1 << 20)
