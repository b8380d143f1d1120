"""Kernel counters, read from the root namespace, that tell a congested
network from a busy machine: CPU use (all cores, and ovs-vswitchd's share
of one core), the switch port queues, interface bytes, TCP retransmissions,
a program's threads' CPU time and wait for a core. The link monitor samples
most of them; retransmissions are read per call."""
from __future__ import annotations

import json
import os
import subprocess

from emulator.fabric.graph import SWITCH_PREFIX
from emulator.fabric.queues import DISCIPLINES

# the switch port queue kinds `tc -s qdisc` reports, with their field of ECN marks ("": none)
QUEUE_KINDS = {"netem": "", **{kind: d.marks_field for d in DISCIPLINES.values() for kind in d.kinds}}


OVS_PIDFILE = "/var/run/openvswitch/ovs-vswitchd.pid"
TICKS = os.sysconf("SC_CLK_TCK")


def _schedstat_s(text: str) -> tuple[float, float]:
    """(seconds on a core, seconds runnable but waiting for one) of a
    thread's /proc/.../schedstat."""
    on_cpu, waiting = text.split()[:2]
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def thread_cpu(pid: int) -> dict[int, tuple[float, float]]:
    """Each thread of process `pid`: (seconds on a core, seconds runnable
    but waiting for one), from /proc/PID/task/TID/schedstat; {} once it is gone."""
    found = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                found[int(tid)] = _schedstat_s(f.read())
        except (OSError, ValueError):
            continue
    return found


def cpu_jiffies() -> tuple[int, int, int]:
    """(busy, total, stolen) jiffies of all cores since boot. Stolen: time a
    hypervisor ran something else while this machine's cores had work
    (counted as busy: the machine had it not)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]   # idle + iowait
    total = sum(fields[:8])        # guest time is counted in user time already
    return total - idle, total, fields[7] if len(fields) > 7 else 0


def _ovs_file(name: str) -> str:
    """/proc/PID/`name` of ovs-vswitchd (its main thread's, for per-thread files)."""
    with open(OVS_PIDFILE) as f:
        pid = int(f.read())
    with open(f"/proc/{pid}/{name}") as f:
        return f.read()


def ovs_ticks() -> int:
    """ovs-vswitchd's CPU time so far, clock ticks (0 where it cannot be read)."""
    try:
        fields = _ovs_file("stat").rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])   # utime + stime
    except (OSError, ValueError, IndexError):
        return 0


def ovs_wait_s() -> float:
    """Seconds ovs-vswitchd's main thread, the one that forwards every
    port's packets on the userspace datapath, was runnable but waiting for a
    core, since it started (0 where it cannot be read)."""
    try:
        return _schedstat_s(_ovs_file("schedstat"))[1]
    except (OSError, ValueError):
        return 0.0


def switch_queues() -> dict[str, tuple[int, int, int, int, int]]:
    """(bytes, packets, backlog bytes, drops, ECN marks) of every switch
    port's egress queue (the one under HTB; HTB itself repeats the counts)."""
    out = subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True, check=True).stdout
    return {q["dev"]: (q.get("bytes", 0), q.get("packets", 0), q.get("backlog", 0), q.get("drops", 0),
                       _marks(q, QUEUE_KINDS[q["kind"]]))
            for q in json.loads(out or "[]")
            if q.get("dev", "").startswith(SWITCH_PREFIX) and q.get("kind") in QUEUE_KINDS}


def _marks(qdisc: dict, field: str) -> int:
    """A qdisc's ECN marks: a field of its own, or of its extended stats (iproute2 versions differ)."""
    if not field:
        return 0
    return int(qdisc.get(field, qdisc.get("xstats", {}).get(field, 0)))


def received(dev: str) -> tuple[int, int]:
    """(bytes, packets) an interface of the root namespace received."""
    base = f"/sys/class/net/{dev}/statistics/"
    with open(base + "rx_bytes") as b, open(base + "rx_packets") as p:
        return int(b.read()), int(p.read())


# The hosts' TCP counters a call records: column -> (file under /proc/PID/net,
# table prefix, counter). Spurious: retransmissions the receivers reported
# as duplicates (DSACK), a tail loss probe fired by an RTT jump, not a lost
# packet. Timeouts: retransmission timeouts, each at least Linux's 200 ms.
TCP_COUNTERS = {
    "tcp_retrans": ("snmp", "Tcp:", "RetransSegs"),
    "tcp_spurious": ("netstat", "TcpExt:", "TCPDSACKRecv"),
    "tcp_timeouts": ("netstat", "TcpExt:", "TCPTimeouts"),
    "tcp_reordered": ("netstat", "TcpExt:", "TCPSACKReorder"),   # reorderings TCP detected from SACKs
    "tcp_loss_probes": ("netstat", "TcpExt:", "TCPLossProbes"),   # tail-loss probes: no ACK for about 2 RTTs
}
TCP_TABLES = sorted({table for table, _prefix, _name in TCP_COUNTERS.values()})
TCP_PREFIXES = {prefix for _table, prefix, _name in TCP_COUNTERS.values()}


def tcp_counts(host_pids: list[int]) -> dict[str, int]:
    """Every TCP_COUNTERS counter so far, summed over the hosts' namespaces
    (each namespace's two tables read once: the link monitor reads them
    every sample of a workload's calls)."""
    text = []
    for pid in host_pids:
        for table in TCP_TABLES:
            with open(f"/proc/{pid}/net/{table}") as f:
                text.append(f.read())
    return tcp_counts_in("".join(text))


def tcp_counts_in(text: str) -> dict[str, int]:
    """tcp_counts from /proc/PID/net/snmp and netstat of several namespaces,
    concatenated (another server's, read in one command): each table a
    header line and a value line."""
    tables: dict[str, list[list[str]]] = {}   # prefix -> its lines, header and value in turn
    for line in text.splitlines():
        prefix = line[:line.find(":") + 1]
        if prefix in TCP_PREFIXES:
            tables.setdefault(prefix, []).append(line.split())
    totals = {}
    for column, (_table, prefix, name) in TCP_COUNTERS.items():
        lines = tables.get(prefix, [])
        totals[column] = sum(int(values[header.index(name)]) for header, values in zip(lines[::2], lines[1::2]))
    return totals


def hosts_tcp_counts(network, hosts: list[str]) -> dict[str, int]:
    """The TCP counters of these emulated hosts so far (TCP_COUNTERS), each
    read on its server: one command per other server."""
    totals = tcp_counts([network.net[h].pid for h in hosts if not network.remote(h)])
    by_server: dict = {}
    for h in hosts:
        if network.remote(h):
            by_server.setdefault(network.remote(h), []).append(network.net[h].pid)
    for remote, pids in by_server.items():
        files = " ".join(f"/proc/{p}/net/{table}" for p in pids for table in TCP_TABLES)
        more = tcp_counts_in(remote.run(["sh", "-c", f"cat {files}"]))
        totals = {column: totals[column] + more[column] for column in totals}
    return totals
