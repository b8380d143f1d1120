"""Unit tests of the pure collective schedules (emulator/workloads/schedule.py).

Includes a dependency-free simulation of the step semantics that checks every
schedule runs to completion (no deadlock)."""
from __future__ import annotations

import functools
import math
from collections import defaultdict

import pytest

from emulator.workloads.schedule import algorithm_need, build_schedule, chosen_algorithm
from emulator.workloads.steps import Schedule, Step, Transfer, chunks
from emulator.workloads.collectives import COLLECTIVES, busbw_factor
from emulator.workloads.algorithms import ALGORITHMS

RANKS = list(range(2, 18))
POW2 = [2, 4, 8, 16]
NON_POW2 = [p for p in RANKS if p & (p - 1)]
FIXED_SIZES = [1, 2, 3, 7, 16, 17, 100, 1000, 4097, 65536, 999_983, 1 << 20]


def sizes_for(p):
    """Sizes including 1, sizes below p, not divisible by p, and divisible."""
    extra = {max(1, p - 1), p, p + 1, 3 * p, 3 * p + 2, 1024 * p}
    return sorted(set(FIXED_SIZES) | extra)


# schedules are immutable: share them between tests
sched = functools.lru_cache(maxsize=None)(build_schedule)


def log2(p):
    return p.bit_length() - 1


# --- generic checkers ---------------------------------------------------------

def pair_streams(s: Schedule):
    """(src, dst) -> ordered byte counts sent / received, and the step index of each."""
    sent, recvd = defaultdict(list), defaultdict(list)
    for r in range(s.ranks):
        for k, step in enumerate(s.steps[r]):
            for t in step.sends:
                sent[(r, t.peer)].append((t.nbytes, k))
            for t in step.recvs:
                recvd[(t.peer, r)].append((t.nbytes, k))
    return sent, recvd


def check_matching(s: Schedule):
    """Every send has a matching receive: per ordered pair, the byte counts of
    sends and receives agree in order; peers are valid and never the rank itself."""
    for r in range(s.ranks):
        for step in s.steps[r]:
            assert isinstance(step, Step)
            for t in step.sends + step.recvs:
                assert isinstance(t, Transfer)
                assert 0 <= t.peer < s.ranks and t.peer != r, (r, t)
                assert isinstance(t.nbytes, int) and t.nbytes >= 0, (r, t)
    sent, recvd = pair_streams(s)
    assert set(sent) == set(recvd), "pairs with sends but no receives or vice versa"
    for pair in sent:
        assert [b for b, _ in sent[pair]] == [b for b, _ in recvd[pair]], pair


def simulate(s: Schedule, rendezvous: bool = False) -> list[int]:
    """Run the step semantics until nothing moves; return each rank's count of
    completed steps.

    A rank works on its steps in order. The i-th send from a to b matches the
    i-th receive of b from a. Eager model (rendezvous=False): a rank's send in
    step k is available once the rank has reached step k; a step completes
    when all its receives are available. Rendezvous model: additionally every
    send of the step needs its receiver to have reached the matching receive."""
    sent, recvd = pair_streams(s)
    # for the i-th recv of b from a: the step of a that sends it, and vice versa
    recv_needs = [[[] for _ in s.steps[r]] for r in range(s.ranks)]
    send_needs = [[[] for _ in s.steps[r]] for r in range(s.ranks)]
    for (a, b), rs in recvd.items():
        for i, (_, kb) in enumerate(rs):
            recv_needs[b][kb].append((a, sent[(a, b)][i][1]))
    for (a, b), ss in sent.items():
        for i, (_, ka) in enumerate(ss):
            send_needs[a][ka].append((b, recvd[(a, b)][i][1]))
    cur = [0] * s.ranks
    total = [len(st) for st in s.steps]
    moved = True
    while moved:
        moved = False
        for r in range(s.ranks):
            while cur[r] < total[r]:
                k = cur[r]
                needs = recv_needs[r][k] + (send_needs[r][k] if rendezvous else [])
                if all(cur[peer] >= kp for peer, kp in needs):
                    cur[r] += 1
                    moved = True
                else:
                    break
    return cur


