"""The host agent's steps over real TCP on the loopback (no namespaces, no
switches): what a step moves, the rendezvous, failures, and how often it
reports progress."""
import socket
import threading
import time
from types import SimpleNamespace

import pytest

from emulator.replay import agent
from emulator.workloads.steps import Step, Transfer


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        a = socket.create_connection(listener.getsockname())
        b, _ = listener.accept()
    return a, b


def _ranks(n: int):
    """n ranks' Peers (one connection each way between every two, channel 0)."""
    peers = [SimpleNamespace(to={}, frm={}) for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j:
                out, into = _tcp_pair()
                peers[i].to[(j, 0)], peers[j].frm[(i, 0)] = [out], [into]
    return peers


def _buffers(nbytes: int):
    return memoryview(bytes(min(agent.CHUNK, nbytes))), memoryview(bytearray(min(agent.CHUNK, nbytes)))


def _run_all(steps: list[Step], peers) -> list[dict]:
    records, errors = [None] * len(steps), []

    def run(r):
        try:
            records[r] = agent.run_step(steps[r], peers[r], *_buffers(1 << 20))
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(steps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and all(records), errors
    return records


def test_two_ranks_exchange_more_than_their_socket_buffers_hold_at_once():
    size = 16 << 20   # past the eager limit and any socket buffer: a blocking send each way would deadlock
    peers = _ranks(2)
    steps = [Step((Transfer(1, size),), (Transfer(1, size),)), Step((Transfer(0, size),), (Transfer(0, size),))]
    for record in _run_all(steps, peers):
        assert record["sent"] == record["received"] == size
        assert record["end"] >= record["start"]


def test_every_peer_of_an_all_to_all_step_gets_exactly_its_bytes():
    n, each = 5, 300_000
    peers = _ranks(n)
    steps = [Step(tuple(Transfer(j, each + j) for j in range(n) if j != r),
                  tuple(Transfer(j, each + r) for j in range(n) if j != r)) for r in range(n)]
    for r, record in enumerate(_run_all(steps, peers)):
        assert record["sent"] == sum(each + j for j in range(n) if j != r)
        assert record["received"] == (n - 1) * (each + r)


def test_a_rank_ahead_sends_only_the_eager_bytes_until_its_peer_clears_it():
    size = 4 << 20
    peers = _ranks(2)
    sender = threading.Thread(target=agent.run_step, args=(Step((Transfer(1, size),)), peers[0], *_buffers(size)))
    sender.start()
    time.sleep(0.3)   # the peer is still busy elsewhere: nothing clears the sender
    into = peers[1].frm[(0, 0)][0]
    early = 0
    while True:
        try:
            early += len(into.recv(1 << 20, socket.MSG_DONTWAIT))
        except BlockingIOError:
            break
    assert early == agent.EAGER_BYTES
    record = agent.run_step(Step((), (Transfer(0, size - early),)), peers[1], *_buffers(size))
    sender.join(timeout=30)
    assert not sender.is_alive() and record["received"] == size - early


def test_a_message_within_the_eager_limit_goes_whole_unasked():
    peers = _ranks(2)
    record = agent.run_step(Step((Transfer(1, agent.EAGER_BYTES),)), peers[0], *_buffers(agent.EAGER_BYTES))
    assert record["sent"] == agent.EAGER_BYTES   # ended without the peer running a step


def test_a_peer_closing_mid_step_fails_the_step_naming_the_side():
    peers = _ranks(2)
    peers[0].to[(1, 0)][0].sendall(bytes(1000))
    peers[0].to[(1, 0)][0].close()
    with pytest.raises(RuntimeError, match="received: peer closed the connection mid-step"):
        agent.run_step(Step((), (Transfer(0, 5000),)), peers[1], *_buffers(5000))


def test_progress_is_said_at_most_every_report_interval(monkeypatch):
    now, said = [100.0], []
    monkeypatch.setattr(agent.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(agent, "say", lambda *words: said.append(words))
    report = agent.progress_reporter(3)
    for done in range(1, 11):   # ten steps 10 ms apart
        report(done)
        now[0] += 0.010
    assert said == [("STEP", 3, 1), ("STEP", 3, 6)]
