"""The kernel's ECN-marking queues and DCTCP for real: a congested call on
`red-ecn` with DCTCP hosts, and on `fq_codel`, has its switch queues mark
(or drop) packets, the link monitor counts them, the hosts negotiate ECN
and run the congestion control asked (DCTCP, DCTCP's pair; reno: not the VM's own cubic), and every byte arrives. Our own
machines lack sch_red, sch_fq_codel and tcp_dctcp: these run in the VM
stage (vm/stage.py), which requires them."""
import subprocess

import pytest

from emulator.emulation import Emulation
from emulator.fabric.graph import interface_name
from emulator.fabric.queues import DISCIPLINES
from emulator.preflight import plan_emulated
from emulator.results.calls import bytes_ok
from emulator.spec.experiment import make_run

pytestmark = [pytest.mark.emulation, pytest.mark.kernel_queues]

# Naive halving-doubling piles up to 4 flows on one BiGraph link (docs/eflops.md): queues build at once.
CONGESTED = {"topology": "bigraph:m=2,n=4", "algorithm": "halving-doubling", "mapping": "naive",
             "repetitions": 1, "warmup": 0, "host_queue_packets": 20, "switch_queue_packets": 20}


# fq_codel marks a packet only after its flow's queue has stood over 5 ms for 100 ms: 1 MiB's steps
# are too short for that, and its byte-bounded queue drops first (0-4 marks, lab/fq-codel-2026-12-06)
@pytest.mark.parametrize("discipline,tcp,size", [("red-ecn", "dctcp", "1M"), ("fq_codel", "reno", "4M")])
def test_a_congested_call_is_marked_counted_and_complete(tmp_path, clean_machine, discipline, tcp, size):
    plan = plan_emulated(make_run({**CONGESTED, "queue_discipline": discipline, "tcp": tcp, "sizes": [size]}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        shells = [emu.network.host(h.name) for h in plan.fabric.hosts]
        used = {s.cmd("sysctl -n net.ipv4.tcp_congestion_control").strip() for s in shells}
        ecn = {s.cmd("sysctl -n net.ipv4.tcp_ecn").strip() for s in shells}
        link = next(l for l in plan.fabric.links if l.kind == "switch")
        qdisc = subprocess.run(["tc", "qdisc", "show", "dev", interface_name(link.a, link.a_port)],
                               capture_output=True, text=True, check=True).stdout
        (record,) = emu.replay(plan)
    assert any(f"qdisc {kind} " in qdisc for kind in DISCIPLINES[discipline].kinds), qdisc   # the switch port's queue
    assert used == {tcp}
    assert ecn == {"1"}   # a marking queue: the hosts ask for ECN
    assert bytes_ok(plan, plan.calls[0].size_bytes, record.steps)
    switch_rows = [r for r in record.links if r["kind"] == "switch"]
    marks = sum(int(r["marks"]) for r in switch_rows)
    drops = sum(int(r["drops"]) for r in switch_rows)
    assert marks > 0, f"{discipline}: no ECN mark counted on any switch link (drops {drops})"
