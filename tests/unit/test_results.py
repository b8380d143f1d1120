"""Unit tests of agent records -> tables (emulator/results/calls.py) and of the
analysis of a results folder (emulator/results/report.py), on synthetic runs."""
from __future__ import annotations

import csv
import dataclasses
import statistics

import pytest

from emulator.records.metrics import algbw_mbps, busbw_mbps
from emulator.plan.run_plan import plan_run
from emulator.results.report import LINK_LOAD_COLUMNS, format_summary, link_load_rows, plot, summary
from emulator.results.calls import CallRecord, COLLECTIVE_COLUMNS, STEP_COLUMNS, append_csv, bytes_ok, call_time, collective_rows, step_rows
from emulator.results.verdict import fidelity
from emulator.spec.experiment import make_run

K = 1 << 10



COUNTERS = {"cpu_busy": 0.5, "ovs_cpu": 0.3, "queue_drops": 0, "most_drops_port": "", "tcp_retrans": 0}


def wrap(records_by_call):
    """Agent records as Emulation.replay returns them, with quiet counters."""
    return [CallRecord(r, dict(COUNTERS)) for r in records_by_call]


def fake_records(plan, call, time_s: float) -> list[list[dict]]:
    """Records that match the schedule byte for byte; the last rank ends at
    exactly `time_s`, every other rank earlier."""
    sched = plan.schedules[call.size_bytes]
    out = []
    for rank, steps in enumerate(sched.steps):
        finish = time_s * (rank + 1) / plan.ranks
        dt = finish / len(steps)
        out.append([{"start": k * dt, "end": (k + 1) * dt if k < len(steps) - 1 else finish,
                     "sent": sum(t.nbytes for t in step.sends),
                     "received": sum(t.nbytes for t in step.recvs)}
                    for k, step in enumerate(steps)])
    return out


def call_times(plan):
    """A distinct time per call: 0.1 s * (call index + 1)."""
    return [0.1 * (c.index + 1) for c in plan.calls]


@pytest.fixture(scope="module")
def plan():
    return plan_run(make_run({"sizes": ["8K", "16K"], "repetitions": 2, "warmup": 1, "label": "unit"}))


@pytest.fixture(scope="module")
def records(plan):
    return [fake_records(plan, c, t) for c, t in zip(plan.calls, call_times(plan))]


# --- the plan the records are fabricated against ------------------------------------------

def test_plan_has_warmup_and_counted_calls(plan):
    assert plan.ranks == 8
    assert [(c.size_bytes, c.repetition) for c in plan.calls] == [
        (8 * K, -1), (8 * K, 0), (8 * K, 1), (16 * K, -1), (16 * K, 0), (16 * K, 1)]
    assert [c.index for c in plan.calls] == list(range(6))


# --- collective_rows ---------------------------------------------------------------------

def test_call_time_is_max_end(plan, records):
    assert call_time(records[1]) == pytest.approx(0.2)
    assert call_time([[{"end": 0.3}], [{"end": 0.1}, {"end": 0.7}], []]) == 0.7
    assert call_time([]) == 0.0


def test_collective_rows_values(plan, records):
    rows = collective_rows(plan, wrap(records), "user")
    counted = [c for c in plan.calls if c.repetition >= 0]
    assert len(rows) == len(counted) == 4
    times = call_times(plan)
    for row, call in zip(rows, counted):
        t = times[call.index]
        model = plan.predictions[call.size_bytes].time_s
        assert row["size_bytes"] == call.size_bytes and row["repetition"] == call.repetition
        assert row["time_s"] == pytest.approx(t)
        assert row["algbw_mbps"] == pytest.approx(call.size_bytes * 8 / t / 1e6)
        assert row["busbw_mbps"] == pytest.approx(row["algbw_mbps"] * 1.75)    # allreduce, 8 ranks
        assert row["model_time_s"] == model and model > 0
        assert row["time_over_model"] == pytest.approx(t / model)
        assert row["bytes_ok"] is True
        assert (row["topology"], row["policy"], row["collective"], row["algorithm"], row["mapping"]) == \
            ("bigraph:m=2,n=4", "shortest", "allreduce", "ring", "naive")
        assert row["ranks"] == 8 and row["datapath"] == "user" and row["label"] == "unit"
        assert row["host_rate_mbps"] == 50.0 and row["mtu"] == 9000
        assert list(row) == COLLECTIVE_COLUMNS


def test_collective_rows_skip_warmup(plan, records):
    rows = collective_rows(plan, wrap(records), "kernel")
    assert all(r["repetition"] >= 0 for r in rows)
    # the warm-up calls (0 and 3) had times 0.1 and 0.4: none of the rows has them
    assert sorted(round(r["time_s"], 9) for r in rows) == [0.2, 0.3, 0.5, 0.6]


def test_wrong_byte_count_makes_bytes_ok_false(plan, records):
    bad = [[[dict(s) for s in rank] for rank in call] for call in records]
    bad[1][3][2]["received"] += 1          # call 1, rank 3, step 2: one byte too many
    rows = collective_rows(plan, wrap(bad), "user")
    assert [r["bytes_ok"] for r in rows] == [False, True, True, True]


