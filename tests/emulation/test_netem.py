"""netem for real, per link and per tier: a path's ping RTT is the delay its
links were given, a lossy link's qdisc drops what it was told to, and the
flow model's time includes the path delay. Our own machines have no
sch_netem: these run in the VM stage (vm/stage.py), which requires them."""
import re
import statistics

import pytest

from emulator.routes.routing import path
from emulator.emulation import Emulation
from emulator.plan.run_plan import plan_run
from emulator.results.calls import bytes_ok, call_time
from emulator.spec.experiment import make_run

pytestmark = [pytest.mark.emulation, pytest.mark.netem]

# Two sites: a leaf and its hosts each, joined through the spine by long links.
GEO = {"topology": "leafspine:leaves=2,spines=1,hosts=2", "sizes": ["256K"], "repetitions": 1, "warmup": 0,
       "host_rate_mbps": 20, "switch_rate_mbps": 20,
       "link_overrides": ["leaf-spine:rate=10,delay=10", "host-leaf:delay=1"]}


def one_way_ms(plan, a: str, b: str) -> float:
    delay = {end: link.delay_ms for link in plan.fabric.links for end in link.ends()}
    return sum(delay[hop] for hop in path(plan.fabric, plan.table, a, b))


def rtts_ms(host, ip: str, count: int = 10) -> list[float]:
    out = host.cmd(f"ping -n -c {count} -i 0.2 -W 2 {ip}")
    return [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]


def test_delay_per_tier_shows_in_the_path_rtt_and_in_the_model(tmp_path, clean_machine, timing, record_property):
    plan = plan_run(make_run(GEO))
    far, near = plan.fabric.hosts[2], plan.fabric.hosts[1]   # bgh2 on the other leaf, bgh1 beside bgh0
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        h0 = emu.network.host(plan.fabric.hosts[0].name)
        far_rtt = statistics.median(rtts_ms(h0, far.ip))
        near_rtt = statistics.median(rtts_ms(h0, near.ip))
        (record,) = emu.replay(plan)
    expected_far = 2 * one_way_ms(plan, "bgh0", far.name)
    assert expected_far == 2 * (1 + 10 + 10 + 1)
    record_property("rtt_ms", f"across the sites {far_rtt} (configured {expected_far}), "
                              f"inside a site {near_rtt} (configured 4)")
    # netem's delay is a floor: below it, a tier went undelayed; at 1.5x, a link
    # was delayed twice. Between them, how close is the machine's speed (a VM
    # under software emulation added 5.8 ms of its own to 44 in one boot).
    assert 0.98 * expected_far <= far_rtt < 1.5 * expected_far, (far_rtt, expected_far)
    timing(abs(far_rtt - expected_far) < 0.1 * expected_far, (far_rtt, expected_far))
    timing(abs(near_rtt - 4) < 1.5, near_rtt)   # 1 ms each way on two host links: small, so loosely
    size = plan.calls[0].size_bytes
    assert bytes_ok(plan, size, record.steps)
    model_s = plan.predictions[size].time_s
    undelayed = plan_run(make_run({**GEO, "link_overrides": ["leaf-spine:rate=10"]}))
    # a ring of 4 ranks over two sites: each of its 6 steps waits for flows across them
    assert model_s == pytest.approx(undelayed.predictions[size].time_s + 6 * expected_far / 2 / 1e3, rel=1e-9)
    timing(0.8 < call_time(record.steps) / model_s < 1.3, (call_time(record.steps), model_s))


def test_loss_is_set_on_the_one_link_named(tmp_path, clean_machine):
    plan = plan_run(make_run({**GEO, "link_overrides": GEO["link_overrides"] + ["bgh3:loss=10"]}))
    with Emulation(plan, str(tmp_path), log=lambda *_: None) as emu:
        lossy = emu.network.host("bgh3")
        qdiscs = lossy.cmd(f"tc qdisc show dev {lossy.intfs[0].name}")
        clean = emu.network.host("bgh2").cmd(f"tc qdisc show dev {emu.network.host('bgh2').intfs[0].name}")
        replies = rtts_ms(emu.network.host("bgh0"), plan.fabric.host("bgh3").ip, count=50)
    assert "loss 10%" in qdiscs and "delay 1ms" in qdiscs, qdiscs
    assert "loss" not in clean and "delay 1ms" in clean, clean
    assert len(replies) < 50   # 10% each way: all 50 pings back has odds of 3e-5
