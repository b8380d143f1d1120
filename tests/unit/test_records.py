"""A collective algorithm and a mapping are one record each: a toy of
each, written here and put in its registry, runs through the schedule,
the model's fast and generic paths, the agents' step files and the
spec's checks, with nothing else changed (no root)."""
import numpy as np
import pytest

from emulator.fabric import mapping
from emulator.model.simulation import predict, predict_collective
from emulator.plan.run_plan import plan_run
from emulator.routes.routing import forwarding_table
from emulator.spec.experiment import SpecError, make_run
from emulator.workloads import algorithms
from emulator.workloads.algorithms import Algorithm
from emulator.workloads.flat import flatten, one_each
from emulator.workloads.schedule import alpha_beta_time, build_schedule, flat_schedule, lockstep_rounds
from emulator.workloads.steps import Step, Transfer, steps_from_data, steps_to_data


# --- a toy algorithm: every half is one step, each rank swapping its share with rank ^ 1 (even rank counts)

def toy_steps(p, rank, size, reduce_scatter, allgather):
    halves = [h for h, on in (("reduce-scatter", reduce_scatter), ("allgather", allgather)) if on]
    share = size // 2
    return [Step((Transfer(rank ^ 1, share),), (Transfer(rank ^ 1, share),), h) for h in halves]


def toy_flat(p, size, reduce_scatter, allgather):
    per_rank = reduce_scatter + allgather
    peer = np.repeat(np.arange(p) ^ 1, per_rank)
    nbytes = np.full(p * per_rank, size // 2)
    return one_each(p, per_rank, peer, nbytes, peer, nbytes)


TOY = Algorithm("toy-pairs", "swap halves with rank ^ 1", toy_steps, half_messages=lambda p: 1,
                needs=lambda p, rs, ag: "" if p % 2 == 0 else "an even rank count")
TOY_FAST = Algorithm("toy-pairs-fast", "toy-pairs with its arrays built directly", toy_steps,
                     half_messages=lambda p: 1, needs=TOY.needs, flat=toy_flat)


@pytest.fixture
def toys(monkeypatch):
    monkeypatch.setitem(algorithms.ALGORITHMS, TOY.name, TOY)
    monkeypatch.setitem(algorithms.ALGORITHMS, TOY_FAST.name, TOY_FAST)
    # the toy mapping: ranks on the hosts in reverse order, power-of-two counts only
    monkeypatch.setitem(mapping.MAPPINGS, "reversed", mapping.Mapping(
        "reversed", "the last host first", lambda fabric, free, ranks, seed: free[::-1][:ranks],
        power_of_two="the toy says so"))


def test_the_toy_algorithm_builds_its_schedule(toys):
    s = build_schedule("allreduce", "toy-pairs", 4, 1000)
    assert [len(steps) for steps in s.steps] == [2, 2, 2, 2]
    assert s.steps[2][0] == Step((Transfer(3, 500),), (Transfer(3, 500),), "reduce-scatter")
    assert len(build_schedule("reduce-scatter", "toy-pairs", 4, 1000).steps[0]) == 1
    with pytest.raises(ValueError, match="toy-pairs allreduce needs an even rank count"):
        build_schedule("allreduce", "toy-pairs", 5, 1000)


def test_the_generic_and_fast_paths_give_the_same_arrays_and_prediction(toys):
    generic = flat_schedule("allreduce", "toy-pairs", 8, 4096)      # no fast path: the steps flattened
    fast = flat_schedule("allreduce", "toy-pairs-fast", 8, 4096)
    want = flatten(build_schedule("allreduce", "toy-pairs", 8, 4096))
    for flat in (generic, fast):
        assert np.array_equal(flat.step_base, want.step_base)
        assert np.array_equal(flat.sends.peer, want.sends.peer) and np.array_equal(flat.sends.nbytes, want.sends.nbytes)
        assert np.array_equal(flat.recvs.peer, want.recvs.peer) and np.array_equal(flat.recvs.nbytes, want.recvs.nbytes)
    assert lockstep_rounds("allreduce", "toy-pairs", 8, 4096) is None   # no rounds: the exact path
    fabric = make_run({"topology": "bigraph:m=2,n=4"}).fabric()
    table = forwarding_table(fabric, "shortest")
    hosts = mapping.hosts_for_ranks(fabric, "naive")
    a = predict_collective(fabric, table, "allreduce", "toy-pairs", hosts, 4096 * 64)
    b = predict_collective(fabric, table, "allreduce", "toy-pairs-fast", hosts, 4096 * 64)
    c = predict(fabric, table, build_schedule("allreduce", "toy-pairs", 8, 4096 * 64), hosts)
    assert a.time_s == pytest.approx(b.time_s) == pytest.approx(c.time_s)
    # ranks 2k and 2k+1 share a switch on the naive mapping: S/2 bytes per half over one host link each way
    assert a.time_s == pytest.approx(alpha_beta_time("allreduce", "toy-pairs", 2, 4096 * 64, 50.0, 0.0), rel=0.02)


def test_the_agents_step_files_carry_the_toy_steps(toys):
    s = build_schedule("allgather", "toy-pairs", 4, 64)
    assert steps_from_data(steps_to_data(s.steps[1])) == s.steps[1]


def test_the_spec_and_the_plan_take_the_toys_by_name(toys):
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "algorithm": "toy-pairs", "mapping": "reversed",
                              "sizes": "64K"}))
    assert plan.hosts[0] == plan.fabric.hosts[-1].name
    sched = plan.schedules[64 << 10]
    assert [[t.peer for step in steps for t in step.sends] for steps in sched.steps] == [[r ^ 1] * 2 for r in range(8)]
    assert plan.predictions[64 << 10].time_s > 0
    with pytest.raises(SpecError, match="algorithm: toy-pairs allreduce needs an even rank count"):
        make_run({"topology": "bigraph:m=2,n=4", "algorithm": "toy-pairs", "ranks": 7})
    with pytest.raises(SpecError, match=r"mapping: 'reversed' needs a power-of-two rank count \(the toy says so\)"):
        make_run({"topology": "bigraph:m=2,n=4", "mapping": "reversed", "ranks": 6})
    with pytest.raises(SpecError, match="algorithm: 'no-such' is not one of: .*toy-pairs"):   # looked up, not copied
        make_run({"algorithm": "no-such"})
