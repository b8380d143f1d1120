"""Each data flow's kB per 1 ms in some captures, from their first packet (hosts by the last byte of
their address: 5>1 is bgh4 to bgh0).

    .venv/bin/python series.py captures/run0-4M-rep1-bgh4.pcap captures/run0-4M-rep1-bgs0-bgs2.pcap ...
"""
import collections
import re
import subprocess
import sys

BINS = 36   # ms: the first step and a little more
PACKET = re.compile(r"(\d+\.\d+) IP (\d+\.\d+\.\d+\.\d+)\.\d+ > (\d+\.\d+\.\d+\.\d+)\.\d+: .*length (\d+)")


def data_packets(pcap: str) -> list[tuple[float, str, int]]:
    """(time, flow, payload bytes) of every packet with more than 1,000 bytes of payload."""
    text = subprocess.run(["tcpdump", "-n", "-tt", "-r", pcap], capture_output=True, text=True).stdout
    found = (PACKET.match(line) for line in text.splitlines())
    return [(float(m.group(1)), f"{m.group(2).split('.')[-1]}>{m.group(3).split('.')[-1]}", int(m.group(4)))
            for m in found if m and int(m.group(4)) > 1000]


def main(pcaps: list[str]) -> None:
    packets = {p: data_packets(p) for p in pcaps}
    t0 = min(t for got in packets.values() for t, _, _ in got)
    for pcap, got in packets.items():
        flows = collections.defaultdict(lambda: [0] * BINS)
        for t, flow, size in got:
            if int((t - t0) * 1e3) < BINS:
                flows[flow][int((t - t0) * 1e3)] += size
        print("==", pcap.split("/")[-1])
        for flow, bins in sorted(flows.items()):
            print(f"  {flow:5} " + "".join(f"{b // 1000:4d}" for b in bins))


if __name__ == "__main__":
    main(sys.argv[1:])
