"""The torus family (emulator/fabric/topology.py) and dimension-order
routing (emulator/routes/routing.py)."""
from __future__ import annotations

import itertools
from collections import Counter

import pytest

from emulator import cli, exit_codes
from emulator.fabric.topology import build, torus_coordinates, torus_switch
from emulator.routes.routing import POLICIES, forwarding_table, switch_path
from emulator.routes.verification import route_problems

SHIPPED = "torus:x=4,y=4,z=1,hosts=2"


def ring_links(n: int) -> int:
    return {1: 0, 2: 1}.get(n, n)


def neighbours(f, switch: str) -> Counter:
    return Counter(nb for _, nb in f.switch_neighbours(switch))


@pytest.mark.parametrize("x, y, z, hosts", [(4, 4, 1, 2), (3, 2, 1, 1), (2, 2, 2, 1), (5, 1, 1, 3), (3, 3, 3, 1)])
def test_counts_of_switches_hosts_links_and_ports(x, y, z, hosts):
    f = build(f"torus:x={x},y={y},z={z},hosts={hosts}")
    switches = x * y * z
    assert len(f.switches) == switches and len(f.hosts) == switches * hosts
    links = sum(switches // n * ring_links(n) for n in (x, y, z))
    assert len([l for l in f.links if l.kind == "switch"]) == links
    degree = sum(min(ring_links(n), 2) for n in (x, y, z))
    for s in f.switches:
        assert len(f.ports(s.name)) == hosts + degree
        assert max(neighbours(f, s.name).values(), default=1) == 1, "no parallel links"


def test_wraparound_in_every_dimension():
    f = build("torus:x=4,y=3,z=5,hosts=1")
    for s in f.switches:
        x, y, z = torus_coordinates(f, s.name)
        want = {torus_switch(f, c) for c in [((x + 1) % 4, y, z), ((x - 1) % 4, y, z), (x, (y + 1) % 3, z),
                                             (x, (y - 1) % 3, z), (x, y, (z + 1) % 5), (x, y, (z - 1) % 5)]}
        assert set(neighbours(f, s.name)) == want
    corner = torus_switch(f, (0, 0, 0))
    assert torus_switch(f, (3, 0, 0)) in neighbours(f, corner) and torus_switch(f, (0, 0, 4)) in neighbours(f, corner)


def test_size_two_has_one_link_and_size_one_none():
    f = build("torus:x=2,y=1,z=1,hosts=1")
    assert [(l.a, l.b) for l in f.links if l.kind == "switch"] == [("bgs0", "bgs1")]


def ring_steps(a: int, b: int, n: int) -> int:
    """Signed step a -> b in a ring of n: +1 or -1."""
    return 1 if (b - a) % n == 1 else -1


@pytest.mark.parametrize("text", ["torus:x=4,y=3,z=2,hosts=1", "torus:x=5,y=4,z=3,hosts=1"])
def test_dimension_order_goes_x_then_y_then_z_the_shorter_way(text):
    f = build(text)
    sizes = (f.params["x"], f.params["y"], f.params["z"])
    table = forwarding_table(f, "dimension-order")
    for src, dst in itertools.permutations(f.hosts, 2):
        coords = [torus_coordinates(f, s) for s in switch_path(f, table, src.name, dst.name)]
        dims = [next(d for d in range(3) if a[d] != b[d]) for a, b in zip(coords, coords[1:])]
        assert dims == sorted(dims), coords
        a, b = coords[0], coords[-1]
        for d, n in enumerate(sizes):
            forward = (b[d] - a[d]) % n
            shorter = min(forward, n - forward)
            assert dims.count(d) == shorter, (coords, d)
            steps = {ring_steps(p[d], q[d], n) for p, q, dim in zip(coords, coords[1:], dims) if dim == d}
            if shorter and n > 2:   # a tie (n even, half-way) goes the positive way
                assert steps == {1 if forward <= n // 2 else -1}, (coords, d)


@pytest.mark.parametrize("policy", [p for p, r in POLICIES.items() if r.fabric_kind in (None, "torus")
                                    and not r.needs_nodes])
def test_every_policy_of_the_family_verifies(policy):
    f = build(SHIPPED)
    demands = None
    if POLICIES[policy].needs_demands:
        demands = {(s.name, d.name): 1000 * (s.index + 1) for s, d in itertools.permutations(f.hosts[:8], 2)}
    table = forwarding_table(f, policy, demands)
    assert route_problems(f, table, policy) == []


@pytest.mark.parametrize("argv, words", [
    (["-t", "torus:x=0,y=4,z=1,hosts=2"], ["topology", "x=0"]),
    (["-t", "torus:x=4,y=4,z=-1,hosts=2"], ["topology", "z"]),
    (["-t", "torus:x=4,y=4,z=1,hosts=0"], ["topology", "hosts=0"]),
    (["-t", "torus:x=4,y=4,k=4"], ["topology", "k=4", "x=<int>"]),
    (["-t", "torus:x=1,y=1,z=1,hosts=1"], ["topology", "at least 2 hosts"]),
    (["-t", "torus:x=100,y=100,z=100,hosts=1"], ["topology", "hosts", "131072"]),
    (["-t", "torus:x=4,y=4,z=1,hosts=2,x=3"], ["topology", "x is given twice"]),
    (["-t", SHIPPED, "-p", "minimal"], ["policy", "minimal", "dragonfly", "dimension-order"]),
    (["-t", "bigraph:m=2,n=4", "-p", "dimension-order"], ["policy", "dimension-order", "torus"]),
    (["-t", SHIPPED, "-m", "hdrm"], ["mapping", "hdrm"]),
])
def test_bad_input_is_refused_naming_it(argv, words, capsys):
    assert cli.main(["model", *argv]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


@pytest.mark.parametrize("mapping", ["naive", "round-robin", "random"])
def test_the_model_runs_an_allreduce_on_it(mapping, capsys):
    assert cli.main(["model", "-t", SHIPPED, "-p", "dimension-order", "-m", mapping]) == 0
    assert "Avg bus bandwidth" in capsys.readouterr().out
