"""The fidelity verdict for real: a light run is trusted, a run that asks
more of the machine than it can forward is not, and says why."""
import pytest

from emulator.emulation import Emulation
from emulator.plan.run_plan import plan_run
from emulator.results.calls import collective_rows
from emulator.spec.experiment import make_run

pytestmark = pytest.mark.emulation


def verdicts(tmp_path, **values) -> list[str]:
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "repetitions": 2, "warmup": 1, **values}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        rows = collective_rows(plan, emu.replay(plan), emu.dataplane.datapath)
    return [r["fidelity"] for r in rows]


def test_a_light_run_passes_the_verdict(tmp_path, clean_machine, timing):
    # 50 Mbit/s links: ovs-vswitchd forwards the 8 hosts' traffic with ease
    got = verdicts(tmp_path, sizes=["4M"], host_rate_mbps=50, switch_rate_mbps=50)
    timing("ok" in got, got)


def test_an_overloaded_machine_fails_the_verdict(tmp_path, clean_machine):
    # 3 Gbit/s links at MTU 1500: several times what the userspace datapath
    # forwards on this machine (emulator/plan/capacity.py REFERENCE), so the links cannot run at rate
    got = verdicts(tmp_path, sizes=["32M"], host_rate_mbps=3000, switch_rate_mbps=3000, mtu=1500)
    assert all(v.startswith("FAIL: ") for v in got), got
    assert all("the model" in v or "machine busy" in v or "links ran at" in v for v in got), got
