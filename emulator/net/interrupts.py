"""Signals that end a run: each one unwinds it so that teardown runs.

Ctrl-C (SIGINT) raises KeyboardInterrupt as Python always does; SIGTERM
and SIGHUP (the ssh connection dropped, the terminal window closed) raise
`Interrupted`. It is not a KeyboardInterrupt on purpose: Mininet's CLI
catches those to stop the command at its prompt, and a hang-up must end
the CLI, not a ping. A signal the process inherited as ignored (`nohup`,
SIGINT of a background job) stays ignored.
"""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading

TEARDOWN_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


def exception_for(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Interrupted(signum)


_terminal_fds: list[int] = []
_unwinding = False


def unwind_on_signals() -> None:
    """Install the handlers; call once at the start of a command."""
    _terminal_fds[:] = [fd for fd in (0, 1, 2) if _isatty(fd)]
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, _unwind)


def _unwind(signum, _frame) -> None:
    global _unwinding
    if signum == signal.SIGHUP:
        _leave_terminal()
    if _unwinding:   # a second signal (a shell forwards SIGHUP too): teardown is under way
        return
    _unwinding = True
    raise Interrupted(signum)


def lost_terminal(error: BaseException) -> bool:
    """True if `error` is a write to a terminal that hung up (EIO); then
    later writes go nowhere and the SIGHUP still to come changes nothing."""
    global _unwinding
    if not (isinstance(error, OSError) and error.errno == errno.EIO and _terminal_fds):
        return False
    _leave_terminal()
    _unwinding = True
    return True


def _leave_terminal() -> None:
    """After a hang-up, writing to the terminal fails (EIO) and reading
    from it ends: point those descriptors at /dev/null so that teardown's
    messages cannot break teardown."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in _terminal_fds:
        os.dup2(null, fd)
    os.close(null)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


@contextlib.contextmanager
def deferred():
    """Signals wait until the block is done (teardown), then interrupt.
    Off the main thread there is nothing to defer: Python interrupts only
    the main thread (and only it may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old: dict = {}

    def note(signum, _frame):
        if old.get(signum) == signal.SIG_IGN:
            return
        if signum == signal.SIGHUP:
            _leave_terminal()
        caught.append(signum)

    for signum in TEARDOWN_SIGNALS:
        old[signum] = signal.signal(signum, note)
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
    if caught:
        raise exception_for(caught[0])
