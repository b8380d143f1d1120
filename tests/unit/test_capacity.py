"""The capacity check (pure): calibration files, lookups, the run's peak
load from the model, the warning, --bw auto; and calibrate's pure parts."""
import dataclasses
import json

import pytest

from emulator import calibration

from emulator.plan import capacity
from emulator.plan.capacity import Assessment, Calibration, Point
from emulator.fabric.mapping import hosts_for_ranks
from emulator.fabric.topology import build
from emulator.model.buckets import EmulatedLinks
from emulator.model.simulation import predict
from emulator.routes.routing import forwarding_table
from emulator.plan.run_plan import model_for, plan_run
from emulator.spec.experiment import make_run

from test_model import schedule

CAL = Calibration("box, 2 CPUs", "2026-11-30", [
    Point("user", 1500, "off", 1400.0, 300.0, 20.0),
    Point("user", 9000, "off", 5400.0, 2400.0, 170.0),
    Point("user", 9000, "tso", 14000.0, 5000.0, 350.0),
], "/x/calibration.json")


# --- the model's peak load ------------------------------------------------------------

def test_peak_load_counts_every_switch_a_flow_crosses():
    # bigraph:m=2,n=4 ring, naive, shortest: step 0's flows cross 1+3+1+2+1+3+1+2 = 14
    # switches, each flow alone on its path at the link rate
    plan = plan_run(make_run({"sizes": ["4M"], "host_rate_mbps": 100, "switch_rate_mbps": 100}))
    assert plan.predictions[4 << 20].peak_switch_mbps == pytest.approx(1400)


def test_peak_load_of_flows_sharing_a_link_is_the_links_rate_once():
    # 8 hosts on one leaf pair: halving-doubling with the naive mapping squeezes
    # flows through shared uplinks; the load is still bounded by link rates
    plan = plan_run(make_run({"topology": "bigraph:m=4,n=8", "algorithm": "halving-doubling",
                              "mapping": "naive", "sizes": ["4M"], "host_rate_mbps": 10,
                              "switch_rate_mbps": 10}))
    hdrm = plan_run(make_run({"topology": "bigraph:m=4,n=8", "algorithm": "halving-doubling",
                              "mapping": "hdrm", "sizes": ["4M"], "host_rate_mbps": 10,
                              "switch_rate_mbps": 10}))
    naive, good = plan.predictions[4 << 20].peak_switch_mbps, hdrm.predictions[4 << 20].peak_switch_mbps
    assert 0 < naive < good <= 32 * 10 * 3   # 32 senders, at most 3 switches each


def test_peak_load_scales_with_the_link_rate():
    loads = [plan_run(make_run({"sizes": ["1M"], "host_rate_mbps": r, "switch_rate_mbps": r}))
             .predictions[1 << 20].peak_switch_mbps for r in (10, 40)]
    assert loads[1] == pytest.approx(4 * loads[0])


# --- lookups --------------------------------------------------------------------------

def test_lookup_exact_setting():
    value, how = capacity.lookup(CAL, "user", 9000, "off")
    assert value == 2400.0 and "calibrated at MTU 9000" in how and "/x/calibration.json" in how


def test_lookup_interpolates_between_mtus():
    value, how = capacity.lookup(CAL, "user", 5250, "off")
    assert value == pytest.approx(1350.0) and "interpolated between MTU 1500 and 9000" in how


def test_lookup_below_the_smallest_mtu_shrinks_with_it():
    value, how = capacity.lookup(CAL, "user", 750, "off")
    assert value == pytest.approx(150.0) and "scaled down from MTU 1500" in how


def test_lookup_above_the_largest_calibrated_mtu_takes_it():
    value, how = capacity.lookup(Calibration("m", "d", [Point("user", 1500, "off", 1, 300.0, 1)], "f"),
                                 "user", 9000, "off")
    assert value == 300.0 and "taken from MTU 1500" in how


def test_lookup_of_an_uncalibrated_setting_says_how_to_calibrate_it():
    with pytest.raises(LookupError, match="calibrate --offload tso"):
        capacity.lookup(CAL, "kernel", 9000, "tso")


