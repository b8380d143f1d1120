"""Unit tests of packet captures (emulator/fabric/captured.py), no root: which
interface records a link, and what a pcap says. The pcaps are made here
with scapy as tcpdump -s 96 writes them (headers only, each frame's wire
length kept): two TCP flows across one link, one segment sent twice."""
from __future__ import annotations

import dataclasses
import json
import os

import pandas as pd
import pytest

from emulator.results import captures
from emulator.records import captures as capture_records
from emulator.fabric.captured import CapturedLink, captured_links
from emulator.fabric.graph import host_address, host_of_address
from emulator.spec.experiment import SpecError, make_run
from emulator.fabric.topology import bigraph, leafspine

START = 1_700_000_000.0    # the call's start, in the pcap's clock (Unix time)
MSS = 8948                 # MTU 9000 less IPv4 and TCP headers with timestamps
FRAME = MSS + 66           # Ethernet 14, IPv4 20, TCP 32


def segment(src: int, dst: int, sport: int, dport: int, seq: int, payload: int = MSS, flags: str = "A"):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    return (Ether() / IP(src=host_address(src)[0], dst=host_address(dst)[0]) /
            TCP(sport=sport, dport=dport, seq=seq % (1 << 32), flags=flags,
                options=[("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]) / (b"\0" * payload))


def write_pcap(path, packets) -> None:
    """(seconds after START, packet) as tcpdump -s 96 -w writes them."""
    from scapy.utils import PcapWriter
    writer = PcapWriter(str(path), linktype=1, snaplen=96)   # 1: Ethernet
    for i, (t, packet) in enumerate(packets):
        raw = bytes(packet)
        if i == 0:
            writer.write_header(raw[:96])
        stamp = round((START + t) * 1e6)
        writer.write_packet(raw[:96], sec=stamp // 10**6, usec=stamp % 10**6, wirelen=len(raw))
    writer.close()


# bgh0 -> bgh4 sends 5 segments, the third one again at 0.25 s (a loss: the
# retransmission); bgh4 acknowledges; bgh1 -> bgh5 crosses 2**32 in its sequence numbers.
A_SEQ, B_SEQ = 1000, (1 << 32) - 2 * MSS
PACKETS = ([(0.02 * k, segment(0, 4, 40000, 5201, A_SEQ + k * MSS)) for k in range(5)]
           + [(0.25, segment(0, 4, 40000, 5201, A_SEQ + 2 * MSS))]
           + [(0.03, segment(4, 0, 5201, 40000, 1, payload=0)), (0.26, segment(4, 0, 5201, 40000, 1, payload=0))]
           + [(0.11 + 0.02 * k, segment(1, 5, 40001, 5201, B_SEQ + k * MSS)) for k in range(4)])


@pytest.fixture
def pcap(tmp_path):
    path = tmp_path / "run0-8M-rep1-bgs0-bgs2.pcap"
    write_pcap(path, sorted(PACKETS, key=lambda p: p[0]))
    return path


def test_read_segments_takes_lengths_from_the_headers_of_a_pcap_without_payload(pcap):
    segments = captures.read_segments(str(pcap), START)
    assert len(segments) == len(PACKETS)
    first = segments[0]
    assert (first.src, first.sport, first.dst, first.dport) == ("bgh0", 40000, "bgh4", 5201)
    assert first.t == pytest.approx(0.0, abs=1e-6) and first.payload == MSS and first.wire_bytes == FRAME
    ack = next(s for s in segments if s.src == "bgh4")
    assert ack.payload == 0 and ack.wire_bytes == 66


def test_the_segment_sent_twice_is_the_one_retransmission(pcap):
    segments = captures.read_segments(str(pcap), START)
    marked = [s for s, kind in zip(segments, captures.kinds(segments)) if kind == captures.RETRANSMISSION]
    assert len(marked) == 1
    assert (marked[0].src, marked[0].seq, marked[0].t) == ("bgh0", A_SEQ + 2 * MSS, pytest.approx(0.25))


def test_sequence_numbers_that_wrap_past_2_32_are_no_retransmission(pcap):
    segments = [s for s in captures.read_segments(str(pcap), START) if s.src == "bgh1"]
    assert [s.seq for s in segments][2:] == [0, MSS]      # wrapped
    assert not any(captures.kinds(segments))


def sent(order_sent: int, k: int, ip_id_base: int = 100) -> captures.Segment:
    """bgh0 -> bgh4's k-th segment of MSS bytes, the `order_sent`-th packet its socket sent."""
    return captures.Segment(0.01 * order_sent, "bgh0", 40000, "bgh4", 5201, A_SEQ + k * MSS, MSS, 0, FRAME,
                            (ip_id_base + order_sent) % (1 << 16))


def test_an_earlier_segment_overtaken_on_the_way_is_out_of_order_not_a_retransmission():
    # sent 0, 1, 2, 3; the link sees 0, 2, 1, 3 (1 was held up on the way)
    wire = [sent(0, 0), sent(2, 2), sent(1, 1), sent(3, 3)]
    assert captures.kinds(wire) == [None, None, captures.OUT_OF_ORDER, None]


def test_a_segment_lost_before_the_link_and_sent_again_is_a_retransmission():
    # segment 1 was dropped upstream: the link sees 0, 2, 3, then 1 again, sent after them
    wire = [sent(0, 0), sent(2, 2), sent(3, 3), sent(4, 1)]
    assert captures.kinds(wire) == [None, None, None, captures.RETRANSMISSION]
    # ... and so also when the retransmission is itself overtaken by the new segment sent after it
    assert captures.kinds([sent(0, 0), sent(1, 2), sent(3, 3), sent(2, 1)])[-1] == captures.RETRANSMISSION


def test_ip_ids_wrap_past_2_16_and_a_segment_seen_twice_is_always_a_retransmission():
    wrapping = [sent(0, 0, 65534), sent(2, 2, 65534), sent(1, 1, 65534)]   # ids 65534, 0, 65535
    assert captures.kinds(wrapping)[-1] == captures.OUT_OF_ORDER
    same_id = [sent(0, 0), sent(1, 1), sent(0, 0)]                          # a stack with constant ids
    assert captures.kinds(same_id)[-1] == captures.RETRANSMISSION
    inside_the_last = [sent(0, 0), sent(1, 1), dataclasses.replace(sent(2, 1), seq=A_SEQ + MSS + 100)]
    assert captures.kinds(inside_the_last)[-1] == captures.RETRANSMISSION   # repacketized


def test_flow_rows_give_each_flows_throughput_per_bin_and_its_retransmissions(pcap):
    rows = captures.flow_rows(captures.read_segments(str(pcap), START), bin_s=0.1)
    by = {(r["flow"], r["t_s"]): r for r in rows}
    a = "bgh0:40000>bgh4:5201"
    assert sorted({r["flow"] for r in rows}) == [a, "bgh1:40001>bgh5:5201", "bgh4:5201>bgh0:40000"]
    # 0.00..0.08: five segments; 0.25: the one sent again
    assert (by[(a, 0.1)]["packets"], by[(a, 0.1)]["bytes"], by[(a, 0.1)]["payload_bytes"]) == (5, 5 * FRAME, 5 * MSS)
    assert by[(a, 0.1)]["mbps"] == pytest.approx(5 * FRAME * 8 / 0.1 / 1e6)
    assert by[(a, 0.1)]["retransmissions"] == 0
    assert (by[(a, 0.3)]["packets"], by[(a, 0.3)]["retransmissions"]) == (1, 1)
    assert (a, 0.2) not in by                                  # nothing sent in that bin
    b = "bgh1:40001>bgh5:5201"
    assert [(r["t_s"], r["packets"]) for r in rows if r["flow"] == b] == [(0.2, 4)]
    assert sum(r["retransmissions"] for r in rows) == 1 and sum(r["out_of_order"] for r in rows) == 0
    assert set(rows[0]) == set(capture_records.FLOW_COLUMNS) - {"call", "link", "rate_mbps"}


def test_packets_before_the_call_start_fall_in_bins_that_end_by_it():
    seg = captures.Segment(-0.03, "bgh0", 1, "bgh1", 2, 5, 0, 0, 66, 0)
    assert [r["t_s"] for r in captures.flow_rows([seg], 0.1)] == [0.0]


def test_a_file_that_is_not_a_pcap_is_named(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"not a capture at all")
    with pytest.raises(ValueError, match="x.pcap: not a pcap"):
        captures.read_segments(str(bad), START)


def test_host_names_come_back_from_fabric_addresses():
    assert [host_of_address(host_address(i)[0]) for i in (0, 7, 1000)] == ["bgh0", "bgh7", "bgh1000"]
    assert host_of_address("10.0.0.1") is None and host_of_address("198.18.0.0") is None
    assert host_of_address("not an address") is None


# --- which links, which interface, which file --------------------------------------------

def test_a_switch_link_is_recorded_on_the_first_named_switchs_port_a_host_link_on_its_switchs():
    fabric = bigraph(2, 4)
    up = next(l for l in fabric.links if l.kind == "switch" and {l.a, l.b} == {"bgs0", "bgs2"})
    port = up.a_port if up.a == "bgs0" else up.b_port
    other = up.b_port if up.a == "bgs0" else up.a_port
    host = fabric.host("bgh3")
    assert captured_links(fabric, ["bgs0-bgs2", "bgs2-bgs0", "bgh3"]) == [
        CapturedLink("bgs0-bgs2", f"bgs0-eth{port}", up.rate_mbps),
        CapturedLink("bgs2-bgs0", f"bgs2-eth{other}", up.rate_mbps),
        CapturedLink("bgh3", f"{host.switch}-eth{host.port}", up.rate_mbps)]


def test_parallel_links_are_all_recorded_and_numbered():
    fabric = leafspine(2, 1, 1, uplinks=2)
    leaf = next(s.name for s in fabric.switches if s.tier == "leaf")
    spine = next(s.name for s in fabric.switches if s.tier == "spine")
    names = [c.name for c in captured_links(fabric, [f"{leaf}-{spine}"])]
    assert names == [f"{leaf}-{spine}-1", f"{leaf}-{spine}-2"]


@pytest.mark.parametrize("value, words", [
    ("bgs0-bgs1", ["capture", "'bgs0-bgs1' is not a link", "bigraph-emu topo", "bgs0-bgs2"]),   # same part
    ("bgh99", ["capture", "'bgh99' is not a link"]),
    ("bgh3,bgh3", ["capture", "bgh3 is given twice"]),
    ("bgh0,bgh1,bgh2,bgh3,bgh4", ["capture", "at most 4"]),
    ("bgh0,,bgh1", ["capture", "empty link name"]),
    (["bgh0", 3], ["capture", "expected link names"]),
    (7, ["capture", "expected link names"]),
])
def test_a_bad_capture_is_refused_naming_the_key(value, words):
    with pytest.raises(SpecError) as e:
        make_run({"capture": value})
    assert all(w in str(e.value) for w in words), str(e.value)


def test_capture_reads_back_from_spec_json_and_flags():
    from emulator import cli
    spec = make_run({"capture": "bgs0-bgs2, bgh3"})
    assert spec.capture == ("bgs0-bgs2", "bgh3")
    assert make_run(json.loads(json.dumps(dataclasses.asdict(spec)))) == spec
    args = cli.parser().parse_args(["run", "--capture", "bgs1-bgs3"])
    assert cli._experiment(args, check_kernel=False).runs[0].capture == ("bgs1-bgs3",)


def test_capture_files_and_rows():
    assert capture_records.capture_file(2, 8 << 20, 0, "bgs0-bgs2") == "captures/run2-8M-rep1-bgs0-bgs2.pcap"
    assert capture_records.capture_file(0, 0, 1, "bgh3") == "captures/run0-workload-rep2-bgh3.pcap"
    link = CapturedLink("bgh3", "bgs1-eth2", 50.0)
    (row,) = capture_records.capture_rows(4, [link], ["captures/x.pcap"], START + 0.1234567, [(120, 0)])
    assert row == {"call": 4, "link": "bgh3", "interface": "bgs1-eth2", "rate_mbps": 50.0, "file": "captures/x.pcap",
                   "start_unix_s": START + 0.123457, "packets": 120, "dropped": 0}
    assert capture_records.capture_rows(4, [link], ["f"], START, [(None, None)])[0]["dropped"] == ""


def test_tcpdump_counts_what_it_says_when_it_stops():
    said = ("tcpdump: listening on bgs0-eth3, link-type EN10MB (Ethernet), snapshot length 96 bytes\n"
            "1234 packets captured\n1240 packets received by filter\n6 packets dropped by kernel\n")
    assert capture_records.tcpdump_counts(said) == (1234, 6)
    assert capture_records.tcpdump_counts("1 packet captured\n") == (1, None)
    # on SIGUSR1 it says the same on one line; the latest report counts
    said = "tcpdump: 10 packets captured, 25 packets received by filter, 3 packets dropped by kernel\n" + said
    assert capture_records.tcpdump_counts(said) == (1234, 6)
    assert capture_records.tcpdump_report(said.splitlines()[0]) == {"captured": 10, "received by filter": 25,
                                                             "dropped by kernel": 3}


def test_the_capture_adapter_asks_tcpdump_for_headers_only_and_does_nothing_without_links(tmp_path):
    from emulator.measure.capture import SNAPLEN, LinkCapture, tcpdump_command
    command = tcpdump_command("bgs0-eth3", "x.pcap")
    assert command[:3] == ["tcpdump", "-i", "bgs0-eth3"] and command[command.index("-s") + 1] == str(SNAPLEN)
    assert SNAPLEN >= 14 + 20 + 60 and "-U" in command and ["-Z", "root"] == command[-2:]
    with LinkCapture([], str(tmp_path), []) as capture:
        pass
    assert capture.counts == [] and os.listdir(tmp_path) == []


# --- the report ----------------------------------------------------------------------------

def captured_folder(folder, pcap) -> None:
    """A results folder as a run with --capture bgs0-bgs2 leaves it (one call)."""
    from emulator.plan.run_plan import plan_run
    from emulator.results.calls import CallRecord, write_call
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "sizes": ["8M"], "repetitions": 1, "warmup": 0,
                              "capture": ["bgs0-bgs2"]}))
    os.makedirs(folder / "captures")
    os.replace(pcap, folder / "captures" / pcap.name)
    (folder / "spec.json").write_text(json.dumps({"name": "t", "runs": [dataclasses.asdict(plan.spec)]}))
    (call,) = plan.calls
    steps = [[{"start": 0.0, "end": 0.1 * (k + 1), "sent": sum(t.nbytes for t in s.sends),
               "received": sum(t.nbytes for t in s.recvs)} for k, s in enumerate(rank)]
             for rank in plan.schedules[call.size_bytes].steps]
    link = captured_links(plan.fabric, plan.spec.capture)
    rows = capture_records.capture_rows(call.index, link, [f"captures/{pcap.name}"], START, [(len(PACKETS), 0)])
    write_call(str(folder), plan, call, CallRecord(steps, {}, captures=rows), "user")


def test_the_report_turns_a_folders_pcaps_into_capture_flows_and_a_plot(tmp_path, pcap, capsys):
    from emulator import cli
    folder = tmp_path / "res"
    captured_folder(folder, pcap)
    assert cli.main(["report", str(folder)]) == 0, capsys.readouterr().err
    flows = pd.read_csv(folder / "capture_flows.csv")
    assert set(flows.link) == {"bgs0-bgs2"} and set(flows.run) == {0} and set(flows.size_bytes) == {8 << 20}
    assert flows.retransmissions.sum() == 1 and flows.bytes.sum() == 10 * FRAME + 2 * 66
    assert (folder / "capture_flows.png").read_bytes()[:4] == b"\x89PNG"


def test_a_missing_pcap_is_bad_input_named_before_anything_is_written(tmp_path, pcap, capsys):
    from emulator import cli
    folder = tmp_path / "res"
    captured_folder(folder, pcap)
    (folder / "captures" / pcap.name).unlink()
    before = sorted(os.listdir(folder))
    assert cli.main(["report", str(folder)]) == 2
    assert f"names captures/{pcap.name}, which is missing" in capsys.readouterr().err
    assert sorted(os.listdir(folder)) == before


def test_flow_series_fill_silent_bins_and_keep_the_busiest_flows():
    from emulator.results.plots import flow_series
    panel = pd.DataFrame({"t_s": [0.1, 0.3, 0.2, 0.3], "flow": ["a", "a", "b", "c"], "bytes": [9, 9, 1, 5],
                          "mbps": [1.0, 2.0, 0.5, 3.0]})
    series = flow_series(panel, 0.1, limit=2)
    assert list(series.columns) == ["a", "c"] and list(series.index) == [0.0, 0.1, 0.2, 0.3]
    assert list(series.a) == [0.0, 1.0, 0.0, 2.0] and list(series.c) == [0.0, 0.0, 0.0, 3.0]
