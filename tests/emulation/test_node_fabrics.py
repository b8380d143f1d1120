"""Nodes of accelerators for real: 4 nodes of 4 accelerators come up on
BiGraph (two NICs a node, PCIe switches under a root) and on a rail fabric
(NVSwitch, a NIC per rail, PXN), the routes through the nodes' bridges are
read back and probed, every accelerator moves exactly its bytes, and
nothing is left behind."""
import subprocess

import pytest

from emulator.emulation import Emulation
from emulator.fabric.graph import SWITCH_PREFIX
from emulator.plan.run_plan import plan_run
from emulator.results.calls import bytes_ok
from emulator.routes.verification import route_problems
from emulator.spec.experiment import make_run

pytestmark = pytest.mark.emulation

NODES = {"sizes": ["256K"], "repetitions": 1, "warmup": 0, "accelerators": 4, "nics": 2}
FABRICS = {"bigraph-pcie": {"topology": "bigraph:m=2,n=4", "interconnect": "pcie"},
           "rail-nvlink-pxn": {"topology": "rail:nodes=4,rails=2,spines=1", "interconnect": "nvlink",
                               "policy": "pxn"}}


@pytest.mark.parametrize("algorithm", ["ring", "hierarchical"])
@pytest.mark.parametrize("fabric", list(FABRICS))
def test_every_accelerator_moves_its_bytes_through_its_node(tmp_path, clean_machine, fabric, algorithm):
    plan = plan_run(make_run({**NODES, **FABRICS[fabric], "algorithm": algorithm}))
    assert len(plan.fabric.hosts) == 16 and len(plan.fabric.nodes()) == 4
    assert route_problems(plan.fabric, plan.table, plan.spec.policy) == []
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:   # bring-up reads back and probes the routes
        bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True, check=True).stdout.split()
        (record,) = emu.replay(plan)
    assert sorted(b for b in bridges if b.startswith(SWITCH_PREFIX)) == sorted(s.name for s in plan.fabric.switches)
    size = plan.calls[0].size_bytes
    assert bytes_ok(plan, size, record.steps)
    for rank, steps in enumerate(record.steps):
        assert sum(s["sent"] for s in steps) == plan.schedules[size].bytes_sent(rank)
    inside = [r for r in record.links if r["node"] in {s.name for s in plan.fabric.switches if s.node >= 0}]
    assert sum(r["tx_bytes"] for r in inside) > 0   # the interconnect carried traffic
