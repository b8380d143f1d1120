"""Sample every link's counters while a call runs (a thread of the emulator).

Kernel counters only, read from the root namespace: one `tc` call for all
switch queues and a /sys read per host uplink, so a 100 ms period costs a
few percent of one core even on the largest fabric we emulate.

A fabric over several servers: each other server runs this module as a
sampler (`python -m emulator.measure.monitor --serve DEVS`) that prints its
counters as a JSON line every period; every sample of the head takes the
latest line of each (at most one period old).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import queue
import sys
import threading
import time

from emulator.records.links import DirectedLink, Sample
from emulator.measure import counters

FRESH_TIMEOUT_S = 10.0   # a server's sampler answers a request for a reading within this


def sample(links: list[DirectedLink], remotes=(), fresh: bool = False, tcp_pids=()) -> Sample:
    """This machine's counters of `links` (the receive counters of those
    whose dev is here), with the latest of every RemoteSampler's, or (fresh)
    one each takes when asked now; and the TCP counters of the hosts whose
    processes are `tcp_pids`, if any."""
    busy, total, stolen = counters.cpu_jiffies()
    s = Sample(time.monotonic(), counters.switch_queues(), cpu_busy=busy, cpu_total=total, cpu_stolen=stolen,
               ovs_ticks=counters.ovs_ticks(), ovs_wait_s=counters.ovs_wait_s(),
               tcp=counters.tcp_counts(tcp_pids) if tcp_pids else {})
    for remote in remotes:
        sent, received = remote.fresh() if fresh else remote.latest()
        s.sent.update(sent)
        s.received.update(received)
    for link in links:
        if not link.egress and link.dev not in s.received:
            s.received[link.dev] = counters.received(link.dev)
    return s


class RemoteSampler:
    """Another server's sampler, read by a thread as it writes."""

    def __init__(self, remote, devs: list[str], interval_s: float):
        self.name, self.remote = remote.name, remote
        self.proc = remote.popen([sys.executable, "-m", "emulator.measure.monitor", "--serve", ",".join(devs),
                                  "--interval", str(interval_s)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._latest: tuple[dict, dict] | None = None
        self._ready = threading.Event()
        self._answered = threading.Event()
        threading.Thread(target=self._read, name=f"sampler-{remote.name}", daemon=True).start()
        if not self._ready.wait(60):
            self.stop()
            raise RuntimeError(f"server {remote.name}: its link sampler did not start within 60 s")

    def _read(self) -> None:
        for line in self.proc.stdout:
            got = json.loads(line)
            self._latest = ({d: tuple(v) for d, v in got["sent"].items()},
                            {d: tuple(v) for d, v in got["received"].items()})
            if got.get("asked"):
                self._answered.set()
            self._ready.set()

    def latest(self) -> tuple[dict, dict]:
        if self.proc.poll() is not None:
            raise RuntimeError(f"server {self.name}: its link sampler stopped (connection lost?)")
        return self._latest

    def fresh(self, timeout_s: float = FRESH_TIMEOUT_S) -> tuple[dict, dict]:
        """A reading taken after this moment (a call's start or end): the
        latest may be a period old, and would miss a call's last bytes on
        this server's links."""
        self.latest()   # still running
        self._answered.clear()
        try:
            self.proc.stdin.write("now\n")
            self.proc.stdin.flush()
        except OSError:
            raise RuntimeError(f"server {self.name}: its link sampler stopped (connection lost?)") from None
        if not self._answered.wait(timeout_s):
            raise RuntimeError(f"server {self.name}: its link sampler did not answer within {timeout_s:.0f} s")
        return self.latest()

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10 if self.remote.alive else 0)   # a lost server's session: no answer
        except subprocess.TimeoutExpired:
            self.proc.kill()


def serve(devs: list[str], interval_s: float) -> None:
    """The sampler of one server: a JSON line of its switch queues and the
    receive counters of `devs` every `interval_s`, and at once for each line
    read from stdin (marked "asked": read after the request came), until
    stdin closes."""
    requests: queue.Queue = queue.Queue()

    def listen():
        for _ in sys.stdin:
            requests.put(True)
        requests.put(None)
    threading.Thread(target=listen, daemon=True).start()
    asked = False
    while True:
        print(json.dumps({"sent": counters.switch_queues(), "asked": asked,
                          "received": {dev: counters.received(dev) for dev in devs}}), flush=True)
        try:
            request = requests.get(timeout=interval_s)
        except queue.Empty:
            asked = False
            continue
        if request is None:
            return
        asked = True


class LinkMonitor:
    """`with LinkMonitor(links, 0.1) as m:` ... then m.samples."""

    def __init__(self, links: list[DirectedLink], interval_s: float, on_sample=None, remotes=(), tcp_pids=()):
        self.links = links
        self.remotes = remotes   # RemoteSampler of every other server
        self.tcp_pids = tcp_pids   # hosts whose TCP counters every sample reads (about 0.1 ms a host)
        self.interval_s = interval_s
        self.on_sample = on_sample   # called with each new Sample (the live view)
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="link-monitor", daemon=True)

    def __enter__(self) -> "LinkMonitor":
        self.samples.append(sample(self.links, self.remotes, fresh=True, tcp_pids=self.tcp_pids))
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        # after a failure (a server lost) the latest readings, without waiting on them
        self.samples.append(sample(self.links, self.remotes, fresh=exc[0] is None, tcp_pids=self.tcp_pids))

    def _run(self) -> None:
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            s = sample(self.links, self.remotes, tcp_pids=self.tcp_pids)
            self.samples.append(s)
            if self.on_sample is not None:
                self.on_sample(self.samples)
            next_at += self.interval_s


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="a server's link sampler (started by the emulator)")
    ap.add_argument("--serve", required=True, help="devices whose receive counters to read, comma-separated")
    ap.add_argument("--interval", type=float, required=True)
    args = ap.parse_args()
    serve([d for d in args.serve.split(",") if d], args.interval)