def all_cases():
    """Every supported combination: what an algorithm's record says it does
    not run (halving-doubling reduce-scatter and allgather on a
    non-power-of-two rank count, tree but allreduce) is tested separately."""
    for c in COLLECTIVES:
        for a in ALGORITHMS:
            for p in RANKS:
                if algorithm_need(c, a, p):
                    continue
                yield c, a, p


# --- the simulator itself -----------------------------------------------------

def test_simulator_detects_deadlock():
    # both ranks first wait for the other, then send: a classic deadlock
    steps = ((Step((), (Transfer(1, 5),)), Step((Transfer(1, 5),), ())),
             (Step((), (Transfer(0, 5),)), Step((Transfer(0, 5),), ())))
    s = Schedule("x", "y", 2, 5, steps)
    check_matching(s)
    assert simulate(s) == [0, 0]


def test_simulator_eager_vs_rendezvous():
    # rank 0 sends twice then receives; rank 1 receives in its second step only
    steps = ((Step((Transfer(1, 1),), ()), Step((Transfer(1, 1),), ()), Step((), (Transfer(1, 1),))),
             (Step((Transfer(0, 1),), ()), Step((), (Transfer(0, 1), Transfer(0, 1)))))
    s = Schedule("x", "y", 2, 1, steps)
    check_matching(s)
    assert simulate(s) == [3, 2]
    # rank 0's first send has to wait for rank 1's second step; rank 1's send to
    # rank 0's third step: with rendezvous both block
    assert simulate(s, rendezvous=True) == [0, 0]


# --- every collective, algorithm, rank count and size -------------------------

@pytest.mark.parametrize("collective,algorithm,p", list(all_cases()))
def test_sends_match_receives_and_no_deadlock(collective, algorithm, p):
    for size in sizes_for(p):
        s = sched(collective, algorithm, p, size)
        ran = chosen_algorithm(collective, algorithm, p, size)   # auto: the one it picked
        assert (s.collective, s.algorithm, s.ranks, s.size_bytes) == (collective, ran, p, size)
        assert len(s.steps) == p
        check_matching(s)
        # which peers and steps are used does not depend on the size: simulate a few
        if size in (1, p + 1, 1 << 20):
            total = [len(st) for st in s.steps]
            assert simulate(s) == total, (collective, algorithm, p, size)
            assert simulate(s, rendezvous=True) == total, (collective, algorithm, p, size)
        # conservation: what is sent is received
        assert sum(s.bytes_sent(r) for r in range(p)) == sum(s.bytes_received(r) for r in range(p))


# total bytes on the wire, summed over ranks, for p ranks and S bytes
TOTAL_TRAFFIC = {
    "allreduce": lambda p, S: 2 * (p - 1) * S,
    "reduce-scatter": lambda p, S: (p - 1) * S,
    "allgather": lambda p, S: (p - 1) * S,
    "broadcast": lambda p, S: (p - 1) * S,
    "all-to-all": lambda p, S: (p - 1) * S,
    "parameter-server": lambda p, S: 2 * (p - 1) * S,
    "stride": lambda p, S: p * S,
    "incast": lambda p, S: (p - 1) * S,
}


@pytest.mark.parametrize("collective,algorithm,p", list(all_cases()))
def test_total_traffic(collective, algorithm, p):
    for size in sizes_for(p):
        s = sched(collective, algorithm, p, size)
        assert sum(s.bytes_sent(r) for r in range(p)) == TOTAL_TRAFFIC[collective](p, size), size


@pytest.mark.parametrize("collective", ["broadcast", "all-to-all", "parameter-server", "stride", "incast"])
def test_algorithm_ignored_for_single_algorithm_collectives(collective):
    for p in (2, 5, 8):
        a = sched(collective, "ring", p, 1000)
        b = sched(collective, "halving-doubling", p, 1000)
        assert a.steps == b.steps


# --- ring ----------------------------------------------------------------------

