"""A user's program on the emulated hosts: started once per rank inside its
host (or as mpiexec inside rank 0's host), waited for, and ended with
everything it started.

Every process in a host's network namespace other than Mininet's shell
belongs to the program (the fabric is up and verified, nothing else runs
there), so "everything it started" is found by namespace, also what
daemonised itself, recorded for the sweep and ended by id. While it runs,
each of its threads' time on a core and waiting for one is read with the
poll (the last POLL_S of a thread's life is missed), by host.

A rank whose host is on another server (a fabric over several) starts
there through the head's ssh connection, with its folder under that
server's AWAY_ROOT; its ssh ends when it does, with its exit code; its
folder is then brought back into the results, its times moved onto the
head's clock, and its CPU is what its wrapper counted (its waiting for a
core is not read there). Stopping it ends every process in that server's
hosts' namespaces (`python -m emulator.net.cluster stop-hosts`).
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

from emulator.plan import ranks as R
from emulator.measure import counters
from emulator.net import interrupts, processes

AWAY_ROOT = f"/tmp/bigraph-exec-{os.getpid()}"   # a remote rank's folder: AWAY_ROOT/ranks/<rank>, on its server
POLL_S = 0.2
FAIL_GRACE_S = 3.0   # after a rank fails, how long the others get to fail with their own message
STOP_GRACE_S = 3.0   # between SIGTERM and SIGKILL


class HostThreads:
    """What runs in the hosts: every process in their namespaces but
    Mininet's shells, and, for the hosts of `slots` on this machine, each
    of their threads' seconds on a core and runnable but waiting for one,
    as last read by poll()."""

    def __init__(self, network, slots: list[R.Slot]):
        self.shells = set(network.host_pids())
        self.host_of = {processes.netns(network.host(s.host).pid): s.host for s in slots
                        if not network.remote(s.host)}
        self.threads: dict[int, tuple[str, float, float]] = {}   # a thread's host, CPU s, wait s

    def members(self) -> list[int]:
        """Every process in the hosts' namespaces but Mininet's shells."""
        return processes.namespace_members(self.shells)

    def poll(self) -> list[int]:
        """The members now, their threads read."""
        members = self.members()
        for pid in members:
            host = self.host_of.get(processes.netns(pid))
            if host:
                for tid, (on_cpu, waiting) in counters.thread_cpu(pid).items():
                    self.threads[tid] = (host, on_cpu, waiting)
        return members

    def by_host(self) -> dict[str, tuple[float, float]]:
        """Per host read: its processes' seconds on a core and seconds
        runnable but waiting for one, summed over their threads."""
        totals = {host: (0.0, 0.0) for host in self.host_of.values()}
        for host, on_cpu, waiting in self.threads.values():
            cpu, wait = totals[host]
            totals[host] = (cpu + on_cpu, wait + waiting)
        return totals


@dataclasses.dataclass
class Away:
    """The server that holds a rank's host, other than this one."""
    remote: object    # net.cluster.Remote, connected
    offset_s: float   # its time.monotonic() minus this machine's


