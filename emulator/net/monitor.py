"""Sample every link's counters while a call runs (a thread of the emulator).

Kernel counters only, read from the root namespace: one `tc` call for all
switch queues and a /sys read per host uplink, so a 100 ms period costs a
few percent of one core even on the largest fabric we emulate.
"""
from __future__ import annotations

import threading
import time

from emulator.results.linkstats import DirectedLink, Sample
from emulator.net import counters


def sample(links: list[DirectedLink]) -> Sample:
    busy, total = counters.cpu_jiffies()
    s = Sample(time.monotonic(), counters.switch_queues(), cpu_busy=busy, cpu_total=total,
               ovs_ticks=counters.ovs_ticks())
    for link in links:
        if not link.egress:
            s.received[link.dev] = counters.received(link.dev)
    return s


class LinkMonitor:
    """`with LinkMonitor(links, 0.1) as m:` ... then m.samples."""

    def __init__(self, links: list[DirectedLink], interval_s: float, on_sample=None):
        self.links = links
        self.interval_s = interval_s
        self.on_sample = on_sample   # called with each new Sample (the live view)
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="link-monitor", daemon=True)

    def __enter__(self) -> "LinkMonitor":
        self.samples.append(sample(self.links))
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(sample(self.links))

    def _run(self) -> None:
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            s = sample(self.links)
            self.samples.append(s)
            if self.on_sample is not None:
                self.on_sample(self.samples)
            next_at += self.interval_s