def test_an_uncalibrated_kernel_datapath_gets_the_software_emulation_figures():
    value, how = capacity.lookup(capacity.load("/nonexistent/calibration.json"), "kernel", 9000, "off")
    assert value == 99.0 and "software emulation" in how and "bigraph-emu calibrate" in how
    assert capacity.reference_for("user", "off") is capacity.REFERENCE
    # TSO was measured at MTU 1500 only, and kept no load: MTU 9000 gets that, not more
    value, how = capacity.lookup(capacity.REFERENCE, "kernel", 9000, "tso")
    assert value == 0.0 and "taken from MTU 1500" in how


def test_reference_figures_say_they_are_not_this_machines():
    _, how = capacity.lookup(capacity.REFERENCE, "user", 9000, "off")
    assert "reference" in how and "bigraph-emu calibrate" in how


# --- files ------------------------------------------------------------------------------

def test_missing_file_means_the_reference_figures(tmp_path):
    assert capacity.load(str(tmp_path / "none.json")) is capacity.REFERENCE


def test_save_then_load_round_trip_and_merge(tmp_path):
    path = str(tmp_path / "sub" / "calibration.json")
    capacity.save(CAL, path)
    again = capacity.load(path)
    assert again.points == sorted(CAL.points, key=Point.key) and again.source == path
    newer = Calibration("box, 2 CPUs", "2026-12-01", [Point("user", 9000, "off", 5000.0, 2000.0, 140.0)], "")
    capacity.save(newer, path)
    merged = capacity.load(path)
    assert len(merged.points) == 3 and merged.measured == "2026-12-01"
    assert capacity.lookup(merged, "user", 9000, "off")[0] == 2000.0      # replaced
    assert capacity.lookup(merged, "user", 1500, "off")[0] == 300.0       # kept


def test_unreadable_file_names_itself(tmp_path):
    bad = tmp_path / "calibration.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="calibration.json"):
        capacity.load(str(bad))
    bad.write_text(json.dumps({"machine": "m", "measured": "d", "points": [{"mtu": 1}]}))
    with pytest.raises(ValueError, match="unreadable"):
        capacity.load(str(bad))


def point_file(tmp_path, **changes) -> str:
    record = {"datapath": "user", "mtu": 9000, "offload": "off", "raw_mbps": 5000.0, "faithful_mbps": 4000.0,
              "link_rate_mbps": 300.0, **changes}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"machine": "m", "measured": "d", "points": [record]}))
    return str(path)


@pytest.mark.parametrize("changes", [{"faithful_mbps": -1}, {"faithful_mbps": "4000"}, {"raw_mbps": 0},
                                     {"link_rate_mbps": None}, {"faithful_mbps": True}, {"mtu": "9000"},
                                     {"datapath": 1}, {"raw_mbps": float("nan")}, {"step_latency_us": -1},
                                     {"port_latency_us": -0.5}, {"many_ports_faithful_mbps": -1},
                                     {"many_ports_faithful_mbps": "900"}])
def test_a_point_with_a_figure_that_is_no_figure_is_refused(tmp_path, changes):
    with pytest.raises(ValueError, match="calibration.json is unreadable"):
        capacity.load(point_file(tmp_path, **changes))


def test_a_faithful_figure_of_zero_loads_and_every_run_is_told_it_does_not_fit(tmp_path):
    """A calibration that found no faithful load is a result, not a file error."""
    zero = capacity.load(point_file(tmp_path, faithful_mbps=0))
    check = capacity.assess(plan_run(make_run({"sizes": ["1M"]})), zero, "user", "off")
    assert check.fits is False and check.fraction == float("inf")
    assert "WARNING" in check.describe(50) and check.to_dict()["fraction"] is None


def test_environment_names_another_file(tmp_path, monkeypatch):
    monkeypatch.setenv(capacity.ENV_FILE, str(tmp_path / "c.json"))
    assert capacity.calibration_path() == str(tmp_path / "c.json")


# --- the check ----------------------------------------------------------------------------

