"""The fabric in Mininet: OVS switches, hosts in namespaces, shaped veths.

The only module that builds with Mininet (agents.py starts processes in
its hosts). Hosts get static ARP for every
other host (BiGraph has loops: nothing may be flooded), no default route
(traffic stays on the fabric), and the TCP settings the emulation needs.
"""
from __future__ import annotations

import shutil
import subprocess
import time
from typing import TYPE_CHECKING

from mininet.cli import CLI
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host, OVSSwitch, RemoteController
from mininet.link import Link

from emulator.fabric.graph import ADDRESS_BASE, PREFIX_LEN, Fabric
from emulator.fabric.queues import FIFO, Discipline
from emulator.net import processes
from emulator.net.dataplane import Dataplane
from emulator.net.shaping import loss_commands, segment_bytes, tc_batch, tc_commands

if TYPE_CHECKING:
    from emulator.net.cluster import Servers


TSQ_FRAMES = 2
LINK_GROUP = 47806   # the interface group of every veth a fabric on this machine has in the root namespace
ROOT = "@"   # a script's key for a server's root namespace: ROOT + server ("" for this machine)
QUIET = "error"   # Mininet's log level while it builds and stops: no bring-up chatter


class LoopbackController(RemoteController):
    """Our os-ken process on 127.0.0.1. Mininet's reachability probe needs
    telnet and only warns; the emulator checks the controller itself."""

    def checkListening(self):
        pass


class ScriptedHost(Host):
    """A host Mininet leaves unconfigured: its address and loopback come in
    its configuration script with everything else (_interface_scripts);
    Mininet's three commands a host, one shell round trip each, took 9 ms."""

    def config(self, ip=None, **_params):
        intf = self.defaultIntf()
        if intf and ip:   # Mininet's own view of it (its CLI reads it)
            intf.ip, intf.prefixLen = ip.split("/")[0], int(ip.split("/")[1])
        return {}


class BatchedLink(Link):
    """A veth pair made later, with every other, in one `ip -batch`
    (_make_links); Mininet's `ip link add` through a node's shell took 3 ms
    a link. Its ends come up in the configuration scripts. Every pair is
    deleted at once, as one group (EmulatedFabric.stop): the kernel took
    20 ms for each pair deleted alone."""

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                     deleteIntfs=True):
        self.pair = [(name, node.pid, addr) for name, node, addr in
                     ((intfname1, node1, addr1), (intfname2, node2, addr2))]

    def stop(self):
        pass


