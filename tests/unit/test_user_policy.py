"""A routing policy of one's own (`-p file:PATH.py`, emulator/routes/user_policy.py):
every kind of bad answer refused naming the file and the first bad route,
before anything is built (exit 2); a good one routed exactly as it says,
by the model, the verification, the rules and the controller's record."""
from __future__ import annotations

import json
import os

import pytest

from controller.__main__ import parse_args
from emulator import execute
from emulator.cli import main
from emulator.exit_codes import BAD_INPUT
from emulator.fabric.topology import build
from emulator.plan.run_plan import plan_run
from emulator.routes import user_policy, verification
from emulator.routes.routing import (ANY_SOURCE, LiftedTable, fixed_policy, forwarding_table, given_routes,
                                     out_port, pair_paths, policy_record)
from emulator.routes.rules import switch_rules
from emulator.routes.state import RouteState
from emulator.spec.experiment import SpecError, make_run
from emulator.spec.sweep import load_sweep
from emulator.spec.vary import varied_runs

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "policies", "avoid_busiest.py")
TOPOLOGY = "bigraph:m=2,n=4"   # bgh0,1 on bgs0, bgh2,3 on bgs1 (upper); bgh4,5 on bgs2, bgh6,7 on bgs3 (lower)

# a user's file: shortest switch paths for every pair (`good`), which each case below spoils once
BASE = '''
from collections import deque

def shortest(fabric, a, b):
    before, queue = {a: None}, deque([a])
    while queue:
        here = queue.popleft()
        for _, nb in fabric.switch_neighbours(here):
            if nb not in before:
                before[nb] = here
                queue.append(nb)
    path = [b]
    while before[path[-1]] is not None:
        path.append(before[path[-1]])
    return path[::-1]

def good(fabric):
    return {(s.name, d.name): shortest(fabric, s.switch, d.switch)
            for s in fabric.hosts for d in fabric.hosts if s.name != d.name}
'''


def policy_file(tmp_path, body: str, name: str = "mine.py") -> str:
    path = tmp_path / name
    path.write_text(body)
    return f"file:{path}"


def spoiled(tmp_path, change: str) -> str:
    """A policy answering `good` with `change` made to it (`r`: the answer)."""
    return policy_file(tmp_path, BASE + f"\ndef routes(fabric, demands):\n    r = good(fabric)\n    {change}\n"
                                         "    return r\n")


def refusal(policy: str) -> str:
    """Why the plan of a run with `policy` is refused (the routes run there, with the run's demands)."""
    with pytest.raises(SpecError) as e:
        plan_run(make_run({"topology": TOPOLOGY, "policy": policy, "sizes": ["1M"]}))
    return str(e.value)


# ---- the file -------------------------------------------------------------------------------

def test_a_syntax_error_names_the_file_and_line(tmp_path):
    policy = policy_file(tmp_path, "def routes(fabric, demands):\n    return {\n\ndef x(:\n")
    with pytest.raises(SpecError, match=r"policy: .*mine\.py, line \d+: syntax error"):
        make_run({"policy": policy})


def test_a_file_without_routes_is_refused(tmp_path):
    with pytest.raises(SpecError, match=r"mine\.py: defines no routes\(fabric, demands\) function"):
        make_run({"policy": policy_file(tmp_path, "ROUTES = {}\n")})


def test_a_file_whose_import_raises_names_the_exception_and_line(tmp_path):
    with pytest.raises(SpecError, match=r"mine\.py: importing it raised ZeroDivisionError: .* \(line 2\)"):
        make_run({"policy": policy_file(tmp_path, "X = 1\nY = X / 0\n")})


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(SpecError, match=r"policy file .*nothing\.py: cannot read it: No such file"):
        make_run({"policy": f"file:{tmp_path / 'nothing.py'}"})


def test_routes_raising_names_the_exception_and_line(tmp_path):
    policy = policy_file(tmp_path, "def routes(fabric, demands):\n    return {}['x']\n")
    assert refusal(policy).endswith("mine.py: routes(fabric, demands) raised KeyError: 'x' (line 2)")


def test_an_answer_that_is_not_a_dict_is_refused(tmp_path):
    assert "routes returned list, not a dict {(source host, destination host)" in \
        refusal(spoiled(tmp_path, "r = list(r.items())"))


# ---- the answer: one test per kind of bad route -----------------------------------------------

def test_a_missing_pair_is_named(tmp_path):
    assert "no route from bgh0 to bgh5: every ordered pair of distinct hosts of bigraph:m=2,n=4 needs one " \
           "(56 pairs, 55 given)" in refusal(spoiled(tmp_path, "del r['bgh0', 'bgh5']"))


def test_an_unknown_host_is_named(tmp_path):
    assert "route bgh0 -> bgh99: bigraph:m=2,n=4 has no host 'bgh99'" in \
        refusal(spoiled(tmp_path, "r['bgh0', 'bgh99'] = ['bgs0']"))


