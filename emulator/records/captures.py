"""Packet capture records (pure): where a call's pcap of a link goes in the
results folder, the columns of captures.csv and capture_flows.csv, and what
tcpdump says when it stops (emulator/measure/capture.py runs it,
emulator/results/captures.py reads the pcaps)."""
from __future__ import annotations

import re

from emulator.fabric.captured import CapturedLink
from emulator.inputs import size_name

FOLDER = "captures"   # in the results folder
# captures.csv: one row per captured link and call
CAPTURE_COLUMNS = ["call", "link", "interface", "rate_mbps", "file", "start_unix_s", "packets", "dropped"]
# capture_flows.csv: one row per flow direction and bin
FLOW_COLUMNS = ["call", "link", "rate_mbps", "t_s", "flow", "src", "sport", "dst", "dport", "packets", "bytes", "payload_bytes",
                "mbps", "retransmissions", "out_of_order"]


def capture_file(run: int, size_bytes: int, repetition: int, link: str) -> str:
    """Where a counted call's pcap of a link goes, in the results folder:
    captures/run0-8M-rep1-bgs0-bgs2.pcap (repetitions counted from 1)."""
    what = size_name(size_bytes) if size_bytes else "workload"
    return f"{FOLDER}/run{run}-{what}-rep{repetition + 1}-{link}.pcap"


def capture_rows(call: int, links: list[CapturedLink], files: list[str], start_unix_s: float,
                 counts: list[tuple[int | None, int | None]]) -> list[dict]:
    """captures.csv's rows of a call (without the run columns): each link's
    file, the call's start in the pcap's clock (Unix time) and what tcpdump counted."""
    return [{"call": call, "link": link.name, "interface": link.interface, "rate_mbps": link.rate_mbps, "file": file,
             "start_unix_s": round(start_unix_s, 6), "packets": "" if captured is None else captured,
             "dropped": "" if dropped is None else dropped}
            for link, file, (captured, dropped) in zip(links, files, counts)]


def tcpdump_counts(text: str) -> tuple[int | None, int | None]:
    """(packets captured, packets dropped by the kernel) from what tcpdump
    prints when it stops; None where it said nothing."""
    said = tcpdump_report(text)
    return said["captured"], said["dropped by kernel"]


def tcpdump_report(text: str) -> dict[str, int | None]:
    """tcpdump's latest counts (it prints them on SIGUSR1 too, on one
    line): packets captured (written), received by filter (handed to it
    by the kernel, written or not yet), dropped by kernel."""
    def count(words: str) -> int | None:
        found = re.findall(rf"(\d+) packets? {words}", text)
        return int(found[-1]) if found else None
    return {words: count(words) for words in ("captured", "received by filter", "dropped by kernel")}