def test_bytes_ok_checks_sent_and_step_count(plan, records):
    call = plan.calls[1]
    good = records[1]
    assert bytes_ok(plan, call.size_bytes, good)
    sent = [[dict(s) for s in rank] for rank in good]
    sent[0][0]["sent"] -= 1
    assert not bytes_ok(plan, call.size_bytes, sent)
    short = [list(rank) for rank in good]
    short[5] = short[5][:-1]               # rank 5 lost its last step
    assert not bytes_ok(plan, call.size_bytes, short)
    # records of a 16K call checked against the 8K schedule do not match
    assert not bytes_ok(plan, 8 * K, records[4])


def test_bytes_ok_missing_rank_is_false(plan, records):
    assert not bytes_ok(plan, plan.calls[1].size_bytes, records[1][:-1])


# --- step_rows ---------------------------------------------------------------------------

def test_step_rows(plan, records):
    rows = step_rows(plan, wrap(records))
    steps = len(plan.schedules[8 * K].steps[0])
    assert steps == 14                                  # ring allreduce, 8 ranks: 2 * 7
    counted = sum(1 for c in plan.calls if c.repetition >= 0)
    assert len(rows) == counted * plan.ranks * steps
    assert all(r["repetition"] >= 0 for r in rows)
    assert all(list(r) == STEP_COLUMNS for r in rows)
    r = next(r for r in rows if r["size_bytes"] == 16 * K and r["repetition"] == 1
             and r["rank"] == 2 and r["step"] == 9)
    rec = records[5][2][9]
    assert (r["start_s"], r["end_s"], r["bytes_sent"], r["bytes_received"]) == \
        (rec["start"], rec["end"], rec["sent"], rec["received"])
    assert r["host"] == plan.hosts[2]
    assert r["phase"] == "allgather"
    assert r["model_end_s"] == plan.predictions[16 * K].step_end_s[2][9]


# --- append_csv --------------------------------------------------------------------------

def test_append_csv_header_once(tmp_path, plan, records):
    path = str(tmp_path / "collectives.csv")
    rows = collective_rows(plan, wrap(records), "user")
    append_csv(path, COLLECTIVE_COLUMNS, rows[:1])
    append_csv(path, COLLECTIVE_COLUMNS, rows[1:])
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0] == ",".join(COLLECTIVE_COLUMNS)
    assert sum(1 for line in lines if line.startswith("run,topology,")) == 1
    assert len(lines) == 1 + len(rows)
    with open(path) as f:
        back = list(csv.DictReader(f))
    assert [int(r["size_bytes"]) for r in back] == [r["size_bytes"] for r in rows]
    assert [float(r["time_s"]) for r in back] == pytest.approx([r["time_s"] for r in rows])
    assert all(r["bytes_ok"] == "True" for r in back)


def test_append_csv_empty_rows_writes_header(tmp_path):
    path = str(tmp_path / "steps.csv")
    append_csv(path, STEP_COLUMNS, [])
    append_csv(path, STEP_COLUMNS, [])
    with open(path) as f:
        assert f.read().splitlines() == [",".join(STEP_COLUMNS)]


# --- report: summary, format_summary, plot ----------------------------------------------

@pytest.fixture(scope="module")
def collectives_csv(tmp_path_factory, plan, records):
    path = str(tmp_path_factory.mktemp("run") / "collectives.csv")
    rows = collective_rows(plan, wrap(records), "user")
    append_csv(path, COLLECTIVE_COLUMNS, rows[:2])
    append_csv(path, COLLECTIVE_COLUMNS, rows[2:])
    return path, rows


def test_summary_medians_per_size(plan, collectives_csv):
    path, rows = collectives_csv
    s = summary(path)
    assert list(s.size_bytes) == [8 * K, 16 * K]
    for size in (8 * K, 16 * K):
        got = s[s.size_bytes == size].iloc[0]
        mine = [r for r in rows if r["size_bytes"] == size]
        t = statistics.median(r["time_s"] for r in mine)
        model = plan.predictions[size].time_s
        assert got.time_s == pytest.approx(t)
        # busbw of the median time, as the printed table reports it
        assert got.busbw_mbps == pytest.approx(busbw_mbps("allreduce", 8, size, t))
        assert got.model_time_s == pytest.approx(model)
        assert got.rate_mbps == 50.0
        assert bool(got.bytes_ok) is True
        assert got.meas_over_model == pytest.approx(t / model)
        assert got.ranks == 8 and got.collective == "allreduce"


def test_summary_model_busbw_with_one_repetition(tmp_path):
    p = plan_run(make_run({"sizes": "8K", "repetitions": 1, "warmup": 0}))
    path = str(tmp_path / "collectives.csv")
    append_csv(path, COLLECTIVE_COLUMNS, collective_rows(p, wrap([fake_records(p, c, 0.1) for c in p.calls]), "user"))
    got = summary(path).iloc[0]
    model = p.predictions[8 * K].time_s
    assert got.model_busbw_mbps == pytest.approx(busbw_mbps("allreduce", 8, 8 * K, model), rel=1e-9)


def test_summary_model_busbw_is_the_models_busbw(plan, collectives_csv):
    path, _ = collectives_csv
    s = summary(path)
    for size in (8 * K, 16 * K):
        got = s[s.size_bytes == size].iloc[0]
        model = plan.predictions[size].time_s
        assert got.model_busbw_mbps == pytest.approx(busbw_mbps("allreduce", 8, size, model), rel=1e-6)


