"""Every routing policy for real: the controller installs its rules, OVS
holds exactly them, and probe packets cross exactly the switches its routes
say (Emulation verifies all of it before traffic, and fails loudly if not);
then a workload moves the scheduled bytes."""
import pytest

from emulator.routes.routing import POLICIES
from emulator.emulation import Emulation, EmulationError
from emulator.plan.run_plan import plan_run
from emulator.results.calls import bytes_ok
from emulator.spec.experiment import make_run

pytestmark = pytest.mark.emulation


# pxn routes rail fabrics of nodes only: tests/emulation/test_node_fabrics.py runs it there; minimal and
# dimension-order their own families: tests/emulation/test_hpc_families.py
@pytest.mark.parametrize("policy", sorted(p for p, record in POLICIES.items()
                                           if not record.needs_nodes and record.fabric_kind in (None, "bigraph")))
def test_policy_paths_are_installed_and_followed(tmp_path, clean_machine, policy):
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "policy": policy, "collective": "all-to-all",
                              "sizes": ["256K"], "repetitions": 1, "warmup": 0}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        installed = emu.installed_rules()
        (record,) = emu.replay(plan)
    assert sum(len(rules) for rules in installed.values()) >= len(plan.fabric.switches) * len(plan.fabric.hosts)
    assert bytes_ok(plan, plan.calls[0].size_bytes, record.steps)


def test_a_wrong_route_fails_loudly(tmp_path, clean_machine):
    """The controller routes with "shortest" but the emulator expects "spread"'s
    routes: the read-back of the rules must refuse to go on."""
    plan = plan_run(make_run({"topology": "fattree:k=4", "policy": "shortest", "sizes": ["64K"],
                              "repetitions": 1, "warmup": 0}))
    expected = plan_run(make_run({"topology": "fattree:k=4", "policy": "spread", "sizes": ["64K"],
                                  "repetitions": 1, "warmup": 0}))
    plan.table = expected.table
    with pytest.raises(EmulationError, match="do not hold the computed rules"):
        with Emulation(plan, str(tmp_path), log=lambda *_: None):
            pass
