"""Deferring signals (emulator.net.interrupts.deferred), without root."""
import os
import signal
import threading

import pytest

from emulator.net import interrupts


def test_a_signal_in_a_deferred_block_interrupts_after_it():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the block ran to its end")
    assert done == ["the block ran to its end"]


def test_off_the_main_thread_a_deferred_block_just_runs():
    """A controller restarted by the fault thread: Python lets only the main
    thread set handlers (and only it is interrupted)."""
    errors, done = [], []

    def block():
        try:
            with interrupts.deferred():
                done.append(True)
        except Exception as e:   # noqa: BLE001 - the test reports whatever it was
            errors.append(e)
    thread = threading.Thread(target=block)
    thread.start()
    thread.join()
    assert done == [True] and errors == []
