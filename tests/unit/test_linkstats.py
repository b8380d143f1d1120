"""Unit tests of the link time series (emulator/results/linkstats.py), hand-checked."""
from __future__ import annotations

import pytest

from emulator.results import linkstats
from emulator.records import links as link_records
from emulator.records.links import Sample
from emulator.fabric.topology import bigraph

MTU = 9000


def test_every_directed_link_is_read_from_its_switch_side():
    fabric = bigraph(2, 4)
    links = link_records.directed_links(fabric)
    assert len(links) == 2 * len(fabric.links)
    assert len({l.label for l in links}) == len(links)
    host = fabric.hosts[0]
    up = next(l for l in links if l.label.startswith(f"{host.name}:0>"))
    down = next(l for l in links if l.label.endswith(f">{host.name}"))
    # both directions of a host link are read on the switch's port
    assert up.dev == down.dev == f"{host.switch}-eth{host.port}"
    assert (up.egress, down.egress) == (False, True)
    assert up.kind == down.kind == "host"
    for l in links:
        assert l.dev.startswith("bgs")
        assert l.label == f"{l.node}:{l.port}>{l.peer}"
        if l.kind == "switch":
            assert l.egress and l.dev == f"{l.node}-eth{l.port}"


def two_samples(sent_bytes, received_bytes, dt=0.1, backlog=0, drops=0, marks=0):
    a = Sample(10.0, {"bgs0-eth3": (1000, 10, 0, 5, 7)}, {"bgs0-eth1": (500, 5)}, 100, 200, 50, 3.0, 10)
    b = Sample(10.0 + dt, {"bgs0-eth3": (1000 + sent_bytes, 20, backlog, 5 + drops, 7 + marks)},
               {"bgs0-eth1": (500 + received_bytes, 9)}, 150, 300, 55, 3.03, 20)
    return [a, b]


LINKS = [link_records.DirectedLink("bgs0", 3, "bgs1", "switch", 8.0, "bgs0-eth3", True),
         link_records.DirectedLink("bgh0", 0, "bgs0", "host", 8.0, "bgs0-eth1", False)]


def test_link_rows_turn_counter_deltas_into_utilisation():
    # 8 Mbit/s for 0.1 s is 100 000 bytes: 50 000 bytes is half the rate
    rows = linkstats.link_rows(4, LINKS, two_samples(50_000, 100_000, backlog=18_028, drops=2, marks=3),
                               t0=9.95)
    switch, host = rows
    assert switch == {"call": 4, "t_s": pytest.approx(0.15), "link": "bgs0:3>bgs1", "node": "bgs0", "port": 3,
                      "peer": "bgs1", "kind": "switch", "scope": "network",
                      "rate_mbps": 8.0, "tx_bytes": 50_000, "tx_packets": 10, "util": pytest.approx(0.5),
                      "backlog_bytes": 18_028, "drops": 2, "marks": 3}
    assert host["util"] == pytest.approx(1.0)
    assert (host["tx_packets"], host["backlog_bytes"], host["drops"], host["marks"]) == (4, 0, 0, 0)


def test_a_link_missing_from_a_sample_is_skipped():
    a, b = two_samples(1, 1)
    del b.sent["bgs0-eth3"]
    assert [r["link"] for r in linkstats.link_rows(0, LINKS, [a, b], 10.0)] == ["bgh0:0>bgs0"]


def test_machine_rows():
    (row,) = linkstats.machine_rows(1, two_samples(0, 0), t0=10.0, ticks_per_s=100)
    assert row["cpu_busy"] == pytest.approx(0.5)     # 50 busy of 100 jiffies
    assert row["ovs_cpu"] == pytest.approx(0.5)      # 5 ticks = 0.05 s in 0.1 s
    assert row["ovs_wait"] == pytest.approx(0.3)     # its thread waited for a core 0.03 s of the 0.1 s
    assert row["cpu_stolen"] == pytest.approx(0.1)   # a hypervisor took 10 of the 100 jiffies
    assert row["t_s"] == pytest.approx(0.1)


def row(link, t, tx, backlog=0, kind="switch", rate=8.0, util=None):
    return {"link": link, "t_s": t, "tx_bytes": tx, "kind": kind, "rate_mbps": rate, "backlog_bytes": backlog,
            "util": tx * 8 / (0.1 * rate * 1e6) if util is None else util}


def test_utilisation_over_a_call():
    # over a 1 s call at 8 Mbit/s (1 MB/s): a carried 0.5 MB, b 0.25 MB; host links ignored
    rows = [row("a", 0.1, 250_000), row("a", 0.2, 250_000), row("b", 0.1, 250_000),
            row("h", 0.1, 1_000_000, kind="host")]
    assert linkstats.utilisation(rows, 1.0) == pytest.approx((0.5, 0.375))
    assert linkstats.utilisation(rows, 1.0, kind="host") == pytest.approx((1.0, 1.0))
    assert linkstats.utilisation([], 1.0) == (0.0, 0.0)


def test_saturated_rate_uses_only_intervals_with_a_queue_at_both_ends():
    full = 3 * (MTU + 14)
    rows = [row("a", 0.1, 0, backlog=full, util=0.2),     # queue just built up: not counted
            row("a", 0.2, 0, backlog=full, util=0.97),
            row("a", 0.3, 0, backlog=full, util=0.99),
            row("a", 0.4, 0, backlog=0, util=0.5),        # drained during the interval: not counted
            row("b", 0.1, 0, backlog=0, util=0.1)]
    assert linkstats.saturated_rate(rows, MTU) == pytest.approx(0.99)   # median of 0.97, 0.99
    assert linkstats.saturated_rate(rows[3:], MTU) is None


