"""Start the host agents in their namespaces and drive them call by call."""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time

from emulator.net import processes
from emulator.workloads.steps import Schedule, steps_to_data

AGENT_PORT = 5201
START_DELAY_S = 0.05   # GO is sent this far ahead so every agent is waiting
LOST_CHECK_S = 1.0     # how often a wait asks whether another server's connection has ended


class AgentError(RuntimeError):
    pass


class AgentTimeout(AgentError):
    def __init__(self, word: str, missing: list[int], timeout_s: float):
        super().__init__(f"no {word} from ranks {missing[:10]} within {timeout_s:.0f}s")
        self.missing = missing


def agent_ports(ips: list[str]) -> list[int]:
    """A port per rank: ranks that share a host (several jobs) listen on
    consecutive ports from AGENT_PORT."""
    seen: dict[str, int] = {}
    ports = []
    for ip in ips:
        ports.append(AGENT_PORT + seen.get(ip, 0))
        seen[ip] = seen.get(ip, 0) + 1
    return ports


class AgentFleet:
    """One agent per rank. `hosts[rank]` is the Mininet host object;
    `calls[i]` the schedule of call i (every rank's steps), handed to each
    agent as data: a file per rank with its own steps only."""

    def __init__(self, hosts, ips: list[str], calls: list[Schedule], run_dir: str, connections: int = 1,
                 offsets: list[float] | None = None, remote: list[bool] | None = None, tcp: list[str] | None = None,
                 lost=None):
        self.hosts = hosts
        # per rank: its server's clock minus this one's (time.monotonic() is per machine), and
        # whether it runs on another server (its plan goes through its stdin, not a file), and its
        # job's own congestion control ("": the host's)
        self.offsets = offsets or [0.0] * len(hosts)
        self.remote = remote or [False] * len(hosts)
        # -> the other servers whose ssh connection has ended: their agents' pipes
        # need not end with it (a session that waits on a dead peer), so each wait asks
        self.lost = lost
        folder = os.path.join(run_dir, "agents")
        os.makedirs(folder, exist_ok=True)
        unique = {id(sched): sched for sched in calls}   # calls of one size share a schedule
        keys = {ident: str(i) for i, ident in enumerate(unique)}
        addresses = [[ip, port] for ip, port in zip(ips, agent_ports(ips))]
        self.plan_paths = []
        for rank in range(len(hosts)):
            path = os.path.join(folder, f"rank-{rank}.json")
            programs = {keys[ident]: steps_to_data(sched.steps[rank]) for ident, sched in unique.items()}
            with open(path, "w") as f:
                json.dump({"rank": rank, "addresses": addresses, "connections": connections,
                           "tcp": (tcp or [""] * len(hosts))[rank],
                           "programs": programs, "calls": [keys[id(c)] for c in calls]}, f)
            self.plan_paths.append(path)
        self.procs: list[subprocess.Popen] = []
        self.selector = selectors.DefaultSelector()
        self._pending: dict[int, list[str]] = {}   # complete lines not yet consumed
        self._partial: dict[int, bytes] = {}       # an incomplete last line
        self.steps_done: list[int] = [0] * len(hosts)   # of the call under way, per rank
        self.call_start = 0.0                           # time.monotonic() the call under way started

    def start(self, timeout_s: float = 60.0) -> None:
        for rank, host in enumerate(self.hosts):
            plan = "-" if self.remote[rank] else self.plan_paths[rank]
            proc = host.popen([sys.executable, "-m", "emulator.replay.agent", "--plan", plan],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              bufsize=0)
            processes.record(proc.pid)   # on another server: its ssh
            self.procs.append(proc)
            if self.remote[rank]:
                with open(self.plan_paths[rank], "rb") as f:
                    proc.stdin.write(f.read().replace(b"\n", b" ") + b"\n")
            self.selector.register(proc.stdout, selectors.EVENT_READ, rank)
        self._expect_all("LISTENING", timeout_s)
        self._send_all("CONNECT")
        self._expect_all("READY", timeout_s)

    def run_call(self, call: int, timeout_s: float) -> list[list[dict]]:
        """Start call `call` on every agent at one instant; returns the step
        records of every rank (times relative to that instant)."""
        start_at = self.call_start = time.monotonic() + START_DELAY_S
        self.steps_done = [0] * len(self.procs)
        for rank, offset in enumerate(self.offsets):   # the instant, on each agent's clock
            self._send(rank, f"GO {call} {start_at + offset:.6f}")
        try:
            replies = self._expect_all("DONE", timeout_s)
        except AgentTimeout as e:
            stalled = ", ".join(f"rank {r} in step {self.steps_done[r]}" for r in e.missing[:10])
            raise AgentError(f"call {call} stalled: no answer within {timeout_s:.0f}s from {stalled}") from None
        records = []
        for rank in range(len(self.procs)):
            _, got_call, body = replies[rank].split(" ", 2)
            if int(got_call) != call:
                raise AgentError(f"rank {rank} answered call {got_call}, expected {call}")
            steps = json.loads(body)
            for s in steps:
                s["start"] -= start_at + self.offsets[rank]
                s["end"] -= start_at + self.offsets[rank]
            records.append(steps)
        return records

    def _send_all(self, line: str) -> None:
        for rank in range(len(self.procs)):
            self._send(rank, line)

    def _send(self, rank: int, line: str) -> None:
        try:
            self.procs[rank].stdin.write((line + "\n").encode())
        except BrokenPipeError:
            raise AgentError(f"agent of rank {rank} has exited ({self.procs[rank].poll()})") from None

    def _expect_all(self, word: str, timeout_s: float) -> dict[int, str]:
        """Wait for one line starting with `word` from every agent."""
        replies: dict[int, str] = {}
        deadline = time.monotonic() + timeout_s
        while len(replies) < len(self.procs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AgentTimeout(word, sorted(set(range(len(self.procs))) - set(replies)), timeout_s)
            for key, _ in self.selector.select(timeout=min(left, LOST_CHECK_S)):
                self._read(key.data, word)
            if self.lost is not None and (gone := self.lost()):
                raise AgentError(f"the ssh connection to {', '.join(gone)} ended while the emulator waited "
                                 f"for {word}")
            for rank, lines in self._pending.items():
                while lines and rank not in replies:
                    line = lines.pop(0)
                    if line.startswith("ERROR"):
                        raise AgentError(line)
                    if line.startswith("STEP "):
                        self.steps_done[rank] = int(line.split()[2])
                    elif line.startswith(word):
                        replies[rank] = line
        return replies

    def _read(self, rank: int, waiting_for: str) -> None:
        """Read what agent `rank` wrote, without blocking, split into lines."""
        data = os.read(self.procs[rank].stdout.fileno(), 1 << 16)
        if not data:
            self.selector.unregister(self.procs[rank].stdout)
            raise AgentError(f"agent of rank {rank} exited (code {self.procs[rank].wait()}) "
                             f"while the emulator waited for {waiting_for}; it said: "
                             f"{' | '.join(self._pending.get(rank, []))[-500:]}")
        text = self._partial.get(rank, b"") + data
        *lines, self._partial[rank] = text.split(b"\n")
        self._pending.setdefault(rank, []).extend(l.decode(errors="replace").strip() for l in lines)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    proc.stdin.write(b"EXIT\n")
                except (BrokenPipeError, ValueError):
                    pass
        deadline = time.monotonic() + 3
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                processes.stop_pid(proc.pid)
        self.selector.close()
        for proc in self.procs:
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except (BrokenPipeError, OSError):
                    pass
