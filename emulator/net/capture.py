"""Record chosen links while a call runs: one tcpdump per link, on its
switch-side interface in the root namespace, headers only, started and
stopped by process id (and recorded, so `bigraph-emu clean` ends one a
crash left running)."""
from __future__ import annotations

import os
import selectors
import subprocess
import time

from emulator.captures import CapturedLink, tcpdump_counts
from emulator.net import processes

SNAPLEN = 96        # bytes kept per packet: Ethernet, IPv4 and TCP headers with options (14 + 20 + up to 60)
START_S = 10.0      # tcpdump says it is listening well within this, even on a loaded machine
DRAIN_S = 0.2       # after the call, for the last acknowledgements to cross before tcpdump stops


class CaptureError(RuntimeError):
    pass


def tcpdump_command(interface: str, path: str) -> list[str]:
    """Headers only, each packet written as it comes (a capture stopped by
    a signal loses nothing), as root (the results folder is root's)."""
    return ["tcpdump", "-i", interface, "-s", str(SNAPLEN), "-w", path, "-U", "--immediate-mode", "-Z", "root"]


class LinkCapture:
    """`with LinkCapture(links, folder, files):` tcpdump records links[i]
    into FOLDER/files[i] for the block; then `counts[i]` is (packets
    captured, dropped by the kernel), as tcpdump reported them. No links:
    nothing happens."""

    def __init__(self, links: list[CapturedLink], folder: str, files: list[str]):
        self.links, self.paths = links, [os.path.join(folder, f) for f in files]
        self.procs: list[subprocess.Popen] = []
        self.counts: list[tuple[int | None, int | None]] = []

    def __enter__(self) -> "LinkCapture":
        try:
            for link, path in zip(self.links, self.paths):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                proc = subprocess.Popen(tcpdump_command(link.interface, path), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
                processes.record(proc.pid)
                self.procs.append(proc)
                self._wait_listening(proc, link)
        except BaseException:
            self._stop()
            raise
        return self

    def _wait_listening(self, proc: subprocess.Popen, link: CapturedLink) -> None:
        """Return once tcpdump says it listens (packets from then on are
        kept); CaptureError with what it said if it exits or stays silent."""
        said = b""
        deadline = time.monotonic() + START_S
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stderr, selectors.EVENT_READ)
            while b"listening on" not in said:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    raise CaptureError(f"tcpdump on {link.interface} ({link.name}) did not start within {START_S:g} s")
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    raise CaptureError(f"tcpdump on {link.interface} ({link.name}) exited: "
                                       f"{said.decode(errors='replace').strip()[-300:]}")
                said += chunk

    def __exit__(self, *exc) -> None:
        if self.procs:
            time.sleep(DRAIN_S)
        self._stop()

    def _stop(self) -> None:
        """SIGTERM every tcpdump (it writes its file whole and says what it
        captured), by id; then read what it said."""
        for proc in self.procs:
            processes.stop_pid(proc.pid)
        self.counts = []
        for proc in self.procs:
            proc.wait()
            self.counts.append(tcpdump_counts(proc.stderr.read().decode(errors="replace")))
            proc.stderr.close()
