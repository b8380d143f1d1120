"""The hosts' TCP counters: read from /proc (this process's own namespace,
the real files) and parsed from another server's concatenated tables."""
import os

from emulator.measure import counters

SNMP = """Ip: Forwarding DefaultTTL
Ip: 1 64
Tcp: RtoAlgorithm ActiveOpens RetransSegs InErrs
Tcp: 1 10 {retrans} 0
"""
NETSTAT = """TcpExt: SyncookiesSent TCPTimeouts TCPSACKReorder TCPLossProbes TCPDSACKRecv
TcpExt: 0 {timeouts} {reordered} {probes} {dsack}
IpExt: InNoRoutes
IpExt: 0
"""


def test_every_counter_is_read_from_this_namespaces_proc_files():
    counts = counters.tcp_counts([os.getpid()])
    assert set(counts) == set(counters.TCP_COUNTERS)
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())


def test_another_servers_tables_are_summed_per_counter():
    text = (SNMP.format(retrans=7) + NETSTAT.format(timeouts=2, reordered=4, probes=6, dsack=3)
            + SNMP.format(retrans=5) + NETSTAT.format(timeouts=1, reordered=0, probes=2, dsack=0))
    assert counters.tcp_counts_in(text) == {"tcp_retrans": 12, "tcp_spurious": 3, "tcp_timeouts": 3,
                                            "tcp_reordered": 4, "tcp_loss_probes": 8}


def test_ovs_readings_come_from_the_pidfiles_process_and_are_0_without_one(tmp_path, monkeypatch):
    pidfile = tmp_path / "ovs-vswitchd.pid"
    monkeypatch.setattr(counters, "OVS_PIDFILE", str(pidfile))
    assert (counters.ovs_ticks(), counters.ovs_wait_s()) == (0, 0.0)   # no ovs-vswitchd
    pidfile.write_text(f"{os.getpid()}\n")   # this process stands in for it: its real /proc files
    sum(range(3_000_000))                    # some CPU time to read
    assert counters.ovs_ticks() > 0
    with open(f"/proc/{os.getpid()}/schedstat") as f:
        waited_before = int(f.read().split()[1]) / 1e9
    assert counters.ovs_wait_s() >= waited_before
