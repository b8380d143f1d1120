"""The raw dataplane: iperf3 between two hosts through a chain of plain OVS
switches (standalone, no controller, nothing shaped unless asked), the
baseline the calibration and the dataplane benchmark measure against.

Built with the project's names (bgs*, bgh*) under the emulation lock, and
its processes stopped by id, so `bigraph-emu clean` covers a crash.
"""
from __future__ import annotations

import json
import os
import time

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch
from mininet.link import Link

from emulator.fabric.graph import ADDRESS_BASE, PREFIX_LEN, host_address
from emulator.net import interrupts, ovs_buffers, processes
from emulator.measure.counters import ovs_ticks
from emulator.net.dataplane import Dataplane
from emulator.net.network import QUIET
from emulator.net.shaping import tc_commands

IPERF_PORT = 5201
SHAPED_MBPS = 20000.0   # HTB present on every port, never the limit


def raw_capacity(dataplane: Dataplane, mtu: int, seconds: int, flows: list[int], switches: int = 1,
                 shaped: bool = False, queue_packets: int = 100, tsq_bytes: int = 0, port_type: str = "",
                 switch_shaped_mbps: float = 0.0) -> dict:
    """{flows: (payload Mbit/s, ovs-vswitchd cores busy)} of iperf3 with
    each number of parallel flows. shaped: every port gets the emulator's
    HTB + FIFO at a rate that never limits, and hosts a TCP small-queues
    limit of tsq_bytes, to see what shaping itself costs. port_type: every
    switch port opened as this Open vSwitch interface type instead
    (afxdp, afxdp-nonpmd: AF_XDP sockets in place of AF_PACKET).
    switch_shaped_mbps: HTB at this rate on the switches' ports only, where
    the emulator shapes (does the port type keep it?)."""
    setLogLevel(QUIET)
    results = {}
    with processes.RunLock(), ovs_buffers.large_socket_buffers():
        net = Mininet(topo=None, build=False, controller=None, link=Link,
                      ipBase=f"{ADDRESS_BASE}/{PREFIX_LEN}", autoSetMacs=False)
        try:
            hosts = _build(net, dataplane, switches)
            _configure(net, hosts, dataplane, mtu, shaped, queue_packets, tsq_bytes)
            if switch_shaped_mbps:
                _shape_switch_ports(net, switch_shaped_mbps, queue_packets, mtu, dataplane.tso)
            if port_type:
                _set_port_type(net, port_type)
            server_ip = host_address(1)[0]
            for n in flows:
                ticks0, t0 = ovs_ticks(), time.monotonic()
                mbps = _iperf(hosts[0], hosts[1], server_ip, seconds, n)
                cores = (ovs_ticks() - ticks0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
                results[n] = (mbps, cores)
        finally:
            with interrupts.deferred():
                net.stop()
                processes.sweep()
    return results


def _build(net: Mininet, dataplane: Dataplane, switches: int) -> list:
    """A chain of `switches` (standalone: a chain has no loop), a host at each end."""
    chain = [net.addSwitch(f"bgs{i}", cls=OVSSwitch, dpid="%016x" % (i + 1), datapath=dataplane.datapath,
                           failMode="standalone") for i in range(switches)]
    for a, b in zip(chain, chain[1:]):
        net.addLink(a, b)
    hosts = []
    for i, switch in enumerate((chain[0], chain[-1])):
        ip, mac = host_address(i)
        hosts.append(net.addHost(f"bgh{i}", ip=f"{ip}/{PREFIX_LEN}", mac=mac))
        net.addLink(hosts[-1], switch)
    net.build()
    processes.record(*(n.pid for n in net.hosts + net.switches))
    net.start()
    return hosts


def _configure(net: Mininet, hosts: list, dataplane: Dataplane, mtu: int, shaped: bool,
               queue_packets: int, tsq_bytes: int) -> None:
    for link in net.links:
        for intf in (link.intf1, link.intf2):
            _must(intf.node, f"ip link set dev {intf.name} mtu {mtu}")
            if not dataplane.tso and intf.node in hosts:
                _must(intf.node, f"ethtool -K {intf.name} tx off tso off gso off")
            if shaped:
                for argv in tc_commands(intf.name, SHAPED_MBPS, queue_packets, mtu, tso=dataplane.tso):
                    _must(intf.node, " ".join(argv))
    if shaped and tsq_bytes:
        for h in hosts:
            _must(h, f"sysctl -q -w net.ipv4.tcp_limit_output_bytes={tsq_bytes}")


def _switch_ports(net: Mininet):
    """(switch, port name) of every switch port."""
    return [(switch, intf.name) for switch in net.switches for intf in switch.intfList() if intf.name != "lo"]


def _shape_switch_ports(net: Mininet, rate_mbps: float, queue_packets: int, mtu: int, tso: bool) -> None:
    for switch, port in _switch_ports(net):
        for argv in tc_commands(port, rate_mbps, queue_packets, mtu, tso=tso):
            _must(switch, " ".join(argv))


def _set_port_type(net: Mininet, port_type: str) -> None:
    """Reopen every switch port as `port_type`; RuntimeError if OVS could not."""
    for switch, port in _switch_ports(net):
        switch.vsctl("set", "Interface", port, f"type={port_type}")
    time.sleep(1)   # OVS reopens the ports in its main loop
    for switch, port in _switch_ports(net):
        error = switch.vsctl("get", "Interface", port, "error").strip()
        if error and error != "[]":
            raise RuntimeError(f"{port} as {port_type}: {error}")


def _must(node, command: str) -> None:
    out = node.cmd(command + " 2>&1; echo __rc=$?")
    body, _, rc = out.rpartition("__rc=")
    if rc.strip() != "0":
        raise RuntimeError(f"{node.name}: `{command}` failed: {body.strip()}")


def _iperf(client, server, server_ip: str, seconds: int, flows: int) -> float:
    """Received payload Mbit/s of an iperf3 run with `flows` parallel flows."""
    srv = server.popen(["iperf3", "-s", "-1", "-p", str(IPERF_PORT)])
    processes.record(srv.pid)
    try:
        time.sleep(0.5)
        cli = client.popen(["iperf3", "-c", server_ip, "-p", str(IPERF_PORT), "-t", str(seconds),
                            "-P", str(flows), "-J"])
        processes.record(cli.pid)
        try:
            out, _ = cli.communicate(timeout=seconds + 30)
        finally:
            if cli.poll() is None:
                processes.stop_pid(cli.pid)
        report = json.loads(out)
        if "error" in report:
            raise RuntimeError(f"iperf3: {report['error']}")
        return report["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        if srv.poll() is None:
            processes.stop_pid(srv.pid)
