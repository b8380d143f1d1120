"""The fabric in Mininet: OVS switches, hosts in namespaces, shaped veths.

The only module that builds with Mininet (agents.py starts processes in
its hosts). Hosts get static ARP for every
other host (BiGraph has loops: nothing may be flooded), no default route
(traffic stays on the fabric), and the TCP settings the emulation needs.
"""
from __future__ import annotations

import subprocess
import tempfile

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController
from mininet.link import Link

from emulator.fabric import ADDRESS_BASE, PREFIX_LEN, Fabric
from emulator.net import processes
from emulator.net.dataplane import Dataplane
from emulator.net.shaping import tc_commands


TSQ_FRAMES = 2


class LoopbackController(RemoteController):
    """Our os-ken process on 127.0.0.1. Mininet's reachability probe needs
    telnet and only warns; the emulator checks the controller itself."""

    def checkListening(self):
        pass


class EmulatedFabric:
    def __init__(self, fabric: Fabric, dataplane: Dataplane, controller_port: int, mtu: int = 1500,
                 delay_ms: float = 0.0, loss_pct: float = 0.0):
        self.fabric = fabric
        self.delay_ms, self.loss_pct = delay_ms, loss_pct   # netem on every link end
        self.dataplane = dataplane
        self.controller_port = controller_port
        self.mtu = mtu
        self.net: Mininet | None = None

    # --- bring-up ----------------------------------------------------------
    def start(self) -> None:
        setLogLevel("error")
        self.net = Mininet(topo=None, build=False, controller=None, link=Link,
                           ipBase=f"{ADDRESS_BASE}/{PREFIX_LEN}", autoSetMacs=False)
        self.net.addController("c0", controller=LoopbackController, ip="127.0.0.1", port=self.controller_port)
        for s in self.fabric.switches:
            self.net.addSwitch(s.name, cls=OVSSwitch, dpid="%016x" % s.dpid, datapath=self.dataplane.datapath,
                               protocols="OpenFlow13", failMode="secure")
        for h in self.fabric.hosts:
            self.net.addHost(h.name, ip=f"{h.ip}/{PREFIX_LEN}", mac=h.mac)
        for link in self.fabric.links:
            self.net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port)
        self.net.build()
        # Mininet's node shells (a host's shell holds its namespace)
        processes.record(*(node.pid for node in self.net.hosts + self.net.switches + self.net.controllers))
        self.net.start()
        self._configure_interfaces()
        for h in self.fabric.hosts:
            self._configure_host(h.name)

    def _configure_interfaces(self) -> None:
        """MTU and shaping on both ends of every link (each end shapes the
        direction it sends), tx offload off where the datapath needs it."""
        for link in self.fabric.links:
            for node, port in link.ends():
                intf = self.net[node].intfs[port]
                self._run(node, ["ip", "link", "set", "dev", intf.name, "mtu", str(self.mtu)])
                if self.dataplane.tx_offload_off and not self.fabric.is_switch(node):
                    # Userspace OVS does not complete TCP checksums: without
                    # this, ping works and TCP moves nothing.
                    self._run(node, ["ethtool", "-K", intf.name, "tx", "off", "tso", "off", "gso", "off"])
                for cmd in tc_commands(intf.name, link.rate_mbps, link.queue_packets, self.mtu,
                                       self.delay_ms, self.loss_pct):
                    self._run(node, cmd)

    def _configure_host(self, name: str) -> None:
        host = self.net[name]
        me = self.fabric.host(name)
        intf = host.intfs[0].name
        with tempfile.NamedTemporaryFile("w", prefix="bigraph-arp-", suffix=".batch") as batch:
            for other in self.fabric.hosts:
                if other.name != name:
                    batch.write(f"neigh replace {other.ip} lladdr {other.mac} dev {intf} nud permanent\n")
            batch.flush()
            self._run(name, ["ip", "-batch", batch.name])
        for key, value in (("net.ipv6.conf.all.disable_ipv6", 1),
                           ("net.ipv6.conf.default.disable_ipv6", 1),
                           # Collectives pause between steps: keep cwnd open.
                           ("net.ipv4.tcp_slow_start_after_idle", 0),
                           # Every run starts afresh: no ssthresh or RTT cached
                           # from the congestion of an earlier run on this fabric.
                           ("net.ipv4.tcp_no_metrics_save", 1),
                           # TCP small queues: a socket may by default park 4 MB in
                           # the host's shaped queue, and the ACKs of the flow this
                           # host receives wait behind it (a second at 6 Mbit/s):
                           # the peer's sending stalls. A NIC holds a few frames.
                           ("net.ipv4.tcp_limit_output_bytes", TSQ_FRAMES * (self.mtu + 14))):
            self._run(name, ["sysctl", "-q", "-w", f"{key}={value}"])
        if me.ip not in host.cmd(f"ip -4 -o addr show dev {intf}"):
            raise RuntimeError(f"{name} did not get its address {me.ip}")

    def _run(self, node: str, argv: list[str]) -> str:
        """Run a command in `node`'s namespace; raise on failure (Mininet
        only prints tc and ip errors)."""
        out = self.net[node].cmd(" ".join(argv) + " 2>&1; echo __rc=$?")
        body, _, rc = out.rpartition("__rc=")
        if rc.strip() != "0":
            raise RuntimeError(f"{node}: `{' '.join(argv)}` failed: {body.strip()}")
        return body

    # --- access ------------------------------------------------------------
    def host(self, name: str):
        return self.net[name]

    def host_pids(self) -> list[int]:
        return [self.net[h.name].pid for h in self.fabric.hosts]

    def ping_all(self, timeout_s: int = 2) -> list[tuple[str, str]]:
        """Every host pings every other host once, in parallel per host;
        returns the (src, dst) pairs that failed."""
        failed = []
        by_ip = {h.ip: h.name for h in self.fabric.hosts}
        for src in self.fabric.hosts:
            targets = " ".join(h.ip for h in self.fabric.hosts if h.name != src.name)
            out = self.net[src.name].cmd(
                f"for ip in {targets}; do (ping -c1 -W{timeout_s} -q $ip >/dev/null 2>&1 || echo FAIL $ip) & done; wait")
            failed += [(src.name, by_ip[w.split()[1]]) for w in out.splitlines() if w.startswith("FAIL ")]
        return failed

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Every link between nodes a and b down or up, at both ends."""
        for end in (a, b):
            for intf in self.net[end].intfs.values():
                if intf.link and {intf.link.intf1.node.name, intf.link.intf2.node.name} == {a, b}:
                    self._run(end, ["ip", "link", "set", "dev", intf.name, "up" if up else "down"])

    def dump_flows(self) -> dict[str, str]:
        """`ovs-ofctl dump-flows` of every bridge, at once: OVS's own view of
        its rules. Packet counts are brought up to date first: purging the
        datapath's flow cache pushes their counts to the rules (only used
        before traffic, when the cache refills at no cost)."""
        subprocess.run(["ovs-appctl", "revalidator/purge"], capture_output=True, check=True)
        dumps = {s.name: subprocess.Popen(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", s.name],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for s in self.fabric.switches}
        out = {}
        for name, proc in dumps.items():
            text, err = proc.communicate()
            if proc.returncode:
                raise RuntimeError(f"ovs-ofctl dump-flows {name} failed: {err.strip()}")
            out[name] = text
        return out

    def probe(self, pairs: list[tuple[str, str]], count: int) -> list[tuple[str, str]]:
        """Every src pings its dst `count` times, all pairs at once; returns
        the pairs that lost a reply."""
        for src, dst in pairs:
            self.net[src].sendCmd(f"ping -c{count} -i0.01 -W2 -q {self.fabric.host(dst).ip} >/dev/null; echo rc=$?")
        lost = []
        for src, dst in pairs:
            if "rc=0" not in self.net[src].waitOutput():
                lost.append((src, dst))
        return lost

    # --- teardown ----------------------------------------------------------
    def stop(self) -> None:
        if self.net is not None:
            net, self.net = self.net, None
            net.stop()
            for controller in net.controllers:   # RemoteController.stop leaves its shell
                controller.terminate()
