"""Packet captures for real: a run with --capture records each named link
on its switch-side interface with tcpdump during the counted call, headers
only; the pcaps open (tcpdump -r, scapy), hold what the link monitor
counted on that link, and the report turns them into capture_flows.csv; no
tcpdump is left running. Also: ports.csv's times count from the call's start."""
import os
import signal
import subprocess
import sys
import threading

import pandas as pd
import pytest

from emulator import exit_codes
from emulator.results.captures import read_segments
from emulator.fabric.captured import CapturedLink
from emulator.net import processes
from emulator.measure.capture import SNAPLEN, CaptureError, LinkCapture

pytestmark = pytest.mark.emulation

# naive halving-doubling on bigraph:m=2,n=4: bgh0 and bgh1 exchange with bgh4 and bgh5 over bgs0-bgs2
RUN = ["run", "-t", "bigraph:m=2,n=4", "-a", "halving-doubling", "-m", "naive", "-b", "2M", "-e", "2M",
       "-n", "1", "-w", "1", "--bw", "20", "--capture", "bgs0-bgs2,bgh0"]


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    out = tmp_path_factory.mktemp("capture") / "res"
    proc = subprocess.run([sys.executable, "-m", "emulator.cli", *RUN, "--out", str(out)], capture_output=True,
                          text=True, timeout=600)
    return out, proc


def test_a_run_records_the_links_it_names_during_the_counted_call(captured, clean_machine):
    out, proc = captured
    assert proc.returncode in exit_codes.FINISHED, proc.stdout + proc.stderr
    assert "capturing bgs0-bgs2 bgh0" in proc.stdout
    captures = pd.read_csv(out / "captures.csv")
    assert list(captures.link) == ["bgs0-bgs2", "bgh0"]            # the counted call only, not the warm-up
    assert set(captures.repetition) == {0} and captures.call.nunique() == 1
    assert list(captures.interface)[1] == "bgs0-eth1"              # bgh0 is port 1 of bgs0
    # asserted in the VM stage too: the capture waits for tcpdump to catch up (0 dropped in 4 of 4 stages)
    assert (captures.dropped == 0).all(), f"tcpdump dropped packets: {captures.to_dict('records')}"
    from scapy.utils import RawPcapReader
    for capture in captures.itertuples():
        path = out / capture.file
        # opens as Wireshark would; the first packets may be IPv6 the kernel sends from a switch port (in a VM)
        shown = subprocess.run(["tcpdump", "-r", str(path), "-c", "50", "-n"], capture_output=True, text=True)
        assert shown.returncode == 0 and " IP " in shown.stdout, shown.stderr
        lengths = [(len(data), meta.wirelen) for data, meta in RawPcapReader(str(path))]
        assert lengths and all(kept == min(wire, SNAPLEN) for kept, wire in lengths)   # headers only
        assert capture.packets >= len(read_segments(str(path), capture.start_unix_s)) > 0


def test_the_pcap_of_a_link_holds_what_the_monitor_counted_on_it(captured, clean_machine):
    out, _ = captured
    captures = pd.read_csv(out / "captures.csv")
    call = int(captures.call.iloc[0])
    links = pd.read_csv(out / "links.csv")
    both_ways = links[(links.call == call) & (((links.node == "bgs0") & (links.peer == "bgs2")) |
                                              ((links.node == "bgs2") & (links.peer == "bgs0")))]
    counted = both_ways.tx_bytes.sum()
    flows = pd.read_csv(out / "capture_flows.csv")
    on_link = flows[flows.link == "bgs0-bgs2"]
    assert counted > 1 << 20 and on_link.bytes.sum() <= 1.05 * counted   # a capture sees no bytes that did not cross
    assert on_link.bytes.sum() >= 0.95 * counted, (on_link.bytes.sum(), counted)   # every byte, in the VM stage too
    data = on_link[on_link.payload_bytes > 0]
    assert {("bgh0", "bgh4"), ("bgh1", "bgh5")} <= set(zip(data.src, data.dst)) | set(zip(data.dst, data.src))
    host = flows[flows.link == "bgh0"]
    assert len(host) and ((host.src == "bgh0") | (host.dst == "bgh0")).all()   # a host's link: its own flows
    retrans = int(pd.read_csv(out / "collectives.csv").tcp_retrans.sum())
    assert on_link.retransmissions.sum() <= retrans                           # every one was sent by some host
    assert (out / "capture_flows.png").exists()


def test_ports_csv_counts_from_the_calls_start(captured, clean_machine):
    out, _ = captured
    ports = pd.read_csv(out / "ports.csv")
    time_s = pd.read_csv(out / "collectives.csv").time_s.max()
    assert {"run", "call", "t_s", "switch", "port", "peer", "tx_bytes"} <= set(ports.columns)
    assert len(ports) and ports.t_s.min() >= 0 and ports.t_s.max() <= time_s + 2.0
    assert set(ports.call) <= set(pd.read_csv(out / "links.csv").call)


def test_a_capture_that_cannot_start_says_why_and_leaves_no_tcpdump(tmp_path, clean_machine):
    with pytest.raises(CaptureError, match="bgs9-eth99"):
        with LinkCapture([CapturedLink("bgs9-bgs8", "bgs9-eth99", 1.0)], str(tmp_path), ["captures/x.pcap"]):
            pass
    assert processes.leftover_processes() == []


def test_a_capture_stops_only_when_tcpdump_has_written_what_it_received(tmp_path, clean_machine):
    """tcpdump held stopped through the traffic and the drain, as on a busy
    machine: the packets wait in its socket, and none may be lost at the stop."""
    with LinkCapture([CapturedLink("lo", "lo", 1.0)], str(tmp_path), ["lo.pcap"]) as capture:
        tcpdump = capture.recorders[0].proc.pid
        os.kill(tcpdump, signal.SIGSTOP)
        subprocess.run(["ping", "-c", "20", "-i", "0.01", "-q", "127.0.0.1"], capture_output=True, check=True)
        threading.Timer(1.0, os.kill, (tcpdump, signal.SIGCONT)).start()   # after the drain
    from scapy.utils import RawPcapReader
    written = sum(1 for _ in RawPcapReader(str(tmp_path / "lo.pcap")))
    assert capture.counts == [(40, 0)] and written == 40   # every echo and reply
