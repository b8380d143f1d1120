"""A real Dask scheduler and workers on 127.0.0.1 for the sweep tests:
processes of ours, ended by their ids."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

BIN = os.path.join(os.path.dirname(sys.executable), "bigraph-emu")
DASK = os.path.join(os.path.dirname(sys.executable), "dask")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DaskCluster:
    """A scheduler and workers, each a process of ours, ended by id."""

    def __init__(self, workers: int, tmp_path, resources: str | None = None):
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.log = open(tmp_path / "dask.log", "w")
        self.scheduler = self._start([DASK, "scheduler", "--host", "127.0.0.1", "--port",
                                      self.address.rsplit(":", 1)[1], "--no-dashboard"])
        extra = ["--resources", resources] if resources else []
        self.workers = [self._start([DASK, "worker", self.address, "--nthreads", "1", "--no-nanny",
                                     "--no-dashboard", "--host", "127.0.0.1", *extra]) for _ in range(workers)]
        self._wait_for(workers)

    def _start(self, argv):
        return subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def _wait_for(self, workers: int) -> None:
        from distributed import Client
        deadline = time.monotonic() + 60
        with Client(self.address, timeout="30s") as client:
            while len(client.scheduler_info()["workers"]) < workers:
                assert time.monotonic() < deadline, open(self.log.name).read()[-2000:]
                time.sleep(0.2)

    def stop(self) -> None:
        for proc in self.workers + [self.scheduler]:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.workers + [self.scheduler]:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log.close()