@pytest.mark.parametrize("p", RANKS)
def test_ring_allreduce_structure_and_bytes(p):
    for S in sizes_for(p):
        s = sched("allreduce", "ring", p, S)
        c = chunks(S, p)
        for r in range(p):
            steps = s.steps[r]
            assert len(steps) == 2 * (p - 1)
            assert [st.phase for st in steps] == ["reduce-scatter"] * (p - 1) + ["allgather"] * (p - 1)
            for st in steps:
                assert [t.peer for t in st.sends] == [(r + 1) % p]
                assert [t.peer for t in st.recvs] == [(r - 1) % p]
            # each phase sends every chunk but one: exactly 2*(S - chunk) per rank
            assert s.bytes_sent(r) == 2 * S - c[(r + 1) % p] - c[(r + 2) % p]
            assert s.bytes_received(r) == 2 * S - c[r] - c[(r + 1) % p]
            assert 2 * (S - math.ceil(S / p)) <= s.bytes_sent(r) <= 2 * (S - S // p)
            if S % p == 0:
                assert s.bytes_sent(r) == 2 * (S - S // p) == s.bytes_received(r)
                assert s.bytes_sent(r) == pytest.approx(2 * (p - 1) / p * S)


@pytest.mark.parametrize("p", RANKS)
def test_ring_reduce_scatter_and_allgather(p):
    for S in sizes_for(p):
        rs = sched("reduce-scatter", "ring", p, S)
        ag = sched("allgather", "ring", p, S)
        ar = sched("allreduce", "ring", p, S)
        for r in range(p):
            assert len(rs.steps[r]) == len(ag.steps[r]) == p - 1
            assert {st.phase for st in rs.steps[r]} == {"reduce-scatter"}
            assert {st.phase for st in ag.steps[r]} == {"allgather"}
            # allreduce = reduce-scatter followed by allgather
            assert ar.steps[r] == rs.steps[r] + ag.steps[r]


def test_chunks():
    for size in range(0, 40):
        for parts in range(1, 12):
            c = chunks(size, parts)
            assert len(c) == parts and sum(c) == size
            assert max(c) - min(c) <= 1
            assert c == sorted(c, reverse=True)


# --- halving-doubling ---------------------------------------------------------

def final_segment(rank, p, S):
    """[lo, hi) that `rank` owns after recursive halving (bit k decides at step k)."""
    lo, hi = 0, S
    for k in range(log2(p)):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if not (rank >> k) & 1 else (mid, hi)
    return lo, hi


@pytest.mark.parametrize("p", POW2)
def test_hd_allreduce_power_of_two(p):
    d = log2(p)
    for S in sizes_for(p):
        s = sched("allreduce", "halving-doubling", p, S)
        segs = [final_segment(r, p, S) for r in range(p)]
        # final segments partition [0, S), sizes differ by at most one
        assert sorted(segs)[0][0] == 0 and sorted(segs)[-1][1] == S
        assert all(a[1] == b[0] for a, b in zip(sorted(segs), sorted(segs)[1:]))
        assert max(hi - lo for lo, hi in segs) - min(hi - lo for lo, hi in segs) <= 1
        for r in range(p):
            steps = s.steps[r]
            assert len(steps) == 2 * d
            assert [st.phase for st in steps] == ["reduce-scatter"] * d + ["allgather"] * d
            partners = [k for k in range(d)] + [k for k in reversed(range(d))]
            for st, k in zip(steps, partners):
                assert [t.peer for t in st.sends] == [r ^ (1 << k)]
                assert [t.peer for t in st.recvs] == [r ^ (1 << k)]
            # reduce-scatter sizes halve, allgather sizes double
            rs = [st.sends[0].nbytes for st in steps[:d]]
            ag = [st.sends[0].nbytes for st in steps[d:]]
            for a, b in zip(rs, rs[1:]):
                assert abs(a - 2 * b) <= 2
            for a, b in zip(ag, ag[1:]):
                assert abs(2 * a - b) <= 2
            final = segs[r][1] - segs[r][0]
            assert sum(rs) == S - final
            assert sum(st.recvs[0].nbytes for st in steps[d:]) == S - final
            if S % p == 0:
                assert s.bytes_sent(r) == 2 * (S - final) == 2 * (S - S // p)
                assert s.bytes_received(r) == 2 * (S - S // p)
                assert rs == [S >> (k + 1) for k in range(d)]
                assert ag == [S >> (d - k) for k in range(d)]


@pytest.mark.parametrize("p", POW2)
def test_hd_reduce_scatter_allgather_power_of_two(p):
    d = log2(p)
    for S in sizes_for(p):
        rs = sched("reduce-scatter", "halving-doubling", p, S)
        ag = sched("allgather", "halving-doubling", p, S)
        ar = sched("allreduce", "halving-doubling", p, S)
        for r in range(p):
            assert len(rs.steps[r]) == len(ag.steps[r]) == d
            assert ar.steps[r] == rs.steps[r] + ag.steps[r]
            final = final_segment(r, p, S)
            assert rs.bytes_sent(r) == S - (final[1] - final[0])
            assert ag.bytes_received(r) == S - (final[1] - final[0])


@pytest.mark.parametrize("p", NON_POW2)
def test_hd_allreduce_non_power_of_two_pre_post(p):
    core = 1 << log2(p)
    extra = p - core
    d = log2(p)
    S = 1000 * p + 3
    s = sched("allreduce", "halving-doubling", p, S)
    proxies = []
    for r in range(p):
        steps = s.steps[r]
        phases = [st.phase for st in steps]
        if r < 2 * extra and r % 2 == 0:        # sits out the core
            assert phases == ["pre", "post"]
            assert steps[0].sends == (Transfer(r + 1, S),) and not steps[0].recvs
            assert steps[1].recvs == (Transfer(r + 1, S),) and not steps[1].sends
        elif r < 2 * extra:                      # proxy for r-1
            proxies.append(r)
            assert phases == ["pre"] + ["reduce-scatter"] * d + ["allgather"] * d + ["post"]
            assert steps[0].recvs == (Transfer(r - 1, S),) and not steps[0].sends
            assert steps[-1].sends == (Transfer(r - 1, S),) and not steps[-1].recvs
        else:
            assert phases == ["reduce-scatter"] * d + ["allgather"] * d
    assert len(proxies) == extra
    # the core is a power-of-two halving-doubling over the `core` active ranks,
    # and no active rank ever talks to a rank that sits out
    active = [r for r in range(p) if not (r < 2 * extra and r % 2 == 0)]
    assert len(active) == core
    for r in active:
        for st in s.steps[r]:
            if st.phase in ("reduce-scatter", "allgather"):
                assert {t.peer for t in st.sends + st.recvs} <= set(active)
                assert len(st.sends) == len(st.recvs) == 1
                assert st.sends[0].peer == st.recvs[0].peer
    # partners of the core differ in one bit of the virtual rank
    virtual = {r: i for i, r in enumerate(active)}
    for r in active:
        core_steps = [st for st in s.steps[r] if st.phase in ("reduce-scatter", "allgather")]
        ks = list(range(d)) + list(reversed(range(d)))
        for st, k in zip(core_steps, ks):
            assert virtual[st.sends[0].peer] == virtual[r] ^ (1 << k)


# Each rank of a reduce-scatter must receive at least its reduced block, and
# each rank of an allgather must send its block and receive the others.
def _needs_violations(collective, p, S):
    s = sched(collective, "halving-doubling", p, S)
    c = chunks(S, p)
    bad = []
    for r in range(p):
        if collective == "reduce-scatter" and s.bytes_received(r) < min(c):
            bad.append((r, "received", s.bytes_received(r)))
        if collective == "allgather":
            if s.bytes_sent(r) < min(c):
                bad.append((r, "sent", s.bytes_sent(r)))
            if s.bytes_received(r) < S - max(c):
                bad.append((r, "received", s.bytes_received(r)))
    return bad


@pytest.mark.parametrize("collective", ["reduce-scatter", "allgather"])
def test_hd_reduce_scatter_allgather_lower_bounds_power_of_two(collective):
    for p in POW2:
        for S in sizes_for(p):
            assert _needs_violations(collective, p, S) == []


@pytest.mark.parametrize("collective", ["reduce-scatter", "allgather"])
@pytest.mark.parametrize("p", [3, 5, 6, 12])
def test_hd_reduce_scatter_allgather_refuse_non_power_of_two(collective, p):
    """The pre/post trick of allreduce does not give these collectives every
    block, so they refuse clearly instead of running a wrong schedule."""
    with pytest.raises(ValueError, match="power-of-two"):
        sched(collective, "halving-doubling", p, 1200 * p)


# --- other collectives ----------------------------------------------------------

@pytest.mark.parametrize("p", RANKS)
def test_broadcast_structure(p):
    for S in sizes_for(p):
        s = sched("broadcast", "ring", p, S)
        for r in range(p):
            # 4p chunks; a middle rank needs one extra step to forward the last
            assert len(s.steps[r]) == 4 * p + (1 if 0 < r < p - 1 else 0)
            assert s.bytes_received(r) == (0 if r == 0 else S)
            assert s.bytes_sent(r) == (0 if r == p - 1 else S)
            for st in s.steps[r]:
                assert {t.peer for t in st.sends} <= {r + 1}
                assert {t.peer for t in st.recvs} <= {r - 1}


@pytest.mark.parametrize("p", [3, 4, 8])
def test_broadcast_is_causal(p):
    """A non-root rank owns nothing at the start, so by the end of step k it
    cannot have sent more than it received in steps before k."""
    S = 1000 * p
    s = sched("broadcast", "ring", p, S)
    for r in range(1, p):
        received_before = 0
        sent = 0
        for st in s.steps[r]:
            sent += sum(t.nbytes for t in st.sends)
            assert sent <= received_before, (r, sent, received_before)
            received_before += sum(t.nbytes for t in st.recvs)


@pytest.mark.parametrize("p", RANKS)
def test_all_to_all(p):
    for S in sizes_for(p):
        s = sched("all-to-all", "ring", p, S)
        c = chunks(S, p)
        for r in range(p):
            assert len(s.steps[r]) == 1
            st = s.steps[r][0]
            assert sorted(t.peer for t in st.sends) == [q for q in range(p) if q != r]
            assert sorted(t.peer for t in st.recvs) == [q for q in range(p) if q != r]
            assert all(t.nbytes == c[t.peer] for t in st.sends)
            assert all(t.nbytes == c[r] for t in st.recvs)
            assert s.bytes_sent(r) == S - c[r]


@pytest.mark.parametrize("p", RANKS)
def test_parameter_server(p):
    S = 4096
    s = sched("parameter-server", "ring", p, S)
    server = s.steps[0]
    assert [st.phase for st in server] == ["push", "pull"]
    assert sorted(t.peer for t in server[0].recvs) == list(range(1, p)) and not server[0].sends
    assert sorted(t.peer for t in server[1].sends) == list(range(1, p)) and not server[1].recvs
    assert s.bytes_received(0) == s.bytes_sent(0) == (p - 1) * S
    for w in range(1, p):
        assert s.steps[w] == (Step((Transfer(0, S),), (), "push"), Step((), (Transfer(0, S),), "pull"))


# --- busbw factors (nccl-tests) ---------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 16, 17, 64])
def test_busbw_factor(n):
    assert busbw_factor("allreduce", n) == pytest.approx(2 * (n - 1) / n)
    for c in ("reduce-scatter", "allgather", "all-to-all"):
        assert busbw_factor(c, n) == pytest.approx((n - 1) / n)
    assert busbw_factor("broadcast", n) == 1.0
    assert busbw_factor("parameter-server", n) == 1.0


def test_busbw_known_values():
    assert busbw_factor("allreduce", 8) == 1.75
    assert busbw_factor("allgather", 8) == 0.875
    assert busbw_factor("allreduce", 2) == 1.0


def test_busbw_factor_every_collective_and_unknown():
    for c in COLLECTIVES:
        assert busbw_factor(c, 4) > 0
    with pytest.raises(ValueError, match="unknown collective 'gather'"):
        busbw_factor("gather", 4)


# --- bad inputs -------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (("allgatherv", "ring", 4, 100), "unknown collective 'allgatherv'"),
    (("allreduce", "tre", 4, 100), "unknown algorithm 'tre'"),
    (("allreduce", "ring", 1, 100), "at least 2 ranks"),
    (("allreduce", "ring", 0, 100), "at least 2 ranks"),
    (("allreduce", "ring", -3, 100), "at least 2 ranks"),
    (("allreduce", "ring", 4, 0), "size must be >= 1"),
    (("allreduce", "ring", 4, -5), "size must be >= 1"),
    (("broadcast", "bogus", 4, 100), "unknown algorithm"),
])
def test_bad_inputs_rejected(args, needle):
    with pytest.raises(ValueError, match=needle):
        build_schedule(*args)


def test_non_integer_ranks_rejected():
    with pytest.raises((ValueError, TypeError)):
        build_schedule("allreduce", "ring", 4.0, 100)
    with pytest.raises((ValueError, TypeError)):
        build_schedule("allreduce", "ring", "4", 100)


def test_non_integer_size_rejected():
    with pytest.raises((ValueError, TypeError)):
        build_schedule("allreduce", "ring", 4, 10.5)


# --- jitter ---------------------------------------------------------------------------

@pytest.mark.parametrize("collective,algorithm,p", [("allreduce", "halving-doubling", 8), ("allreduce", "ring", 5),
                                                    ("all-to-all", "ring", 6), ("parameter-server", "ring", 4)])
def test_jittered_schedule_still_matches_and_only_grows(collective, algorithm, p):
    from emulator.workloads.schedule import jittered
    s = sched(collective, algorithm, p, 100_000)
    j = jittered(s, 0.2, seed=3)
    check_matching(j)
    assert [len(x) for x in j.steps] == [len(x) for x in s.steps]
    for a, b in zip(s.steps, j.steps):
        for sa, sb in zip(a, b):
            for ta, tb in zip(sa.sends, sb.sends):
                assert ta.peer == tb.peer and ta.nbytes <= tb.nbytes <= ta.nbytes * 1.2
    assert j == jittered(s, 0.2, seed=3) and j != jittered(s, 0.2, seed=4)
    assert jittered(s, 0.0) == s
    with pytest.raises(ValueError, match="jitter amplitude"):
        jittered(s, -0.1)


def test_stride_sends_half_way_round():
    sched = build_schedule("stride", "ring", 8, 1000)
    for rank, steps in enumerate(sched.steps):
        (step,) = steps
        assert step.sends == (Transfer((rank + 4) % 8, 1000),)
        assert step.recvs == (Transfer((rank - 4) % 8, 1000),)
    assert busbw_factor("stride", 8) == 1.0


def test_over_connections_splits_every_transfer_and_keeps_the_bytes():
    from emulator.workloads.schedule import over_connections
    base = build_schedule("allreduce", "halving-doubling", 8, 1001)
    assert over_connections(base, 1) is base
    split = over_connections(base, 3)
    for rank in range(8):
        assert split.bytes_sent(rank) == base.bytes_sent(rank)
        for a, b in zip(base.steps[rank], split.steps[rank]):
            assert len(b.sends) == 3 * len(a.sends) and len(b.recvs) == 3 * len(a.recvs)
            assert {t.peer for t in b.sends} == {t.peer for t in a.sends}
            assert max(t.nbytes for t in b.sends) - min(t.nbytes for t in b.sends) <= 1


def test_incast_sends_every_rank_to_rank_0_at_once():
    s = sched("incast", "ring", 5, 1000)
    assert [len(steps) for steps in s.steps] == [1] * 5
    assert [t.peer for t in s.steps[0][0].recvs] == [1, 2, 3, 4] and s.steps[0][0].sends == ()
    assert all(s.steps[r][0].sends[0].peer == 0 and s.steps[r][0].recvs == () for r in range(1, 5))
    assert s.bytes_received(0) == 4000
