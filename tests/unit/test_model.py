"""Flow model: hand-checked small cases, then the BiGraph/HDRM claims."""
import dataclasses
import math

import numpy as np
import pytest

from emulator.routes.routing import forwarding_table, model_table
from emulator.fabric.mapping import hosts_for_ranks
from emulator.model.simulation import link_loads_per_step, max_flows_per_step, max_min_rates, predict
from emulator.workloads.schedule import alpha_beta_time
from emulator.workloads.schedule import build_schedule
from emulator.workloads.steps import Schedule, Step, Transfer
from emulator.fabric.topology import LinkProfile, bigraph, build

MiB = 2 ** 20
M = MiB
S = 16 * MiB
ALPHA = 5e-4


def bytes_per_s(mbps):
    return mbps * 1e6 / 8


def schedule(*ranks):
    """A hand-written schedule: ranks[r] = rank r's steps as (sends, recvs),
    each a list of (peer, nbytes)."""
    steps = tuple(tuple(Step(tuple(Transfer(p, n) for p, n in sends), tuple(Transfer(p, n) for p, n in recvs))
                        for sends, recvs in rank) for rank in ranks)
    return Schedule("custom", "custom", len(ranks), 0, steps)


def two_switches(m=3, host_mbps=100.0, switch_mbps=100.0):
    """bigraph n=2: hosts 0..m-1 on bgs0, m..2m-1 on bgs1, one link between them."""
    fabric = bigraph(m, 2, LinkProfile(host_rate_mbps=host_mbps, switch_rate_mbps=switch_mbps))
    return fabric, forwarding_table(fabric, "shortest"), [h.name for h in fabric.hosts]


def setup(topology, policy, mapping, algorithm="halving-doubling", size=S):
    fabric = build(topology)
    table = forwarding_table(fabric, policy)
    hosts = hosts_for_ranks(fabric, mapping)
    return fabric, table, build_schedule("allreduce", algorithm, len(hosts), size), hosts


# --- single flows and sharing ------------------------------------------------

def test_one_flow_takes_size_over_rate_plus_alpha():
    fabric, table, hosts = two_switches(m=1, host_mbps=80.0, switch_mbps=40.0)
    sched = schedule([([(1, S)], [])], [([], [(0, S)])])
    pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    # The 40 Mbit/s switch link is the bottleneck.
    assert pred.time_s == pytest.approx(S / bytes_per_s(40) + ALPHA, rel=1e-9)
    assert pred.step_end_s == ((pred.time_s,), (pred.time_s,))


def test_a_flow_arrives_its_paths_delay_after_its_last_byte():
    fabric, table, hosts = two_switches(m=1, host_mbps=80.0, switch_mbps=40.0)
    delays = {"host": 2.0, "switch": 30.0}   # ms, each direction
    fabric.links = [dataclasses.replace(l, delay_ms=delays[l.kind]) for l in fabric.links]
    sched = schedule([([(1, S)], [(1, 1000)])], [([(0, 1000)], [(0, S)])])
    pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    one_way = (2 * 2.0 + 30.0) / 1e3   # two host links and the switch link
    assert pred.time_s == pytest.approx(S / bytes_per_s(40) + ALPHA + one_way, rel=1e-9)
    # the small reply of rank 1 pays the same delay, on top of its own transfer
    assert pred.step_end_s[0] == pred.step_end_s[1]


def test_two_flows_on_one_bottleneck_get_half_rate_each():
    fabric, table, hosts = two_switches(m=2, switch_mbps=50.0)
    # ranks 0,1 on bgs0 send to ranks 2,3 on bgs1: both cross bgs0 -> bgs1
    sched = schedule([([(2, S)], [])], [([(3, S)], [])], [([], [(0, S)])], [([], [(1, S)])])
    pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    assert pred.time_s == pytest.approx(S / bytes_per_s(25) + ALPHA, rel=1e-9)
    assert pred.link_max_flows[("bgs0", 3)] == 2          # port 3: first port after m=2 host ports
    assert pred.max_flows_per_step == [2]