def test_summary_bytes_ok_false_if_any_call_wrong(tmp_path, plan, records):
    bad = [[[dict(s) for s in rank] for rank in call] for call in records]
    bad[2][0][0]["sent"] = 0
    path = str(tmp_path / "collectives.csv")
    append_csv(path, COLLECTIVE_COLUMNS, collective_rows(plan, wrap(bad), "user"))
    s = summary(path)
    assert [bool(x) for x in s.bytes_ok] == [False, True]


def test_format_summary(collectives_csv):
    path, _ = collectives_csv
    s = summary(path)
    text = format_summary(s)
    lines = text.splitlines()
    assert len(lines) == 2 + len(s)
    for col in ("topology", "policy", "algorithm", "mapping", "size", "time", "busbw", "model", "meas/model"):
        assert col in lines[0]
    for name, unit in (("size", "(B)"), ("time", "(ms)"), ("busbw", "(Mb/s)"), ("model", "(Mb/s)")):
        end = lines[0].index(f" {name} ") + len(name) + 1
        assert lines[1][:end].endswith(unit), (name, unit)   # right under its name
    for line, r in zip(lines[2:], s.itertuples()):
        fields = line.split()
        assert fields[:5] == ["bigraph:m=2,n=4", "shortest", "ring", "naive", str(r.size_bytes)]
        assert fields[5] == f"{r.time_s * 1e3:.1f}"
        assert fields[6] == f"{r.busbw_mbps:.2f}"
        assert fields[7] == f"{r.model_busbw_mbps:.2f}"
        assert fields[8] == f"{r.meas_over_model:.2f}"


def test_plot_writes_png(tmp_path, collectives_csv):
    path, _ = collectives_csv
    out = tmp_path / "busbw.png"
    plot(summary(path), str(out))
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 1000


def test_summary_keeps_runs_with_different_rates_apart(tmp_path):
    path = str(tmp_path / "collectives.csv")
    for rate in (10, 20):
        p = plan_run(make_run({"sizes": "8K", "repetitions": 1, "warmup": 0, "host_rate_mbps": rate,
                               "switch_rate_mbps": rate}))
        append_csv(path, COLLECTIVE_COLUMNS,
                   collective_rows(p, wrap([fake_records(p, c, 0.1) for c in p.calls]), "user"))
    assert len(summary(path)) == 2


# --- report: link loads -------------------------------------------------------------------

@pytest.fixture(scope="module")
def hd_plans():
    base = {"topology": "bigraph:m=4,n=8", "algorithm": "halving-doubling", "sizes": "64K"}
    return {m: plan_run(make_run({**base, "mapping": m})) for m in ("hdrm", "naive")}


def test_link_loads_hdrm_one_flow_per_link(hd_plans):
    rows = link_load_rows(hd_plans["hdrm"])
    assert len(rows) == 10                      # 32 ranks: 5 halving + 5 doubling steps
    assert [r["step"] for r in rows] == list(range(10))
    assert all(r["max_flows_per_link"] == 1 for r in rows)
    assert all(r["links_with_2plus_flows"] == 0 for r in rows)
    assert [r["phase"] for r in rows] == ["reduce-scatter"] * 5 + ["allgather"] * 5
    assert all(list(r) == LINK_LOAD_COLUMNS for r in rows)
    assert all(r["mapping"] == "hdrm" and r["topology"] == "bigraph:m=4,n=8" for r in rows)


def test_link_loads_naive_collides(hd_plans):
    rows = link_load_rows(hd_plans["naive"])
    assert len(rows) == 10
    assert max(r["max_flows_per_link"] for r in rows) > 1
    busy = [r for r in rows if r["max_flows_per_link"] > 1]
    assert all(r["links_with_2plus_flows"] >= 1 for r in busy)
    # the busiest link is a node:port of the fabric
    fabric = hd_plans["naive"].fabric
    for r in rows:
        node, port = r["busiest_link"].rsplit(":", 1)
        assert int(port) in fabric.ports(node) or (not fabric.is_switch(node) and int(port) == 0)


def test_link_loads_agree_with_model_max_flows(hd_plans):
    for p in hd_plans.values():
        rows = link_load_rows(p)
        pred = p.predictions[max(p.predictions)]
        assert [r["max_flows_per_link"] for r in rows] == pred.max_flows_per_step


def test_algbw_in_rows_uses_metrics(plan, records):
    row = collective_rows(plan, wrap(records), "user")[0]
    assert row["algbw_mbps"] == algbw_mbps(row["size_bytes"], row["time_s"])


# --- fidelity verdict ------------------------------------------------------------------

