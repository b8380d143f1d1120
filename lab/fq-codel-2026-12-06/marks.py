"""fq_codel's ECN marks and drops on a congested call, by queue depth,
call size and whether its bytes are bounded under TSO (memory_limit).
Runs where sch_fq_codel is (the VM stage):
    python3 vm/stage.py --command 'cd /bigraph-emu && $BIGRAPH_VENV/bin/python lab/fq-codel-2026-12-06/marks.py' \
        --out /tmp/fq-codel
(add --again after marks.py for the test's two cases, three times each)
"""
import sys
import tempfile
import time

from emulator.emulation import Emulation
from emulator.fabric import queues
from emulator.preflight import plan_emulated
from emulator.spec.experiment import make_run

CONGESTED = {"topology": "bigraph:m=2,n=4", "algorithm": "halving-doubling", "mapping": "naive",
             "repetitions": 1, "warmup": 0, "queue_discipline": "fq_codel", "tcp": "reno"}
BOUNDED = queues.FQ_CODEL.qdisc


def unbounded(packets, frame, rate_mbps, threshold, tso):   # the queue before its bytes were bounded
    return ["fq_codel", "limit", str(packets), "ecn"]


def measure(queue: int, size: str, bounded: bool) -> str:
    object.__setattr__(queues.FQ_CODEL, "qdisc", BOUNDED if bounded else unbounded)
    plan = plan_emulated(make_run({**CONGESTED, "sizes": [size], "host_queue_packets": queue,
                                   "switch_queue_packets": queue}))
    with tempfile.TemporaryDirectory() as out, Emulation(plan, out, log=lambda *_: None) as emu:
        t0 = time.monotonic()
        (record,) = emu.replay(plan)
        took = time.monotonic() - t0
    rows = [r for r in record.links if r["kind"] == "switch"]
    marks, drops = (sum(int(r[k]) for r in rows) for k in ("marks", "drops"))
    return f"| {queue} | {size} | {'yes' if bounded else 'no'} | {marks} | {drops} | {took:.1f} |"


if __name__ == "__main__":
    print("| queue packets | size | bytes bounded | marks | drops | replay s |\n|---|---|---|---|---|---|")
    cases = [(20, "1M", False), (20, "1M", True), (20, "4M", True), (100, "1M", True), (100, "4M", True)]
    if sys.argv[1:] == ["--again"]:   # the test's cases, three times each
        cases = [(20, "1M", True), (20, "4M", True)] * 3
    for queue, size, bounded in cases:
        print(measure(queue, size, bounded), flush=True)
    sys.exit(0)
