"""Packet captures of chosen links (pure, no root): which interface records
a link, where its pcap goes, and what a pcap says, read with scapy: each
TCP flow's throughput over time, its retransmissions and reordered segments.

A run with `capture = ["bgs0-bgs2", "bgh3"]` records, during every counted
call, the switch-side interface of each link (switch ports live in the root
namespace), headers only, one pcap per link and call in captures/ of the
results folder (emulator/measure/capture.py runs tcpdump). One interface sees
both directions of its link, each packet as it leaves its queue: on the wire.
captures.csv lists the files; the report turns them into capture_flows.csv.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from emulator.fabric.graph import host_of_address

BIN_S = 0.1           # throughput bins, as the link monitor's default period


# --- what a pcap says -------------------------------------------------------------------

@dataclass(frozen=True)
class Segment:
    """One TCP segment as captured (headers only, so lengths come from the headers)."""
    t: float           # seconds since the call's start
    src: str           # host name (or address, if not a fabric host)
    sport: int
    dst: str
    dport: int
    seq: int
    payload: int       # TCP payload bytes (from the IP header's length)
    syn_fin: int       # sequence numbers SYN and FIN take (0, 1 or 2)
    wire_bytes: int    # the frame's length on the wire
    ip_id: int         # the IP header's id: Linux numbers a TCP socket's packets in the order it sends them


def read_segments(path: str, start_unix_s: float) -> list[Segment]:
    """Every TCP segment of a pcap, times from `start_unix_s` (the call's
    start); ValueError if the file is not a pcap scapy reads."""
    from scapy.error import Scapy_Exception
    from scapy.layers.inet import IP, TCP
    from scapy.utils import PcapReader
    segments = []
    try:
        with PcapReader(path) as packets:
            for packet in packets:
                if IP not in packet or TCP not in packet:
                    continue
                ip, tcp = packet[IP], packet[TCP]
                flags = int(tcp.flags)
                segments.append(Segment(
                    float(packet.time) - start_unix_s, host_of_address(ip.src) or ip.src, tcp.sport,
                    host_of_address(ip.dst) or ip.dst, tcp.dport, tcp.seq,
                    max(0, ip.len - 4 * ip.ihl - 4 * tcp.dataofs), (flags & 0x02) // 0x02 + (flags & 0x01),
                    packet.wirelen or len(packet), ip.id))
    except (Scapy_Exception, EOFError, OSError) as e:
        raise ValueError(f"{path}: not a pcap scapy reads ({e})") from None
    return segments


RETRANSMISSION, OUT_OF_ORDER = "retransmission", "out of order"


def _sent_after(a: int, b: int) -> bool:
    """IP id `a` was given after `b` (16-bit ids, serial arithmetic)."""
    return 0 < (a - b) % (1 << 16) < (1 << 15)


def kinds(segments: list[Segment]) -> list[str | None]:
    """Per segment (in capture order): RETRANSMISSION if it carries sequence
    numbers its flow had sent before, OUT_OF_ORDER if it is an earlier
    segment that arrives after later ones (reordered on the way), else
    None. The IP id tells them apart: a segment whose sequence numbers were
    not seen yet is a retransmission only if it was sent after the segment
    that first went past them (its original was lost before this link).
    Sequence numbers are unwrapped past 2**32."""
    flows: dict[tuple, _FlowSeen] = {}
    marks = []
    for s in segments:
        length = s.payload + s.syn_fin
        if length == 0:                # a pure acknowledgement
            marks.append(None)
            continue
        flow = flows.setdefault((s.src, s.sport, s.dst, s.dport), _FlowSeen(s.seq))
        marks.append(flow.see(s, length))
    return marks


class _FlowSeen:
    """What a capture has seen of one flow direction so far."""

    def __init__(self, seq: int):
        self.raw, self.unwrapped = seq, seq   # its last data segment's sequence number, raw and unwrapped
        self.starts: set[int] = set()         # sequence numbers segments started at
        self.highest = None                   # highest sequence number sent + 1
        self.raised: list[int] = []           # where each segment that raised it started, in order
        self.raised_ids: list[int] = []       # and its IP id

    def see(self, s: Segment, length: int) -> str | None:
        seq = self.unwrapped + ((s.seq - self.raw + (1 << 31)) % (1 << 32)) - (1 << 31)
        self.raw, self.unwrapped = s.seq, seq
        kind = None
        if self.highest is not None and seq < self.highest:
            past = bisect.bisect_right(self.raised, seq)   # the first segment seen that started past it
            if seq in self.starts or past == len(self.raised):   # or inside the last one: seen before
                kind = RETRANSMISSION
            else:
                kind = RETRANSMISSION if _sent_after(s.ip_id, self.raised_ids[past]) else OUT_OF_ORDER
        self.starts.add(seq)
        if self.highest is None or seq + length > self.highest:
            self.highest = seq + length
            if not self.raised or seq > self.raised[-1]:
                self.raised.append(seq)
                self.raised_ids.append(s.ip_id)
        return kind


def flow_rows(segments: list[Segment], bin_s: float = BIN_S) -> list[dict]:
    """capture_flows.csv's rows of one pcap (without the run and link
    columns): per flow direction and bin of `bin_s`, its packets, bytes on
    the wire, TCP payload, throughput (wire Mbit/s), retransmissions and
    segments out of order;
    t_s is the bin's end, as in links.csv. Segments are taken in time order."""
    segments = sorted(segments, key=lambda s: s.t)
    bins: dict[tuple, dict] = {}
    for s, kind in zip(segments, kinds(segments)):
        k = math.floor(s.t / bin_s)
        key = (s.src, s.sport, s.dst, s.dport, k)
        row = bins.setdefault(key, {"t_s": round((k + 1) * bin_s, 6), "flow": f"{s.src}:{s.sport}>{s.dst}:{s.dport}",
                                    "src": s.src, "sport": s.sport, "dst": s.dst, "dport": s.dport, "packets": 0,
                                    "bytes": 0, "payload_bytes": 0, "retransmissions": 0, "out_of_order": 0})
        row["packets"] += 1
        row["bytes"] += s.wire_bytes
        row["payload_bytes"] += s.payload
        row["retransmissions"] += kind == RETRANSMISSION
        row["out_of_order"] += kind == OUT_OF_ORDER
    rows = sorted(bins.values(), key=lambda r: (r["flow"], r["t_s"]))
    for r in rows:
        r["mbps"] = round(r["bytes"] * 8 / bin_s / 1e6, 6)
    return rows
