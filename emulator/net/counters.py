"""Counters read around every call, to tell a congested network from a busy
machine: CPU use, drops in the switch port queues, TCP retransmissions."""
from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass

from emulator.fabric import SWITCH_PREFIX


@dataclass(frozen=True)
class Snapshot:
    time: float
    cpu_busy: int            # jiffies, all cores
    cpu_total: int
    drops: dict[str, int]    # switch port -> packets dropped by its queue
    retrans: dict[str, int]  # host -> TCP segments retransmitted


def _cpu() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]   # idle + iowait
    return sum(fields) - idle, sum(fields)


def _queue_drops() -> dict[str, int]:
    out = subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True, check=True).stdout
    drops = {}
    for q in json.loads(out or "[]"):
        dev = q.get("dev", "")
        if dev.startswith(SWITCH_PREFIX):
            drops[dev] = drops.get(dev, 0) + q.get("drops", 0)
    return drops


def _retransmissions(pid: int) -> int:
    """RetransSegs of the network namespace `pid` lives in."""
    with open(f"/proc/{pid}/net/snmp") as f:
        lines = [l.split() for l in f if l.startswith("Tcp:")]
    return int(lines[1][lines[0].index("RetransSegs")])


def snapshot(host_pids: dict[str, int]) -> Snapshot:
    busy, total = _cpu()
    return Snapshot(time.monotonic(), busy, total, _queue_drops(),
                    {h: _retransmissions(pid) for h, pid in host_pids.items()})


def delta(a: Snapshot, b: Snapshot) -> dict:
    """What happened between two snapshots."""
    drops = {d: b.drops.get(d, 0) - a.drops.get(d, 0) for d in b.drops}
    worst = max(drops, key=drops.get, default="")
    return {"cpu_busy": (b.cpu_busy - a.cpu_busy) / max(1, b.cpu_total - a.cpu_total),
            "queue_drops": sum(drops.values()),
            "most_drops_port": worst if drops.get(worst) else "",
            "tcp_retrans": sum(b.retrans[h] - a.retrans.get(h, 0) for h in b.retrans)}