def test_call_figures():
    rows = [row("a", 0.1, 100_000), row("b", 0.1, 0)]
    assert linkstats.call_figures(rows, 0.1, MTU) == {"max_link_util": 1.0, "mean_link_util": 0.5,
                                                      "saturated_util": None}


def test_machine_totals_over_a_call():
    first = Sample(10.0, {"bgs0-eth3": (0, 0, 0, 5, 0), "bgs1-eth2": (0, 0, 0, 1, 3)}, cpu_busy=100,
                   cpu_total=200, ovs_ticks=50, ovs_wait_s=7.0, cpu_stolen=0)
    last = Sample(12.0, {"bgs0-eth3": (0, 0, 0, 9, 0), "bgs1-eth2": (0, 0, 0, 1, 10), "bgs2-eth1": (0, 0, 0, 2, 4)},
                  cpu_busy=400, cpu_total=600, ovs_ticks=150, ovs_wait_s=7.5, cpu_stolen=20)
    totals = linkstats.machine_totals(first, last, ticks_per_s=100)
    assert totals == {"cpu_busy": pytest.approx(0.75), "cpu_stolen": pytest.approx(0.05), "ovs_cpu": pytest.approx(0.5),
                      "ovs_wait": pytest.approx(0.25), "queue_drops": 6,
                      "queue_marks": 11, "most_drops_port": "bgs0-eth3"}
    quiet = linkstats.machine_totals(first, first, ticks_per_s=100)
    assert (quiet["queue_drops"], quiet["most_drops_port"]) == (0, "")


def test_window_counters_count_only_the_samples_around_a_window():
    # a call of four 0.1 s intervals from t0 = 10: 7 drops and 3 retransmissions in the second, 1 drop in the fourth
    drops, retrans, busy = [0, 0, 7, 7, 8], [0, 0, 3, 3, 3], [0, 10, 90, 100, 110]
    samples = [Sample(10.0 + 0.1 * i, {"bgs0-eth3": (0, 0, 0, drops[i], 0)}, cpu_busy=busy[i], cpu_total=100 * i,
                      tcp={"tcp_retrans": retrans[i]}) for i in range(5)]
    rows = [row("a", round(0.1 * i, 6), 100_000 if i == 2 else 0) for i in range(1, 5)]
    second = linkstats.window_counters(samples, 10.0, 100, rows, MTU, 0.12, 0.18)   # within the second interval
    assert (second["queue_drops"], second["tcp_retrans"], second["most_drops_port"]) == (7, 3, "bgs0-eth3")
    assert second["cpu_busy"] == pytest.approx(0.8)
    assert second["max_link_util"] == pytest.approx(1.0)   # 100 kB in its 0.1 s at 8 Mbit/s
    third = linkstats.window_counters(samples, 10.0, 100, rows, MTU, 0.2, 0.3)   # exactly the third interval
    assert (third["queue_drops"], third["tcp_retrans"], third["max_link_util"]) == (0, 0, 0.0)
    whole = linkstats.window_counters(samples, 10.0, 100, rows, MTU, 0.0, 0.4)
    assert (whole["queue_drops"], whole["tcp_retrans"]) == (8, 3)
    assert whole["max_link_util"] == pytest.approx(0.25)
    # beyond the samples: the first and the last; without TCP in the samples, no TCP figure
    bare = [Sample(s.t, s.sent, cpu_busy=s.cpu_busy, cpu_total=s.cpu_total) for s in samples]
    beyond = linkstats.window_counters(bare, 10.0, 100, rows, MTU, -1.0, 9.0)
    assert beyond["queue_drops"] == 8 and "tcp_retrans" not in beyond


def test_port_rows_keep_the_readings_of_the_call_from_its_start():
    fabric = bigraph(2, 4)
    up = next(l for l in fabric.links if l.kind == "switch")
    readings = [{"t": t, "switch": up.a, "port": str(up.a_port), "tx_bytes": str(tx), "rx_bytes": "7",
                 "tx_dropped": "0"} for t, tx in ((99.5, 10), (100.4, 20), (101.4, 30), (102.6, 40))]
    rows = linkstats.port_rows(3, readings, t0=100.0, t1=102.0, fabric=fabric)
    assert rows == [{"call": 3, "t_s": pytest.approx(0.4), "switch": up.a, "port": up.a_port, "peer": up.b,
                     "tx_bytes": 20, "rx_bytes": 7, "tx_dropped": 0},
                    {"call": 3, "t_s": pytest.approx(1.4), "switch": up.a, "port": up.a_port, "peer": up.b,
                     "tx_bytes": 30, "rx_bytes": 7, "tx_dropped": 0}]
    assert set(rows[0]) == set(link_records.PORT_COLUMNS)


def test_the_controllers_readings_are_read_once_and_whole_lines_only(tmp_path):
    from emulator.net.controller_process import ControllerProcess
    controller = ControllerProcess("fabric.json", "shortest", str(tmp_path))
    assert controller.port_readings() == []   # nothing written yet
    path = tmp_path / link_records.CONTROLLER_PORTS
    path.write_text(",".join(link_records.PORT_READING_COLUMNS) + "\n1.5,bgs0,3,10,20,0\n2.5,bgs0")
    assert controller.port_readings() == [{"t": "1.5", "switch": "bgs0", "port": "3", "tx_bytes": "10",
                                           "rx_bytes": "20", "tx_dropped": "0"}]
    with open(path, "a") as f:
        f.write(",3,11,21,0\n")
    assert [r["t"] for r in controller.port_readings()] == ["2.5"]
    assert controller.port_readings() == []