def test_max_min_with_unequal_bottlenecks():
    # hosts h0,h1,h2 on bgs0 and h3,h4,h5 on bgs1; NICs 100 Mb/s, bgs0->bgs1 60 Mb/s.
    #   A: h0 -> h3 and B: h1 -> h4 share bgs0->bgs1 (60): 30 each.
    #   C: h1 -> h2 shares h1's NIC (100) with B, which is held at 30 elsewhere,
    #   so C gets the remaining 70. Nothing else is shared.
    # C (S bytes) ends at S/70 Mb/s; A and B stay at 30 (their bottleneck is
    # unchanged when C leaves) and end at S/30 Mb/s.
    fabric, table, hosts = two_switches(m=3, host_mbps=100.0, switch_mbps=60.0)
    sched = schedule([([(3, S)], [])], [([(4, S), (2, S)], [])], [([], [(1, S)])],
                     [([], [(0, S)])], [([], [(1, S)])], [])
    pred = predict(fabric, table, sched, hosts)
    ends = [e[0] if e else None for e in pred.step_end_s]
    assert ends[2] == pytest.approx(S / bytes_per_s(70), rel=1e-9)   # C's receiver
    assert ends[0] == pytest.approx(S / bytes_per_s(30), rel=1e-9)   # A
    assert ends[4] == pytest.approx(S / bytes_per_s(30), rel=1e-9)   # B's receiver
    assert ends[5] is None


def test_max_min_rates_directly():
    # links 0,1,2 of capacity 10, 4, 10: flow 0 on links 0,1; flow 1 on 0,2; flow 2 on 2.
    # Link 1 caps flow 0 at 4; link 0 leaves 6 for flow 1, link 2 gives it 5
    # (shared with flow 2), so flow 1 = 5, flow 2 = 5.
    route = np.array([[0, 1], [0, 2], [2, 3]])
    capacity = np.array([10.0, 4.0, 10.0, math.inf])   # link 3 pads short routes
    assert max_min_rates(route, capacity).tolist() == pytest.approx([4.0, 5.0, 5.0])


@pytest.mark.parametrize("seed", range(40))
def test_filling_link_by_link_gives_the_rates_of_filling_flow_by_flow(seed):
    from emulator.model.simulation import _filling_by_flow, _filling_by_link
    rng = np.random.default_rng(seed)
    links, flows, width = int(rng.integers(2, 40)), int(rng.integers(1, 400)), int(rng.integers(1, 5))
    capacity = np.append(rng.choice([10.0, 25.0, 40.0, 7.5], links), math.inf)
    route = rng.integers(0, links + 1, (flows, width))   # link id `links` is the infinite pad
    route[0] = links                                     # a flow on the pad only: unbounded
    with np.errstate(invalid="ignore"):                  # inf - inf on the pad link
        want = _filling_by_flow(route, capacity)
    got = _filling_by_link(route, capacity)
    assert math.isinf(got[0]) and math.isinf(want[0])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_filling_link_by_link_groups_past_16_bit_link_ids():
    from emulator.model.simulation import _filling_by_flow, _filling_by_link
    rng = np.random.default_rng(1)
    links = 70_000
    capacity = np.append(rng.choice([10.0, 25.0], links), math.inf)
    route = rng.integers(0, links, (5000, 3))
    np.testing.assert_allclose(_filling_by_link(route, capacity), _filling_by_flow(route, capacity), rtol=1e-12)


def test_a_large_all_to_all_fills_link_by_link_as_flow_by_flow(monkeypatch):
    import emulator.model.simulation as model
    fabric = build("fattree:k=8")
    table = model_table(fabric, "ecmp")
    hosts = [h.name for h in fabric.hosts]
    flow_by_flow = model.predict_collective(fabric, table, "all-to-all", "ring", hosts, 4 * M, ALPHA)
    monkeypatch.setattr(model, "LINKWISE_ENTRIES", 0)
    link_by_link = model.predict_collective(fabric, table, "all-to-all", "ring", hosts, 4 * M, ALPHA)
    assert link_by_link.time_s == pytest.approx(flow_by_flow.time_s, rel=1e-9)
    assert link_by_link.link_max_flows == flow_by_flow.link_max_flows


