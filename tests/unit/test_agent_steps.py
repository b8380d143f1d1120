"""The host agent's bookkeeping (pure): how many transfers its thread pool
must hold at once, and how often it reports progress."""
from emulator.net import agent
from emulator.workloads.schedule import build_schedule
from emulator.workloads.steps import Step, Transfer


def test_the_pool_holds_every_transfer_of_the_largest_step_but_the_first():
    alltoall = build_schedule("all-to-all", "ring", 8, 1 << 20).steps[0]
    ring = build_schedule("allreduce", "ring", 8, 1 << 20).steps[0]
    most = max(len(s.sends) + len(s.recvs) for s in alltoall)
    assert agent.most_side_jobs({"a": alltoall, "r": ring}) == most - 1 > 1
    assert agent.most_side_jobs({"r": ring}) == 1   # one send and one receive a step


def test_channels_side_by_side_each_need_their_own():
    two = (Transfer(1, 10), Transfer(2, 10))
    steps = (Step(two, two, channel=0), Step(two, (), channel=1), Step((), (), compute_s=0.1, channel=2))
    assert agent.most_side_jobs({"p": steps}) == 3 + 1 + 0


def test_progress_is_said_at_most_every_report_interval(monkeypatch):
    now, said = [100.0], []
    monkeypatch.setattr(agent.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(agent, "say", lambda *words: said.append(words))
    report = agent.progress_reporter(3)
    for done in range(1, 11):   # ten steps 10 ms apart
        report(done)
        now[0] += 0.010
    assert said == [("STEP", 3, 1), ("STEP", 3, 6)]