def test_a_run_that_fits_says_so_without_warning():
    plan = plan_run(make_run({"sizes": ["1M"], "host_rate_mbps": 50, "switch_rate_mbps": 50}))
    check = capacity.assess(plan, CAL, "user", "off")
    assert check.peak_mbps == pytest.approx(700) and check.fits
    assert "WARNING" not in check.describe(50) and "29%" in check.describe(50)


def test_a_run_that_asks_too_much_warns_and_says_what_would_fit():
    plan = plan_run(make_run({"sizes": ["1M"], "host_rate_mbps": 400, "switch_rate_mbps": 400}))
    check = capacity.assess(plan, CAL, "user", "off")
    assert not check.fits and check.fraction == pytest.approx(5600 / 2400)
    text = check.describe(400)
    assert "WARNING" in text and "about 170 Mbit/s" in text   # 400 * 2400/5600 = 171 -> 170


def test_uncalibrated_setting_is_not_checked_but_said():
    plan = plan_run(make_run({"sizes": ["1M"], "mtu": 9000, "offload": "tso"}))
    check = capacity.assess(plan, Calibration("m", "d", CAL.points[:2], "f"), "user", "tso")
    assert check.fits is None and check.fraction is None
    assert "not checked" in check.describe(50) and check.to_dict()["faithful_link_mbps"] is None


def many_ports(faithful: float | None) -> Calibration:
    point = Point("user", 9000, "tso", 9000.0, 8000.0, 570.0, many_ports_faithful_mbps=faithful)
    return Calibration("m, 2 CPUs", "d", [point], "f")


def fattree_check(calibration: Calibration) -> Assessment:
    plan = plan_run(make_run({"topology": "fattree:k=4", "sizes": ["1M"], "mtu": 9000, "offload": "tso"}))
    return capacity.assess(plan, calibration, "user", "tso")


def test_beyond_the_probes_ports_the_faithful_load_shrinks_as_measured_at_many_ports():
    """The k=4 fat-tree has 80 switch ports to the probe's 16: what calibrate
    measured there is what the check allows there, and a fabric between
    the two gets the power law through both points."""
    assert capacity.port_exponent(many_ports(800.0), "user", 9000, "tso")[0] == pytest.approx(1.431, abs=1e-3)
    check = fattree_check(many_ports(800.0))
    assert check.faithful_mbps == pytest.approx(800.0)
    assert "** 1.43" in check.basis and "800 at 80 on fattree:k=4" in check.basis
    plan = plan_run(make_run({"topology": "bigraph:m=4,n=8", "sizes": ["1M"], "mtu": 9000, "offload": "tso"}))
    between = capacity.assess(plan, many_ports(800.0), "user", "tso")   # 64 ports
    assert between.faithful_mbps == pytest.approx(8000 * (16 / 64) ** 1.4307, rel=1e-3)


def test_a_machine_whose_many_ports_carry_more_keeps_the_proportional_rule():
    """3,516 at 80 ports against 11,252 at 16 measured 0.72: the runs of 32-64
    hosts it let in failed, so the check never scales by less than the ports."""
    exponent, how = capacity.port_exponent(many_ports(2500.0), "user", 9000, "tso")
    assert exponent == 1.0 and "measured 0.72, taken as 1" in how
    assert fattree_check(many_ports(2500.0)).faithful_mbps == pytest.approx(8000 * 16 / 80)


def test_without_a_measurement_at_many_ports_the_load_shrinks_in_proportion():
    check = fattree_check(many_ports(None))
    assert check.faithful_mbps == pytest.approx(8000 * 16 / 80)
    assert "** 1.00" in check.basis and "not measured" in check.basis


def test_nothing_faithful_at_many_ports_means_nothing_beyond_the_probes_ports():
    assert fattree_check(many_ports(0.0)).faithful_mbps == 0.0


def test_a_fabric_within_the_probes_ports_keeps_the_probes_load():
    plan = plan_run(make_run({"sizes": ["1M"], "mtu": 9000, "offload": "tso"}))   # the probe's own fabric
    assert capacity.assess(plan, many_ports(800.0), "user", "tso").faithful_mbps == pytest.approx(8000.0)


