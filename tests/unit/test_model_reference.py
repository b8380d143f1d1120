"""Regression corpus: the model predicts what the reference copy of it
(reference_model.py, pinned to main at 5049187) predicts, to 1e-6 relative,
on cases up to 1024 ranks: congested (naive mapping on BiGraph, fat-tree
ECMP), desynchronised (random mapping, jittered flows, jobs with compute,
two tenants), with latency, path delays, header overhead and several
connections per pair."""
import dataclasses
import tomllib

import numpy as np
import pytest

import reference_model
from emulator.routes.routing import forwarding_table
from emulator.workloads.schedule import flat_schedule
from emulator.fabric.mapping import hosts_for_ranks
from emulator.model.simulation import predict
from emulator.workloads.program import compile_workload
from emulator.workloads.schedule import build_schedule, jittered, over_connections
from emulator.fabric.topology import build
from emulator.workloads.workload import parse_workload

REL = 1e-6
MiB = 1 << 20

# topology, collective, algorithm, mapping, policy, size
COLLECTIVES = [
    ("bigraph:m=4,n=8", "allreduce", "ring", "naive", "shortest", 16 * MiB),
    ("bigraph:m=4,n=8", "allreduce", "halving-doubling", "naive", "shortest", 16 * MiB + 7),
    ("bigraph:m=4,n=8", "allreduce", "halving-doubling", "hdrm", "ecmp", 16 * MiB),
    ("bigraph:m=4,n=8", "allreduce", "ring", "random", "ecmp", 16 * MiB),
    ("bigraph:m=8,n=16", "allreduce", "ring", "random", "shortest", 64 * MiB),
    ("bigraph:m=16,n=64", "allreduce", "halving-doubling", "naive", "shortest", 64 * MiB),
    ("bigraph:m=16,n=64", "allreduce", "halving-doubling", "random", "ecmp", 64 * MiB),
    ("fattree:k=4", "allreduce", "ring", "naive", "ecmp", 16 * MiB),
    ("fattree:k=8", "allreduce", "ring", "random", "ecmp", 16 * MiB),
    ("fattree:k=16", "allreduce", "halving-doubling", "naive", "ecmp", 64 * MiB),
    ("fattree:k=8", "all-to-all", "ring", "naive", "ecmp", 16 * MiB),
    ("leafspine:leaves=4,spines=2,hosts=8", "allreduce", "ring", "random", "ecmp", 16 * MiB),
    ("leafspine:leaves=8,spines=4,hosts=8", "allreduce", "halving-doubling", "naive", "ecmp", 16 * MiB + 3),
    ("leafspine:leaves=4,spines=2,hosts=4", "broadcast", "ring", "naive", "shortest", 4 * MiB),
    ("bigraph:m=2,n=4", "parameter-server", "ring", "naive", "shortest", 4 * MiB),
    ("bigraph:m=4,n=8", "reduce-scatter", "halving-doubling", "naive", "valiant", 8 * MiB),
]

TWO_TENANTS = """
[[job]]
name = "a"
ranks = 16
placement = "round-robin"
ops = [{op = "compute", ms = 50}, {op = "allreduce", bytes = "16M"}]
[[job]]
name = "b"
ranks = 16
placement = "round-robin"
iterations = 2
ops = [{op = "compute", ms = 20}, {op = "allreduce", bytes = "8M", algorithm = "halving-doubling"}]
"""
DATA_PARALLEL = """
[[job]]
name = "dp"
ranks = 32
template = "data-parallel"
placement = "random"
"""


def assert_same(got, want):
    assert got.time_s == pytest.approx(want.time_s, rel=REL)
    assert len(got.step_end_s) == len(want.step_end_s)
    for mine, theirs in zip(got.step_end_s, want.step_end_s):
        np.testing.assert_allclose(mine, theirs, rtol=REL, atol=0)
    assert got.link_max_flows == want.link_max_flows
    assert got.max_flows_per_step == want.max_flows_per_step
    assert got.peak_switch_mbps == pytest.approx(want.peak_switch_mbps, rel=REL)


def both(fabric, table, sched, hosts, **kw):
    return predict(fabric, table, sched, hosts, **kw), reference_model.predict(fabric, table, sched, hosts, **kw)


@pytest.mark.parametrize("case", COLLECTIVES, ids=lambda c: " ".join(map(str, c[:5])))
def test_collectives_predict_as_the_reference(case):
    topology, collective, algorithm, mapping, policy, size = case
    fabric = build(topology)
    hosts = hosts_for_ranks(fabric, mapping, seed=3)
    sched = build_schedule(collective, algorithm, len(hosts), size)
    table = forwarding_table(fabric, policy, seed=1)
    got, want = both(fabric, table, sched, hosts, alpha_s=5e-4, efficiency=0.95)
    assert_same(got, want)
    flat = flat_schedule(collective, algorithm, len(hosts), size)   # built as arrays, no step objects
    assert_same(predict(fabric, table, flat, hosts, alpha_s=5e-4, efficiency=0.95), want)


def test_jittered_flows_on_several_connections_predict_as_the_reference():
    fabric = build("fattree:k=4")
    hosts = hosts_for_ranks(fabric, "random", seed=5)
    sched = over_connections(jittered(build_schedule("allreduce", "ring", len(hosts), 8 * MiB), 0.3, seed=2), 2)
    assert_same(*both(fabric, forwarding_table(fabric, "ecmp"), sched, hosts, alpha_s=2e-4))


def test_path_delays_predict_as_the_reference():
    fabric = build("leafspine:leaves=4,spines=2,hosts=4")
    fabric.links = [dataclasses.replace(l, delay_ms=0.5 + (i % 3)) for i, l in enumerate(fabric.links)]
    hosts = hosts_for_ranks(fabric, "naive")
    sched = build_schedule("allreduce", "ring", len(hosts), 8 * MiB)
    assert_same(*both(fabric, forwarding_table(fabric, "ecmp"), sched, hosts, alpha_s=1e-4))


@pytest.mark.parametrize("text", [TWO_TENANTS, DATA_PARALLEL], ids=["two tenants", "data-parallel"])
def test_jobs_with_compute_predict_as_the_reference(text):
    fabric = build("bigraph:m=4,n=8")
    compiled = compile_workload(parse_workload(tomllib.loads(text), "w.toml"), fabric)
    table = forwarding_table(fabric, "ecmp")
    assert_same(*both(fabric, table, compiled.schedule, compiled.hosts, alpha_s=5e-4))