def test_fidelity_passes_a_faithful_call_and_names_every_reason_to_doubt_one():
    quiet = {"cpu_busy": 0.5, "ovs_cpu": 0.4, "queue_drops": 0, "tcp_retrans": 0, "saturated_util": 0.98}
    assert fidelity(1.10, quiet) == "ok"
    assert fidelity(0.90, {**quiet, "saturated_util": None}) == "ok"   # no saturated link to judge
    assert fidelity(0.80, quiet) == "FAIL: 0.80x the model"
    assert fidelity(1.30, quiet) == "FAIL: 1.30x the model"
    assert fidelity(1.30, {**quiet, "ovs_cpu": 0.95}) == "FAIL: 1.30x the model (switches CPU-bound)"
    # where its wait for a core was read: on a core or waiting for one, and the verdict says which
    assert fidelity(1.30, {**quiet, "ovs_cpu": 0.36, "ovs_wait": 0.55}) == (
        "FAIL: 1.30x the model (switches CPU-bound: Open vSwitch ran 36% of the call and waited for a core 55%)")
    assert fidelity(1.30, {**quiet, "ovs_cpu": 0.36, "ovs_wait": 0.2}) == "FAIL: 1.30x the model"
    # a hypervisor's steal: the machine's cores were not all its own
    assert fidelity(1.30, {**quiet, "cpu_stolen": 0.12}) == "FAIL: 1.30x the model (a hypervisor took 12% of the cores)"
    assert fidelity(1.30, {**quiet, "cpu_stolen": 0.02}) == "FAIL: 1.30x the model"
    from emulator.results.verdict import machine_failed
    assert machine_failed(fidelity(1.30, {**quiet, "cpu_stolen": 0.12}))
    assert not machine_failed(fidelity(1.30, quiet))
    assert fidelity(1.0, {**quiet, "cpu_busy": 0.97, "cpu_stolen": 0.3}) == (
        "FAIL: machine busy (CPU idle 3%; a hypervisor took 30% of the cores)")
    assert fidelity(1.30, {**quiet, "tcp_retrans": 3}) == (
        "FAIL: 1.30x the model (retransmissions without a queue drop: reordering, or losses outside the queues)")
    assert fidelity(1.30, {**quiet, "tcp_retrans": 3, "queue_drops": 2}) == "FAIL: 1.30x the model (packet losses)"
    assert fidelity(1.0, {**quiet, "cpu_busy": 0.97}) == "FAIL: machine busy (CPU idle 3%)"
    assert fidelity(1.0, {**quiet, "saturated_util": 0.7}) == "FAIL: saturated links ran at 70% of their rate"
    assert fidelity(1.5, {**quiet, "cpu_busy": 0.95, "saturated_util": 0.8}) == (
        "FAIL: machine busy (CPU idle 5%); saturated links ran at 80% of their rate; 1.50x the model")


def test_a_latency_bound_call_says_so_whichever_way_it_missed_the_model():
    quiet = {"cpu_busy": 0.2, "ovs_cpu": 0.2, "queue_drops": 0, "tcp_retrans": 0}
    bound = ("latency-bound: 71% of the model's time is per-message latency and least step times, which this "
             "machine's hosts and switches set, not the links' rates")
    assert fidelity(0.50, quiet, latency_share=0.71) == f"FAIL: 0.50x the model ({bound})"
    assert fidelity(1.30, {**quiet, "cpu_stolen": 0.1}, latency_share=0.71) == (
        f"FAIL: 1.30x the model ({bound}, a hypervisor took 10% of the cores)")
    assert fidelity(1.30, quiet, latency_share=0.49) == "FAIL: 1.30x the model"      # mostly the links' bytes
    assert fidelity(1.05, quiet, latency_share=0.9) == "ok"                          # named only where it missed
    from emulator.results.verdict import machine_failed
    assert not machine_failed(fidelity(0.50, quiet, latency_share=0.71))             # the model's, not the machine's


def _bound(tcp: str = "bbr", mtu: int = 1500, queue: int = 100, drain: bool = False):
    """The reference machine's TCP-sharing factors for a setting (bbr, MTU 1500: 1.05x for 4 flows, 1.16x for 15);
    without `drain`, no time for a queue's drain (the sharing and timeouts' arithmetic alone)."""
    from emulator.plan import capacity
    bound = capacity.network_bound(make_run({"tcp": tcp, "mtu": mtu, "host_queue_packets": queue,
                                             "switch_queue_packets": queue}), capacity.REFERENCE)
    return bound if drain else dataclasses.replace(bound, drain_s=0.0)


LOSSY = {"cpu_busy": 0.2, "ovs_cpu": 0.2, "queue_drops": 120, "tcp_retrans": 150, "tcp_spurious": 10,
         "saturated_util": 0.97}