def test_the_many_port_figure_round_trips_through_the_file(tmp_path):
    path = capacity.save(many_ports(812.5), str(tmp_path / "c.json"))
    assert capacity.load(path).points[0].many_ports_faithful_mbps == 812.5
    assert capacity.load(point_file(tmp_path)).points[0].many_ports_faithful_mbps is None   # older files


def test_assessment_record():
    record = Assessment(500.0, 2000.0, "why").to_dict()
    assert record == {"peak_link_mbps": 500.0, "faithful_link_mbps": 2000.0, "fraction": 0.25, "fits": True,
                      "basis": "why"}


@pytest.mark.parametrize("rate, factor, want", [(50, 1.0, 50), (50, 0.5, 25), (400, 0.4286, 170),
                                                (9.7, 1.0, 9.7), (1000, 0.123, 120), (3, 0.1, 1.0)])
def test_scaled_rate_rounds_down_to_two_digits(rate, factor, want):
    assert capacity.scaled_rate(rate, factor) == pytest.approx(want)


# --- calibrate's pure parts -----------------------------------------------------------------

def test_bisect_finds_the_largest_passing_rate():
    assert calibration.bisect(lambda r: r <= 70, 100, 7) == pytest.approx(70, abs=1)
    assert calibration.bisect(lambda r: False, 100, 5) == 0.0
    tried = []
    calibration.bisect(lambda r: tried.append(r) or True, 100, 3)
    assert tried == [50, 75, 87.5]


def row(**kw):
    base = {"bytes_ok": True, "fidelity": "ok", "saturated_util": 0.99, "time_over_model": 1.02}
    return {**base, **kw}


def test_judge_wants_the_verdict_and_links_within_five_percent():
    assert calibration.judge([row(), row()]) == "ok"
    assert calibration.judge([row(), row(saturated_util=0.93)]) == "saturated links at 93% of their rate"
    assert calibration.judge([row(fidelity="FAIL: 1.3x the model")]) == "FAIL: 1.3x the model"
    assert calibration.judge([row(bytes_ok=False)]) == "wrong byte counts"
    assert calibration.judge([]) == "no counted call"


def test_judge_without_a_saturated_link_uses_the_model():
    assert calibration.judge([row(saturated_util="", time_over_model=1.04)]) == "ok"
    assert "1.08x the model" in calibration.judge([row(saturated_util=None, time_over_model=1.08)])


def test_probe_calls_last_about_a_second_and_a_half():
    for rate, mtu, topology in ((10, 9000, capacity.PROBE_TOPOLOGY), (200, 9000, capacity.PROBE_TOPOLOGY),
                                (20, 1500, capacity.PROBE_TOPOLOGY), (30, 9000, capacity.MANY_PORTS_TOPOLOGY)):
        spec = calibration.probe_spec(rate, mtu, "off", "auto", 2, topology)
        t = plan_run(spec).predictions[spec.sizes[0]].time_s
        assert 1.0 < t < 2.2, (rate, mtu, t)


@pytest.mark.parametrize("topology", [capacity.PROBE_TOPOLOGY, capacity.MANY_PORTS_TOPOLOGY])
def test_no_two_probe_flows_share_a_link(topology):
    """So the model runs every flow at the link rate, and a call within 5% of it kept up."""
    spec = calibration.probe_spec(30, 9000, "tso", "auto", 1, topology)
    assert plan_run(spec).predictions[spec.sizes[0]].most_flows_on_a_link == 1


# --- --bw auto on the command line --------------------------------------------------------------

def test_bw_auto_scales_both_rates_to_the_calibration(tmp_path, monkeypatch, capsys):
    from emulator import cli
    monkeypatch.setenv(capacity.ENV_FILE, capacity.save(CAL, str(tmp_path / "c.json")))
    # 14 switch traversals at rate R: 0.8 * 2400 / 14 = 137 -> 130 Mbit/s
    assert cli.main(["model", "-t", "bigraph:m=2,n=4", "-b", "1M", "--bw", "auto", "--offload", "off"]) == 0
    assert "links 130 Mbit/s host / 130 Mbit/s switch" in capsys.readouterr().out


