"""TCP's measured sharing of a queue: the factor per flow count, the
stretched prediction, the calibration file's records, and the column
that says which model ran."""
import json

import pytest

from emulator import calibration
from emulator.model.sharing import Sharing, SharingPoint, for_setting, stretched_time
from emulator.plan import capacity
from emulator.plan.run_plan import plan_run
from emulator.spec.experiment import make_run


def point(flows, over, tcp="cubic", mtu=9000, queue=100):
    return SharingPoint(tcp, mtu, queue, flows, over, 3.0, 50.0)


MEASURED = Sharing((point(2, 1.1), point(4, 1.3), point(16, 2.0)))


def test_one_flow_is_max_min_and_measured_counts_are_taken_as_measured():
    assert MEASURED.factor(1) == 1.0
    assert MEASURED.factor(0) == 1.0
    assert MEASURED.factor(2) == pytest.approx(1.1)
    assert MEASURED.factor(16) == pytest.approx(2.0)


def test_between_measured_counts_the_factor_follows_log2_of_the_count():
    assert MEASURED.factor(8) == pytest.approx(1.3 + 0.5 * 0.7)   # halfway from 4 to 16 in log2
    assert MEASURED.factor(3) == pytest.approx(1.1 + (1.584962500721156 - 1) * 0.2)


def test_beyond_the_measured_counts_the_nearest_is_kept_not_extrapolated():
    assert MEASURED.factor(64) == pytest.approx(2.0)
    only_four = Sharing((point(4, 1.4),))
    assert only_four.factor(2) == pytest.approx(1.2)   # between one flow (1.0) and four
    assert only_four.factor(8) == pytest.approx(1.4)


def test_a_setting_is_found_only_where_it_was_measured():
    points = [point(2, 1.1), point(4, 1.3, mtu=1500), point(2, 1.5, tcp="bbr")]
    assert for_setting(points, "cubic", 9000, 100).points == (points[0],)
    assert for_setting(points, "cubic", 9000, 50) is None
    assert for_setting(points, "reno", 9000, 100) is None
    assert "cubic, MTU 9000, a 100-packet queue: 2 flows 1.10x" in MEASURED.describe()


def test_steps_are_stretched_by_their_busiest_links_flows():
    class Prediction:   # three steps: one flow, four flows, one flow on the busiest link
        time_s = 6.0
        max_flows_per_step = [1, 4, 1]

        def step_index_end_s(self):
            return [1.0, 3.0, 6.0]
    assert stretched_time(Prediction(), MEASURED) == pytest.approx(1.0 + 2.0 * 1.3 + 3.0)


def test_an_uncongested_ring_is_left_as_max_min_and_an_incast_is_stretched():
    ring = plan_run(make_run({"topology": "bigraph:m=2,n=4", "sizes": ["1M"]}))
    prediction = ring.predictions[1 << 20]
    assert stretched_time(prediction, MEASURED) == pytest.approx(prediction.time_s)
    spec = calibration.sharing_spec(16, 9000, 100, "cubic", 1)
    incast = plan_run(spec).predictions[spec.sizes[0]]
    assert incast.max_flows_per_step == [16]
    assert stretched_time(incast, MEASURED) == pytest.approx(2.0 * incast.time_s)


def test_the_calibration_incast_lasts_about_half_a_second_through_one_queue():
    for flows in (2, 4, 8, 16):
        spec = calibration.sharing_spec(flows, 1500, 50, "bbr", 3)
        plan = plan_run(spec)
        assert plan.ranks == flows + 1 and spec.sharing == "max-min"
        assert 0.4 < plan.predictions[spec.sizes[0]].time_s < 0.7
        assert plan.predictions[spec.sizes[0]].most_flows_on_a_link == flows
        assert (spec.tcp, spec.mtu, spec.host_queue_packets) == ("bbr", 1500, 50)


def test_a_point_is_the_median_over_max_min_and_the_mean_drops():
    spec = calibration.sharing_spec(4, 9000, 100, "cubic", 3)
    rows = [{"time_over_model": r, "time_s": 2 * r, "queue_drops": d}
            for r, d in ((1.2, 10), (1.25, 0), (1.3, ""), (1.22, 1))]
    assert calibration.sharing_point(4, rows, spec) == SharingPoint("cubic", 9000, 100, 4, 1.235, 2.8, 50.0, 0.0)
    rows[1]["time_s"] = 2.5 + 0.3   # a call that waited a retransmission timeout
    assert calibration.sharing_point(4, rows, spec).timeouts_per_call == 0.25


def test_sharing_points_are_saved_merged_and_read_back(tmp_path):
    path = str(tmp_path / "calibration.json")
    first = capacity.Calibration("m, 2 CPUs", "2026-12-03", [capacity.Point("user", 9000, "tso", 8000.0, 7000.0, 500.0)],
                                 "", [point(2, 1.1), point(4, 1.3)])
    capacity.save(first, path)
    capacity.save(capacity.Calibration("m, 2 CPUs", "2026-12-04", [], "", [point(4, 1.4), point(8, 1.6)]), path)
    loaded = capacity.load(path)
    assert [(p.flows, p.over_max_min) for p in loaded.sharing] == [(2, 1.1), (4, 1.4), (8, 1.6)]
    assert len(loaded.points) == 1   # a sharing measurement keeps the capacity figures
    found, basis = capacity.sharing_for(loaded, "cubic", 9000, 100)
    assert found.factor(8) == pytest.approx(1.6) and path in basis


