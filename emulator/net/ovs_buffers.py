"""Socket buffers of ovs-vswitchd. Its userspace datapath sends the packets of every port of every
bridge through one AF_PACKET socket. A packet waiting in a port's tc queue
still counts against that socket's send buffer, so with the default 208 KB
the shaped queues overflow it and OVS drops packets silently (its log says
"error sending Ethernet packet ... Resource temporarily unavailable"): TCP
then retransmits and the emulated links look slower than configured.

The socket is created when ovs-vswitchd sends its first packet, with
net.core.wmem_default as its buffer. The emulator raises that default while
a fresh ovs-vswitchd forwards its first packets and restores it right after.
The receive sockets, one per port, are made when the ports are added; a
busy ovs-vswitchd lets them overflow too, so rmem_default is raised as well.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess

SEND_BUFFER_BYTES = 64 << 20
RECEIVE_BUFFER_BYTES = 4 << 20
DEFAULTS = {"/proc/sys/net/core/wmem_default": SEND_BUFFER_BYTES,
            "/proc/sys/net/core/rmem_default": RECEIVE_BUFFER_BYTES}


def send_buffer() -> int | None:
    """Send buffer of ovs-vswitchd's shared packet socket, None before it exists."""
    out = subprocess.run(["ss", "-0", "-m", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        # the unbound socket ("[0]:*"); the per-port ones are bound to a device
        if "[0]:*" in line and '"ovs-vswitchd"' in line:
            found = re.search(r"\btb(\d+)", line)
            if found:
                return int(found.group(1))
    return None


# The machine's own values while ours are in force: a crash in between
# leaves them here, and the cleanup sweep puts them back.
SAVED = "/run/bigraph-emu/socket-defaults.json"


@contextlib.contextmanager
def large_socket_buffers():
    """While active, sockets ovs-vswitchd creates get large buffers; the
    machine's defaults are restored on exit, whatever happens."""
    if not os.path.exists(SAVED):
        before = {}
        for path in DEFAULTS:
            with open(path) as f:
                before[path] = f.read().strip()
        os.makedirs(os.path.dirname(SAVED), exist_ok=True)
        with open(SAVED + ".tmp", "w") as f:
            json.dump(before, f)
        os.replace(SAVED + ".tmp", SAVED)
    try:
        for path, value in DEFAULTS.items():
            with open(path, "w") as f:
                f.write(str(value))
        yield
    finally:
        restore_socket_defaults()


def restore_socket_defaults() -> bool:
    """Put back the values saved by large_socket_buffers; False if none were."""
    try:
        with open(SAVED) as f:
            before = json.load(f)
    except FileNotFoundError:
        return False
    for path, value in before.items():
        with open(path, "w") as f:
            f.write(value)
    os.remove(SAVED)
    return True


def status_line(size: int | None) -> str | None:
    """A warning when the buffer is too small to trust the measurements."""
    if size is None or size >= SEND_BUFFER_BYTES:
        return None
    return (f"# WARNING: Open vSwitch's packet send buffer is {size // 1024} KB: packets waiting in the "
            f"emulated queues will be dropped inside OVS and TCP will retransmit. Restart Open vSwitch "
            f"(vm/provision.sh does it when no bridge is in use) so the emulator can enlarge it.")