def test_a_call_slower_than_max_min_for_the_networks_own_reasons_is_trusted_as_far_as_measured_and_says_why():
    from emulator.results.verdict import NETWORK, trusted
    # 4 flows with bbr: sharing explains 1.05x * 1.15 = 1.20x of max-min, each timeout counted 0.2 s more
    verdict = fidelity(1.4, {**LOSSY, "tcp_timeouts": 2}, 4, model_s=1.0, bound=_bound())
    assert verdict == (
        f"{NETWORK}1.40x max-min sharing: TCP recovered from 120 queue drops with up to 4 flows on a link "
        "(2 retransmission timeouts, each at least 0.2 s; 0.40 s beyond the model); the machine kept up; within "
        "what was measured: sharing explains 1.20x (1.05x for 4 flows, bbr MTU 1500 100-packet queue) and 2 "
        "timeouts 0.4 s")
    assert trusted(verdict) and trusted("ok") and not trusted("FAIL: 1.30x the model")
    # against TCP's measured sharing, a wait long enough for a retransmission timeout, but none counted
    assert fidelity(1.16, LOSSY, 4, "measured TCP sharing", model_s=2.0, bound=_bound()) == (
        f"{NETWORK}1.16x measured TCP sharing: TCP recovered from 120 queue drops with up to 4 flows on a link "
        "(0.32 s beyond the model: a retransmission timeout takes at least 0.2 s); the machine kept up; within what "
        "was measured: sharing explains 1.20x (1.05x for 4 flows, bbr MTU 1500 100-packet queue) and no timeouts "
        "counted")
    assert "(1 retransmission timeout, each" in fidelity(1.16, {**LOSSY, "tcp_timeouts": 1}, 4, model_s=1.0,
                                                         bound=_bound())
    assert "timeout" not in fidelity(1.16, {**LOSSY, "tcp_timeouts": 0}, 4, model_s=1.0,
                                     bound=_bound()).split("; within")[0]
    # an artefact, not the network: every one of these fails
    lossy = {**LOSSY, "tcp_timeouts": 2}
    assert fidelity(1.4, lossy, model_s=1.0).startswith("FAIL: 1.40x the model")              # no link shared
    assert fidelity(1.4, lossy, 4).startswith("FAIL: 1.40x the model")                        # no model to hold it to
    assert fidelity(1.4, {**lossy, "queue_drops": 0}, 4, model_s=1.0).startswith("FAIL")      # losses in no queue
    assert fidelity(1.4, {**lossy, "ovs_cpu": 0.9}, 4, model_s=1.0).startswith("FAIL")        # switches CPU-bound
    assert fidelity(1.4, {**lossy, "ovs_wait": 0.7}, 4, model_s=1.0).startswith("FAIL")       # ... waiting for a core
    assert fidelity(1.4, {**lossy, "ovs_wait": 0.1}, 4, model_s=1.0).startswith(NETWORK)
    assert fidelity(1.4, {**lossy, "cpu_stolen": 0.2}, 4, model_s=1.0).startswith(NETWORK)    # steal named, not judged
    jumpy = {**lossy, "tcp_spurious": 100, "cpu_busy": 0.7}
    assert fidelity(1.4, jumpy, 4, model_s=1.0).startswith("FAIL")                           # RTT jumps, not losses
    assert fidelity(1.4, {**jumpy, "cpu_busy": 0.5}, 4, model_s=1.0).startswith(NETWORK)     # ... quiet: the queues'
    assert fidelity(1.4, {**lossy, "cpu_busy": 0.95}, 4, model_s=1.0).startswith("FAIL")      # machine busy
    assert fidelity(1.4, {**lossy, "saturated_util": 0.7}, 4, model_s=1.0).startswith("FAIL") # links below their rate
    assert fidelity(0.5, lossy, 4, model_s=1.0).startswith("FAIL")                            # faster than the model


def test_a_loss_at_a_calls_tail_and_each_timeout_wait_behind_a_full_queue():
    """A full queue's drain (packets x MTU at the link's rate) once for a call whose queues dropped, and on top of
    each timeout's 0.2 s (Linux's RTO is the RTT, which the full queue stretches, plus at least 0.2 s)."""
    from emulator.results.verdict import NETWORK
    bound = _bound(mtu=9000, drain=True)   # 100 packets of 9000 B at the default 50 Mbit/s: 0.144 s
    assert bound.drain_s == pytest.approx(0.144)
    # 4 flows with bbr at MTU 9000: sharing 1.00x, 1.15x with the tolerance, and the drain 0.144 s: 1.294 s of a
    # 1 s model
    lossy = {**LOSSY, "tcp_timeouts": 0}
    within = fidelity(1.29, lossy, 4, model_s=1.0, bound=bound)
    assert within.startswith(NETWORK) and within.endswith("a loss recovered behind a full queue 0.14 s and 0 timeouts 0.0 s")
    assert fidelity(1.30, lossy, 4, model_s=1.0, bound=bound).startswith(f"FAIL: {NETWORK}1.30x")
    # a timeout: 0.2 s and the drain again, 1.638 s
    assert fidelity(1.63, {**LOSSY, "tcp_timeouts": 1}, 4, model_s=1.0, bound=bound).startswith(NETWORK)
    assert fidelity(1.65, {**LOSSY, "tcp_timeouts": 1}, 4, model_s=1.0, bound=bound).startswith("FAIL")
    # no drop: no loss to recover, the drain explains nothing
    even = {**lossy, "queue_drops": 0, "tcp_retrans": 0, "tcp_spurious": 0, "saturated_util": 0.98}
    assert fidelity(1.2, even, 4, model_s=1.0, bound=bound).startswith(f"FAIL: {NETWORK}1.20x")


