"""A fabric over several servers: ssh to each, what preflight checks on
them before anything is built, their clocks, and Mininet's cluster classes
with the fabric's MTU and shaping kept on the links that cross servers.

The head (the first server) runs the emulator and the controller; every
other server is reached as root by ssh (BatchMode: keys, never a password)
through one connection per server that this module starts and stops. A
server runs the same project at the same path (`python -m
emulator.net.cluster ROLE` answers for it there):

  facts   what preflight compares: versions, datapath, calibration, lock
  hold    takes the server's run lock (and allows the run's congestion control
          to its namespaces) until its stdin closes
  clock   answers UDP datagrams with its time.monotonic() on the port it prints
  sweep   removes what a run left there (by name, and recorded processes)
  clean   the same under the server's run lock (`bigraph-emu clean --servers`)
  capture runs a tcpdump for the head until stdin closes (a link of this server)
  stop-hosts  ends every process in the namespaces of the given host shells
          (an `exec`'s ranks there)
"""
from __future__ import annotations

import contextlib
import json
import select
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

from mininet.examples.cluster import RemoteLink
from mininet.link import Link

from emulator.fabric.graph import ADDRESS_BASE, PREFIX_LEN, SWITCH_PREFIX
from emulator.net import processes
from emulator.plan.capacity import MAX_EMULATED_HOSTS
from emulator.spec.experiment import SpecError

SSH_CONFIG_ENV = "BIGRAPH_SSH_CONFIG"   # an ssh config file for the servers (port, key, known hosts)
PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the same path on each
CONNECT_TIMEOUT_S = 10
# ssh gives up on a server that answers nothing for ALIVE_S x ALIVE_COUNT:
# a lost server fails the run within that, well under 30 s
ALIVE_S, ALIVE_COUNT = 3, 4


def ssh_options() -> list[str]:
    config = os.environ.get(SSH_CONFIG_ENV)
    return ((["-F", config] if config else [])
            + ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
               "-o", f"ServerAliveInterval={ALIVE_S}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}"])


class Remote:
    """One server, reached by ssh as root through one master connection
    (started by `connect`, ended by `close`); commands run in its root
    namespace, in the project's folder, with the head's Python."""

    def __init__(self, name: str):
        self.name = name
        self.host = name.split("@")[-1]
        self.dest = name if "@" in name else f"root@{name}"
        self.control = os.path.join(tempfile.gettempdir(), f"bigraph-ssh-{os.getpid()}-{self.host}")
        self.master: subprocess.Popen | None = None

    def ssh(self, *extra: str) -> list[str]:
        """ssh's argv up to the command: through the master connection."""
        return ["ssh", *ssh_options(), "-o", f"ControlPath={self.control}", "-o", "ControlMaster=no",
                *extra, self.dest]

    def ssh_alone(self) -> list[str]:
        """ssh's argv up to the command, on a connection of its own (not
        through the master, whose sessions sshd's MaxSessions limits)."""
        return ["ssh", *ssh_options(), "-o", "ControlPath=none", self.dest]

    def connect(self) -> None:
        self.master = subprocess.Popen(["ssh", *ssh_options(), "-o", f"ControlPath={self.control}",
                                        "-o", "ControlMaster=yes", "-N", self.dest],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, start_new_session=True)
        processes.record(self.master.pid)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S + 5
        while not os.path.exists(self.control):
            if self.master.poll() is not None or time.monotonic() > deadline:
                err = self.master.stderr.read().decode(errors="replace").strip() if self.master.poll() is not None else ""
                self.close()
                raise ClusterError(f"server {self.name}: no passwordless ssh as root "
                                   f"({err or 'no answer'}); `ssh {self.dest} true` must work without a "
                                   f"password (a key in root's authorized_keys)")
            time.sleep(0.05)

    @property
    def alive(self) -> bool:
        return self.master is not None and self.master.poll() is None

    def command(self, argv: list[str]) -> list[str]:
        """argv run on the server, in the project's folder there."""
        return self.ssh() + [f"cd {shlex.quote(PROJECT)} && exec {shlex.join(argv)}"]

    def run(self, argv: list[str], timeout_s: float = 60, input: str | None = None) -> str:
        try:
            done = subprocess.run(self.command(argv), capture_output=True, text=True, timeout=timeout_s,
                                  input=input)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"server {self.name}: `{shlex.join(argv)}` did not answer within "
                               f"{timeout_s:.0f} s") from None
        if done.returncode:
            raise ClusterError(f"server {self.name}: `{shlex.join(argv)}` failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-400:]}")
        return done.stdout

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(self.command(argv), start_new_session=True, **kw)

    def close(self) -> None:
        if self.master is not None:
            processes.stop_pid(self.master.pid)
            self.master = None
        if os.path.exists(self.control):
            os.remove(self.control)


