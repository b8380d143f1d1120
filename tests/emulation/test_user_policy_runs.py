"""A routing policy of one's own for real: the controller installs the
routes the emulator computed from the user's file (not the file run again),
OVS holds exactly them and probes follow them (Emulation verifies both
before traffic), and a ring allreduce's packets take the policy's detour."""
import json
import os

import pytest

from emulator.emulation import Emulation
from emulator.plan.run_plan import plan_run, route_demands
from emulator.results.calls import bytes_ok
from emulator.routes import user_policy
from emulator.routes.routing import forwarding_table, pair_paths
from emulator.spec.experiment import make_run

pytestmark = pytest.mark.emulation

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "policies", "avoid_busiest.py")


def test_a_file_policys_routes_are_installed_and_followed(tmp_path, clean_machine):
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "policy": f"file:{EXAMPLE}", "collective": "allreduce",
                              "algorithm": "ring", "sizes": ["1M"], "repetitions": 1, "warmup": 0}))
    fabric, n = plan.fabric, plan.ranks
    planned = pair_paths(fabric, plan.table)
    assert planned == user_policy.answer(EXAMPLE, fabric, route_demands(plan.spec, plan.schedules, plan.hosts))
    shortest = pair_paths(fabric, forwarding_table(fabric, "shortest"))
    ring = [(plan.hosts[r], plan.hosts[(r + 1) % n]) for r in range(n)]
    src, dst = next(pair for pair in ring if planned[pair] != shortest[pair])   # a ring pair the policy moves
    here, there = next((a, b) for a, b, c in zip(planned[src, dst], planned[src, dst][1:], shortest[src, dst][1:])
                       if b != c)   # where it leaves shortest's path: a rule for its source alone
    port = next(p for p, nb in fabric.switch_neighbours(here) if nb == there)

    def packets(rules) -> int:
        return sum(r.packets for r in rules[here] if r.rule.ipv4_src == fabric.host(src).ip
                   and r.rule.ipv4_dst == fabric.host(dst).ip and r.rule.out_port == port)

    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        before = emu.installed_rules()
        (record,) = emu.replay(plan)
        after = emu.installed_rules()
    assert bytes_ok(plan, plan.calls[0].size_bytes, record.steps)
    with open(tmp_path / "policy-routes.json") as f:
        handed = {(a, b): switches for a, b, switches in json.load(f)}
    with open(tmp_path / "routes.json") as f:
        installed = {tuple(pair.split(">")): switches for pair, switches in json.load(f).items()}
    assert handed == installed == planned
    assert packets(after) - packets(before) > 0, f"{src}->{dst}'s packets did not leave {here} towards {there}"