def test_bw_auto_without_a_calibration_for_the_setting_is_refused(tmp_path, monkeypatch, capsys):
    from emulator import cli
    from emulator.net import dataplane
    monkeypatch.setattr(dataplane, "userspace_tso_enabled", lambda: True)
    frames_only = Calibration("m", "d", CAL.points[:2], "")
    monkeypatch.setenv(capacity.ENV_FILE, capacity.save(frames_only, str(tmp_path / "c.json")))
    assert cli.main(["model", "-b", "1M", "--bw", "auto", "--offload", "tso", "--datapath", "user"]) == 2
    assert "--bw auto: this machine is not calibrated" in capsys.readouterr().err


# --- the links a run's model adds for the emulation ------------------------------------

def test_emulated_links_take_the_settings_step_latency_and_share_its_raw_capacity():
    point = next(p for p in capacity.REFERENCE.points if p.key() == ("user", 9000, "tso"))
    latency = point.step_latency_us * 1e-6
    links = capacity.emulated_links(capacity.REFERENCE, "user", 9000, "tso", 8)
    assert links.step_floor_s == pytest.approx(latency) and latency > 0
    assert links.burst.seconds == pytest.approx(0.010) and links.burst.peak_mbps == pytest.approx(point.raw_mbps / 8)
    assert f"steps take at least {latency * 1e3:.2f} ms" in links.basis and "reference machine" in links.basis
    twice = capacity.emulated_links(capacity.REFERENCE, "user", 9000, "tso", 16)   # the calibration had 8 hosts
    assert twice.step_floor_s == pytest.approx(2 * latency)


def test_emulated_links_of_an_uncalibrated_step_latency_say_so():
    links = capacity.emulated_links(CAL, "user", 1500, "off", 16)
    assert links.step_floor_s == 0 and "not measured" in links.basis and CAL.source in links.basis
    assert links.burst.peak_mbps == pytest.approx(1400.0 / 16)


def test_emulated_links_of_another_mtu_take_the_nearest_and_say_it():
    links = capacity.emulated_links(CAL, "user", 8000, "off", 8)
    assert links.burst.peak_mbps == pytest.approx(5400.0 / 8) and "at MTU 9000" in links.basis


def test_a_step_latency_round_trips_through_the_file(tmp_path):
    assert capacity.load(point_file(tmp_path, step_latency_us=1800.0)).points[0].step_latency_us == 1800.0
    assert capacity.load(point_file(tmp_path)).points[0].step_latency_us == 0.0   # files from before it
    assert capacity.load(point_file(tmp_path, port_latency_us=7.5)).points[0].port_latency_us == 7.5
    assert capacity.load(point_file(tmp_path)).points[0].port_latency_us == 0.0


def test_a_runs_plan_with_emulated_links_predicts_the_burst_and_the_least_step_time():
    spec = make_run({"sizes": ["32K", "1M", "64M"], "algorithm": "ring", "mapping": "naive"})
    links = capacity.emulated_links(capacity.REFERENCE, "user", 9000, "tso", 8)
    plain, emulated = plan_run(spec), plan_run(spec, links=links)
    burst_only = plan_run(spec, links=dataclasses.replace(links, step_floor_s=0.0, switch_latency_s=0.0))
    floor_only = plan_run(spec, links=dataclasses.replace(links, burst=None, step_floor_s=0.004, switch_latency_s=0.0))
    small, mid, large = 32 << 10, 1 << 20, 64 << 20
    assert burst_only.predictions[small].time_s < 0.5 * plain.predictions[small].time_s   # 2 KB steps: a burst each
    steps = len(plain.schedules[small].steps[0])
    # 2 KB steps take alpha and 0.3 ms on the wire: the floor instead; 64 KB ones take 11 ms: it hides
    assert floor_only.predictions[small].time_s == pytest.approx(steps * 0.004, rel=1e-9)
    assert floor_only.predictions[mid].time_s == pytest.approx(plain.predictions[mid].time_s, rel=1e-9)
    assert emulated.predictions[large].time_s == pytest.approx(plain.predictions[large].time_s, rel=0.01)
    assert emulated.links is links and plain.links is None