class ClusterError(RuntimeError):
    pass


def role(name: str) -> list[str]:
    """The argv of one of this module's roles, with the head's Python."""
    return [sys.executable, "-m", "emulator.net.cluster", name]


# --- on each server: what it answers -----------------------------------------------------

def facts_of(datapath: str, offload: str, mtu: int) -> dict:
    """What preflight compares between servers."""
    from mininet.net import VERSION
    from emulator import version
    from emulator.net.dataplane import detect
    from emulator.plan import capacity
    ovs = subprocess.run(["ovs-vswitchd", "--version"], capture_output=True, text=True).stdout.splitlines()
    try:
        plane = detect(datapath, offload)
        found = {"datapath": plane.datapath, "dataplane": plane.describe()}
    except (RuntimeError, ValueError) as e:
        found = {"datapath": None, "dataplane": str(e)}
    calibration = capacity.load()
    try:   # the rule a run on one machine is checked by: its budget shrinks past the calibration's ports
        budget = capacity.faithful_budget(calibration, found["datapath"] or "user", mtu, offload)
        faithful, basis, ports, exponent = budget.faithful_mbps, budget.basis, budget.ports, budget.exponent
    except LookupError as e:
        faithful, basis, ports, exponent = None, str(e), 0, 0.0
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    from emulator.net.capabilities import congestion_controls, qdiscs
    return {"uid": os.geteuid(), "boot_id": boot, "mininet": VERSION, "ovs": ovs[0] if ovs else "",
            "congestion_controls": congestion_controls(), "qdiscs": qdiscs(),
            "project": version(), "cpus": os.cpu_count(), "faithful_mbps": faithful, "basis": basis,
            "calibrated_ports": ports, "port_exponent": exponent,
            "calibrated_on": calibration.machine, **found}


def hold_lock(tcp: str) -> int:
    """Hold this server's run lock, and the run's congestion control allowed
    to its namespaces, until stdin closes (the head's run ends or its
    connection is lost)."""
    from emulator.net import congestion
    try:
        with processes.RunLock(), congestion.allowed(tcp):
            print("HELD", flush=True)
            sys.stdin.read()
    except processes.MachineBusy as e:
        print(f"BUSY {e}", flush=True)
        return 4
    return 0