def test_a_drained_flow_frees_its_share():
    # X (S) and Y (2S) share one 50 Mb/s link: both at R/2 until X drains at
    # 2S/R, then Y's last S at R: Y ends at 3S/R.
    fabric, table, hosts = two_switches(m=2, switch_mbps=50.0)
    sched = schedule([([(2, S)], [])], [([(3, 2 * S)], [])], [([], [(0, S)])], [([], [(1, 2 * S)])])
    pred = predict(fabric, table, sched, hosts)
    r = bytes_per_s(50)
    assert pred.step_end_s[2][0] == pytest.approx(2 * S / r, rel=1e-9)
    assert pred.step_end_s[3][0] == pytest.approx(3 * S / r, rel=1e-9)


def test_empty_and_host_local_transfers_take_alpha():
    fabric, table, hosts = two_switches(m=1)
    empty = schedule([([(1, 0)], [])], [([], [(0, 0)])])
    assert predict(fabric, table, empty, hosts, alpha_s=ALPHA).time_s == pytest.approx(ALPHA)
    local = schedule([([(1, S)], [])], [([], [(0, S)])])
    assert predict(fabric, table, local, [hosts[0], hosts[0]], alpha_s=ALPHA).time_s == pytest.approx(ALPHA)
    assert max_flows_per_step(fabric, table, local, [hosts[0], hosts[0]]) == [0]


# --- step dependencies --------------------------------------------------------

def test_a_send_waits_until_its_receiver_is_ready():
    # rank 0 wants to send S to rank 1 at once; rank 1 is busy sending 4S in
    # step 0 and posts the receive only in step 1 (rendezvous), so rank 0's
    # flow starts when rank 1's step 0 ends.
    fabric, table, hosts = two_switches(m=3, host_mbps=50.0, switch_mbps=50.0)
    sched = schedule([([(1, S)], [])], [([(3, 4 * S)], []), ([], [(0, S)])], [], [([], [(1, 4 * S)])])
    pred = predict(fabric, table, sched, hosts[:4], alpha_s=ALPHA)
    step0 = 4 * S / bytes_per_s(50) + ALPHA
    step1 = step0 + S / bytes_per_s(50) + ALPHA
    assert pred.step_end_s[1] == pytest.approx((step0, step1), rel=1e-9)
    assert pred.step_end_s[0] == pytest.approx((step1,), rel=1e-9)


def test_no_step_starts_before_the_previous_one_ended():
    fabric, table, sched, hosts = setup("bigraph:m=4,n=8", "shortest", "random")
    pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    rate = bytes_per_s(50)
    for rank, ends in enumerate(pred.step_end_s):
        previous = 0.0
        for step, end in zip(sched.steps[rank], ends):
            # a send starts with its step, cannot beat its NIC's line rate and costs alpha
            fastest = max(t.nbytes for t in step.sends) / rate + ALPHA
            assert end >= previous + fastest * (1 - 1e-9)
            previous = end
    assert pred.time_s == max(max(e) for e in pred.step_end_s)


def test_efficiency_scales_time():
    fabric, table, sched, hosts = setup("bigraph:m=4,n=8", "shortest", "naive")
    full = predict(fabric, table, sched, hosts).time_s
    assert predict(fabric, table, sched, hosts, efficiency=0.8).time_s == pytest.approx(full / 0.8, rel=1e-9)
    with pytest.raises(ValueError):
        predict(fabric, table, sched, hosts, efficiency=0.0)


def test_mismatched_schedules_are_refused():
    fabric, table, hosts = two_switches(m=1)
    with pytest.raises(ValueError, match="receives 0"):
        predict(fabric, table, schedule([([(1, S)], [])], [([], [])]), hosts)
    with pytest.raises(ValueError, match="expects"):
        predict(fabric, table, schedule([([(1, S)], [])], [([], [(0, S - 1)])]), hosts)
    with pytest.raises(ValueError, match="outside"):
        predict(fabric, table, schedule([([(2, S)], [])], [([], [])]), hosts)
    # each rank waits for the other's second step before its own first ends
    deadlock = schedule([([], [(1, 1)]), ([(1, 1)], [])], [([], [(0, 1)]), ([(0, 1)], [])])
    with pytest.raises(RuntimeError, match="deadlock"):
        predict(fabric, table, deadlock, hosts)


