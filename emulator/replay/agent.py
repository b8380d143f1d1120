"""The host agent: one process per rank, executing the rank's steps,
received as data, over real TCP (compute as a timed wait: the emulated
hosts share the machine's cores, so real arithmetic would measure the
machine, not the network). Standard library only; runs inside the host's
network namespace. It never rebuilds a schedule from a collective's name.

It talks to the emulator over stdin/stdout, one line per message:
  agent -> emulator: LISTENING | READY | STEP <call> <steps done> | DONE <call> <json> | ERROR <text>
  emulator -> agent: CONNECT | GO <call> <start time> | EXIT
Times are time.monotonic(), one clock shared by every process of the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import select
import socket
import struct
import sys
import threading
import time

from emulator.workloads.steps import Step, steps_from_data

CHUNK = 1 << 20   # bytes per send/recv system call
CLEAR_TO_SEND = b"C"
EAGER_BYTES = 64 << 10   # sent before the peer clears us, as MPI's eager limit: keeps the pipe full
# Progress (STEP lines) at most this often: the live views sample every 100 ms, and a line
# per step wakes the emulator thousands of times a second when steps take milliseconds
REPORT_S = 0.05


def say(*words) -> None:
    print(*words, flush=True)


class Peers:
    """`connections` TCP connections per channel to every rank we send to
    and from every rank we receive from, opened once and reused by every
    step (as NCCL does). The i-th transfer to a peer within a step uses
    connection i of the step's channel: channels that run side by side
    never share a connection."""

    def __init__(self, rank: int, addresses: list[tuple[str, int]], connections: int = 1, tcp: str = ""):
        self.rank = rank
        self.addresses = addresses
        self.connections = connections
        self.tcp = tcp.encode()   # its job's congestion control ("": the host's)
        self.listener = self._socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(addresses[rank])
        self.listener.listen(len(addresses) * connections)
        self.to: dict[int, list[socket.socket]] = {}
        self.frm: dict[int, list[socket.socket]] = {}

    def connect(self, send_to: set[tuple[int, int]], recv_from: set[tuple[int, int]]) -> None:
        """send_to, recv_from: (peer, channel) pairs."""
        failed = []
        acceptor = threading.Thread(target=self._accept, args=(set(recv_from), failed))
        acceptor.start()
        for peer, channel in sorted(send_to):
            self.to[(peer, channel)] = [self._open(peer, channel, i) for i in range(self.connections)]
        acceptor.join()
        if failed:
            raise ConnectionError(f"peers {sorted(set(recv_from) - set(self.frm))} did not connect: {failed[0]}")

    def _socket(self) -> socket.socket:
        """A TCP socket with the job's congestion control (accepted ones inherit the listener's)."""
        s = socket.socket()
        if self.tcp:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.tcp)
        return s

    def _open(self, peer: int, channel: int, index: int) -> socket.socket:
        s = self._socket()
        s.settimeout(30)
        s.connect(self.addresses[peer])
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(struct.pack("!III", self.rank, channel, index))
        return s

    def _accept(self, expected: set[int], failed: list) -> None:
        self.listener.settimeout(30)
        try:
            for _ in range(len(expected) * self.connections):   # every peer opens each of its connections once
                s, _ = self.listener.accept()
                s.settimeout(None)
                peer, channel, index = struct.unpack("!III", _recv_exact(s, 12))
                self.frm.setdefault((peer, channel), [None] * self.connections)[index] = s
        except OSError as e:   # reported by connect(), in the main thread
            failed.append(e)

    def close(self) -> None:
        for s in [c for conns in list(self.to.values()) + list(self.frm.values()) for c in conns if c]:
            s.close()
        self.listener.close()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed the connection")
        got += k
    return bytes(buf)


def _connections(transfers, conns: dict, channel: int) -> list[socket.socket]:
    """The socket of every transfer: the i-th one with a peer uses connection i."""
    used: dict[int, int] = {}
    out = []
    for t in transfers:
        i = used.get(t.peer, 0)
        used[t.peer] = i + 1
        out.append(conns[(t.peer, channel)][i])
    return out


class _Send:
    """One message to a peer. Rendezvous, as MPI and NCCL do for large
    messages: the first EAGER_BYTES go at once and fill the path while the
    peer's clearance travels (as MPI sends a first fragment with its
    rendezvous request); the rest waits for the clearance. A rank that runs
    ahead thus pushes at most EAGER_BYTES into a peer still busy with an
    earlier step, where it would share links with that step. A message of
    at most EAGER_BYTES goes whole, unasked (MPI's eager protocol): waiting
    for a clearance would tie a stream of small messages to the queueing
    delay of the path, one message per round trip."""

    kind = "sent"

    def __init__(self, sock: socket.socket, nbytes: int, payload: memoryview):
        self.sock, self.left, self.payload = sock, nbytes, payload
        self.eager = min(nbytes, EAGER_BYTES)
        self.cleared = nbytes <= EAGER_BYTES

    def event(self) -> int:
        return select.POLLOUT if self.eager or self.cleared else select.POLLIN

    def advance(self) -> int:
        """Moves what the socket takes now; the bytes sent."""
        sent = 0
        while self.left:
            if not (self.eager or self.cleared):   # the clearance comes back on this connection
                try:
                    said = self.sock.recv(1, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if said != CLEAR_TO_SEND:
                    raise ConnectionError("peer closed the connection instead of clearing us to send")
                self.cleared = True
            want = min(CHUNK, self.eager or self.left)
            try:
                k = self.sock.send(self.payload[:want], socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            self.left -= k
            self.eager = max(0, self.eager - k)
            sent += k
            if k < want:   # the socket's buffer is full: wait for room rather than ask again
                break
        return sent


class _Receive:
    """One message from a peer, cleared at once if it is past the eager limit."""

    kind = "received"

    def __init__(self, sock: socket.socket, nbytes: int, scratch: memoryview):
        self.sock, self.left, self.scratch = sock, nbytes, scratch
        if nbytes > EAGER_BYTES:
            sock.sendall(CLEAR_TO_SEND)

    def event(self) -> int:
        return select.POLLIN

    def advance(self) -> int:
        """Takes what has arrived; the bytes received."""
        got = 0
        while self.left:
            want = min(len(self.scratch), self.left)
            try:
                k = self.sock.recv_into(self.scratch, want, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            if k == 0:
                raise ConnectionError("peer closed the connection mid-step")
            self.left -= k
            got += k
            if k < want:   # all that had arrived: wait for more rather than ask again
                break
        return got


def run_step(step: Step, peers: Peers, payload: memoryview, scratch: memoryview) -> dict:
    """Send and receive everything of one step at once, on this thread
    (one poll over the step's sockets: no thread hand-offs, which cost an
    agent more of the shared cores than the bytes do); returns its record."""
    start = time.monotonic()
    if step.compute_s:
        time.sleep(step.compute_s)
    counts = {"sent": 0, "received": 0}
    receives = [_Receive(sock, t.nbytes, scratch)   # made first: their clearances go out before our bytes
                for t, sock in zip(step.recvs, _connections(step.recvs, peers.frm, step.channel))]
    moving = [_Send(sock, t.nbytes, payload)
              for t, sock in zip(step.sends, _connections(step.sends, peers.to, step.channel))] + receives
    while moving:
        for t in moving:
            try:
                counts[t.kind] += t.advance()
            except OSError as e:
                raise RuntimeError(f"{t.kind}: {e}") from None
        moving = [t for t in moving if t.left]
        if moving:
            poller = select.poll()
            for t in moving:
                poller.register(t.sock, t.event())
            poller.poll()
    return {"start": start, "end": time.monotonic(), "sent": counts["sent"], "received": counts["received"]}


def run_program(steps: tuple[Step, ...], peers: Peers, payload: memoryview, scratch: memoryview,
                on_step) -> list[dict]:
    """Every step of one call: each channel's steps in order, channels side
    by side (a thread each), a step starting once the steps it waits for
    have ended. `on_step(done)` is told how many steps have ended."""
    records: list = [None] * len(steps)
    ended = [threading.Event() for _ in steps]
    errors: list[str] = []
    lock = threading.Lock()
    channels: dict[int, list[int]] = {}
    for k, step in enumerate(steps):
        channels.setdefault(step.channel, []).append(k)

    def run_channel(ks: list[int]) -> None:
        for k in ks:
            for j in steps[k].after:
                ended[j].wait()
            if errors:
                return
            try:
                records[k] = run_step(steps[k], peers, payload, scratch)
            except Exception as e:   # reported below; the other channels stop waiting
                errors.append(f"step {k}: {e}")
                for event in ended:
                    event.set()
                return
            ended[k].set()
            with lock:
                on_step(sum(r is not None for r in records))

    lanes = list(channels.values())
    threads = [threading.Thread(target=run_channel, args=(ks,)) for ks in lanes[1:]]
    for t in threads:
        t.start()
    if lanes:
        run_channel(lanes[0])
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return records


def _buffer_bytes(programs: dict, side: str) -> int:
    """A buffer for the largest message of a side ("sends", "recvs"), up to CHUNK."""
    largest = max((t.nbytes for steps in programs.values() for s in steps for t in getattr(s, side)), default=1)
    return min(CHUNK, max(largest, 1))


def progress_reporter(call: int):
    """on_step for run_program: says STEP <call> <steps done>, at most every REPORT_S."""
    said = [0.0]

    def on_step(done: int) -> None:
        now = time.monotonic()
        if now - said[0] >= REPORT_S:
            said[0] = now
            say("STEP", call, done)
    return on_step


def _commands(stream) -> queue.Queue:
    """The emulator's command lines, read on a thread of their own: when
    they end (the emulator exited, was killed, or its ssh to this server
    dropped), the agent ends at once, even mid-call, blocked on peers that
    may never answer: nothing else would stop it (a process started
    through sudo, as on a server, is not the one the emulator can signal)."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        os._exit(0)

    threading.Thread(target=read, daemon=True).start()
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="bigraph-emu host agent (started by the emulator)")
    p.add_argument("--plan", required=True, help="JSON: the ranks' addresses and this rank's steps of every call; "
                                                 "'-': its first line on stdin (an agent on another server)")
    args = p.parse_args(argv)
    if args.plan == "-":
        plan = json.loads(sys.stdin.readline())
    else:
        with open(args.plan) as f:
            plan = json.load(f)
    rank = plan["rank"]
    addresses = [tuple(a) for a in plan["addresses"]]
    programs = {key: steps_from_data(steps) for key, steps in plan["programs"].items()}
    calls = [programs[key] for key in plan["calls"]]
    send_to = {(t.peer, s.channel) for steps in programs.values() for s in steps for t in s.sends}
    recv_from = {(t.peer, s.channel) for steps in programs.values() for s in steps for t in s.recvs}
    payload = memoryview(bytes(_buffer_bytes(programs, "sends")))
    scratch = memoryview(bytearray(_buffer_bytes(programs, "recvs")))   # what arrives is counted, not kept
    peers = Peers(rank, addresses, plan.get("connections", 1), plan.get("tcp", ""))
    commands = _commands(sys.stdin)
    try:
        say("LISTENING")
        while True:
            cmd = commands.get().split()
            if cmd[0] == "CONNECT":
                peers.connect(send_to, recv_from)
                say("READY")
            elif cmd[0] == "GO":
                call, start_at = int(cmd[1]), float(cmd[2])
                time.sleep(max(0.0, start_at - time.monotonic()))
                steps = run_program(calls[call], peers, payload, scratch, progress_reporter(call))
                say("DONE", call, json.dumps(steps))
            elif cmd[0] == "EXIT":
                return 0
    except Exception as e:
        say("ERROR", f"rank {rank}: {type(e).__name__}: {e}")
        return 1
    finally:
        peers.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