def clean_here(wait_s: float = 15) -> int:
    """Sweep under the run lock. A head killed with -9 leaves its lock
    holder here until `clean` on the head ends its ssh connection: wait
    for it that long."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with processes.RunLock():
                print(json.dumps(processes.sweep()))
            return 0
        except processes.MachineBusy as e:
            if time.monotonic() > deadline:
                print(json.dumps([f"nothing: {e}"]))
                return 0
            time.sleep(0.5)


def answer_clock() -> int:
    """Answer every UDP datagram with this machine's time.monotonic(), on a
    port it prints, until stdin closes: a datagram is the quickest round
    trip the network between servers offers (ssh's would add its own)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("0.0.0.0", 0))
        print(sock.getsockname()[1], flush=True)
        while True:
            ready, _, _ = select.select([sock, sys.stdin], [], [])
            if sys.stdin in ready and not sys.stdin.readline():
                return 0
            if sock in ready:
                data, peer = sock.recvfrom(64)
                sock.sendto(data + f" {time.monotonic():.9f}".encode(), peer)


def relay_capture(tcpdump: list[str]) -> int:
    """Run tcpdump (its stderr is ours, through ssh to the head): each line
    on stdin asks it for its counts (SIGUSR1), the end of stdin stops it."""
    path = tcpdump[tcpdump.index("-w") + 1]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    proc = subprocess.Popen(tcpdump, stdin=subprocess.DEVNULL, start_new_session=True)
    processes.record(proc.pid)
    for _ in sys.stdin:
        proc.send_signal(signal.SIGUSR1)
    processes.stop_pid(proc.pid)
    return proc.wait()


def main(argv: list[str]) -> int:
    if argv[0] == "facts":
        print(json.dumps(facts_of(argv[1], argv[2], int(argv[3]))))
        return 0
    if argv[0] == "hold":
        return hold_lock(argv[1])
    if argv[0] == "clock":
        return answer_clock()
    if argv[0] == "sweep":
        print(json.dumps(processes.sweep()))
        return 0
    if argv[0] == "clean":
        return clean_here()
    if argv[0] == "capture":
        return relay_capture(argv[1:])
    if argv[0] == "stop-hosts":   # a program's processes in these host shells' namespaces
        processes.end_members({int(pid) for pid in argv[1:]}, grace_s=3.0)
        return 0
    raise SystemExit(f"unknown role {argv[0]!r}")


def clean_servers(names) -> dict[str, str]:
    """`bigraph-emu clean --servers`: on each server, what a run left
    there (after kill -9 of the head, say), removed under its run lock."""
    said = {}
    for name in names:
        remote = Remote(name)
        try:
            remote.connect()
            removed = json.loads(remote.run(role("clean")))
            said[name] = ", ".join(removed) if removed else "nothing; it is clean"
        except ClusterError as e:
            said[name] = f"nothing: {e}"
        finally:
            remote.close()
    return said


# --- from the head: clocks, the network between servers -------------------------------

def clock_samples(remote: Remote, enough_s: float, exchanges: int = 1000,
                  seconds: float = 10.0) -> list[tuple[float, float, float]]:
    """(head time sent, server time, head time answered) of UDP round trips
    to the server's clock (a datagram lost or late is left out), until one
    trip bounds the clock within `enough_s` (half its time) after at least
    20, or `exchanges` or `seconds` are spent: on a busy server a quick
    trip is rare, and one is all the offset needs."""
    proc = remote.popen(role("clock"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    samples, best = [], float("inf")
    try:
        port = proc.stdout.readline().strip()
        if not port.isdigit():
            raise ClusterError(f"server {remote.name}: its clock did not start")
        until = time.monotonic() + seconds   # from its start: starting Python over ssh took over 10 s in a VM
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1.0)
            address = (resolve(remote.host), int(port))
            for i in range(exchanges):
                if time.monotonic() > until or (len(samples) >= 20 and best <= enough_s):
                    break
                t0 = time.monotonic()
                sock.sendto(str(i).encode(), address)   # not connected: a reply may come from another local address
                try:
                    while True:   # a late answer to an earlier datagram is skipped
                        seq, theirs = sock.recv(64).split()
                        if int(seq) == i:
                            break
                except socket.timeout:
                    continue
                samples.append((t0, float(theirs), time.monotonic()))
                best = min(best, (samples[-1][2] - t0) / 2)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    if not samples:
        raise ClusterError(f"server {remote.name}: no answer from its clock over UDP (a firewall?)")
    return samples


def path_mtu_ok(remote: Remote, mtu: int) -> bool:
    """Whether an IPv4 packet of `mtu` bytes reaches the server unfragmented."""
    done = subprocess.run(["ping", "-M", "do", "-c", "2", "-i", "0.2", "-W", "3", "-s", str(mtu - 28), remote.host],
                          capture_output=True, text=True)
    return done.returncode == 0


def link_rate_mbps(remote: Remote, seconds: float = 2.0) -> float:
    """TCP Mbit/s from the head to the server (iperf3, one stream)."""
    port = 5299
    # without a terminal, ssh's end does not stop it: it stops itself
    server = remote.popen(["timeout", str(int(seconds) + 30), "iperf3", "-s", "-1", "-p", str(port)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            done = subprocess.run(["iperf3", "-c", remote.host, "-p", str(port), "-t", str(seconds), "-J"],
                                  capture_output=True, text=True)
            end = json.loads(done.stdout or "{}").get("end", {}) if done.returncode == 0 else {}
            # iperf3 3.12 may leave the sums out (seen under software emulation): its one stream's then
            got = end.get("sum_received") or end.get("sum_sent") or (end.get("streams") or [{}])[0].get("receiver")
            if got:
                return got["bits_per_second"] / 1e6
            time.sleep(0.2)   # its iperf3 server is not listening yet
        raise ClusterError(f"server {remote.name}: iperf3 from the head failed: "
                           f"{(done.stdout + done.stderr)[-300:]}")
    finally:
        try:
            server.wait(timeout=seconds + 10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def head_address(remote: Remote) -> str:
    """The head's address toward a server (what its switches reach the controller at)."""
    out = subprocess.run(["ip", "-o", "route", "get", resolve(remote.host)], capture_output=True, text=True).stdout
    words = out.split()
    return words[words.index("src") + 1]


def resolve(host: str) -> str:
    out = subprocess.run(["getent", "ahostsv4", host], capture_output=True, text=True).stdout.split()
    if not out:
        raise ClusterError(f"server {host}: its name does not resolve to an IPv4 address")
    return out[0]


# --- Mininet's cluster classes, as the fabric needs them -------------------------------------

class ShapedTunnelLink(RemoteLink):
    """A link between two servers, as Mininet's RemoteGRELink but over VXLAN
    (built into more kernels than gretap: ours lacks ip_gre), at the
    fabric's MTU on both ends (RemoteGRELink forces 1450 on every link; the
    network between servers must carry MTU + TUNNEL_HEADER_BYTES, checked
    in preflight), shaped like any link (the emulator shapes both ends by
    name). Each end listens on a UDP port of its own, so two servers that
    are one machine (a test) can hold both ends. Links within a server are
    veths."""

    count = 0

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                     deleteIntfs=True):
        node1 = self.node1 if node1 is None else node1
        node2 = self.node2 if node2 is None else node2
        if getattr(node1, "server", "localhost") == getattr(node2, "server", "localhost"):
            return Link.makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2, deleteIntfs=deleteIntfs)
        ShapedTunnelLink.count += 1
        vni = ShapedTunnelLink.count
        port1, port2 = TUNNEL_PORT_BASE + 2 * vni, TUNNEL_PORT_BASE + 2 * vni + 1
        ip1, ip2 = _tunnel_address(node1, node2), _tunnel_address(node2, node1)
        for node, name, addr, local, peer, port, peer_port in ((node1, intfname1, addr1, ip1, ip2, port1, port2),
                                                                (node2, intfname2, addr2, ip2, ip1, port2, port1)):
            lines = [f"ip link add {name} type vxlan id {vni} local {local} dstport {port} nolearning",
                     f"bridge fdb append 00:00:00:00:00:00 dev {name} dst {peer} port {peer_port}"]
            if addr:
                lines.append(f"ip link set {name} address {addr}")
            lines.append(f"ip link set {name} up")
            script = " && ".join(lines) + " && echo tunnel-end-up"   # its output may hold warnings (sudo's)
            out = node.rcmd(["sh", "-c", shlex.quote(script) if node.isRemote else script])
            if "tunnel-end-up" not in out:
                raise ClusterError(f"making the tunnel end {name} on {node.server} failed: {out.strip()}")
        self.tunnel = 1   # RemoteLink.stop: delete both ends, not a veth
        return None

    def stop(self):
        if self.tunnel:
            self.intf1.delete()
            self.intf2.delete()
        else:
            Link.stop(self)
        self.tunnel = None


TUNNEL_PORT_BASE = 14789   # UDP ports 14791.. of the tunnels' ends, two per link that crosses servers


def _tunnel_address(node, peer) -> str:
    """The address `node`'s server sends the tunnel from: toward `peer`'s server."""
    if getattr(node, "server", "localhost") != "localhost":
        return node.serverIP
    out = subprocess.run(["ip", "-o", "route", "get", peer.serverIP], capture_output=True, text=True).stdout.split()
    return out[out.index("src") + 1]


# --- preflight: before anything is built --------------------------------------------------

def open_servers(plan, log=print) -> "Servers":
    """Connect to every server of the plan's spec and check them all before
    anything is built: passwordless ssh as root, the same Mininet, Open
    vSwitch and project, a datapath, a free machine, the network between
    them (the fabric's MTU plus the tunnel's header, and the rate the
    crossing links may need), clocks within the run's limit, and a
    placement within every server's budget; printed per server for both
    placements. ClusterError names the first server that fails."""
    from emulator.plan import servers as spread
    spec = plan.spec
    head, names = spec.servers[0], spec.servers[1:]
    _check_head(head)
    remotes: dict[str, Remote] = {}
    servers = Servers(head, remotes, {}, "")
    try:
        for name in names:
            remotes[name] = Remote(name)
            remotes[name].connect()
        facts = {head: facts_of(spec.datapath, spec.offload, spec.mtu),
                 **{n: _facts_there(r, spec) for n, r in remotes.items()}}
        problems = spread.fact_problems(facts, spread.needs_of(plan))
        if problems:
            raise ClusterError("; ".join(problems))
        servers.shared = {n for n in names if facts[n]["boot_id"] == facts[head]["boot_id"]}
        for name, remote in remotes.items():
            if name not in servers.shared:
                servers.locks[name] = _hold(remote, spec.tcp)
        budgets = [spread.server_of(n, facts[n], MAX_EMULATED_HOSTS) for n in spec.servers]
        placement = _placement(plan, budgets, spec.placement, log, facts[head]["basis"])
        split = spread.split_nodes(plan.fabric, placement)
        if split:
            raise SpecError(f"servers: placement {spec.placement} would split nodes of accelerators across "
                            f"servers: {'; '.join(split[:3])}; a node's interconnect stays on one server "
                            "(fewer servers, or --interconnect nvlink: one bridge a node)")
        servers.where = {node: spec.servers[s] for node, s in placement.where.items()}
        servers.controller_ip = head_address(next(iter(remotes.values()))) if remotes else "127.0.0.1"
        servers.record = {"head": head, "placement": spec.placement, "cross_bytes_planned": placement.cross_bytes,
                          "servers": {n: {**facts[n], "switches": placement.switches[i], "hosts": placement.hosts[i],
                                          "load_mbps": round(placement.load_mbps[i], 1)}
                                      for i, n in enumerate(spec.servers)}}
        _check_network(servers, plan, placement, log)
        _check_clocks(servers, plan, log)
    except BaseException:
        servers.close()
        raise
    return servers


def _check_head(head: str) -> None:
    host = head.split("@")[-1]
    if host == "localhost":
        return
    mine = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    addresses = {w.split("/")[0] for line in mine.splitlines() for w in line.split()[3:4]}
    if resolve(host) not in addresses:
        raise ClusterError(f"servers: the first server, {head}, is the head and must be this machine (its "
                           f"address {resolve(host)} is not one of this machine's); run bigraph-emu there")


def _facts_there(remote: Remote, spec) -> dict:
    try:
        return json.loads(remote.run(role("facts") + [spec.datapath, spec.offload, str(spec.mtu)]))
    except ClusterError as e:
        raise ClusterError(f"{e} (is the project, at {PROJECT}, and its Python, {sys.executable}, there?)") from None


def _hold(remote: Remote, tcp: str) -> subprocess.Popen:
    """The server's run lock, held by a process there until the run ends."""
    proc = remote.popen(role("hold") + [tcp], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    answer = proc.stdout.readline().strip()
    if answer != "HELD":
        proc.stdin.close()
        proc.wait(timeout=10)
        if answer.startswith("BUSY "):   # another run holds that server: the same exit code as here
            raise processes.MachineBusy(f"server {remote.name}: {answer.removeprefix('BUSY ')}")
        raise ClusterError(f"server {remote.name}: {answer or 'its run lock did not answer'}")
    return proc


def _placement(plan, budgets, method: str, log, head_basis: str):
    from emulator.plan import servers as spread
    traffic = spread.traffic_of(plan)
    chosen = None
    for each in spread.PLACEMENTS:
        placed = spread.place(traffic, budgets, each)
        text = spread.describe(placed, plan.fabric, plan.spec.mtu)
        log(text.replace("\n", " (this run's)\n", 1) if each == method else text)
        chosen = placed if each == method else chosen
    alone = spread.as_one_machine(chosen, head_basis)
    if alone:   # the whole fabric on the head: checked as a run on one machine is
        log(alone.describe(plan.spec.host_rate_mbps))
        return chosen
    over = chosen.overloaded()
    if over:
        raise ClusterError(f"the {method} placement is past a server's budget: {'; '.join(over)} (more servers, "
                           "lower rates, or `bigraph-emu calibrate` on them)")
    return chosen


def _check_network(servers: "Servers", plan, placement, log) -> None:
    """The network between head and servers carries the fabric's frames in
    the tunnel, at the rate the crossing links may need."""
    from emulator.plan import servers as spread
    mtu = plan.spec.mtu
    need = spread.tunnel_mbps(plan.fabric, placement, mtu)
    index = {name: i for i, name in enumerate(plan.spec.servers)}
    for name, remote in servers.remotes.items():
        if name in servers.shared:
            continue
        if not path_mtu_ok(remote, mtu + spread.TUNNEL_HEADER_BYTES):
            raise ClusterError(f"server {name}: the network to it does not carry {mtu + spread.TUNNEL_HEADER_BYTES}-"
                               f"byte packets (the fabric's MTU {mtu} plus the tunnel's "
                               f"{spread.TUNNEL_HEADER_BYTES}); raise its MTU or lower --mtu")
        wanted = sum(v for pair, v in need.items() if index[name] in pair)
        rate = link_rate_mbps(remote)
        servers.record["servers"][name]["network_mbps"] = round(rate, 1)
        log(f"# server {name}: {rate:.0f} Mbit/s from the head; its crossing links may need {wanted:.0f}")
        if wanted > rate:
            raise ClusterError(f"server {name}: the links that cross to it may need {wanted:.0f} Mbit/s with the "
                               f"tunnel's headers, the network to it carries {rate:.0f}; lower the rates or "
                               "place by traffic")


def _check_clocks(servers: "Servers", plan, log) -> None:
    from emulator.plan import servers as spread
    limit = spread.clock_limit_s(plan.predictions.values())
    for name, remote in servers.remotes.items():
        samples = clock_samples(remote, enough_s=limit / 2)
        offset, uncertainty = spread.clock_offset(samples)
        servers.offsets[name] = offset
        servers.record["servers"][name].update(clock_offset_s=offset, clock_uncertainty_s=uncertainty,
                                               clock_round_trips=len(samples))
        log(f"# server {name}: clock {offset * 1e3:+.3f} ms from the head's, within {uncertainty * 1e3:.3f} ms "
            f"(the quickest of {len(samples)} round trips)")
        if uncertainty > limit:
            raise ClusterError(f"server {name}: its clock is known to {uncertainty * 1e3:.2f} ms only, more than "
                               f"{limit * 1e3:.2f} ms (1% of the run's shortest call): a network this slow "
                               "cannot time the run's calls; larger messages, or a quicker network")


class Servers:
    """Where every node of the fabric is: the head (this machine) or one
    of the remote servers, connected. Mininet's cluster classes build it."""

    def __init__(self, head: str, remotes: dict[str, Remote], where: dict[str, str], controller_ip: str):
        self.head, self.remotes, self.where = head, remotes, where   # where: node -> server name
        self.controller_ip = controller_ip
        self.offsets: dict[str, float] = {}      # server -> its time.monotonic() minus the head's
        self.shared: set[str] = set()            # servers that are this machine (another name for it)
        self.locks: dict[str, subprocess.Popen] = {}   # the other servers' run locks, held
        self.record: dict = {}                   # what the results keep: facts, placement, clocks
        self.made_dirs: list[str] = []

    def offset_of(self, node: str) -> float:
        return self.offsets.get(self.server_of(node), 0.0)

    def lost(self) -> list[str]:
        """Servers whose connection has ended."""
        return [name for name, remote in self.remotes.items() if not remote.alive]

    def unreachable(self) -> list[str]:
        """Servers that do not run `true` within the time ssh gives a
        silent server (their connection ended, or ends meanwhile)."""
        out = []
        for name, remote in self.remotes.items():
            try:
                if remote.alive:
                    remote.run(["true"], timeout_s=ALIVE_S * ALIVE_COUNT + 3)
                    continue
            except ClusterError:
                pass
            out.append(name)
        return out

    def sweep(self) -> list[str]:
        """On every other server still reached: what the run left there, removed
        (the project's objects by name, its recorded processes)."""
        removed = []
        for name, remote in self.remotes.items():
            if name in self.shared or not remote.alive:
                continue
            try:
                removed += [f"{item} on {name}" for item in json.loads(remote.run(role("sweep")))]
            except ClusterError as e:
                removed.append(f"nothing on {name} ({e})")
        return removed

    def close(self) -> None:
        """The other servers' locks released, the connections closed."""
        for name, proc in self.locks.items():
            try:
                proc.stdin.close()
                proc.wait(timeout=10 if self.remotes[name].alive else 0)   # a lost server's session: no answer
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
        self.locks = {}
        for remote in self.remotes.values():
            remote.close()
        for folder in reversed(self.made_dirs):
            with contextlib.suppress(OSError):   # not empty: something else uses it now
                os.rmdir(folder)
        self.made_dirs = []

    def server_of(self, node: str) -> str:
        """"" for the head, else the server's name."""
        server = self.where.get(node, self.head)   # the controller: the head
        return "" if server == self.head else server

    def remote_of(self, node: str) -> Remote | None:
        return self.remotes.get(self.server_of(node))

    def node_options(self, node: str) -> dict:
        from mininet.examples.cluster import RemoteHost, RemoteOVSSwitch
        remote = self.remote_of(node)
        cls = RemoteOVSSwitch if node.startswith(SWITCH_PREFIX) else RemoteHost
        if remote is None:
            return {"cls": cls, "server": "localhost"}
        return {"cls": cls, "server": remote.name, "serverIP": resolve(remote.host), "user": "root",
                "controlPath": remote.control}

    def mininet(self):
        from mininet.examples.cluster import MininetCluster
        # it makes ~/.ssh/mn (and ~/.ssh) for ssh control files we do not use: gone again at close
        home = os.path.expanduser("~")
        os.environ.setdefault("HOME", home)   # MininetCluster reads it; a systemd service has none
        self.made_dirs = [d for d in (os.path.join(home, ".ssh"), os.path.join(home, ".ssh", "mn"))
                          if not os.path.exists(d)]
        return MininetCluster(topo=None, build=False, controller=None, link=ShapedTunnelLink,
                              servers=["localhost", *self.remotes], user="root", precheck=False,
                              serverIP={"localhost": "127.0.0.1",
                                        **{name: resolve(r.host) for name, r in self.remotes.items()}},
                              ipBase=f"{ADDRESS_BASE}/{PREFIX_LEN}", autoSetMacs=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
