"""Switch queue disciplines: the tc arguments each record gives, and the
shaping that puts them under HTB."""
from __future__ import annotations

import pytest

from emulator.fabric.queues import DISCIPLINES, FIFO, FQ_CODEL, RED_ECN, default_threshold, discipline
from emulator.net.shaping import tc_commands


def test_fifo_counts_packets_or_with_tso_bytes():
    assert FIFO.qdisc(100, 9014, 50.0, 20, False) == ["pfifo", "limit", "100"]
    assert FIFO.qdisc(100, 9014, 50.0, 20, True) == ["bfifo", "limit", "901400"]
    assert not FIFO.marks


def test_red_ecn_marks_from_k_packets_on_the_instantaneous_queue():
    args = RED_ECN.qdisc(100, 9014, 50.0, 20, False)
    value = dict(zip(args[1::2], args[2::2]))
    assert args[0] == "red" and args[-1] == "ecn"
    assert (int(value["min"]), int(value["max"])) == (20 * 9014, 20 * 9014 + 1)   # step marking at K
    assert int(value["limit"]) == 100 * 9014 and value["probability"] == "1.0" and value["bandwidth"] == "50.0mbit"
    assert RED_ECN.marks and RED_ECN.marks_field == "marked"


def test_fq_codel_has_the_queue_depth_and_ecn():
    assert FQ_CODEL.qdisc(64, 1514, 8.0, 0, False) == ["fq_codel", "limit", "64", "ecn"]


def test_fq_codel_under_tso_bounds_its_bytes_as_fifo_does():
    """A TSO segment is up to 64 KiB: 100 of them would be seven times the
    100 frames of MTU 9000 asked for."""
    args = FQ_CODEL.qdisc(100, 9014, 50.0, 0, True)
    assert args == ["fq_codel", "limit", "100", "memory_limit", str(100 * 9014), "ecn"]
    assert args[args.index("memory_limit") + 1] == FIFO.qdisc(100, 9014, 50.0, 0, True)[-1]
    assert FQ_CODEL.marks and FQ_CODEL.marks_field == "ecn_mark"


def test_the_default_threshold_is_a_fifth_of_the_queue_and_at_least_two():
    assert [default_threshold(q) for q in (1, 5, 10, 100, 1000)] == [2, 2, 2, 20, 200]


def test_shaping_puts_the_discipline_under_htb():
    lines = tc_commands("bgs0-eth1", 50.0, 100, 9000, discipline=RED_ECN)
    assert lines[0][4:9] == ["bgs0-eth1", "root", "handle", "1:", "htb"]
    assert lines[2][:10] == ["tc", "qdisc", "add", "dev", "bgs0-eth1", "parent", "1:1", "handle", "10:", "red"]
    assert "min" in lines[2] and lines[2][lines[2].index("min") + 1] == str(20 * 9014)   # the default K
    assert tc_commands("x", 50.0, 100, 9000, discipline=RED_ECN, threshold=7)[2][13] == str(7 * 9014)
    assert tc_commands("x", 50.0, 100, 9000)[2][9:] == ["pfifo", "limit", "100"]   # fifo by default
    # netem (delay, loss) takes the queue's place: the spec allows it with fifo only
    assert tc_commands("x", 50.0, 100, 9000, delay_ms=2.0)[2][9] == "netem"


def test_a_discipline_is_looked_up_by_name():
    assert discipline("fq_codel") is FQ_CODEL
    with pytest.raises(ValueError, match="unknown queue discipline 'codel'; choose one of: fifo, red-ecn, fq_codel"):
        discipline("codel")
    assert list(DISCIPLINES) == ["fifo", "red-ecn", "fq_codel"]


def test_a_run_says_before_it_starts_when_fq_codel_s_queue_drains_before_its_target():
    from emulator.plan.run_plan import plan_run
    from emulator.preflight import shallow_queue
    from emulator.spec.experiment import make_run
    shallow = {"topology": "bigraph:m=2,n=4", "queue_discipline": "fq_codel", "mtu": 1500,
               "host_queue_packets": 20, "switch_queue_packets": 20}
    line = shallow_queue(plan_run(make_run(shallow)))   # 20 frames of 1514 bytes at 50 Mbit/s: 4.8 ms
    assert line.startswith("# queue: fq_codel marks packets that waited 5 ms")
    assert "20 packets (1514 bytes) drains in 4.8 ms at 50 Mbit/s" in line and "a queue of 21 packets" in line
    assert shallow_queue(plan_run(make_run({**shallow, "switch_queue_packets": 21, "host_queue_packets": 21}))) == ""
    assert shallow_queue(plan_run(make_run({**shallow, "queue_discipline": "red-ecn"}))) == ""   # no target
