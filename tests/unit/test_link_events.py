"""The thread that applies a run's link events (emulation._LinkEvents),
with a recording stand-in for the switch commands."""
import threading
import time

import pytest

from emulator.emulation import _LinkEvents
from emulator.spec.experiment import parse_link_event


class Recorder:
    """Applies events slowly, as switch shells under software emulation do."""

    def __init__(self, seconds: float, fail_on: str = ""):
        self.seconds, self.fail_on = seconds, fail_on
        self.applied, self.busy, self.overlapped = [], threading.Lock(), False

    def __call__(self, event, t0):
        if not self.busy.acquire(blocking=False):
            self.overlapped = True
            self.busy.acquire()
        try:
            if event.action == self.fail_on:
                raise RuntimeError(f"bgs0: `ip link set dev bgs0-eth3 {event.action}` failed")
            time.sleep(self.seconds)
            self.applied.append((event.action, round(time.monotonic() - t0, 2)))
        finally:
            self.busy.release()


def test_an_event_that_outlasts_the_gap_to_the_next_delays_it_and_never_overlaps():
    apply = Recorder(0.4)
    events = _LinkEvents([parse_link_event("0.2:bgs0-bgs2:up"), parse_link_event("0:bgs0-bgs2:down")], apply)
    time.sleep(1.0)
    events.finish()
    assert [action for action, _ in apply.applied] == ["down", "up"]   # in time order, not as listed
    assert not apply.overlapped
    assert apply.applied[1][1] >= 0.8   # the up waited for the down to be done


def test_a_failed_event_is_raised_by_finish_and_stops_the_rest():
    apply = Recorder(0.0, fail_on="down")
    events = _LinkEvents([parse_link_event("0:bgs0-bgs2:down"), parse_link_event("0.1:bgs0-bgs2:up")], apply)
    time.sleep(0.3)
    with pytest.raises(RuntimeError, match=r"a link event failed: bgs0: `ip link set dev bgs0-eth3 down` failed"):
        events.finish()
    assert apply.applied == []


def test_events_not_yet_due_when_the_run_ends_are_not_applied():
    apply = Recorder(0.0)
    events = _LinkEvents([parse_link_event("0:bgs0-bgs2:down"), parse_link_event("30:bgs0-bgs2:up")], apply)
    time.sleep(0.2)
    t = time.monotonic()
    events.finish()
    assert time.monotonic() - t < 1 and [a for a, _ in apply.applied] == ["down"]
