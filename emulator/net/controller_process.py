"""Start the os-ken controller (python -m controller) and wait for routes;
read the port counters it keeps."""
from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import time

from emulator.records.links import CONTROLLER_PORTS, PORT_READING_COLUMNS
from emulator.net import interrupts, processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ControllerProcess:
    def __init__(self, fabric_json: str, policy: str, run_dir: str, demands_json: str = "", seed: int = 1,
                 listen: str = "127.0.0.1", routes_json: str = ""):
        self.listen = listen   # switches on other servers reach it at the head's address toward them
        self.fabric_json = fabric_json
        self.policy = policy
        self.extra = ["--seed", str(seed)] + (["--demands", demands_json] if demands_json else []) \
            + (["--routes", routes_json] if routes_json else [])   # a file policy's routes, computed by the emulator
        self.ready_file = os.path.join(run_dir, "controller-ready.json")
        self.log_path = os.path.join(run_dir, "controller.log")
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.ports_path = os.path.join(run_dir, CONTROLLER_PORTS)
        self._ports_read = 0   # bytes of it read so far

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the controller and return once it listens."""
        self.launch()
        self.wait_listening(timeout_s)

    def launch(self) -> None:
        """Start the controller's process (it takes a third of a second to
        listen: the fabric is built meanwhile)."""
        if os.path.exists(self.ready_file):
            os.remove(self.ready_file)
        log = open(self.log_path, "a")
        with interrupts.deferred():   # a Ctrl-C now would leave a process that nobody stops
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "controller", "--fabric", self.fabric_json, "--policy", self.policy,
                 "--ready-file", self.ready_file, "--port", str(self.port), "--listen", self.listen, *self.extra],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            processes.record(self.proc.pid)
        log.close()

    def wait_listening(self, timeout_s: float = 60.0) -> None:
        """Return once the controller listens. Python and os-ken load slowly
        on a loaded machine: a restart during traffic in a software-emulated
        VM took over 20 s; a dead process fails at once."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            with socket.socket() as s:
                if s.connect_ex((self.listen, self.port)) == 0:
                    return
            time.sleep(0.02)
        raise RuntimeError(f"controller did not listen on {self.listen}:{self.port} within {timeout_s}s; "
                           f"see {self.log_path}")

    def wait_routes(self, timeout_s: float = 60.0) -> dict:
        """Block until every switch has connected and confirmed its rules."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            if os.path.exists(self.ready_file):
                with open(self.ready_file) as f:
                    return json.load(f)
            time.sleep(0.02)
        raise RuntimeError(f"not every switch got its routes within {timeout_s}s; see {self.log_path}")

    def port_readings(self) -> list[dict]:
        """The port counter readings the controller wrote since the last
        call (whole lines only: it may be writing one), rows of PORT_READING_COLUMNS."""
        try:
            with open(self.ports_path, "rb") as f:
                f.seek(self._ports_read)
                data = f.read()
        except FileNotFoundError:
            return []
        data = data[:data.rfind(b"\n") + 1]
        self._ports_read += len(data)
        lines = [line for line in data.decode().splitlines() if line and not line.startswith(PORT_READING_COLUMNS[0] + ",")]
        return list(csv.DictReader(lines, fieldnames=PORT_READING_COLUMNS))

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"controller exited with code {self.proc.returncode}; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            processes.stop_pid(self.proc.pid)
