"""Counters read around every call, to tell a congested network from a busy
machine: CPU use (all cores, and ovs-vswitchd's share of one core), drops in
the switch port queues, TCP retransmissions."""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass

from emulator.fabric import SWITCH_PREFIX


OVS_PIDFILE = "/var/run/openvswitch/ovs-vswitchd.pid"
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Snapshot:
    time: float
    cpu_busy: int            # jiffies, all cores
    cpu_total: int
    ovs_ticks: int           # CPU time of ovs-vswitchd (forwards every switch in userspace)
    drops: dict[str, int]    # switch port -> packets dropped by its queue
    retrans: dict[str, int]  # host -> TCP segments retransmitted


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]   # idle + iowait
    return sum(fields) - idle, sum(fields)


def ovs_ticks() -> int:
    try:
        with open(OVS_PIDFILE) as f:
            pid = int(f.read())
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return 0
    return int(fields[11]) + int(fields[12])   # utime + stime


def switch_queues() -> dict[str, tuple[int, int, int, int]]:
    """(bytes, packets, backlog bytes, drops) of every switch port's egress
    FIFO (the queue under HTB; HTB itself repeats the same counts)."""
    out = subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True, check=True).stdout
    return {q["dev"]: (q.get("bytes", 0), q.get("packets", 0), q.get("backlog", 0), q.get("drops", 0))
            for q in json.loads(out or "[]")
            if q.get("dev", "").startswith(SWITCH_PREFIX) and q.get("kind") in ("pfifo", "netem")}


def received(dev: str) -> tuple[int, int]:
    """(bytes, packets) an interface of the root namespace received."""
    base = f"/sys/class/net/{dev}/statistics/"
    with open(base + "rx_bytes") as b, open(base + "rx_packets") as p:
        return int(b.read()), int(p.read())


def _retransmissions(pid: int) -> int:
    """RetransSegs of the network namespace `pid` lives in."""
    with open(f"/proc/{pid}/net/snmp") as f:
        lines = [l.split() for l in f if l.startswith("Tcp:")]
    return int(lines[1][lines[0].index("RetransSegs")])


def snapshot(host_pids: dict[str, int]) -> Snapshot:
    busy, total = cpu_jiffies()
    drops = {dev: q[3] for dev, q in switch_queues().items()}
    return Snapshot(time.monotonic(), busy, total, ovs_ticks(), drops,
                    {h: _retransmissions(pid) for h, pid in host_pids.items()})


def delta(a: Snapshot, b: Snapshot) -> dict:
    """What happened between two snapshots."""
    drops = {d: b.drops.get(d, 0) - a.drops.get(d, 0) for d in b.drops}
    worst = max(drops, key=drops.get, default="")
    return {"cpu_busy": (b.cpu_busy - a.cpu_busy) / max(1, b.cpu_total - a.cpu_total),
            "ovs_cpu": (b.ovs_ticks - a.ovs_ticks) / TICKS / max(1e-9, b.time - a.time),
            "queue_drops": sum(drops.values()),
            "most_drops_port": worst if drops.get(worst) else "",
            "tcp_retrans": sum(b.retrans[h] - a.retrans.get(h, 0) for h in b.retrans)}
