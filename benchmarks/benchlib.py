"""Shared by the root benchmarks (bringup.py, dataplane.py, memory.py):
waiting for the machine-wide emulation lock, phase timers, the leftover
check after every run, and a plain Mininet built from a project Fabric.

Nothing here kills by name: processes are stopped by the ids we started,
bridges and links are removed only by the project's prefixes (bgs, bgh).
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from emulator.net import interrupts, processes  # noqa: E402

LOCK_POLL_S = 60.0
LOCK_WAIT_S = 3600.0


# --- the one-emulation-at-a-time lock ------------------------------------------------

def lock_free() -> bool:
    """True if nobody holds the emulation lock right now (like `flock -n`)."""
    os.makedirs(processes.STATE_DIR, exist_ok=True)
    fd = os.open(processes.LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)   # closing releases our probe lock


def wait_for_lock(poll_s: float = LOCK_POLL_S, limit_s: float = LOCK_WAIT_S) -> None:
    """Block until no emulation runs (poll every `poll_s`, give up after `limit_s`)."""
    start = time.monotonic()
    told = False
    while not lock_free():
        if time.monotonic() - start > limit_s:
            raise SystemExit(f"another emulation held the lock for {limit_s / 60:.0f} minutes; giving up")
        if not told:
            print(f"# waiting for another emulation to finish (checking every {poll_s:.0f} s)", flush=True)
            told = True
        time.sleep(poll_s)


def with_lock_retry(fn, attempts: int = 5):
    """Run fn() once the lock is free; if another emulation grabbed the lock
    in between (Emulation raises "another bigraph-emu emulation is running"),
    wait again."""
    for attempt in range(attempts):
        wait_for_lock()
        try:
            return fn()
        except RuntimeError as e:
            if "another bigraph-emu emulation is running" not in str(e) or attempt == attempts - 1:
                raise
            print("# another emulation started first; waiting", flush=True)


@contextlib.contextmanager
def held_lock():
    """Hold the emulation lock (for what we build without Emulation)."""
    with processes.RunLock():
        yield


def run_child(argv: list[str], capture: bool = False) -> subprocess.CompletedProcess:
    """Run a benchmark part that tears down on its own. On Ctrl-C, SIGTERM
    or a hang-up, pass the signal on and wait for its teardown before
    unwinding (subprocess.run would kill it and leave its fabric behind)."""
    pipe = subprocess.PIPE if capture else None
    proc = subprocess.Popen(argv, stdout=pipe, stderr=pipe, text=True)
    try:
        out, err = proc.communicate()
    except (KeyboardInterrupt, interrupts.Interrupted) as e:
        with interrupts.deferred():
            proc.send_signal(getattr(e, "signum", signal.SIGINT))
            proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


# --- leftovers ------------------------------------------------------------------------

def leftovers() -> list[str]:
    return processes.leftover_bridges() + processes.leftover_links() + \
        [f"process {pid}" for pid in processes.leftover_processes()]


def check_clean(what: str) -> bool:
    """After a run: no bgs*/bgh* bridge or link and no recorded process may
    remain; if some do, remove them (what `bigraph-emu clean` does) and say so."""
    left = leftovers()
    if not left:
        return True
    print(f"# WARNING: {what} left {len(left)} things ({', '.join(left[:5])}...); sweeping them", flush=True)
    wait_for_lock()
    with held_lock():
        processes.sweep()
    left = leftovers()
    if left:
        print(f"# WARNING: still left after the sweep: {', '.join(left[:8])}", flush=True)
    return False


# --- timing ---------------------------------------------------------------------------

class PhaseTimer:
    """Seconds per named phase, accumulated; `wrap` times a method of a class
    for as long as the timer is active (benchmarks only: no source is edited)."""

    active: "PhaseTimer | None" = None

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.first_start: dict[str, float] = {}   # name -> time.time() its first call began

    def __enter__(self):
        PhaseTimer.active = self
        return self

    def __exit__(self, *exc):
        PhaseTimer.active = None

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.calls[name] = self.calls.get(name, 0) + 1

    def get(self, name: str) -> float:
        return self.seconds.get(name, 0.0)


def wrap(cls, method: str, name: str) -> None:
    """Time every call of cls.method into the active PhaseTimer as `name`."""
    original = getattr(cls, method)
    if getattr(original, "_bench_wrapped", False):
        return

    @functools.wraps(original)
    def timed(*args, **kwargs):
        if PhaseTimer.active is not None:
            PhaseTimer.active.first_start.setdefault(name, time.time())
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            if PhaseTimer.active is not None:
                PhaseTimer.active.add(name, time.perf_counter() - t0)

    timed._bench_wrapped = True
    setattr(cls, method, timed)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def run_dir(tag: str) -> str:
    return tempfile.mkdtemp(prefix=f"bigraph-bench-{tag}-")


def fmt(x, width: int = 7, digits: int = 2) -> str:
    if x is None:
        return f"{'-':>{width}}"
    return f"{x:{width}.{digits}f}"


def ratio(a, b, width: int = 6) -> str:
    if a is None or b in (None, 0):
        return f"{'-':>{width}}"
    return f"{a / b:{width}.2f}"


# --- plain Mininet from a Fabric --------------------------------------------------------

def ovs_ticks() -> int:
    """CPU clock ticks ovs-vswitchd has used (to spot a flood during a baseline)."""
    from emulator.measure.counters import ovs_ticks as ticks
    return ticks()


def switch_rx_packets(fabric) -> int:
    """Packets that entered the fabric's switch ports (root-namespace veths)."""
    total = 0
    for link in fabric.links:
        for node, port in link.ends():
            if fabric.is_switch(node):
                try:
                    with open(f"/sys/class/net/{node}-eth{port}/statistics/rx_packets") as f:
                        total += int(f.read())
                except OSError:
                    pass
    return total


def disable_ipv6(net, fabric) -> None:
    """No IPv6 on any interface of the fabric: a standalone (learning) OVS
    bridge floods the kernel's IPv6 router solicitations and MLD reports,
    and on a fabric with loops (BiGraph, fat-tree) a flood never ends. Done
    after Mininet built the links and before the bridges exist (net.start),
    so nothing has been forwarded yet."""
    names = []
    for link in fabric.links:
        for node, port in link.ends():
            if fabric.is_switch(node):
                names.append(f"{node}-eth{port}")
    for i in range(0, len(names), 200):
        keys = [f"net.ipv6.conf.{n}.disable_ipv6=1" for n in names[i:i + 200]]
        subprocess.run(["sysctl", "-q", "-w", *keys], check=False)
    for h in fabric.hosts:
        net[h.name].cmd("sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
