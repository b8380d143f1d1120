"""A user's program on the emulated hosts: started once per rank inside its
host (or as mpiexec inside rank 0's host), waited for, and ended with
everything it started.

Every process in a host's network namespace other than Mininet's shell
belongs to the program (the fabric is up and verified, nothing else runs
there), so "everything it started" is found by namespace, also what
daemonised itself, recorded for the sweep and ended by id. While it runs,
each of its threads' time on a core and waiting for one is read with the
poll (the last POLL_S of a thread's life is missed), by host.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from emulator.plan import ranks as R
from emulator.measure import counters
from emulator.net import interrupts, processes

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
        self.namespaces = {_netns(pid) for pid in self.shells} - {None}
        self.host_of = {_netns(network.host(s.host).pid): s.host for s in slots if not network.remote(s.host)}
        self.threads: dict[int, tuple[str, float, float]] = {}   # a thread's host, CPU s, wait s

    def members(self) -> list[int]:
        """Every process in the hosts' namespaces but Mininet's shells."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in self.shells and _netns(int(entry)) in self.namespaces:
                found.append(int(entry))
        return found

    def poll(self) -> list[int]:
        """The members now, their threads read."""
        members = self.members()
        for pid in members:
            host = self.host_of.get(_netns(pid))
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


class Program:
    """The processes of one `exec`; `with` ends every one of them."""

    def __init__(self, network, slots: list[R.Slot], out: str):
        self.network, self.slots, self.out = network, slots, out
        self.hosts = HostThreads(network, slots)
        self.procs: list[subprocess.Popen] = []   # a rank's wrapper each, or mpiexec alone
        self.t0 = 0.0

    def __enter__(self) -> "Program":
        return self

    def __exit__(self, *exc) -> None:
        with interrupts.deferred():   # a second Ctrl-C must not leave processes behind
            self.stop()

    def start_ranks(self, command: list[str], hostfile: str) -> None:
        """CMD once per rank in its host, rank order, each through emulator.replay.rank."""
        self.t0 = time.monotonic()
        for slot in self.slots:
            folder = R.rank_dir(self.out, slot.rank)
            os.makedirs(folder, exist_ok=True)
            env = {**os.environ, **R.rank_env(self.slots, slot.rank, hostfile, folder)}
            self._popen(slot.host, R.wrapped(sys.executable, folder, command), env)

    def start_mpi(self, argv: list[str]) -> None:
        """mpiexec in rank 0's host; its stdout and stderr in ranks/mpiexec.*."""
        self.t0 = time.monotonic()
        for slot in self.slots:
            os.makedirs(R.rank_dir(self.out, slot.rank), exist_ok=True)
        self._popen(self.slots[0].host, argv, dict(os.environ), os.path.join(self.out, R.RANKS_FOLDER, R.MPIEXEC_LOG))

    def _popen(self, host: str, argv: list[str], env: dict, log: str | None = None) -> None:
        outputs = {}
        if log:
            outputs = {"stdout": open(log + ".stdout", "wb"), "stderr": open(log + ".stderr", "wb")}
        try:
            proc = self.network.host(host).popen(argv, env=env, stdin=subprocess.DEVNULL,
                                                 **(outputs or {"stdout": subprocess.DEVNULL,
                                                                "stderr": subprocess.DEVNULL}))
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
        return [R.read_exit(self.out, s.rank) for s in self.slots]

    def stop(self) -> None:
        """SIGTERM to every process of the program, SIGKILL after a grace;
        then reap our own children."""
        for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 1.0)):
            left = self.hosts.members()
            if not left:
                break
            processes.record(*left)
            for pid in left:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self._alive(left):
                time.sleep(0.05)
        for proc in self.procs:
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass

    def _alive(self, pids: list[int]) -> bool:
        for proc in self.procs:
            proc.poll()   # reap our children, or they stay as zombies
        return any(processes.alive(pid) for pid in pids)


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None
