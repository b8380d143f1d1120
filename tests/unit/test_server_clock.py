"""A server's clock is read over UDP until one round trip bounds it well
enough: at least 20 trips, more while none is quick enough, and the time
allowed counts from the clock's start (starting Python over ssh on a busy
VM took longer than the whole allowance once)."""
import subprocess

from emulator.net.cluster import clock_samples
from emulator.plan.servers import clock_offset


class ThisMachine:
    """A 'server' that is this machine, its clock started after `delay_s`."""
    name = host = "127.0.0.1"

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s

    def popen(self, argv, **kw):
        return subprocess.Popen(["sh", "-c", f'sleep {self.delay_s}; exec "$@"', "sh", *argv], **kw)


def test_a_quick_round_trip_ends_the_sampling_after_twenty():
    samples = clock_samples(ThisMachine(), enough_s=1.0)   # any trip here is well within a second
    assert len(samples) == 20
    offset, uncertainty = clock_offset(samples)
    assert abs(offset) < 0.01 and uncertainty < 1.0   # one machine, one monotonic clock


def test_no_quick_enough_trip_takes_every_exchange_allowed():
    assert len(clock_samples(ThisMachine(), enough_s=0.0, exchanges=60)) == 60


def test_the_time_allowed_counts_from_the_clocks_start():
    samples = clock_samples(ThisMachine(delay_s=1.5), enough_s=0.0, exchanges=30, seconds=1.0)
    assert len(samples) >= 20   # a start slower than the allowance still leaves the allowance to sample