def test_a_step_lasts_at_least_the_least_step_time_beside_its_transfers():
    fabric = build("bigraph:m=2,n=4")
    table = forwarding_table(fabric, "shortest")
    hosts = hosts_for_ranks(fabric, "naive")[:2]
    sched = schedule([([(1, 1000)], []), ([(1, 1000)], [])], [([], [(0, 1000)]), ([], [(0, 1000)])])
    alone = predict(fabric, table, sched, hosts, alpha_s=5e-4)
    assert predict(fabric, table, sched, hosts, alpha_s=5e-4, min_step_s=alone.time_s / 4).time_s == alone.time_s
    assert predict(fabric, table, sched, hosts, alpha_s=5e-4, min_step_s=0.01).time_s == pytest.approx(0.02)
    with pytest.raises(ValueError, match="min_step_s"):
        predict(fabric, table, sched, hosts, min_step_s=-1.0)


def test_a_message_waits_the_switch_latency_at_every_switch_it_crosses():
    fabric = build("fattree:k=4")
    table = forwarding_table(fabric, "shortest")
    pairs = calibration.switch_pairs(fabric, table)
    assert sorted(pairs) == [1, 3, 5]
    sched = schedule([([(1, 1000)], [])], [([], [(0, 1000)])])
    for switches, pair in pairs.items():
        plain = predict(fabric, table, sched, list(pair), alpha_s=5e-4)
        slowed = predict(fabric, table, sched, list(pair), alpha_s=5e-4, switch_latency_s=2e-3)
        assert slowed.time_s - plain.time_s == pytest.approx(switches * 2e-3)
    with pytest.raises(ValueError, match="switch_latency_s"):
        predict(fabric, table, sched, list(pairs[1]), switch_latency_s=-1.0)


def test_the_switch_latency_is_the_slope_over_switches_crossed():
    one_way = {n: {64: 0.5e-3 + n * 0.2e-3, 4096: 0.6e-3 + n * 0.2e-3} for n in (1, 3, 5)}
    assert calibration.per_switch_s(one_way) == pytest.approx(0.2e-3)
    assert calibration.per_switch_s({1: {64: 2e-3}, 3: {64: 1e-3}}) == 0.0   # faster further away: noise


def test_emulated_links_scale_the_switch_latency_by_the_fabrics_switch_ports(tmp_path):
    cal = capacity.load(point_file(tmp_path, offload="tso", port_latency_us=8.0))
    probe = capacity.emulated_links(cal, "user", 9000, "tso", 8)
    fattree = capacity.emulated_links(cal, "user", 9000, "tso", 16, capacity.switch_ports(build("fattree:k=4")))
    assert probe.switch_latency_s == pytest.approx(8e-6 * 16)   # the calibration fabric's 16 ports
    assert fattree.switch_latency_s == pytest.approx(8e-6 * 80) and "every switch crossed adds 0.64 ms" in fattree.basis
    assert capacity.emulated_links(CAL, "user", 9000, "off", 8).switch_latency_s == 0.0   # not measured


def test_fit_step_latency_finds_the_latency_calls_were_made_with():
    plan = plan_run(calibration.latency_spec(9000, "tso", "user", 1))
    burst = capacity.link_burst(8821.0, len(plan.hosts))
    made = model_for(plan.fabric, plan.table, plan.spec, EmulatedLinks(burst, 1.7e-3, ""))
    times = {size: [made(plan.schedules[size], plan.hosts).time_s * f for f in (0.98, 1.0, 1.03)]
             for size in plan.spec.sizes}
    latency, ratios = calibration.fit_step_latency(plan, burst, times)
    assert latency == pytest.approx(1.7e-3) and all(r == pytest.approx(1.0) for r in ratios.values())
    with pytest.raises(ValueError, match="no measured call"):
        calibration.fit_step_latency(plan, burst, {size: [] for size in plan.spec.sizes})


def test_emulated_links_of_the_kernel_datapath_name_the_vms_figures():
    links = capacity.emulated_links(capacity.REFERENCE, "kernel", 9000, "off", 8)
    assert "software emulation" in links.basis and "not measured" in links.basis
    assert links.burst.peak_mbps == pytest.approx(1066.0 / 8)
