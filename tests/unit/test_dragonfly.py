"""The dragonfly family (emulator/fabric/topology.py) and its routing:
"minimal" and Valiant through a third group (emulator/routes/routing.py)."""
from __future__ import annotations

import itertools
from collections import Counter

import pytest

from emulator import cli, exit_codes
from emulator.fabric.topology import build, dragonfly_group
from emulator.routes.routing import POLICIES, forwarding_table, switch_path
from emulator.routes.verification import route_problems

FULL = "dragonfly:a=4,p=2,h=2,g=9"     # g = a*h + 1: one global link per pair of groups
SMALL = "dragonfly:a=4,p=2,h=1,g=4"    # the shipped example: fewer groups, spare global ports


def group_pairs(fabric) -> Counter:
    """Global links per unordered pair of groups."""
    return Counter(tuple(sorted((dragonfly_group(fabric, l.a), dragonfly_group(fabric, l.b))))
                   for l in fabric.links if l.kind == "switch"
                   and dragonfly_group(fabric, l.a) != dragonfly_group(fabric, l.b))


def groups_on(fabric, table, src, dst) -> list[int]:
    return [dragonfly_group(fabric, s) for s in switch_path(fabric, table, src, dst)]


def global_hops(groups: list[int]) -> int:
    return sum(a != b for a, b in zip(groups, groups[1:]))


@pytest.mark.parametrize("text, a, p, h, g", [(FULL, 4, 2, 2, 9), (SMALL, 4, 2, 1, 4), ("dragonfly:a=3,p=1,h=1,g=2", 3, 1, 1, 2)])
def test_counts_of_routers_hosts_links_and_ports(text, a, p, h, g):
    f = build(text)
    assert len(f.switches) == a * g and {s.tier for s in f.switches} == {"router"}
    assert len(f.hosts) == a * p * g
    local = [l for l in f.links if l.kind == "switch" and dragonfly_group(f, l.a) == dragonfly_group(f, l.b)]
    assert len(local) == g * a * (a - 1) // 2
    assert sum(group_pairs(f).values()) <= g * a * h // 2
    for s in f.switches:
        globals_ = sum(dragonfly_group(f, nb) != dragonfly_group(f, s.name) for _, nb in f.switch_neighbours(s.name))
        assert globals_ <= h
        assert len(f.ports(s.name)) == p + (a - 1) + globals_
        assert [r.index // a for r in f.switches if dragonfly_group(f, r.name) == dragonfly_group(f, s.name)] == \
            [dragonfly_group(f, s.name)] * a


def test_full_size_joins_every_pair_of_groups_once_and_uses_every_global_port():
    f = build(FULL)
    assert group_pairs(f) == {pair: 1 for pair in itertools.combinations(range(9), 2)}
    for s in f.switches:
        assert sum(dragonfly_group(f, nb) != dragonfly_group(f, s.name) for _, nb in f.switch_neighbours(s.name)) == 2


@pytest.mark.parametrize("text", [SMALL, "dragonfly:a=4,p=1,h=2,g=4", "dragonfly:a=3,p=1,h=2,g=5",
                                  "dragonfly:a=2,p=1,h=3,g=4"])
def test_fewer_groups_join_every_pair_as_evenly_as_possible(text):
    f = build(text)
    counts = group_pairs(f)
    assert set(counts) == set(itertools.combinations(range(f.params["g"]), 2))
    assert max(counts.values()) - min(counts.values()) <= 1


@pytest.mark.parametrize("text", [FULL, SMALL])
def test_minimal_is_local_global_local(text):
    f = build(text)
    table = forwarding_table(f, "minimal")
    for src, dst in itertools.permutations(f.hosts, 2):
        groups = groups_on(f, table, src.name, dst.name)
        assert len(groups) - 1 <= 3 and global_hops(groups) == (groups[0] != groups[-1])


@pytest.mark.parametrize("policy", ["shortest", "ecmp"])
def test_shortest_paths_are_at_most_three_router_hops(policy):
    """Graph-shortest: never longer than local-global-local, though some
    cross two global links through a third group at the same length."""
    f = build(FULL)
    table = forwarding_table(f, policy)
    assert max(len(switch_path(f, table, s.name, d.name)) - 1 for s, d in itertools.permutations(f.hosts, 2)) == 3


def test_valiant_goes_through_a_third_group_minimally():
    f = build(SMALL)
    table = forwarding_table(f, "valiant", seed=3)
    for src, dst in itertools.permutations(f.hosts, 2):
        groups = groups_on(f, table, src.name, dst.name)
        visited = list(dict.fromkeys(groups))
        if groups[0] != groups[-1]:   # source group, one other, destination group; one global link each
            assert len(visited) == 3 and global_hops(groups) == 2, (src.name, dst.name, groups)
        assert len(groups) <= 6


def test_valiant_is_seeded_and_minimal_without_a_third_group():
    f = build(SMALL)
    assert forwarding_table(f, "valiant", seed=5) == forwarding_table(f, "valiant", seed=5)
    two = build("dragonfly:a=2,p=1,h=1,g=2")
    valiant, minimal = forwarding_table(two, "valiant"), forwarding_table(two, "minimal")
    for s, d in itertools.permutations(two.hosts, 2):
        assert switch_path(two, valiant, s.name, d.name) == switch_path(two, minimal, s.name, d.name)


@pytest.mark.parametrize("policy", [p for p, r in POLICIES.items() if r.fabric_kind in (None, "dragonfly")
                                    and not r.needs_nodes])
def test_every_policy_of_the_family_verifies(policy):
    f = build(SMALL)
    demands = None
    if POLICIES[policy].needs_demands:
        demands = {(s.name, d.name): 1000 * (s.index + 1) for s, d in itertools.permutations(f.hosts[:8], 2)}
    table = forwarding_table(f, policy, demands)
    assert route_problems(f, table, policy) == []


@pytest.mark.parametrize("argv, words", [
    (["-t", "dragonfly:a=2,p=1,h=1,g=4"], ["topology", "g=4", "a*h + 1 = 3"]),
    (["-t", "dragonfly:a=0,p=1,h=1,g=1"], ["topology", "a=0"]),
    (["-t", "dragonfly:a=4,p=-1,h=1,g=4"], ["topology", "p"]),
    (["-t", "dragonfly:a=4,p=2,h=1,g=4,k=2"], ["topology", "k=2"]),
    (["-t", "dragonfly:a=1,p=1,h=1,g=1"], ["topology", "at least 2 hosts"]),
    (["-t", "dragonfly:a=64,p=64,h=64,g=64"], ["topology", "hosts", "131072"]),
    (["-t", SMALL, "-p", "dimension-order"], ["policy", "dimension-order", "torus", "minimal"]),
    (["-t", SMALL, "-m", "hdrm"], ["mapping", "hdrm"]),
    (["-t", "fattree:k=4", "-p", "minimal"], ["policy", "minimal", "dragonfly"]),
])
def test_bad_input_is_refused_naming_it(argv, words, capsys):
    assert cli.main(["model", *argv]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


def test_the_model_runs_an_allreduce_on_it(capsys):
    assert cli.main(["model", "-t", "dragonfly:a=4,p=2,h=2,g=4", "-c", "allreduce", "-p", "minimal"]) == 0
    assert "Avg bus bandwidth" in capsys.readouterr().out