def test_an_empty_path_is_named(tmp_path):
    assert "route bgh0 -> bgh5: the path is empty" in refusal(spoiled(tmp_path, "r['bgh0', 'bgh5'] = []"))


def test_an_unknown_switch_is_named(tmp_path):
    assert "route bgh0 -> bgh5: bigraph:m=2,n=4 has no switch 'bgs9'" in \
        refusal(spoiled(tmp_path, "r['bgh0', 'bgh5'] = ['bgs0', 'bgs9', 'bgs2']"))


def test_a_path_not_starting_at_the_sources_switch_is_named(tmp_path):
    assert "route bgh0 -> bgh5: must start at bgs0, the switch of bgh0, not at bgs1" in \
        refusal(spoiled(tmp_path, "r['bgh0', 'bgh5'] = ['bgs1', 'bgs2']"))


def test_a_path_not_ending_at_the_destinations_switch_is_named(tmp_path):
    assert "route bgh0 -> bgh5: must end at bgs2, the switch of bgh5, not at bgs3" in \
        refusal(spoiled(tmp_path, "r['bgh0', 'bgh5'] = ['bgs0', 'bgs3']"))


def test_two_switches_not_linked_are_named(tmp_path):
    assert "route bgh0 -> bgh2: bgs0 and bgs1 are not linked" in \
        refusal(spoiled(tmp_path, "r['bgh0', 'bgh2'] = ['bgs0', 'bgs1']"))


def test_a_loop_is_named(tmp_path):
    assert "route bgh0 -> bgh4: visits bgs2 twice (a loop): bgs0 > bgs2 > bgs1 > bgs2" in \
        refusal(spoiled(tmp_path, "r['bgh0', 'bgh4'] = ['bgs0', 'bgs2', 'bgs1', 'bgs2']"))


def test_a_bad_route_is_exit_2_before_anything_is_built(tmp_path, capsys):
    policy = spoiled(tmp_path, "r['bgh0', 'bgh2'] = ['bgs0', 'bgs1']")
    assert main(["model", "-t", TOPOLOGY, "-c", "allreduce", "-p", policy]) == BAD_INPUT
    assert "route bgh0 -> bgh2: bgs0 and bgs1 are not linked" in capsys.readouterr().err


# ---- good answers ---------------------------------------------------------------------------

def test_routes_to_one_destination_may_disagree_at_a_switch(tmp_path):
    """Forwarding is by destination: where two sources' routes to one host
    leave a switch by different ports, that switch gets per-source rules,
    at the sources' own switch and at a switch in the middle."""
    answer = {("bgh0", "bgh2"): ["bgs0", "bgs2", "bgs1"], ("bgh1", "bgh2"): ["bgs0", "bgs3", "bgs1"],
              ("bgh4", "bgh0"): ["bgs2", "bgs1", "bgs3", "bgs0"], ("bgh6", "bgh0"): ["bgs3", "bgs1", "bgs2", "bgs0"]}
    policy = spoiled(tmp_path, f"r.update({answer!r})")
    fabric = build(TOPOLOGY)
    table = forwarding_table(fabric, policy)
    paths = pair_paths(fabric, table)
    assert {pair: paths[pair] for pair in answer} == answer
    for switch, dst, sources in (("bgs0", "bgh2", ("bgh0", "bgh1")), ("bgs1", "bgh0", ("bgh4", "bgh6"))):
        assert isinstance(table[switch][dst], dict) and ANY_SOURCE in table[switch][dst]
        assert len({out_port(table, switch, src, dst) for src in sources}) == 2, (switch, dst)
    pinned = [r for r in switch_rules(fabric, table, "bgs1") if r.ipv4_src and r.ipv4_dst == fabric.host("bgh0").ip]
    assert pinned, "no per-source rule at bgs1 for bgh0"
    assert verification.route_problems(fabric, table, policy) == []


def test_the_demands_are_the_runs_and_none_without_a_workload(tmp_path):
    policy = policy_file(tmp_path, BASE + "SEEN = []\n\ndef routes(fabric, demands):\n    SEEN.append(demands)\n"
                                          "    return good(fabric)\n")
    plan = plan_run(make_run({"topology": TOPOLOGY, "policy": policy, "collective": "allreduce", "sizes": ["1M"]}))
    forwarding_table(plan.fabric, policy)
    seen = user_policy.load(policy.removeprefix("file:")).__globals__["SEEN"]
    ring = {(f"bgh{i}", f"bgh{(i + 1) % 8}") for i in range(8)}
    assert set(seen[0]) == ring and all(n > 0 for n in seen[0].values())
    assert seen[-1] is None


def test_the_example_runs_through_the_model_beside_shortest(capsys):
    """avoid_busiest moves the ring's pairs off the busiest middle switch
    onto the other, where two of them share a link: the model says so."""
    busbw = {}
    for policy in ("shortest", f"file:{EXAMPLE}"):
        assert main(["model", "-t", TOPOLOGY, "-c", "allreduce", "-p", policy, "--json"]) == 0
        (run,) = json.loads(capsys.readouterr().out)
        busbw[policy] = run["sizes"][-1]["busbw_mbps"]
        assert all(s["time_s"] > 0 for s in run["sizes"])
    assert busbw[f"file:{EXAMPLE}"] == pytest.approx(busbw["shortest"] / 2, rel=0.05)


