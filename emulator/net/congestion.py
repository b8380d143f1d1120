"""The hosts' TCP congestion control. A network namespace may take as its
default only one of the machine's allowed congestion controls
(net.ipv4.tcp_allowed_congestion_control, kept by the root namespace: on
a machine whose own is bbr, that is "reno bbr"). While a run needs
another, it is added to that list; the machine's list is put back at
teardown, or by `bigraph-emu clean` after a crash."""
from __future__ import annotations

import contextlib
import os
import subprocess

ALLOWED = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
SAVED = "/run/bigraph-emu/allowed-congestion-control"


def _read() -> str:
    with open(ALLOWED) as f:
        return f.read().strip()


def _write(value: str) -> None:
    with open(ALLOWED, "w") as f:
        f.write(value)


AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"


@contextlib.contextmanager
def allowed(name: str):
    """While active, namespaces may take `name` as their default. The
    allowed list takes only loaded congestion controls: one the kernel
    offers as a module (dctcp in a stock Debian kernel) is loaded first."""
    with open(AVAILABLE) as f:
        loaded = f.read().split()
    if name not in loaded:
        subprocess.run(["modprobe", f"tcp_{name}"], check=True, capture_output=True)
    current = _read()
    if name in current.split():
        yield
        return
    if not os.path.exists(SAVED):   # the machine's own list, kept for `clean` after a crash
        os.makedirs(os.path.dirname(SAVED), exist_ok=True)
        with open(SAVED + ".tmp", "w") as f:
            f.write(current)
        os.replace(SAVED + ".tmp", SAVED)
    try:
        _write(f"{current} {name}")
        yield
    finally:
        restore()


def restore() -> bool:
    """Put back the list `allowed` saved; False if there was none."""
    try:
        with open(SAVED) as f:
            _write(f.read().strip())
    except FileNotFoundError:
        return False
    os.remove(SAVED)
    return True
