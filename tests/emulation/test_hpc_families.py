"""The HPC families for real: a small dragonfly and a small torus come up,
OVS holds their policy's routes (Emulation verifies them and probes them
before traffic), and a short ring allreduce moves exactly the scheduled
bytes. Each case well under 40 s."""
import time

import pytest

from emulator.emulation import Emulation
from emulator.plan.run_plan import plan_run
from emulator.results.calls import bytes_ok
from emulator.spec.experiment import make_run

pytestmark = pytest.mark.emulation

BUDGET_S = 40


@pytest.mark.parametrize("topology, policy", [
    ("dragonfly:a=2,p=1,h=1,g=3", "minimal"),    # 6 routers, 6 hosts: every pair of groups joined once
    ("dragonfly:a=2,p=1,h=1,g=3", "valiant"),    # through the third group
    ("torus:x=3,y=2,z=1,hosts=1", "dimension-order"),   # a ring of 3 and a dimension of 2
])
def test_short_allreduce_on_a_small_fabric(tmp_path, clean_machine, timing, topology, policy):
    started = time.monotonic()
    plan = plan_run(make_run({"topology": topology, "policy": policy, "collective": "allreduce",
                              "algorithm": "ring", "sizes": ["256K"], "repetitions": 1, "warmup": 0}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        assert emu.network.ping_all() == []
        (record,) = emu.replay(plan)
    assert bytes_ok(plan, plan.calls[0].size_bytes, record.steps)
    elapsed = time.monotonic() - started
    timing(elapsed < BUDGET_S, f"{topology} {policy}: {elapsed:.1f} s, budget {BUDGET_S} s")
