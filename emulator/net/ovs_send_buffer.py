"""Open vSwitch's userspace datapath sends the packets of every port of every
bridge through one AF_PACKET socket. A packet waiting in a port's tc queue
still counts against that socket's send buffer, so with the default 208 KB
the shaped queues overflow it and OVS drops packets silently (its log says
"error sending Ethernet packet ... Resource temporarily unavailable"): TCP
then retransmits and the emulated links look slower than configured.

The socket is created when ovs-vswitchd sends its first packet, with
net.core.wmem_default as its buffer. The emulator raises that default while
a fresh ovs-vswitchd forwards its first packets and restores it right after.
"""
from __future__ import annotations

import contextlib
import re
import subprocess

SEND_BUFFER_BYTES = 64 << 20
WMEM_DEFAULT = "/proc/sys/net/core/wmem_default"


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


@contextlib.contextmanager
def large_send_buffer():
    """While active, a socket ovs-vswitchd creates gets SEND_BUFFER_BYTES;
    the machine's default is restored on exit, whatever happens."""
    with open(WMEM_DEFAULT) as f:
        before = f.read().strip()
    with open(WMEM_DEFAULT, "w") as f:
        f.write(str(SEND_BUFFER_BYTES))
    try:
        yield
    finally:
        with open(WMEM_DEFAULT, "w") as f:
            f.write(before)


def status_line(size: int | None) -> str | None:
    """A warning when the buffer is too small to trust the measurements."""
    if size is None or size >= SEND_BUFFER_BYTES:
        return None
    return (f"# WARNING: Open vSwitch's packet send buffer is {size // 1024} KB: packets waiting in the "
            f"emulated queues will be dropped inside OVS and TCP will retransmit. Restart Open vSwitch "
            f"(vm/provision.sh does it when no bridge is in use) so the emulator can enlarge it.")