# --- collectives against the alpha-beta model ---------------------------------

def test_alpha_beta_formulas():
    # p=2, S=1e6 B, 8 Mbit/s -> beta = 1 us/B: 2 alpha + 2 * 1/2 * 1 s
    assert alpha_beta_time("allreduce", "ring", 2, 1e6, 8.0, 0.01) == pytest.approx(1.02)
    # p=8: ring 14 alpha, HD 6 alpha, both 2 * 7/8 * S beta
    assert alpha_beta_time("allreduce", "ring", 8, 8e6, 8.0, 0.01) == pytest.approx(0.14 + 14)
    assert alpha_beta_time("allreduce", "halving-doubling", 8, 8e6, 8.0, 0.01) == pytest.approx(0.06 + 14)
    with pytest.raises(ValueError):
        alpha_beta_time("allreduce", "halving-doubling", 6, 8e6, 8.0, 0.01)


def test_ring_on_small_bigraph_matches_alpha_beta():
    fabric, table, sched, hosts = setup("bigraph:m=2,n=4", "spread", "naive", "ring")
    pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    assert pred.max_flows_per_step == [1] * 14
    assert pred.time_s == pytest.approx(alpha_beta_time("allreduce", "ring", 8, S, 50.0, ALPHA), rel=1e-9)


@pytest.mark.parametrize("policy", ["shortest", "spread"])
def test_hdrm_is_congestion_free_and_matches_alpha_beta(policy):
    fabric, table, sched, hosts = setup("bigraph:m=4,n=8", policy, "hdrm")
    pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    loads = link_loads_per_step(fabric, table, sched, hosts)
    assert len(loads) == 10
    for step in loads:
        across = [n for (node, port), n in step.items()
                  if fabric.is_switch(node) and fabric.is_switch(fabric.peer(node, port)[0])]
        assert across and max(across) == 1
    assert pred.max_flows_per_step == [1] * 10
    assert pred.time_s == pytest.approx(alpha_beta_time("allreduce", "halving-doubling", 32, S, 50.0, ALPHA),
                                        rel=1e-9)