def test_a_network_call_beyond_what_sharing_and_timeouts_explain_fails_naming_the_seconds_unexplained():
    from emulator.results.verdict import NETWORK, machine_failed, trusted
    # 15 flows: 1.16x with bbr, 1.34x with the tolerance; two timeouts 0.4 s; 3.60x of a 1 s model leaves 1.86 s
    verdict = fidelity(3.6, {**LOSSY, "tcp_timeouts": 2}, 15, model_s=1.0, bound=_bound())
    assert verdict == (
        f"FAIL: {NETWORK}3.60x, sharing explains 1.34x (1.16x for 15 flows, bbr MTU 1500 100-packet queue) and 2 "
        "timeouts 0.4 s: 1.86 s unexplained (3.60x max-min sharing: TCP recovered from 120 queue drops with up to "
        "15 flows on a link (2 retransmission timeouts, each at least 0.2 s; 2.60 s beyond the model); the machine "
        "kept up)")
    assert not trusted(verdict) and not machine_failed(verdict)
    # just inside and just beyond: 4 flows, sharing alone explains 1.046 * 1.15 = 1.2029x
    assert fidelity(1.20, LOSSY, 4, model_s=1.0, bound=_bound()).startswith(NETWORK)
    beyond = fidelity(1.21, LOSSY, 4, model_s=1.0, bound=_bound())
    assert beyond.startswith(f"FAIL: {NETWORK}1.21x, sharing explains 1.20x") and ": 0.0071 s unexplained (" in beyond
    # the timeouts counted explain the rest: 1.40 s needs one of 0.2 s beside sharing's 1.2029 s
    assert fidelity(1.4, {**LOSSY, "tcp_timeouts": 0}, 4, model_s=1.0, bound=_bound()).startswith("FAIL")
    assert fidelity(1.4, {**LOSSY, "tcp_timeouts": 1}, 4, model_s=1.0, bound=_bound()).startswith(NETWORK)
    assert fidelity(1.4, {**LOSSY, "tcp_timeouts": ""}, 4, model_s=1.0, bound=_bound()).startswith("FAIL")  # none counted
    # the bound is over max-min's time, whatever the call is compared with: a 1.1 s stretched model of 1 s max-min
    stretched = fidelity(1.3, LOSSY, 4, "measured TCP sharing", model_s=1.1, max_min_s=1.0, bound=_bound())
    assert stretched.startswith("FAIL") and "sharing explains 1.09x" in stretched and "0.227 s unexplained" in stretched
    # no calibration: a factor of 1, said with how to measure one
    assert "(no TCP-sharing calibration, 1.00x (`bigraph-emu calibrate --tcp-sharing`))" in fidelity(1.4, LOSSY, 4,
                                                                                                     model_s=1.0)


def test_the_bound_stands_on_the_runs_calibrated_setting_or_names_the_nearest():
    from emulator.plan import capacity
    from emulator.results.verdict import held_to_bound
    assert _bound().stands_in == "" and _bound().factor(4) == pytest.approx(1.046)
    assert _bound("cubic", 9000, 100).factor(4) == 1.0          # 0.999 measured: never below max-min
    assert _bound().factor(1) == 1.0                            # one flow: what max-min gets right
    near = _bound("bbr", 9000, 20)                              # bbr was measured at MTU 9000 with 100 packets only
    assert near.sharing.points[0].setting() == ("bbr", 9000, 100)
    assert near.describe(4) == ("1.00x for 4 flows, bbr MTU 9000 100-packet queue: the nearest calibrated point to "
                                "this run's bbr MTU 9000 20-packet queue (`bigraph-emu calibrate --tcp-sharing "
                                "2,4,8,16 --tcp bbr --mtu 9000 --queue 20`)")
    assert "the nearest calibrated point" in fidelity(1.4, {**LOSSY, "tcp_timeouts": 3}, 4, model_s=1.0, bound=near)
    assert _bound("cubic", 1500, 20).sharing.points[0].setting() == ("cubic", 1500, 100)   # the MTU before the queue
    # this machine's own measurement of a setting goes before the reference's
    from emulator.model.sharing import SharingPoint
    mine = capacity.Calibration("here", "2026-12-07", [], "/tmp/c.json",
                                [SharingPoint("bbr", 1500, 100, 4, 1.3, 10.0, 50.0)])
    spec = make_run({"tcp": "bbr", "mtu": 1500})
    assert capacity.network_bound(spec, mine).factor(4) == 1.3
    # held once: a verdict already held to the bound is left as it is
    held = fidelity(1.4, {**LOSSY, "tcp_timeouts": 2}, 4, model_s=1.0, bound=_bound())
    assert held_to_bound(held, 1.4, 1.0, 1.0, 4, 2, 120, _bound()) == held


