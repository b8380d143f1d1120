"""A command on a pseudo-terminal of its own, as a user's terminal window
runs it: its own session with the terminal as its controlling one, so that
Ctrl-C typed on it and a hang-up (the window closed) reach its process
group from the kernel, exactly as they would for a user."""
from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import subprocess
import termios
import threading
import time


def _take_terminal() -> None:
    # a shell gives its foreground job the default SIGINT; a test run from
    # a background job would otherwise pass on an ignored one
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    def __init__(self, argv: list[str], cwd: str | None = None):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                                     start_new_session=True, preexec_fn=_take_terminal)
        os.close(slave)
        self._out = bytearray()
        self._reading = True
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while self._reading:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:   # EIO: the program closed its end
                return
            if not data:
                return
            self._out += data

    def text(self) -> str:
        return self._out.decode(errors="replace")

    def expect(self, words: str, timeout_s: float = 120, since: int = 0) -> int:
        """Wait until `words` appear after offset `since`; returns the offset after them."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            at = self.text().find(words, since)
            if at >= 0:
                return at + len(words)
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"{words!r} never appeared (exit code {self.proc.poll()}):\n{self.text()[-3000:]}")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def ctrl_c(self) -> None:
        self.type("\x03")   # the terminal sends SIGINT to the foreground process group

    def signal_group(self, signum: int) -> None:
        os.killpg(self.proc.pid, signum)

    def kill(self) -> None:
        """kill -9: no teardown at all."""
        self.proc.kill()
        self.proc.wait()

    def hang_up(self) -> None:
        """Close the terminal: the kernel sends SIGHUP to the session."""
        self._reading = False
        self._reader.join()
        os.close(self.master)
        self.master = -1

    def wait(self, timeout_s: float = 120) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return code

    def close(self) -> None:
        """After the test, also a failed one: never leave the program running
        (SIGTERM first, so that it tears its fabric down)."""
        if self.proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.master >= 0:
            self._reading = False
            self._reader.join()
            os.close(self.master)
            self.master = -1


# How a user's terminal ends a program, by name (the tests and the soak share them).
INTERRUPTIONS = {
    "ctrl-c": Terminal.ctrl_c,
    "SIGTERM to the group": lambda term: term.signal_group(signal.SIGTERM),
    "SIGHUP to the group": lambda term: term.signal_group(signal.SIGHUP),
    "terminal closed": Terminal.hang_up,   # ssh dropped, window closed: the kernel's SIGHUP
    "kill -9": Terminal.kill,
}