def test_naive_mapping_congests_and_is_slower():
    fabric, table, sched, hosts = setup("bigraph:m=4,n=8", "shortest", "naive")
    naive = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    hdrm = predict(fabric, table, sched, hosts_for_ranks(fabric, "hdrm"), alpha_s=ALPHA)
    assert naive.time_s >= 1.4 * hdrm.time_s
    # Partners r^4 and r^8 sit on two switches of one part: all their flows
    # take the lowest-port middle switch, and a middle->switch link carries
    # the 4 flows arriving from one switch plus the 4 passing on to another
    # (2m); r^16 puts a switch's 4 flows on its one direct link (m).
    assert naive.max_flows_per_step == [1, 1, 8, 8, 4, 4, 8, 8, 1, 1]
    assert max_flows_per_step(fabric, table, sched, hosts) == naive.max_flows_per_step
    # live counts can exceed the per-step ones: a rank ahead of its neighbours
    # sends step k+1 while they still send step k; a rank only ever sends one flow
    assert max(naive.link_max_flows.values()) >= 8
    assert {n for (node, _), n in naive.link_max_flows.items() if not fabric.is_switch(node)} == {1}
    # Without latency, every step is a pure bandwidth step at its busiest
    # link's load: sum(load * bytes) / R.
    sizes = [S // 2 ** (k + 1) for k in range(5)]
    sizes += sizes[::-1]
    bandwidth = sum(n * b for n, b in zip(naive.max_flows_per_step, sizes)) / bytes_per_s(50)
    assert predict(fabric, table, sched, hosts).time_s == pytest.approx(bandwidth, rel=1e-9)
    # With latency, ranks ahead fill the shared links while others wait out
    # alpha, so less than all 10 alphas show.
    assert bandwidth + ALPHA < naive.time_s <= bandwidth + 10 * ALPHA + 1e-9


def test_large_hdrm_stays_exact():
    # 2048 hosts: the batching of near-simultaneous events must not drift.
    fabric, table, sched, hosts = setup("bigraph:m=32,n=64", "spread", "hdrm")
    pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    assert max(pred.max_flows_per_step) == 1
    assert pred.time_s == pytest.approx(alpha_beta_time("allreduce", "halving-doubling", 2048, S, 50.0, ALPHA),
                                        rel=1e-6)


# --- compute, channels and waits (job programs) ---------------------------------

def test_compute_delays_the_transfer_that_follows_it():
    fabric, table, hosts = two_switches(m=1, host_mbps=80.0, switch_mbps=40.0)
    sched = Schedule("custom", "custom", 2, 0, (
        (Step(compute_s=1.5, phase="compute"), Step((Transfer(1, S),), ())),
        (Step((), (Transfer(0, S),)),)))
    pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    # the receiver posts at once, but the sender computes first
    assert pred.time_s == pytest.approx(1.5 + S / bytes_per_s(40) + ALPHA, rel=1e-9)
    assert pred.step_end_s[0][0] == pytest.approx(1.5, rel=1e-12)


def test_communication_on_its_own_channel_overlaps_compute_until_the_wait():
    fabric, table, hosts = two_switches(m=1, host_mbps=80.0, switch_mbps=40.0)
    comm = S / bytes_per_s(40) + ALPHA   # about 3.4 s
    for compute, expected in ((5.0, 5.0), (1.0, comm)):   # hidden behind compute, or exposed
        sched = Schedule("custom", "custom", 2, 0, (
            (Step((Transfer(1, S),), (), channel=1),        # issued, not waited for
             Step(compute_s=compute, phase="compute"),      # runs meanwhile
             Step(phase="wait", after=(0,))),               # waits for the transfer
            (Step((), (Transfer(0, S),), channel=1),)))
        pred = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
        assert pred.step_end_s[0][2] == pytest.approx(expected, rel=1e-9)


def test_one_chain_on_another_channel_predicts_as_the_plain_schedule():
    import dataclasses
    fabric, table, sched, hosts = setup("bigraph:m=2,n=4", "shortest", "naive", "ring", size=S)
    plain = predict(fabric, table, sched, hosts, alpha_s=ALPHA)
    moved = dataclasses.replace(sched, steps=tuple(tuple(dataclasses.replace(s, channel=3) for s in rank)
                                                   for rank in sched.steps))
    assert predict(fabric, table, moved, hosts, alpha_s=ALPHA).step_end_s == plain.step_end_s


def test_a_step_may_only_wait_for_earlier_steps():
    fabric, table, hosts = two_switches(m=1)
    sched = Schedule("custom", "custom", 2, 0, ((Step(after=(1,)), Step()), ()))
    with pytest.raises(ValueError, match="waits for a step that is not before it"):
        predict(fabric, table, sched, hosts)


# --- lock-step rounds ----------------------------------------------------------

@pytest.mark.parametrize("topology, policy, mapping, algorithm", [
    ("bigraph:m=4,n=8", "shortest", "hdrm", "halving-doubling"),
    ("bigraph:m=4,n=8", "shortest", "naive", "ring"),
    ("fattree:k=4", "ecmp", "naive", "ring"),
])
def test_lockstep_is_exact_where_ranks_stay_together(topology, policy, mapping, algorithm):
    from emulator.workloads.schedule import flat_schedule, lockstep_rounds
    from emulator.model.simulation import LOCKSTEP, predict_lockstep
    fabric, table, _, hosts = setup(topology, policy, mapping, algorithm)
    exact = predict(fabric, table, flat_schedule("allreduce", algorithm, len(hosts), S), hosts, ALPHA)
    rounds, note = lockstep_rounds("allreduce", algorithm, len(hosts), S)
    approx = predict_lockstep(fabric, table, rounds, hosts, ALPHA, note=note)
    assert approx.time_s == pytest.approx(exact.time_s, rel=1e-9)
    for mine, theirs in zip(approx.step_end_s, exact.step_end_s):
        assert mine == pytest.approx(theirs, rel=1e-9)
    assert approx.max_flows_per_step == exact.max_flows_per_step
    assert approx.link_max_flows == exact.link_max_flows
    assert approx.approximation == LOCKSTEP and exact.approximation == ""


def test_lockstep_simulates_a_repeated_round_once(monkeypatch):
    """Halving-doubling's doubling round k is halving round k mirrored: the
    same sends, so one simulation serves both, and the figures are those of
    simulating every round."""
    import emulator.model.simulation as model
    from emulator.workloads.schedule import lockstep_rounds
    fabric, table, _, hosts = setup("bigraph:m=4,n=8", "shortest", "random", "halving-doubling")
    rounds, note = lockstep_rounds("allreduce", "halving-doubling", len(hosts), S)
    calls = []
    simulate = model._simulate
    monkeypatch.setattr(model, "_simulate", lambda *a: calls.append(1) or simulate(*a))
    once = model.predict_lockstep(fabric, table, rounds, hosts, ALPHA, note=note)
    assert len(rounds) == 10 and len(calls) == 5
    monkeypatch.setattr(model, "_round_key", lambda flat: id(flat))   # every round simulated
    every = model.predict_lockstep(fabric, table, rounds, hosts, ALPHA, note=note)
    assert len(calls) == 15
    assert once == every


@pytest.mark.parametrize("algorithm, mapping", [("ring", "random"), ("halving-doubling", "naive")])
def test_a_sweep_without_step_objects_predicts_as_plan_run(algorithm, mapping):
    from emulator.plan.run_plan import model_sweep, plan_run
    from emulator.spec.experiment import RunSpec
    spec = RunSpec(topology="fattree:k=4", algorithm=algorithm, mapping=mapping, policy="ecmp", sizes=(M, 3 * M),
                   repetitions=1, warmup=0, model_alpha_us=300)
    hosts, got = model_sweep(spec, "exact")
    plan = plan_run(spec)
    assert hosts == plan.hosts
    for size in spec.sizes:
        assert got[size].time_s == pytest.approx(plan.predictions[size].time_s, rel=1e-12)
        assert got[size].step_end_s == plan.predictions[size].step_end_s


def test_progress_is_told_the_share_of_steps_started():
    fabric, table, sched, hosts = setup("bigraph:m=8,n=16", "shortest", "random", "ring", size=M)
    seen = []
    predict(fabric, table, sched, hosts, ALPHA, progress=seen.append)
    assert seen and seen == sorted(seen) and 0 < seen[0] and seen[-1] <= 1


@pytest.mark.parametrize("seed", range(20))
def test_rerating_after_drains_equals_filling_again(seed):
    from emulator.model.simulation import _rerate_after_drains
    rng = np.random.default_rng(seed)
    links, flows, width = 12, 40, 3
    capacity = np.append(rng.choice([10.0, 25.0, 40.0], links), math.inf)
    route = rng.integers(0, links + 1, (flows, width))   # link id `links` is the infinite pad
    rates = max_min_rates(route, capacity)
    gone = rng.random(flows) < rng.choice([0.05, 0.3, 0.7])
    if not gone.any():
        gone[rng.integers(flows)] = True
    again = max_min_rates(route[~gone], capacity)
    got = _rerate_after_drains(route[~gone], rates[~gone], capacity, rates[gone].min())
    np.testing.assert_allclose(got, again, rtol=1e-9)


def test_incremental_rerating_changes_nothing_but_merges_at_the_tolerance(monkeypatch):
    """Ranks drift apart (random mapping): with events merged only when all
    but equal, re-rating after drains predicts what filling again does."""
    import emulator.model.simulation as model
    fabric, table, sched, hosts = setup("fattree:k=4", "ecmp", "random", "ring", size=M)
    monkeypatch.setattr(model, "REL_TOL", 1e-12)
    incremental = predict(fabric, table, sched, hosts, ALPHA)
    monkeypatch.setattr(model, "_rerate_after_drains", lambda route, rates, capacity, drained:
                        max_min_rates(route, capacity))
    again = predict(fabric, table, sched, hosts, ALPHA)
    assert incremental.time_s == pytest.approx(again.time_s, rel=1e-12)
    for mine, theirs in zip(incremental.step_end_s, again.step_end_s):
        assert mine == pytest.approx(theirs, rel=1e-12)


@pytest.mark.parametrize("ranks", [6, 12, 13])
def test_lockstep_halving_doubling_on_any_rank_count_is_exact_where_uncongested(ranks):
    """Pre and post steps pair the first ranks off; on a fabric with room
    for every flow the lock-step rounds predict what the exact run does."""
    from emulator.model.simulation import predict_collective
    fabric = build("bigraph:m=5,n=4")
    table = forwarding_table(fabric, "ecmp")
    hosts = hosts_for_ranks(fabric, "naive")[:ranks]
    exact, approx = (predict_collective(fabric, table, "allreduce", "halving-doubling", hosts, S, ALPHA, method=m)
                     for m in ("exact", "lockstep"))
    assert approx.approximation and not exact.approximation
    assert approx.time_s == pytest.approx(exact.time_s, rel=1e-9)


def test_an_empty_first_step_ends_at_once():
    fabric, table, hosts = two_switches(m=1)
    sched = schedule([([], []), ([(1, S)], [])], [([], [(0, S)])])
    pred = predict(fabric, table, sched, hosts)
    assert pred.step_end_s[0][0] == 0.0
    assert pred.time_s == pytest.approx(S / bytes_per_s(100), rel=1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_the_flows_looked_at_hold_every_flow_due_next(seed):
    """_Sending looks only at the classes near the head of the finish order
    found at the re-rating: after any time elapsed and any flows retired,
    they hold the next flow due and all due within the merging tolerance;
    a class holds flows of equal bytes left and rate, and the first flow
    of a class due alone retires alone."""
    from emulator.model.simulation import REL_TOL, _Sending
    rng = np.random.default_rng(seed)
    flows = 500
    left = rng.choice([1e3, 5e5, 2e6], flows) * rng.choice([1.0, 1 + 1e-7], flows)
    rates = rng.choice([1e4, 3e4, 1e5], flows)
    t = float(rng.uniform(0, 10))
    sending = _Sending(t, np.arange(flows), left.copy(), rates)
    assert len(sending.left) < flows / 10
    np.testing.assert_array_equal(sending.left[sending.class_of], left)
    while sending.count:
        near = sending.candidates()
        alive = np.flatnonzero(~sending.gone)
        drain = sending.left[sending.class_of[alive]] / sending.flow_rates[alive]
        due = alive[drain <= drain.min() + REL_TOL * (t + drain.min())]
        assert set(sending.class_of[due]) <= set(near)
        dt = float(drain.min() * rng.choice([0.3, 1.0]))
        sending.elapse(dt)
        t += dt
        if rng.random() < 0.3:
            ids, _ = sending.retire(near[:0], near[:1])
            assert len(ids) == 1 and ids[0] == alive[np.isin(sending.class_of[alive], near[:1])][0]
        else:
            sending.retire(near[:int(rng.integers(1, len(near) + 1))], near[:0])
        assert sending.count == np.count_nonzero(~sending.gone) == sending.alive.sum()


@pytest.mark.parametrize("collective", ["allreduce", "all-to-all"])
def test_desynchronised_ranks_predict_as_the_reference_to_the_bit(collective):
    """Looking at the flows due next, a class of alike flows at a time,
    changes no arithmetic: a ring whose ranks drift apart, where any
    round-off difference would grow, and an all-to-all of 16,256 flows
    predict exactly what the reference copy of the model does."""
    import reference_model
    fabric = build("fattree:k=8")
    hosts = hosts_for_ranks(fabric, "random", seed=3)
    sched = build_schedule(collective, "ring", len(hosts), 16 * MiB)
    table = forwarding_table(fabric, "ecmp", seed=1)
    got = predict(fabric, table, sched, hosts, alpha_s=5e-4, efficiency=0.95)
    want = reference_model.predict(fabric, table, sched, hosts, alpha_s=5e-4, efficiency=0.95)
    assert got.step_end_s == want.step_end_s
