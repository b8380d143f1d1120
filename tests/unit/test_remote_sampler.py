"""A server's link sampler answers a request for a reading at once: the
reading a call ends with is taken after it ended, not up to a period
before (which missed a call's last bytes on the other server's links)."""
import subprocess
import time

from emulator.measure.monitor import RemoteSampler


class ThisMachine:
    """A 'server' that is this machine: the sampler runs as a local process."""
    name = "here"
    alive = True

    @staticmethod
    def popen(argv, **kw):
        return subprocess.Popen(argv, **kw)


def test_a_fresh_reading_comes_at_once_not_a_period_later():
    sampler = RemoteSampler(ThisMachine(), ["lo"], interval_s=30)   # periodic readings 30 s apart
    try:
        t0 = time.monotonic()
        sent, received = sampler.fresh()
        assert time.monotonic() - t0 < 5
        assert "lo" in received and len(received["lo"]) == 2
        t1 = time.monotonic()
        sampler.fresh()   # again: each request gets its own reading
        assert time.monotonic() - t1 < 5
    finally:
        sampler.stop()
    assert sampler.proc.poll() is not None   # stdin closed: it ends


def test_a_stopped_sampler_is_named_when_asked():
    sampler = RemoteSampler(ThisMachine(), ["lo"], interval_s=30)
    sampler.stop()
    try:
        sampler.fresh()
    except RuntimeError as e:
        assert "server here: its link sampler stopped" in str(e)
    else:
        raise AssertionError("a stopped sampler answered")