def test_a_congested_call_slowed_by_uneven_shares_without_a_loss_is_the_networks_as_far_as_sharing_explains():
    from emulator.results.verdict import NETWORK
    even = {"cpu_busy": 0.32, "ovs_cpu": 0.46, "queue_drops": 0, "tcp_retrans": 0, "tcp_spurious": 0,
            "saturated_util": 0.998}   # a demo call: 4 flows on a link, links at their rate, 1.15x
    assert fidelity(1.16, even, 4, "measured TCP sharing", model_s=1.0, bound=_bound()) == (
        f"{NETWORK}1.16x measured TCP sharing: TCP shared the links unevenly, up to 4 flows on a link without a "
        "queue drop, the saturated links at 100% of their rate; the machine kept up; within what was measured: "
        "sharing explains 1.20x (1.05x for 4 flows, bbr MTU 1500 100-packet queue) and no timeouts counted")
    uneven = fidelity(1.5, even, 4, model_s=1.0, bound=_bound())                      # no longer unbounded
    assert uneven.startswith(f"FAIL: {NETWORK}1.50x, sharing explains 1.20x") and "0.297 s unexplained" in uneven
    assert fidelity(1.16, even, 1, model_s=1.0).startswith("FAIL")                     # nothing shared a link
    assert fidelity(1.16, {**even, "saturated_util": None}, 4, model_s=1.0).startswith("FAIL")   # no link measured busy
    assert fidelity(1.16, {**even, "saturated_util": 0.8}, 4, model_s=1.0).startswith("FAIL")    # links below their rate
    assert fidelity(1.16, {**even, "tcp_retrans": 3}, 4, model_s=1.0).startswith("FAIL")         # lost, in no queue
    # probes that were not needed (two jobs' rings with bbr: 10-13 a run), on a quiet machine and not
    probed = {**even, "tcp_retrans": 10, "tcp_spurious": 10}
    assert fidelity(1.2, probed, 4, model_s=1.0, bound=_bound()) == (
        f"{NETWORK}1.20x max-min sharing: TCP shared the links unevenly, up to 4 flows on a link without a queue "
        "drop, 10 spurious retransmissions as queues filled, the saturated links at 100% of their rate; the machine "
        "kept up; within what was measured: sharing explains 1.20x (1.05x for 4 flows, bbr MTU 1500 100-packet "
        "queue) and no timeouts counted")
    assert fidelity(1.2, {**probed, "cpu_busy": 0.6}, 4, model_s=1.0).endswith(
        "(spurious retransmissions: RTT jumps or reordering)")
    assert fidelity(1.2, {**probed, "tcp_retrans": 11}, 4, model_s=1.0).startswith("FAIL")   # a loss in no queue
    assert fidelity(1.16, {**even, "ovs_cpu": 0.9}, 4, model_s=1.0).startswith("FAIL")       # switches CPU-bound
    assert fidelity(0.8, even, 4, model_s=1.0).startswith("FAIL")                            # faster than the model


def test_an_iteration_out_of_step_in_a_workload_that_kept_to_its_model_is_the_networks_as_far_as_measured():
    from emulator.results.verdict import NETWORK
    quiet = {"cpu_busy": 0.27, "ovs_cpu": 0.3, "queue_drops": 0, "tcp_retrans": 0}   # two tenants' iterations
    out = ("jobs out of step: TCP gave the jobs sharing its links unequal shares, and the whole workload took "
           "1.02x its model; the machine kept up")
    bound = _bound("cubic", 9000, 100)   # 2 flows: 1.00x
    # ahead of its model: what one job gained another lost, and the workload kept to its model
    assert fidelity(0.53, quiet, 2, model_s=2.0, workload_over_model=1.02, bound=bound) == (
        f"{NETWORK}0.53x max-min sharing: {out}")
    # behind it: held to what sharing and the timeouts counted explain, said
    assert fidelity(1.39, {**quiet, "tcp_timeouts": 3}, 2, model_s=2.0, workload_over_model=1.02, bound=bound) == (
        f"{NETWORK}1.39x max-min sharing: {out}; within what was measured: sharing explains 1.15x (1.00x for 2 "
        "flows, cubic MTU 9000 100-packet queue) and 3 timeouts 0.6 s")
    assert fidelity(1.39, {**quiet, "tcp_timeouts": 0}, 2, model_s=2.0, workload_over_model=1.02, bound=bound) == (
        f"FAIL: {NETWORK}1.39x, sharing explains 1.15x (1.00x for 2 flows, cubic MTU 9000 100-packet queue) and 0 "
        f"timeouts 0.0 s: 0.48 s unexplained (1.39x max-min sharing: {out})")
    assert fidelity(0.53, quiet, 2, model_s=2.0).startswith("FAIL")                                # no other job
    assert fidelity(0.53, quiet, 2, model_s=2.0, workload_over_model=1.2).startswith("FAIL")       # workload missed
    assert fidelity(0.53, quiet, 2, model_s=2.0, workload_over_model=0.8).startswith("FAIL")
    assert fidelity(0.53, {**quiet, "ovs_cpu": 0.9}, 2, model_s=2.0, workload_over_model=1.0).startswith("FAIL")
    assert fidelity(0.53, {**quiet, "cpu_busy": 0.95}, 2, model_s=2.0, workload_over_model=1.0).startswith("FAIL")
    assert fidelity(1.05, quiet, 2, model_s=2.0, workload_over_model=1.3) == "ok"           # within the model anyway


