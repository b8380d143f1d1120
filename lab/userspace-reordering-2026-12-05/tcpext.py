"""TCP's reordering and recovery counters summed over the emulated hosts (Mininet's shells, `mininet:bgh*`), read
every second until SIGINT or SIGTERM; prints the last reading taken while the hosts were up (their counters start
at 0 with the fabric, so one run's totals).

    .venv/bin/python tcpext.py > counters.json &   # then the run; then kill -INT that pid
"""
import json
import os
import signal
import time

NAMES = ("TCPSACKReorder", "TCPTSReorder", "TCPRenoReorder", "TCPDSACKRecv", "TCPDSACKUndo", "TCPLossUndo",
         "TCPSpuriousRTOs", "TCPTimeouts", "TCPFastRetrans", "TCPLostRetransmit", "TCPSlowStartRetrans",
         "TCPSpuriousRtxHostQueues", "TCPOFOQueue", "TCPLossProbes", "TCPLossProbeRecovery", "TCPDSACKOfoRecv",
         "TCPDSACKIgnoredOld", "TCPDSACKIgnoredNoUndo", "TCPSackRecovery", "TCPRcvCoalesce", "TCPDelivered")


def shells() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"mininet:bgh" in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def reading() -> dict[str, int]:
    totals = dict.fromkeys(NAMES, 0)
    for pid in shells():
        with open(f"/proc/{pid}/net/netstat") as f:
            lines = [l.split() for l in f if l.startswith("TcpExt:")]
        for name, value in zip(lines[0][1:], lines[1][1:]):
            if name in totals:
                totals[name] += int(value)
    return totals


stop = []
signal.signal(signal.SIGINT, lambda *_: stop.append(1))
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
last = {}
while not stop:
    got = reading()
    if any(got.values()) or not last:
        last = got   # the hosts' counters start at 0 with the fabric; the last reading before its teardown counts
    time.sleep(1.0)
print(json.dumps(last))