def test_a_file_with_sharing_alone_keeps_the_reference_capacity(tmp_path):
    path = str(tmp_path / "calibration.json")
    capacity.save(capacity.Calibration("m, 2 CPUs", "2026-12-03", [], "", [point(2, 1.1)]), path)
    mbps, basis = capacity.lookup(capacity.load(path), "user", 9000, "tso")
    assert mbps == next(p.faithful_mbps for p in capacity.REFERENCE.points if p.key() == ("user", 9000, "tso"))
    assert "reference" in basis


def test_where_nothing_was_measured_the_model_says_so():
    found, basis = capacity.sharing_for(capacity.Calibration("m", "d", [], "/x"), "reno", 1234, 7)
    assert found is None
    assert "no TCP-sharing calibration for reno, MTU 1234, a 7-packet queue" in basis
    assert "calibrate --tcp-sharing" in basis


@pytest.mark.parametrize("field, value", [("flows", 0), ("over_max_min", -1), ("over_max_min", float("inf")),
                                          ("mtu", "9000"), ("tcp", "no such!"), ("rate_mbps", True),
                                          ("timeouts_per_call", 1.5), ("standing_queue_ms", -3.0),
                                          ("standing_queue_ms", "12")])
def test_a_bad_sharing_record_names_the_file_and_figure(tmp_path, field, value):
    record = {**point(2, 1.1).__dict__, field: value}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"machine": "m", "measured": "d", "points": [], "sharing": [record]}))
    with pytest.raises(ValueError, match=str(path)):
        capacity.load(str(path))


def test_each_run_says_which_model_it_compares_with(tmp_path, monkeypatch, capsys):
    from emulator import preflight
    path = str(tmp_path / "calibration.json")
    capacity.save(capacity.Calibration("m, 2 CPUs", "2026-12-03", [], "", [point(4, 1.3)]), path)
    monkeypatch.setenv(capacity.ENV_FILE, path)
    specs = [{"sharing": "tcp"}, {"sharing": "max-min"}, {"sharing": "tcp", "tcp": "reno"}]
    plans = preflight.with_sharing([plan_run(make_run({**s, "sizes": ["1M"]})) for s in specs])
    assert plans[0].sharing.factor(4) == pytest.approx(1.3)
    assert plans[1].sharing is None and plans[2].sharing is None
    # the verdict's bound whatever the model: this machine's factors; for reno, the nearest calibrated point
    assert plans[0].bound.factor(4) == plans[1].bound.factor(4) == pytest.approx(1.3)
    assert plans[2].bound.sharing is not None and "nearest calibrated point" in plans[2].bound.describe(4)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# model: TCP sharing measured with cubic, MTU 9000") and path in lines[0]
    assert lines[1] == "# model: max-min sharing (asked for)"
    assert lines[2].startswith("# model: max-min sharing (no TCP-sharing calibration for reno")


def test_the_standing_queue_is_the_deepest_queue_s_mean_backlog_at_the_link_rate():
    links = [{"link": "bgs0-eth5", "backlog_bytes": b} for b in (500_000, 700_000, 600_000)]   # the shared queue
    links += [{"link": "bgs0-eth1", "backlog_bytes": b} for b in (0, "", 90_000)]             # a sender's, nearly empty
    assert calibration.standing_queue_ms(links, 50.0) == pytest.approx(600_000 * 8 / 50e6 * 1e3)   # 96 ms
    assert calibration.standing_queue_ms([], 50.0) == 0.0


def test_a_point_keeps_its_standing_queue_and_a_file_reads_it_back(tmp_path):
    spec = calibration.sharing_spec(2, 9000, 100, "cubic", 3)
    rows = [{"time_over_model": 1.0, "time_s": 0.5, "queue_drops": 0}] * 3
    measured = calibration.sharing_point(2, rows, spec, standing_ms=96.04)
    assert measured.standing_queue_ms == 96.0
    path = str(tmp_path / "calibration.json")
    capacity.save(capacity.Calibration("m, 2 CPUs", "2026-12-05", [], "", [measured]), path)
    assert capacity.load(path).sharing == [measured]
    assert point(2, 1.1).standing_queue_ms is None   # files from before it: not measured, not 0


def test_a_point_is_taken_over_one_flow_alone():
    spec = calibration.sharing_spec(2, 9000, 100, "cubic", 3)
    rows = [{"time_over_model": 0.98, "time_s": 0.49, "queue_drops": 0}] * 3
    assert calibration.sharing_point(2, rows, spec, alone=0.98).over_max_min == pytest.approx(1.0)


def test_the_model_command_and_sweeps_predict_with_the_same_stretch():
    from emulator.plan.predictions import sweep_prediction
    spec = make_run({"topology": "bigraph:m=2,n=4", "collective": "all-to-all", "sizes": ["2M"]})
    plain = sweep_prediction(spec, steps=False)["sizes"][0]
    stretched = sweep_prediction(spec, steps=False, sharing=MEASURED)["sizes"][0]
    assert plain["model"] == "max-min" and stretched["model"] == "tcp"
    assert stretched["max_min_time_s"] == plain["time_s"]
    assert stretched["time_s"] == pytest.approx(stretched_time(plan_run(spec).predictions[2 << 20], MEASURED))
    assert stretched["time_s"] > 1.5 * plain["time_s"]   # 12 flows on a link: between 4 (1.3x) and 16 (2.0x)