class EmulatedFabric:
    def __init__(self, fabric: Fabric, dataplane: Dataplane, controller_port: int, mtu: int = 1500,
                 servers: "Servers | None" = None, tcp: str = "cubic", discipline: Discipline = FIFO,
                 ecn_threshold: int = 0):
        self.tcp = tcp   # every host's congestion control (the agents' and exec programs' alike)
        self.discipline, self.ecn_threshold = discipline, ecn_threshold   # every switch port's queue
        self.fabric = fabric   # its links carry their rates, queues, delay and loss
        self.dataplane = dataplane
        self.controller_port = controller_port
        self.mtu = mtu
        self.servers = servers   # None: all on this machine
        self.net: Mininet | None = None

    # --- bring-up ----------------------------------------------------------
    def start(self, before_switches=lambda: None) -> None:
        """Build and start the fabric; `before_switches` is called once the
        nodes and links exist and before the switches start (and connect to
        the controller)."""
        setLogLevel(QUIET)
        # on one machine, links and hosts are made in batches; over several
        # servers, Mininet's cluster edition makes and configures them
        where = self.servers.node_options if self.servers else (lambda node: {})
        self.net = self.servers.mininet() if self.servers else Mininet(
            topo=None, build=False, controller=None, link=BatchedLink, host=ScriptedHost,
            ipBase=f"{ADDRESS_BASE}/{PREFIX_LEN}", autoSetMacs=False)
        Mininet.addController(self.net, "c0", controller=LoopbackController, port=self.controller_port,
                              ip=self.servers.controller_ip if self.servers else "127.0.0.1")
        for s in self.fabric.switches:
            self.net.addSwitch(s.name, dpid="%016x" % s.dpid, datapath=self.dataplane.datapath,
                               protocols="OpenFlow13", failMode="secure", **{"cls": OVSSwitch, **where(s.name)})
        for h in self.fabric.hosts:
            self.net.addHost(h.name, ip=f"{h.ip}/{PREFIX_LEN}", mac=h.mac, **where(h.name))
        for link in self.fabric.links:
            # a batched link: a host's end made with its MAC, every end set up by a script
            batched = {"up": None, **{f"addr{i}": None if self.fabric.is_switch(n) else self.fabric.host(n).mac
                                      for i, n in ((1, link.a), (2, link.b))}}
            self.net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port,
                             **({} if self.servers else batched))
        if not self.servers:
            self._make_links()
        self.net.build()
        # Mininet's node shells (a host's shell holds its namespace); a remote node's pid is the server's
        processes.record(*(node.pid for node in self.net.hosts + self.net.switches + self.net.controllers
                           if not self.remote(node.name)))
        hosts, switch_ports = self._interface_scripts()
        self._run_scripts(hosts)   # before the switches start: the controller sees every port up at once
        before_switches()
        self.net.start()
        self._run_scripts(switch_ports)   # once Open vSwitch holds its ports, as it did before batching

    def _make_links(self) -> None:
        """Every veth pair of the fabric, each end made in its node's
        namespace; a switch's end (here, in the root namespace) set up at
        once, a host's by the host's script."""
        lines = [" ".join(f"{'link add' if i == 0 else 'type veth peer'} name {name} netns {pid} group {LINK_GROUP}"
                          + (f" address {addr}" if addr else "") for i, (name, pid, addr) in enumerate(l.pair))
                 for l in self.net.links]
        lines += [f"link set dev {intf.name} up" for s in self.net.switches for intf in s.intfList()
                  if intf.name != "lo"]
        done = subprocess.run(["ip", "-batch", "-"], input="\n".join(lines) + "\n", capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"making the fabric's links failed: {done.stderr.strip()[-500:]}")

    def _interface_scripts(self) -> tuple[dict, dict]:
        """Shell scripts for the hosts' namespaces and for each server's root
        namespace (its switch ports): MTU and shaping on both ends of every
        link (each end shapes the direction it sends); host offloads as the
        dataplane wants them; each host's address, ARP table and TCP
        settings. One script per namespace, run all at once: command by
        command through Mininet's shells took seconds."""
        segment = segment_bytes(min(link.rate_mbps for link in self.fabric.links), self.mtu,
                                min(link.queue_packets for link in self.fabric.links))
        ip_lines, tc_lines, switch_ports = {}, {}, []
        for link in self.fabric.links:
            for node, port in link.ends():
                intf = self.net[node].intfs[port].name
                on_switch = self.fabric.is_switch(node)
                switch_ports += [intf] if on_switch else []
                gso = f" gso_max_size {segment}" if self.dataplane.tso and not on_switch else ""
                ip_lines.setdefault(node, []).append(f"link set dev {intf} mtu {self.mtu}{gso} up")
                queue = (self.discipline, self.ecn_threshold) if on_switch else ()   # a host's NIC: a FIFO
                tc_lines.setdefault(node, []).extend(tc_batch(tc_commands(
                    intf, link.rate_mbps, link.queue_packets, self.mtu, link.delay_ms, 0.0,   # loss: start_loss
                    self.dataplane.tso, *queue)))
        roots = {}
        for server, switches in self._switches_by_server().items():   # switch ports: each server's root namespace
            roots[ROOT + server] = (_batch("ip", [line for n in switches for line in ip_lines.get(n, [])])
                                    + _batch("tc", [line for n in switches for line in tc_lines.get(n, [])])
                                    + _no_ipv6([p for p in switch_ports if p.split("-")[0] in switches]))
        settings = self._tcp_settings(segment)
        hosts = {h.name: _batch("ip", ip_lines[h.name] + self._host_lines(h.name)) + self._offload_lines(h.name)
                 + _batch("tc", tc_lines[h.name]) + settings for h in self.fabric.hosts}
        return hosts, roots

    def start_loss(self) -> None:
        """netem loss on the links that have it, after the verification,
        whose every ping and probe packet must arrive."""
        lines = {}
        for link in (l for l in self.fabric.links if l.loss_pct):
            for node, port in link.ends():
                where = ROOT + self._server(node) if self.fabric.is_switch(node) else node   # switch ports: root ns
                lines.setdefault(where, []).extend(tc_batch(loss_commands(
                    self.net[node].intfs[port].name, link.queue_packets, self.mtu, link.delay_ms, link.loss_pct,
                    self.dataplane.tso)))
        if lines:
            self._run_scripts({where: _batch("tc", batch) for where, batch in lines.items()})

    def _offload_lines(self, name: str) -> str:
        if self.dataplane.tso:
            return ""
        # Userspace OVS without TSO does not complete TCP checksums: without
        # this, ping works and TCP moves nothing.
        return f"ethtool -K {self.net[name].intfs[0].name} tx off tso off gso off\n"

    def _host_lines(self, name: str) -> list[str]:
        """`ip` lines: the host's address and static ARP for every other
        host (BiGraph has loops: nothing may be flooded)."""
        intf = self.net[name].intfs[0].name
        return [f"addr replace {self.fabric.host(name).ip}/{PREFIX_LEN} dev {intf}", "link set dev lo up"] + \
            [f"neigh replace {o.ip} lladdr {o.mac} dev {intf} nud permanent"
             for o in self.fabric.hosts if o.name != name]

    def _tcp_settings(self, segment: int) -> str:
        """Shell lines with the TCP settings the emulation needs, written to
        /proc/sys by the shell itself (a `sysctl` process each took a tenth
        of the bring-up's scripts)."""
        # TCP small queues: a socket may by default park 4 MB in the host's
        # shaped queue, and the ACKs of the flow this host receives wait
        # behind it (a second at 6 Mbit/s): the peer's sending stalls. A NIC
        # holds a few frames (or TSO segments).
        tsq = TSQ_FRAMES * (segment if self.dataplane.tso else self.mtu + 14)
        settings = (("ipv6/conf/all/disable_ipv6", 1), ("ipv6/conf/default/disable_ipv6", 1),
                    # Collectives pause between steps: keep cwnd open.
                    ("ipv4/tcp_slow_start_after_idle", 0),
                    # Every run starts afresh: no ssthresh or RTT cached
                    # from the congestion of an earlier run on this fabric.
                    ("ipv4/tcp_no_metrics_save", 1),
                    ("ipv4/tcp_limit_output_bytes", tsq),
                    ("ipv4/tcp_congestion_control", self.tcp),
                    # ask for ECN where switches mark; otherwise Linux's default: answer it only
                    ("ipv4/tcp_ecn", 1 if self.discipline.marks else 2))
        return "".join(f"echo {value} > /proc/sys/net/{key}\n" for key, value in settings)

    def _run_scripts(self, scripts: dict[str, str]) -> None:
        """Run each shell script in its node's network namespace (ROOT +
        server for a server's root one), all at once, on the node's server;
        raise naming the first node whose script failed."""
        procs = {}
        for where, script in scripts.items():
            if where.startswith(ROOT):
                argv, server = ["sh", "-ec", script], where[len(ROOT):]
            else:
                argv, server = ["nsenter", f"--net=/proc/{self.net[where].pid}/ns/net", "sh", "-ec", script], \
                    self._server(where)
            procs[where] = subprocess.Popen(self._on(server, argv), stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True)
        failed = []
        for where, proc in procs.items():
            out, _ = proc.communicate()
            if proc.returncode:
                name = f"the root namespace of {where[len(ROOT):] or 'this machine'}" if where.startswith(ROOT) \
                    else where
                failed.append(f"{name}: {out.strip()[-500:]}")
        if failed:
            raise RuntimeError(f"configuring the fabric's interfaces failed in {failed[0]}")

    # --- where nodes are --------------------------------------------------
    def remote(self, node: str):
        """The cluster.Remote that holds `node`, or None if this machine does."""
        return self.servers.remote_of(node) if self.servers else None

    def _server(self, node: str) -> str:
        return self.servers.server_of(node) if self.servers else ""

    def _on(self, server: str, argv: list[str]) -> list[str]:
        """argv run on a server ("" or the head: here)."""
        remote = self.servers.remotes.get(server) if self.servers else None
        return remote.command(argv) if remote else argv

    def _switches_by_server(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for s in self.fabric.switches:
            out.setdefault(self._server(s.name), []).append(s.name)
        return out

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

    def interactive(self) -> None:
        """Mininet's CLI on the fabric. It prints through Mininet's log, so
        the log speaks at 'output' while the CLI runs (bring-up and
        teardown stay quiet: their chatter is at 'info')."""
        setLogLevel("output")
        try:
            CLI(self.net)
        finally:
            setLogLevel(QUIET)

    def host_pids(self) -> list[int]:
        return [self.net[h.name].pid for h in self.fabric.hosts]

    def ping_all(self, timeout_s: int = 2) -> list[tuple[str, str]]:
        """Every pair of hosts pings once, all hosts at once; returns the
        (src, dst) pairs that failed. An echo and its reply cross both
        directions of a pair, so each pair is pinged from one end: each host
        pings the half of the others that follow it (in a ring, so that every
        host sends as many), half the pings of every host pinging every other."""
        names = [h.name for h in self.fabric.hosts]
        n = len(names)
        return self.ping([(src, names[(i + k) % n]) for i, src in enumerate(names) for k in range(1, n // 2 + 1)
                          if 2 * k < n or i < k], timeout_s)

    def ping(self, pairs: list[tuple[str, str]], timeout_s: int = 2) -> list[tuple[str, str]]:
        """Each src pings its dsts once, all srcs at once; returns the pairs
        that failed. fping sends one host's pings from one process: a ping
        process per pair cost 29 s at 128 hosts."""
        by_ip = {h.ip: h.name for h in self.fabric.hosts}
        targets = {}
        for src, dst in pairs:
            targets.setdefault(src, []).append(self.fabric.host(dst).ip)
        for src, ips in targets.items():
            ips = " ".join(ips)
            if shutil.which("fping"):
                # -u: print the unreachable; -r0: one ping each, as below
                command = f"fping -u -r0 -i1 -t{timeout_s * 1000} {ips} 2>/dev/null | sed 's/^/FAIL /'"
            else:
                command = f"for ip in {ips}; do (ping -c1 -W{timeout_s} -q $ip >/dev/null 2>&1 || echo FAIL $ip) & done; wait"
            self.net[src].sendCmd(command)
        failed = []
        for src in targets:
            out = self.net[src].waitOutput()
            failed += [(src, by_ip[w.split()[1]]) for w in out.splitlines() if w.startswith("FAIL ")]
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
        for server in self._switches_by_server():
            subprocess.run(self._on(server, ["ovs-appctl", "revalidator/purge"]), capture_output=True, check=True)
        dumps = {s.name: subprocess.Popen(self._on(self._server(s.name), ["ovs-ofctl", "-O", "OpenFlow13",
                                                                          "dump-flows", s.name]),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for s in self.fabric.switches}
        out = {}
        for name, proc in dumps.items():
            text, err = proc.communicate()
            if proc.returncode:
                raise RuntimeError(f"ovs-ofctl dump-flows {name} failed: {err.strip()}")
            out[name] = text
        return out

    def controller_connections(self) -> dict[str, str]:
        """OVS's own view of every switch's controller connection: "connected",
        or its state and last error (to tell a switch that never reached the
        controller from one the controller never served)."""
        def vsctl(switch, *args) -> str:
            done = subprocess.run(self._on(self._server(switch), ["ovs-vsctl", "--timeout=5", *args]),
                                  capture_output=True, text=True)
            return done.stdout.strip() if done.returncode == 0 else f"(ovs-vsctl: {done.stderr.strip()})"
        seen = {}
        for s in self.fabric.switches:
            uuid = vsctl(s.name, "get", "bridge", s.name, "controller").strip("[]")
            if not uuid or uuid.startswith("("):
                seen[s.name] = f"no controller configured {uuid}".strip()
                continue
            lines = vsctl(s.name, "get", "controller", uuid, "is_connected", "status").splitlines()
            connected = bool(lines) and lines[0] == "true"
            seen[s.name] = "connected" if connected else f"not connected {' '.join(lines[1:])}".strip()
        return seen

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
    def forget(self, servers: list[str]) -> None:
        """Leave out of the teardown every node on these (lost) servers and
        every link to them: a command sent there would wait for nothing.
        Their tunnels' ends here go with the sweep (by name)."""
        if not servers or self.net is None:
            return
        gone = {n for n, where in self.servers.where.items() if where in servers}
        self.net.hosts = [h for h in self.net.hosts if h.name not in gone]
        self.net.switches = [s for s in self.net.switches if s.name not in gone]
        self.net.links = [l for l in self.net.links if not {l.intf1.node.name, l.intf2.node.name} & gone]

    def stop(self) -> None:
        if self.net is not None:
            net, self.net = self.net, None
            for node in net.hosts + net.switches + net.controllers:
                _settle(node)
            try:
                if not self.servers:   # every pair has an end here: deleting it deletes both
                    subprocess.run(["ip", "link", "delete", "group", str(LINK_GROUP)], capture_output=True)
                net.stop()
            finally:
                for node in net.hosts + net.switches + net.controllers:   # RemoteController.stop leaves its shell
                    node.terminate()


def _settle(node, timeout_s: float = 2.0) -> None:
    """A command that Ctrl-C or a hang-up interrupted in the middle leaves
    Mininet waiting for its end marker, and every later command on that
    node's shell (teardown's too) then fails: interrupt the shell's command
    and read up to the marker."""
    if not node.shell or not node.waiting:
        return
    node.sendInt()
    deadline = time.monotonic() + timeout_s
    while node.waiting and time.monotonic() < deadline:
        node.monitor(timeoutms=100)
    node.waiting = False   # the shell is terminated right after teardown either way


def _batch(tool: str, lines: list[str]) -> str:
    """Shell lines feeding `lines` to one `ip -batch` or `tc -batch`."""
    if not lines:
        return ""
    return f"{tool} -batch - <<'EOF'\n" + "\n".join(lines) + "\nEOF\n"


def _no_ipv6(interfaces: list[str]) -> str:
    """Shell lines that turn IPv6 off on switch ports (in the root
    namespace, where the hosts' `all` setting does not reach): else each
    port's kernel sends router solicitations and MLD reports into the
    fabric, bytes no host sent. A kernel without IPv6 has none to turn off."""
    return "".join(f"[ ! -d /proc/sys/net/ipv6/conf/{i} ] || echo 1 > /proc/sys/net/ipv6/conf/{i}/disable_ipv6\n"
                   for i in interfaces)
