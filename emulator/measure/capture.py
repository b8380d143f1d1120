"""Record chosen links while a call runs: one tcpdump per link, on its
switch-side interface in the root namespace, headers only, started and
stopped by process id (and recorded, so `bigraph-emu clean` ends one a
crash left running).

On a fabric over several servers, a link whose switch another server holds
is recorded there: tcpdump runs under `python -m emulator.net.cluster
capture` through the head's ssh connection (which passes on a request for
counts and, when its stdin closes, stops tcpdump), writes into
REMOTE_FOLDER on that server, and the pcap is brought back into the
results and removed there. Its timestamps are that server's wall clock."""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time

from emulator.records.captures import tcpdump_counts, tcpdump_report
from emulator.fabric.captured import CapturedLink
from emulator.net import processes

REMOTE_FOLDER = f"/tmp/bigraph-capture-{os.getpid()}"   # on another server, its pcaps until brought back
SNAPLEN = 96        # bytes kept per packet: Ethernet, IPv4 and TCP headers with options (14 + 20 + up to 60)
START_S = 10.0      # tcpdump says it is listening well within this, even on a loaded machine
DRAIN_S = 0.2       # after the call, for the last acknowledgements to cross before tcpdump stops
CATCH_UP_S = 30.0   # at most this long for tcpdump to write what its socket still holds
STILL_S = 0.5       # tcpdump that wrote nothing for this long after the call has caught up


class CaptureError(RuntimeError):
    pass


def tcpdump_command(interface: str, path: str) -> list[str]:
    """Headers only, each packet written as it comes (a capture stopped by
    a signal loses nothing), as root (the results folder is root's)."""
    return ["tcpdump", "-i", interface, "-s", str(SNAPLEN), "-w", path, "-U", "--immediate-mode", "-Z", "root"]


class Tcpdump:
    """One tcpdump on this machine: its stderr says what it did."""

    def __init__(self, interface: str, path: str):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.proc = subprocess.Popen(tcpdump_command(interface, path), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        processes.record(self.proc.pid)

    def ask_counts(self) -> None:
        self.proc.send_signal(signal.SIGUSR1)

    def stop(self) -> None:
        processes.stop_pid(self.proc.pid)

    def bring_back(self) -> None:
        pass


class RemoteTcpdump(Tcpdump):
    """One tcpdump on another server (`remote`, net.cluster.Remote)."""

    def __init__(self, interface: str, path: str, remote):
        from emulator.net.cluster import role
        self.remote, self.path = remote, path
        self.there = os.path.join(REMOTE_FOLDER, os.path.basename(path))
        self.proc = remote.popen(role("capture") + tcpdump_command(interface, self.there), stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        processes.record(self.proc.pid)

    def ask_counts(self) -> None:
        try:
            self.proc.stdin.write(b"counts\n")
            self.proc.stdin.flush()
        except OSError:   # it has exited: _report reads why
            pass

    def stop(self) -> None:
        """Its stdin closed: tcpdump stopped there; ssh ended if it does not say so in time."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=CATCH_UP_S)
        except (OSError, subprocess.TimeoutExpired):
            processes.stop_pid(self.proc.pid)

    def bring_back(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "wb") as f:
            subprocess.run(self.remote.command(["cat", self.there]), stdout=f, check=False)
        self.remote.run(["rm", "-f", self.there])
        self.remote.run(["rmdir", "--ignore-fail-on-non-empty", REMOTE_FOLDER])


class LinkCapture:
    """`with LinkCapture(links, folder, files):` tcpdump records links[i]
    into FOLDER/files[i] for the block; then `counts[i]` is (packets
    captured, dropped by the kernel), as tcpdump reported them. No links:
    nothing happens. `remote_of(switch)`: the server that holds a switch,
    None for this machine (a fabric over several servers)."""

    def __init__(self, links: list[CapturedLink], folder: str, files: list[str], remote_of=lambda switch: None):
        self.links, self.paths = links, [os.path.join(folder, f) for f in files]
        self.remote_of = remote_of
        self.recorders: list[Tcpdump] = []
        self.counts: list[tuple[int | None, int | None]] = []

    def __enter__(self) -> "LinkCapture":
        try:
            for link, path in zip(self.links, self.paths):
                remote = self.remote_of(link.interface.split("-")[0])
                self.recorders.append(RemoteTcpdump(link.interface, path, remote) if remote
                                      else Tcpdump(link.interface, path))
                self._wait_listening(self.recorders[-1].proc, link)
        except BaseException:
            self._stop()
            raise
        return self

    def _wait_listening(self, proc: subprocess.Popen, link: CapturedLink) -> None:
        """Return once tcpdump says it listens (packets from then on are
        kept); CaptureError with what it said if it exits or stays silent."""
        try:
            _read_until(proc, b"listening on", time.monotonic() + START_S)
        except TimeoutError:
            raise CaptureError(f"tcpdump on {link.interface} ({link.name}) did not start within {START_S:g} s") from None
        except EOFError as e:
            raise CaptureError(f"tcpdump on {link.interface} ({link.name}) exited: {str(e)[-300:]}") from None

    def __exit__(self, *exc) -> None:
        if self.recorders:
            time.sleep(DRAIN_S)
            self._catch_up()
        self._stop()

    def _catch_up(self) -> None:
        """On a busy machine (a VM under software emulation) tcpdump falls
        behind its socket, and a SIGTERM loses what it has not read yet:
        half a call's packets, once. Wait until each tcpdump has written
        every packet its filter received, or has written nothing more for
        STILL_S with the call over (on loopback the kernel counts each
        packet twice), as it says on SIGUSR1."""
        deadline = time.monotonic() + CATCH_UP_S
        captured = {id(r): None for r in self.recorders}
        while captured and time.monotonic() < deadline:
            for recorder in [r for r in self.recorders if id(r) in captured]:
                said = _report(recorder, deadline)
                if said is None or said["captured"] + said["dropped by kernel"] >= said["received by filter"] \
                        or said["captured"] == captured[id(recorder)]:
                    del captured[id(recorder)]
                else:
                    captured[id(recorder)] = said["captured"]
            if captured:
                time.sleep(STILL_S)

    def _stop(self) -> None:
        """Stop every tcpdump (it writes its file whole and says what it
        captured); then read what it said, and bring back the pcaps of
        other servers."""
        for recorder in self.recorders:
            recorder.stop()
        self.counts = []
        for recorder in self.recorders:
            recorder.proc.wait()
            self.counts.append(tcpdump_counts(recorder.proc.stderr.read().decode(errors="replace")))
            recorder.proc.stderr.close()
            recorder.bring_back()


def _report(recorder: Tcpdump, deadline: float) -> dict[str, int] | None:
    """tcpdump's counts, asked for with SIGUSR1; None if it cannot say."""
    recorder.ask_counts()
    try:
        said = tcpdump_report(_read_until(recorder.proc, b"dropped by kernel", deadline))
    except (TimeoutError, EOFError):   # past the deadline, or it exited
        return None
    return None if None in said.values() else said


def _read_until(proc: subprocess.Popen, marker: bytes, deadline: float) -> str:
    """What tcpdump says on stderr up to and with `marker`; TimeoutError
    past the deadline, EOFError (with what it said) if it exits first."""
    said = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while marker not in said:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(timeout=left):
                raise TimeoutError(said.decode(errors="replace"))
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                raise EOFError(said.decode(errors="replace").strip())
            said += chunk
    return said.decode(errors="replace")
