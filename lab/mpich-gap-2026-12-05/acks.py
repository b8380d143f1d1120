"""Per captured host, MPICH's 16-byte messages (a message's completion, as the capture shows: one goes back to
its sender after each data message has come in): how long after the last data byte a host received from a peer
it sent the peer that message (its reaction), and how long after the last data byte it sent to a peer that
peer's message came back (what its send waited for). Times at the switch's end of the host link.

    .venv/bin/python acks.py FOLDER   # a run with --capture bghN,... of mpi_allreduce.py
"""
import glob
import os
import re
import statistics
import sys

from scapy.all import IP, TCP, PcapReader


def waits(path: str, ip: str) -> tuple[list[float], list[float]]:
    last_data = {"out": {}, "in": {}}
    reaction, waited = [], []
    for p in PcapReader(path):
        if IP not in p or TCP not in p:
            continue
        i, t = p[IP], p[TCP]
        size = i.len - i.ihl * 4 - t.dataofs * 4
        way = "out" if i.src == ip else "in"
        peer = (i.dst if way == "out" else i.src).split(".")[-1]
        when = float(p.time)
        if size >= 1000:
            last_data[way][peer] = when
        elif size == 16:
            # ours answers the data that came in; the peer's answers the data we sent
            seen = last_data["in" if way == "out" else "out"].pop(peer, None)
            if seen is not None:
                (reaction if way == "out" else waited).append(when - seen)
    return reaction, waited


def summary(name: str, xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=10)
    return (f"{name} {len(xs)}: median {1e3 * statistics.median(xs):.1f} ms, 10-90% {1e3 * q[0]:.1f}-"
            f"{1e3 * q[-1]:.1f}, max {1e3 * max(xs):.1f}, sum {1e3 * sum(xs):.0f} ms")


for path in sorted(glob.glob(os.path.join(sys.argv[1], "captures", "*-bgh*.pcap"))):
    n = int(re.search(r"bgh(\d+)", path).group(1))
    reaction, waited = waits(path, f"198.18.0.{n + 1}")
    print(f"bgh{n}: {summary('its reactions', reaction)}\n       {summary('its sends waited', waited)}")