class Program:
    """The processes of one `exec`; `with` ends every one of them."""

    def __init__(self, network, slots: list[R.Slot], out: str, away: dict[int, Away] | None = None):
        self.network, self.slots, self.out = network, slots, out
        self.away = away or {}                    # rank -> its server, for ranks on another one
        self.hosts = HostThreads(network, slots)
        self.procs: list[subprocess.Popen] = []   # a rank's wrapper each, or mpiexec alone
        self.collected: set[int] = set()          # remote ranks whose folder is back
        self.under_mpi = False
        self.t0 = 0.0

    def __enter__(self) -> "Program":
        return self

    def __exit__(self, *exc) -> None:
        with interrupts.deferred():   # a second Ctrl-C must not leave processes behind
            self.stop()
            self.collect()

    def servers(self) -> dict[str, object]:
        """The other servers that hold ranks' hosts, by name."""
        return {a.remote.name: a.remote for a in self.away.values()}

    def prepare_away(self, hostfile_text: str, paths: list[str]) -> None:
        """On every other server: the ranks' folder with the hostfile, and
        every file the command names there (the same path on every server)."""
        for remote in self.servers().values():
            missing = remote.run(["sh", "-c", 'mkdir -p "$0" && cat > "$0/hostfile" && '
                                  'for p; do [ -e "$p" ] || echo "$p"; done', AWAY_ROOT, *paths],
                                 input=hostfile_text).split()
            if missing:
                raise RuntimeError(f"server {remote.name} has no {missing[0]}: the program and the files it "
                                   "names must be at the same path on every server")

    def start_ranks(self, command: list[str], hostfile: str) -> None:
        """CMD once per rank in its host, rank order, each through emulator.replay.rank."""
        self.t0 = time.monotonic()
        for slot in self.slots:
            away = slot.rank in self.away
            out = AWAY_ROOT if away else self.out
            folder = R.rank_dir(out, slot.rank)
            env = R.rank_env(self.slots, slot.rank, os.path.join(out, R.HOSTFILE) if away else hostfile, folder)
            argv = R.wrapped(sys.executable, folder, command)
            if away:
                self._popen(slot.host, R.over_ssh(env, argv), {})
            else:
                os.makedirs(folder, exist_ok=True)
                self._popen(slot.host, argv, {**os.environ, **env})

    def start_mpi(self, argv: list[str]) -> None:
        """mpiexec in rank 0's host; its stdout and stderr in ranks/mpiexec.*."""
        self.t0, self.under_mpi = time.monotonic(), True
        for slot in self.slots:
            os.makedirs(R.rank_dir(self.out, slot.rank), exist_ok=True)
        self._popen(self.slots[0].host, argv, dict(os.environ), os.path.join(self.out, R.RANKS_FOLDER, R.MPIEXEC_LOG))

    def _popen(self, host: str, argv: list[str], env: dict, log: str | None = None) -> None:
        """argv in the host's namespaces, as our child until it exits: Mininet's
        `mnexec -da` forks when its caller leads a process group (the
        cluster edition's hosts make it one), and its child would outlive
        the process we wait for; so `mnexec -a` in a process group of its
        own (a Ctrl-C at the terminal reaches the ranks through us)."""
        outputs = {}
        if log:
            outputs = {"stdout": open(log + ".stdout", "wb"), "stderr": open(log + ".stderr", "wb")}
        node = self.network.host(host)
        try:
            proc = node.popen(argv, env=env, stdin=subprocess.DEVNULL, mncmd=["mnexec", "-a", str(node.pid)],
                              preexec_fn=os.setpgrp,
                              **(outputs or {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}))
        finally:
            for f in outputs.values():
                f.close()
        processes.record(proc.pid)
        self.procs.append(proc)

    def wait(self, timeout_s: float, on_poll=None) -> str:
        """Until every process has exited: "" when all did by themselves,
        else why they were stopped ("timeout" or "a rank failed").
        `on_poll(exits)` sees each rank's state as it goes."""
        deadline, failed_at = self.t0 + timeout_s, None
        while True:
            processes.record(*self.hosts.poll())   # what it started, and its threads' CPU
            exits = self.exits()
            if on_poll:
                on_poll(exits)
            if all(p.poll() is not None for p in self.procs):
                return ""
            now = time.monotonic()
            if failed_at is None and any(e.exit_code not in (None, 0) for e in exits):
                failed_at = now
            if failed_at is not None and now - failed_at > FAIL_GRACE_S:
                return "a rank failed"
            if now > deadline:
                return "timeout"
            time.sleep(POLL_S)

    def exits(self) -> list[R.RankExit]:
        return [self._exit(s.rank) for s in self.slots]

    def _exit(self, rank: int) -> R.RankExit:
        """What rank left; a remote rank not yet back: its ssh's exit code
        (the wrapper's), until collect() brings its folder."""
        away = self.away.get(rank)
        if away is None:
            return R.read_exit(self.out, rank)
        if rank not in self.collected:   # under mpiexec, a rank's own exit is known once it is back
            return R.RankExit(rank, None if self.under_mpi else self.procs[rank].poll(), None, None)
        e = R.read_exit(self.out, rank)
        start, end = (None if t is None else t - away.offset_s for t in (e.start_s, e.end_s))
        return R.RankExit(rank, e.exit_code, start, end, e.cpu_s)

    def collect(self) -> None:
        """Every other server's ranks' folders brought into the results
        (once their processes have ended), then removed there."""
        for name, remote in self.servers().items():
            ranks = [r for r, a in self.away.items() if a.remote.name == name and r not in self.collected]
            if not ranks or not remote.alive:
                continue
            os.makedirs(os.path.join(self.out, R.RANKS_FOLDER), exist_ok=True)
            folders = [os.path.join(R.RANKS_FOLDER, str(r)) for r in ranks]
            with subprocess.Popen(remote.command(["tar", "-C", AWAY_ROOT, "-cf", "-", "--ignore-failed-read",
                                                  "--warning=no-failed-read", *folders]), stdout=subprocess.PIPE) as there:
                subprocess.run(["tar", "-C", self.out, "-xf", "-"], stdin=there.stdout, check=False)
            remote.run(["rm", "-rf", AWAY_ROOT])
            self.collected.update(ranks)

    def cpu_away(self) -> dict[str, tuple[float, str]]:
        """Per remote rank's host: its processes' CPU seconds as its wrapper
        counted them (waiting for a core: not read there)."""
        return {s.host: (e.cpu_s, "") for s in self.slots if s.rank in self.away
                for e in [self._exit(s.rank)] if e.cpu_s is not None}

    def stop(self) -> None:
        """SIGTERM to every process of the program, SIGKILL after a grace;
        then reap our own children."""
        processes.end_members(self.hosts.shells, STOP_GRACE_S, self._reap)
        self._stop_away()
        for proc in self.procs:
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass

    def _stop_away(self) -> None:
        """On every other server: every process in its hosts' namespaces."""
        from emulator.net.cluster import ClusterError, role
        for name, remote in self.servers().items():
            shells = [str(self.network.host(s.host).pid) for s in self.slots
                      if s.rank in self.away and self.away[s.rank].remote.name == name]
            if remote.alive:
                try:
                    remote.run(role("stop-hosts") + shells, timeout_s=STOP_GRACE_S + 10)
                except ClusterError:
                    pass   # lost meanwhile: its sweep ends them

    def _reap(self) -> None:
        for proc in self.procs:
            proc.poll()