def test_retransmissions_the_receivers_saw_twice_are_not_called_losses():
    from emulator.results.verdict import fidelity
    assert fidelity(1.3, {"tcp_retrans": 5, "tcp_spurious": 5}).endswith("(spurious retransmissions: RTT jumps or reordering)")
    assert fidelity(1.3, {"tcp_retrans": 6, "tcp_spurious": 5}).endswith("(packet losses)")
    assert fidelity(1.3, {"tcp_retrans": 5}).endswith("(packet losses)")   # folders from before the column
    assert fidelity(1.05, {"tcp_retrans": 5, "tcp_spurious": 5}) == "ok"
    # where TCP's own count of reorderings was read, the cause says it
    assert fidelity(1.3, {"tcp_retrans": 5, "tcp_spurious": 5, "tcp_reordered": 0}).endswith(
        "(spurious retransmissions: RTT jumps or reordering; TCP detected reordering 0 times)")
    assert fidelity(1.3, {"tcp_retrans": 9, "tcp_spurious": 2, "tcp_reordered": 7, "queue_drops": 0}).endswith(
        "(retransmissions without a queue drop: reordering, or losses outside the queues; "
        "TCP detected reordering 7 times)")
    # and how many tail-loss probes it sent, where they were counted
    assert fidelity(1.3, {"tcp_retrans": 5, "tcp_spurious": 5, "tcp_reordered": 1, "tcp_loss_probes": 40}).endswith(
        "(spurious retransmissions: RTT jumps or reordering; TCP detected reordering 1 times and sent 40 "
        "tail-loss probes)")


# --- every table joinable ---------------------------------------------------------

def test_runs_that_differ_only_in_connections_never_merge_and_every_table_names_its_run(tmp_path):
    """Two runs of one experiment, the same but for connections: collectives.csv
    keeps them apart in the summary, and steps.csv and links.csv rows carry the run index and label."""
    import dataclasses
    from emulator.results.calls import SPEC_KEYS, write_call
    plans = [dataclasses.replace(plan_run(make_run({"topology": "bigraph:m=1,n=4", "sizes": ["8K"], "repetitions": 1,
                                                    "warmup": 0, "connections": c, "label": "x"})), run=i)
             for i, c in enumerate((1, 2))]
    for plan in plans:
        for call in plan.calls:
            steps = [[{"start": 0.0, "end": 0.1 * (k + 1), "sent": sum(t.nbytes for t in s.sends),
                       "received": sum(t.nbytes for t in s.recvs)} for k, s in enumerate(rank)]
                     for rank in plan.schedules[call.size_bytes].steps]
            link = {"call": call.index, "t_s": 0.1, "link": "bgs0:1>bgs2", "kind": "switch", "rate_mbps": 50,
                    "tx_bytes": 1, "tx_packets": 1, "util": 0.1, "backlog_bytes": 0, "drops": 0}
            write_call(str(tmp_path), plan, call, CallRecord(steps, {}, [link], []), "user")
    rows = list(csv.DictReader(open(tmp_path / "collectives.csv")))
    assert [(r["run"], r["connections"], r["label"]) for r in rows] == [("0", "1", "x"), ("1", "2", "x")]
    assert set(SPEC_KEYS) <= set(rows[0])
    assert len(summary(str(tmp_path / "collectives.csv"))) == 2          # not one merged row
    for name in ("steps.csv", "links.csv"):
        runs = {(r["run"], r["label"]) for r in csv.DictReader(open(tmp_path / name))}
        assert runs == {("0", "x"), ("1", "x")}, name


def test_a_folder_written_before_the_spec_keys_existed_is_summarised_with_the_defaults(tmp_path, plan, records):
    from emulator.results.calls import SPEC_KEYS
    rows = [{k: v for k, v in r.items() if k not in SPEC_KEYS and k != "run"}
            for r in collective_rows(plan, wrap(records), "user")]
    path = str(tmp_path / "collectives.csv")
    append_csv(path, [c for c in COLLECTIVE_COLUMNS if c not in SPEC_KEYS and c != "run"], rows)
    s = summary(path)
    assert len(s) == len(plan.spec.sizes) and (s.connections == 1).all()


def test_a_full_disk_names_the_file_it_could_not_write_and_the_space_left():
    from emulator.cli import failure
    from emulator.results.calls import append_csv
    with pytest.raises(OSError) as e:
        append_csv("/dev/full", ["a"], [{"a": 1}] * 10_000)   # every write to /dev/full: no space left
    assert e.value.filename == "/dev/full"
    message = failure(e.value)
    assert message.startswith("no space left on the device: could not write /dev/full (") and "MiB free there" in message
    assert failure(OSError(5, "Input/output error")) == "[Errno 5] Input/output error"   # other failures as they are


def test_a_job_of_its_own_congestion_control_is_held_to_that_congestion_control_s_bound(tmp_path):
    from emulator.plan import capacity
    from emulator.plan.run_plan import plan_run
    path = tmp_path / "w.toml"
    path.write_text('[[job]]\nname = "a"\nranks = 4\ntcp = "bbr"\nops = [{op = "allreduce", bytes = "1M"}]\n'
                    '[[job]]\nname = "b"\nranks = 4\nops = [{op = "allreduce", bytes = "1M"}]\n')
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "workload": str(path), "tcp": "cubic", "mtu": 1500}))
    plan = capacity.with_bounds(plan, capacity.REFERENCE)
    own = plan.job_bounds
    assert list(own) == ["bbr"]   # job b runs the run's cubic: the run's bound
    assert own["bbr"].describe(4) == capacity.network_bound(make_run({"tcp": "bbr", "mtu": 1500}),
                                                            capacity.REFERENCE).describe(4)
    assert "bbr MTU" in own["bbr"].describe(4)
    assert plan.bound.describe(4) == capacity.network_bound(plan.spec, capacity.REFERENCE).describe(4)
    assert plan.bound_of("bbr") is own["bbr"] and plan.bound_of("") is plan.bound