def test_the_examples_routes_are_what_it_answers_and_verified():
    fabric = build(TOPOLOGY)
    policy = f"file:{EXAMPLE}"
    answer = user_policy.answer(EXAMPLE, fabric, None)
    table = forwarding_table(fabric, policy)
    assert pair_paths(fabric, table) == answer
    assert answer != pair_paths(fabric, forwarding_table(fabric, "shortest"))   # it moved some pairs
    assert verification.route_problems(fabric, table, policy) == []
    assert policy_record(policy).routes_given and policy_record(policy).takes_demands


def test_on_nodes_the_user_routes_the_nics_and_the_routes_are_lifted():
    spec = make_run({"topology": TOPOLOGY, "accelerators": 2, "policy": f"file:{EXAMPLE}", "sizes": ["1M"]})
    fabric = spec.fabric()
    table = forwarding_table(fabric, spec.policy)
    assert isinstance(table, LiftedTable)
    assert {h.name for h in table.nodes.network.hosts} == {f"nic{i}" for i in range(8)}
    assert given_routes(fabric, table) == user_policy.answer(EXAMPLE, table.nodes.network, None)
    assert verification.route_problems(fabric, table, spec.policy) == []


# ---- the controller installs the emulator's answer ----------------------------------------

def test_the_controller_record_gives_the_same_rules_without_running_the_file():
    fabric = build(TOPOLOGY)
    table = forwarding_table(fabric, f"file:{EXAMPLE}")
    given = json.loads(json.dumps([[a, b, s] for (a, b), s in given_routes(fabric, table).items()]))
    record = fixed_policy(f"file:{EXAMPLE}", {(a, b): s for a, b, s in given})
    state = RouteState(fabric, record)
    assert state.policy == f"file:{EXAMPLE}"
    for switch in fabric.switches:
        assert state.rules(switch.name) == set(switch_rules(fabric, table, switch.name))
    port = next(p for p, nb in fabric.switch_neighbours("bgs0") if nb == "bgs3")
    assert state.port_changed("bgs0", port, up=False)   # a link its routes need goes down: shortest paths
    assert "cannot route" in state.fallback and "bgs0 and bgs3 are not linked" in state.fallback


def test_the_controller_takes_a_file_policy_only_with_its_routes():
    args = parse_args(["--fabric", "f.json", "--ready-file", "r", "--policy", "file:x.py", "--routes", "r.json"])
    assert args.routes == "r.json"
    for argv in (["--policy", "file:x.py"], ["--policy", "ecmp", "--routes", "r.json"], ["--policy", "nope"]):
        with pytest.raises(SystemExit):
            parse_args(["--fabric", "f.json", "--ready-file", "r", *argv])


def test_exec_routes_a_file_policy_without_demands(tmp_path):
    """A program's traffic is its own: the routes exec installs are those
    of no demands, not of the plan's stand-in collective."""
    policy = policy_file(tmp_path, BASE + "SEEN = []\n\ndef routes(fabric, demands):\n    SEEN.append(demands)\n"
                                          "    return good(fabric)\n")
    job = execute.prepare({"topology": TOPOLOGY, "policy": policy}, ["true"], False, None, str(tmp_path / "out"))
    assert user_policy.load(policy.removeprefix("file:")).__globals__["SEEN"][-1] is None
    assert pair_paths(job.plan.fabric, job.plan.table) == user_policy.answer(
        policy.removeprefix("file:"), job.plan.fabric, None)


# ---- sweeps and --vary take it as any policy ----------------------------------------------

def test_a_sweep_and_vary_take_a_file_policy(tmp_path):
    """A sweep file names it beside itself, as a workload; --vary takes it
    as a value like ours."""
    policy_file(tmp_path, BASE + "\ndef routes(fabric, demands):\n    return good(fabric)\n")
    sweep = tmp_path / "s.toml"
    sweep.write_text('[defaults]\ntopology = "bigraph:m=2,n=4"\nsizes = ["1M"]\n'
                     '[grid]\npolicy = ["shortest", "file:mine.py"]\n')
    policies = [p.spec.policy for p in load_sweep(str(sweep)).points]
    assert policies == ["shortest", f"file:{tmp_path / 'mine.py'}"]
    keys, runs = varied_runs([f"policy=shortest,file:{tmp_path / 'mine.py'}"], {"topology": TOPOLOGY})
    assert keys == ["policy"] and [r.policy for r in runs] == ["shortest", f"file:{tmp_path / 'mine.py'}"]


def test_a_named_pipe_or_a_folder_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    for name, kind in (("pipe.py", "a named pipe"), ("", "a folder")):
        with pytest.raises(SpecError, match=f"policy file .*{name}: cannot read it: it is {kind}"):
            make_run({"policy": f"file:{tmp_path / name}"})
