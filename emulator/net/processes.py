"""Processes the emulator starts, and the sweep that removes what a crashed
run left behind: only the project's own bridges and veths (by name prefix)
and only processes whose ids this project recorded."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

from emulator.fabric.graph import HOST_PREFIX, SWITCH_PREFIX
from emulator.net import congestion, ovs_buffers

STATE_DIR = "/run/bigraph-emu"
LOCK_FILE = f"{STATE_DIR}/lock"
PIDS_FILE = f"{STATE_DIR}/pids.json"
LENT_LOCK_ENV = "BIGRAPH_RUN_LOCK_FD"   # the lock's descriptor, lent by a parent that holds it (a sweep's worker)


class MachineBusy(RuntimeError):
    """Another emulation holds this machine: nothing of this one was built."""


class RunLock:
    """One emulation at a time per machine: switches, names and the one
    ovs-vswitchd thread are shared. Held for the whole run. A process that
    holds it may lend it to the run it starts (`lend()`): the run then
    takes the lock through the same open file, which it already holds.
    The holder writes who it is (its process, command and results folder
    `out`) into the file, for the runs it refuses."""

    def __init__(self, out: str = ""):
        self._fd = None
        self.out = out

    def __enter__(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        lent = os.environ.get(LENT_LOCK_ENV)
        self._fd = os.dup(int(lent)) if lent else os.open(LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(self._fd)
            os.close(self._fd)
            raise MachineBusy(f"another bigraph-emu emulation holds this machine{holder}; "
                              "wait for it to finish") from None
        holder = json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv), "since": time.time(),
                             "out": os.path.abspath(self.out) if self.out else ""})
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, holder.encode(), 0)
        return self

    def __exit__(self, *exc):
        os.close(self._fd)

    def lend(self) -> dict:
        """subprocess arguments that lend the held lock to a child process."""
        return {"pass_fds": (self._fd,), "env": {**os.environ, LENT_LOCK_ENV: str(self._fd)}}


def _holder(fd: int) -> str:
    """': process N (its command, since HH:MM:SS), results in FOLDER' from the
    lock file, or '' if it says nothing readable."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%H:%M:%S", time.localtime(float(holder["since"])))
        out = f", results in {holder['out']}" if holder.get("out") else ""
        return f": process {int(holder['pid'])} ({holder['command']}, since {since}){out}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ""


def _start_time(pid: int) -> str | None:
    """When the process started (clock ticks since boot); None if it is gone
    or a zombie. With the id it names one process, even after an exec."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def alive(pid: int) -> bool:
    return _start_time(pid) is not None


def record(*pids_started: int) -> None:
    """Remember processes we started, with their start times (guards against
    killing an unrelated process that later reuses an id)."""
    pids = _recorded()
    for pid in pids_started:
        pids[str(pid)] = _start_time(pid)
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(PIDS_FILE + ".tmp", "w") as f:
        json.dump(pids, f)
    os.replace(PIDS_FILE + ".tmp", PIDS_FILE)


def _recorded() -> dict:
    try:
        with open(PIDS_FILE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def stop_pid(pid: int, grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s`, one process by id."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 1.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    return
            except ChildProcessError:   # not our child: poll /proc instead
                if _start_time(pid) is None:
                    return
            time.sleep(0.05)


def netns(pid: int) -> str | None:
    """The network namespace a process is in (None: it has gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def namespace_members(shells: set[int]) -> list[int]:
    """Every process in the network namespaces of `shells` (Mininet's host
    shells) but the shells: what was started in those hosts."""
    namespaces = {netns(pid) for pid in shells} - {None}
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and int(e) not in shells and netns(int(e)) in namespaces]


def end_members(shells: set[int], grace_s: float, reap=lambda: None) -> None:
    """SIGTERM to every process in the shells' namespaces, SIGKILL to what
    is left after `grace_s`; `reap` waits for the caller's own children
    (or they stay as zombies)."""
    for sig, grace in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 1.0)):
        left = namespace_members(shells)
        if not left:
            return
        record(*left)
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            reap()
            if not any(alive(pid) for pid in left):
                break
            time.sleep(0.05)


def _ours(name: str) -> bool:
    return name.startswith(SWITCH_PREFIX) or name.startswith(HOST_PREFIX)


def leftover_bridges() -> list[str]:
    out = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True).stdout
    return [b for b in out.split() if _ours(b)]


def leftover_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]
    return [n for n in names if _ours(n)]


def leftover_processes() -> list[int]:
    return [int(pid) for pid, started in _recorded().items() if started and _start_time(int(pid)) == started]


def sweep() -> list[str]:
    """Remove what earlier runs of this project left behind; returns what
    was removed (empty on a clean machine)."""
    removed = []
    for pid in leftover_processes():
        stop_pid(pid)
        removed.append(f"process {pid}")
    for bridge in leftover_bridges():
        subprocess.run(["ovs-vsctl", "--timeout=5", "--if-exists", "del-br", bridge], check=False)
        removed.append(f"bridge {bridge}")
    for link in leftover_links():
        subprocess.run(["ip", "link", "delete", link], stderr=subprocess.DEVNULL, check=False)
        removed.append(f"link {link}")
    try:
        os.remove(PIDS_FILE)
    except FileNotFoundError:
        pass
    if ovs_buffers.restore_socket_defaults():
        removed.append("raised socket buffer defaults (restored)")
    if congestion.restore():
        removed.append("a congestion control allowed to namespaces (the machine's list restored)")
    return removed
