"""Schedules as arrays: built straight into arrays, they hold the numbers
flattening the step objects gives."""
import dataclasses

import numpy as np
import pytest

from emulator.workloads.flat import flatten, ranks_alone
from emulator.workloads.schedule import flat_schedule, lockstep_rounds
from emulator.workloads.schedule import build_schedule
from emulator.workloads.steps import Schedule, Step


def assert_same_flat(a, b):
    assert a.ranks == b.ranks
    np.testing.assert_array_equal(a.step_base, b.step_base)
    for side in ("sends", "recvs"):
        for name in ("first", "peer", "nbytes"):
            np.testing.assert_array_equal(getattr(getattr(a, side), name), getattr(getattr(b, side), name))
    np.testing.assert_array_equal(a.compute_s, b.compute_s)
    assert (a.waits is None) == (b.waits is None)


@pytest.mark.parametrize("collective", ["allreduce", "reduce-scatter", "allgather"])
@pytest.mark.parametrize("algorithm", ["ring", "halving-doubling"])
@pytest.mark.parametrize("ranks", [2, 8, 32])
def test_collectives_in_arrays_are_their_flattened_steps(collective, algorithm, ranks):
    size = 1000 * ranks + 7   # uneven chunks
    assert_same_flat(flat_schedule(collective, algorithm, ranks, size),
                     flatten(build_schedule(collective, algorithm, ranks, size)))


@pytest.mark.parametrize("ranks", [2, 5, 16])
def test_all_to_all_in_arrays_is_its_flattened_step(ranks):
    assert_same_flat(flat_schedule("all-to-all", "ring", ranks, 999),
                     flatten(build_schedule("all-to-all", "ring", ranks, 999)))


@pytest.mark.parametrize("collective, algorithm, ranks", [("allreduce", "halving-doubling", 6),
                                                          ("broadcast", "ring", 4)])
def test_other_collectives_fall_back_to_flattening(collective, algorithm, ranks):
    assert_same_flat(flat_schedule(collective, algorithm, ranks, 999),
                     flatten(build_schedule(collective, algorithm, ranks, 999)))


def test_bad_collectives_are_refused_as_build_schedule_refuses_them():
    with pytest.raises(ValueError, match="power-of-two"):
        flat_schedule("allgather", "halving-doubling", 6, 100)
    with pytest.raises(ValueError, match="at least 2 ranks"):
        flat_schedule("allreduce", "ring", 1, 100)


def test_waits_list_the_channel_order_and_after():
    steps = ((Step(compute_s=1.0), Step(channel=1, after=(0,)), Step(after=(1,))),)
    flat = flatten(Schedule("x", "", 1, 0, steps))
    src, dst = flat.waits
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 1), (0, 2), (1, 2)]
    np.testing.assert_array_equal(flat.compute_s, [1.0, 0.0, 0.0])


@pytest.mark.parametrize("collective", ["allreduce", "reduce-scatter", "allgather"])
@pytest.mark.parametrize("algorithm, size", [("ring", 64 * 32), ("halving-doubling", 64 * 32 + 5)])
def test_lockstep_rounds_are_the_steps_of_every_rank(collective, algorithm, size):
    """Round i (repeats expanded) holds every rank's step i."""
    ranks = 32
    flat = flat_schedule(collective, algorithm, ranks, size)
    rounds, note = lockstep_rounds(collective, algorithm, ranks, size)
    expanded = [r for r, repeats in rounds for _ in range(repeats)]
    per_rank = len(expanded)
    assert note == "" and flat.steps == ranks * per_rank
    for side in ("sends", "recvs"):
        whole = getattr(flat, side)
        for name in ("peer", "nbytes"):
            by_step = getattr(whole, name).reshape(ranks, per_rank)
            for i, r in enumerate(expanded):
                np.testing.assert_array_equal(getattr(getattr(r, side), name), by_step[:, i])


def test_lockstep_ring_rounds_say_they_round_uneven_chunks_up():
    rounds, note = lockstep_rounds("allreduce", "ring", 8, 8 * 100 + 3)
    assert "101 bytes" in note
    assert set(rounds[0][0].sends.nbytes.tolist()) == {101}
    assert lockstep_rounds("all-to-all", "ring", 8, 800) is None
    assert len(lockstep_rounds("allreduce", "halving-doubling", 6, 800)[0]) == 2 + 2 * 2   # pre, core, post


def test_ranks_alone_are_the_flattened_steps_of_that_job_by_itself():
    """A job cut out of a workload's arrays holds what flattening its own
    steps (peers renumbered from 0) gives, waits included, and predicts
    the same to the bit."""
    import tomllib

    from emulator.routes.routing import forwarding_table
    from emulator.model.simulation import _dependencies, predict
    from emulator.workloads.program import compile_workload
    from emulator.workloads.steps import Transfer
    from emulator.fabric.topology import build
    from emulator.workloads.workload import parse_workload
    text = """
[[job]]
name = "dp"
ranks = 8
template = "data-parallel"
params = {params_m = 1.0, bucket_mb = 1}
[[job]]
name = "plain"
ranks = 6
ops = [{op = "compute", ms = 20}, {op = "allreduce", bytes = "1M"}]
"""
    fabric = build("bigraph:m=4,n=4")
    compiled = compile_workload(parse_workload(tomllib.loads(text), "w.toml"), fabric)
    whole = flatten(compiled.schedule)
    table = forwarding_table(fabric, "ecmp")
    for layout in compiled.jobs:
        def local(transfers, base=layout.offset):
            return tuple(Transfer(t.peer - base, t.nbytes) for t in transfers)
        steps = tuple(tuple(Step(local(s.sends), local(s.recvs), s.phase, s.compute_s, s.channel, s.after, s.op)
                            for s in compiled.schedule.steps[r]) for r in layout.ranks)
        own = flatten(Schedule(layout.job.name, "", layout.job.ranks, 0, steps))
        cut = ranks_alone(whole, layout.offset, layout.job.ranks)
        assert_same_flat(dataclasses.replace(cut, waits=own.waits), own)
        for mine, theirs in zip(dataclasses.astuple(_dependencies(cut)), dataclasses.astuple(_dependencies(own))):
            np.testing.assert_array_equal(mine, theirs)   # the same waits, given or implied
        got = predict(fabric, table, cut, layout.hosts, alpha_s=5e-4)
        assert got.step_end_s == predict(fabric, table, own, layout.hosts, alpha_s=5e-4).step_end_s


def test_a_wait_named_twice_is_listed_once_and_ranks_keep_their_own_steps():
    steps = ((Step(), Step(after=(0,))), (Step(channel=1), Step(channel=1), Step(after=(1,))))
    src, dst = flatten(Schedule("x", "", 2, 0, steps)).waits
    assert list(zip(src.tolist(), dst.tolist())) == [(0, 1), (2, 3), (3, 4)]
