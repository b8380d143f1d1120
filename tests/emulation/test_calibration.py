"""The calibration's measurements and the pre-run capacity check, for real."""
import csv
import json
import os
import subprocess

import pytest

from emulator import exit_codes
from emulator import calibration, cli

from emulator.plan import capacity
from emulator.plan.capacity import Calibration, Point
from emulator.net.dataplane import detect, userspace_tso_enabled
from emulator.measure.rawpath import raw_capacity

pytestmark = pytest.mark.emulation

# A prerequisite CI's machines have: missing under BIGRAPH_REQUIRE_EMULATION=1
# (CI), it fails the test; only a platform that cannot have it skips, saying so.
KERNEL_DATAPATH = "the kernel datapath: AF_XDP ports and userspace TSO belong to the userspace datapath"


def lacking(reason: str | None, plane) -> None:
    """Skip for the kernel datapath; for anything else, fail where required."""
    if plane.datapath == "kernel":
        pytest.skip(KERNEL_DATAPATH)
    if reason is None:
        return
    if os.environ.get("BIGRAPH_REQUIRE_EMULATION") == "1":
        pytest.fail(f"{reason} (required here: vm/provision.sh sets it up)")
    pytest.skip(reason)


def test_the_only_platform_these_tests_skip_on_is_the_kernel_datapath():
    """Where `lacking` skips for the platform, the platform is the kernel
    datapath: the openvswitch module is loaded and OVS takes the system datapath."""
    plane = detect("auto", "off")
    if plane.datapath == "kernel":
        assert os.path.isdir("/sys/module/openvswitch")
    else:
        assert plane.datapath == "user" and not os.path.isdir("/sys/module/openvswitch")


def test_raw_capacity_is_measured_through_one_switch(clean_machine, timing):
    mbps, cores = raw_capacity(detect(), 9000, 2, [1])[1]
    timing(mbps > 200, mbps)           # hundreds of Mbit/s at the very least, even on a busy machine
    assert 0 < cores <= os.cpu_count()


def test_switch_ports_shaped_alone_hold_the_rate(clean_machine):
    mbps, _ = raw_capacity(detect("auto", "off"), 1500, 2, [1], switch_shaped_mbps=50.0)[1]
    assert 30 < mbps <= 50   # payload through a switch whose ports HTB holds at 50 Mbit/s


def test_switch_ports_open_as_another_port_type(clean_machine):
    offered = subprocess.run(["ovs-vsctl", "get", "Open_vSwitch", ".", "iface_types"], capture_output=True,
                             text=True).stdout
    plane = detect("auto", "off")
    lacking(None if "afxdp-nonpmd" in offered else "this Open vSwitch offers no afxdp-nonpmd ports", plane)
    mbps, _ = raw_capacity(plane, 1500, 2, [1], port_type="afxdp-nonpmd")[1]
    assert mbps > 0


def test_a_message_takes_longer_the_more_switches_it_crosses(clean_machine, timing):
    from emulator.plan.run_plan import plan_run
    plan = plan_run(calibration.switch_latency_spec(9000, "auto", "auto"))
    one_way = calibration.one_way_times(plan, trips=20)
    assert sorted(one_way) == [1, 3, 5] and all(len(by_size) == 2 for by_size in one_way.values())
    assert all(0 < t < 1.0 for by_size in one_way.values() for t in by_size.values())
    # the userspace datapath takes a turn of its loop over 80 ports per switch; the kernel's forwards at once
    timing(max(one_way[5].values()) > min(one_way[1].values()), one_way)


def test_a_light_probe_passes_with_saturated_links_at_their_rate(clean_machine, timing):
    r = calibration.try_rate(20.0, 9000, "off", "auto", 1, log=lambda *_: None)
    timing(r["verdict"] == "ok", r)
    assert r["load"] == pytest.approx(280)     # 14 switch traversals at 20 Mbit/s
    timing(r["saturated_util"] is not None and r["saturated_util"] >= calibration.SATURATED_MIN, r)


def test_a_run_asking_more_than_the_calibration_warns_first_and_records_it(tmp_path, monkeypatch, capsys,
                                                                             clean_machine):
    tiny = Calibration("test", "2026-11-30", [Point("user", 9000, "off", 5000.0, 100.0, 7.0),
                                              Point("kernel", 9000, "off", 5000.0, 100.0, 7.0)], "")
    monkeypatch.setenv(capacity.ENV_FILE, capacity.save(tiny, str(tmp_path / "calibration.json")))
    out = str(tmp_path / "out")
    assert cli.main(["run", "-t", "bigraph:m=2,n=4", "-b", "1M", "-n", "1", "-w", "0", "--bw", "20",
                     "--offload", "off", "--out", out]) in exit_codes.FINISHED   # asked more than the machine can: the verdict may fail
    printed = capsys.readouterr().out
    assert printed.index("# WARNING: that is more than this machine can emulate") < printed.index("# dataplane")
    assert "about 7.1 Mbit/s" in printed     # 20 * 100 / 280
    with open(os.path.join(out, "capacity.json")) as f:
        record = json.load(f)
    assert record[0]["fits"] is False and record[0]["peak_link_mbps"] == pytest.approx(280)


def test_tso_probe_passes_at_a_rate_frames_alone_could_not_carry(clean_machine, timing):
    lacking(None if userspace_tso_enabled() else "Open vSwitch runs without userspace TSO "
            "(vm/provision.sh --userspace-tso on)", detect("auto", "auto"))
    r = calibration.try_rate(400.0, 9000, "tso", "auto", 1, log=lambda *_: None)
    timing(r["verdict"] == "ok", r)


def test_tcp_sharing_is_measured_into_one_queue_and_kept_for_runs(tmp_path, monkeypatch, capsys, clean_machine,
                                                                   timing):
    path = str(tmp_path / "calibration.json")
    assert cli.main(["calibrate", "--tcp-sharing", "4", "--mtu", "9000", "--quick", "--file", path]) == 0
    printed = capsys.readouterr().out
    assert "# one flow alone:" in printed and printed.count(" 4 flows into one 100-packet queue (cubic, MTU 9000)") == 5
    saved = capacity.load(path)
    assert [(p.tcp, p.mtu, p.queue_packets, p.flows) for p in saved.sharing] == [("cubic", 9000, 100, 4)]
    point = saved.sharing[0]
    assert point.drops_per_call >= 0 and 0 <= point.timeouts_per_call <= 1
    full_ms = 100 * (9000 + 14) * 8 / (point.rate_mbps * 1e6) * 1e3   # the whole queue at the link rate
    assert 0 < point.standing_queue_ms <= 1.05 * full_ms   # cubic fills the queue it shares, up to its depth
    timing(0.9 < point.over_max_min < 1.2, point)   # one queue stays busy: near max-min (docs/capacity.md)
    # a run that asks for it compares with it, and says so
    monkeypatch.setenv(capacity.ENV_FILE, path)
    out = str(tmp_path / "out")
    assert cli.main(["run", "-t", "bigraph:m=2,n=4", "-a", "halving-doubling", "-m", "naive", "-b", "1M", "-n", "1",
                     "-w", "0", "--out", out]) in exit_codes.FINISHED
    assert "# model: TCP sharing measured with cubic, MTU 9000, a 100-packet queue: 4 flows" in capsys.readouterr().out
    with open(os.path.join(out, "collectives.csv")) as f:
        row = next(csv.DictReader(f))
    assert row["model"] == "tcp" and float(row["model_time_s"]) == pytest.approx(
        float(row["max_min_time_s"]) * point.over_max_min, rel=0.05)
