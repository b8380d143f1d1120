"""The flow model with the links' token buckets (the emulator's HTB burst),
checked against times worked out by hand."""
import pytest

from emulator.fabric.mapping import hosts_for_ranks
from emulator.fabric.topology import build
from emulator.model.buckets import Burst
from emulator.model.simulation import predict, predict_collective
from emulator.routes.routing import forwarding_table

from test_model import ALPHA, bytes_per_s, schedule, two_switches

R = 40.0       # Mbit/s, every link
PEAK = 400.0   # Mbit/s while a bucket holds tokens
BURST = Burst(seconds=0.010, peak_mbps=PEAK)
TOKENS = bytes_per_s(R) * BURST.seconds   # 50 KB


def one_flow(nbytes, steps=1, burst=BURST):
    fabric, table, hosts = two_switches(m=1, host_mbps=R, switch_mbps=R)
    sched = schedule([([(1, nbytes)], [])] * steps, [([], [(0, nbytes)])] * steps)
    return predict(fabric, table, sched, hosts, alpha_s=ALPHA, burst=burst)


def spent_after():
    """Seconds a full bucket lasts at the peak, and the bytes sent by then."""
    seconds = TOKENS / (bytes_per_s(PEAK) - bytes_per_s(R))
    return seconds, bytes_per_s(PEAK) * seconds


def test_a_flow_within_its_links_burst_runs_at_the_peak():
    nbytes = 20_000
    assert one_flow(nbytes).time_s == pytest.approx(nbytes / bytes_per_s(PEAK) + ALPHA, rel=1e-9)


def test_a_longer_flow_spends_the_burst_then_runs_at_the_rate():
    nbytes = 1_000_000
    seconds, sent = spent_after()
    expected = seconds + (nbytes - sent) / bytes_per_s(R) + ALPHA
    assert one_flow(nbytes).time_s == pytest.approx(expected, rel=1e-9)
    assert one_flow(nbytes, burst=None).time_s == pytest.approx(nbytes / bytes_per_s(R) + ALPHA, rel=1e-9)


def test_a_bucket_refills_only_for_the_time_its_link_waited():
    nbytes = 1_000_000   # empties the bucket; the next step finds alpha's worth of tokens
    first = one_flow(nbytes).time_s
    refilled = bytes_per_s(R) * ALPHA
    seconds = refilled / (bytes_per_s(PEAK) - bytes_per_s(R))
    second = seconds + (nbytes - bytes_per_s(PEAK) * seconds) / bytes_per_s(R) + ALPHA
    assert one_flow(nbytes, steps=2).time_s == pytest.approx(first + second, rel=1e-9)


def test_two_flows_share_the_peak_and_then_the_rate():
    fabric, table, hosts = two_switches(m=2, host_mbps=1000.0, switch_mbps=R)   # the switch link shapes
    nbytes = 500_000
    sched = schedule([([(2, nbytes)], [])], [([(3, nbytes)], [])], [([], [(0, nbytes)])], [([], [(1, nbytes)])])
    seconds, sent = spent_after()   # both together drain the one bucket as one flow would
    expected = seconds + (2 * nbytes - sent) / bytes_per_s(R) + ALPHA
    assert predict(fabric, table, sched, hosts, alpha_s=ALPHA, burst=BURST).time_s == pytest.approx(expected, rel=1e-9)


def test_the_burst_counts_the_load_in_flight_at_the_links_rates_only():
    with_burst, without = one_flow(20_000), one_flow(20_000, burst=None)
    assert with_burst.peak_switch_mbps == pytest.approx(without.peak_switch_mbps)


def test_flows_sharing_a_bursting_link_count_its_rate_once():
    fabric, table, hosts = two_switches(m=2, host_mbps=1000.0, switch_mbps=R)   # both flows cross one shaped link
    sched = schedule([([(2, 500_000)], [])], [([(3, 500_000)], [])], [([], [(0, 500_000)])], [([], [(1, 500_000)])])
    with_burst, without = (predict(fabric, table, sched, hosts, alpha_s=ALPHA, burst=b) for b in (BURST, None))
    assert with_burst.peak_switch_mbps == pytest.approx(without.peak_switch_mbps)


def exact_and_lockstep(algorithm, mapping, size, **model):
    fabric = build("bigraph:m=2,n=4")
    table = forwarding_table(fabric, "shortest")
    hosts = hosts_for_ranks(fabric, mapping)
    return [predict_collective(fabric, table, "allreduce", algorithm, hosts, size, ALPHA, 1.0, method, **model).time_s
            for method in ("exact", "lockstep")]


@pytest.mark.parametrize("algorithm, mapping", [("ring", "naive"), ("halving-doubling", "hdrm"), ("ring", "hdrm")])
def test_lockstep_with_a_burst_carries_the_tokens_as_the_exact_simulation(algorithm, mapping):
    for size in (64 << 10, 1 << 20):
        exact, lockstep = exact_and_lockstep(algorithm, mapping, size, burst=BURST)
        plain, _ = exact_and_lockstep(algorithm, mapping, size)
        assert exact < plain   # waiting links saved tokens
        assert lockstep == pytest.approx(exact, rel=1e-9)


def test_a_burst_needs_a_peak():
    with pytest.raises(ValueError, match="peak"):
        Burst(0.01, 0.0)


@pytest.mark.parametrize("algorithm, mapping", [("ring", "naive"), ("halving-doubling", "hdrm")])
def test_lockstep_keeps_the_least_step_time_as_the_exact_simulation(algorithm, mapping):
    for size in (32 << 10, 1 << 20):
        exact, lockstep = exact_and_lockstep(algorithm, mapping, size, burst=BURST, min_step_s=2e-3,
                                             switch_latency_s=1e-4)
        assert lockstep == pytest.approx(exact, rel=1e-9)


def test_a_runs_latency_share_is_what_latencies_add_to_its_model():
    import dataclasses
    from emulator.model.buckets import EmulatedLinks
    from emulator.plan.run_plan import plan_run
    from emulator.spec.experiment import make_run
    spec = make_run({"topology": "bigraph:m=2,n=4", "algorithm": "ring", "mapping": "naive",
                     "sizes": [32 << 10, 8 << 20], "host_rate_mbps": 50, "switch_rate_mbps": 50})
    links = EmulatedLinks(BURST, 1e-3, "", 1e-4)
    plan = plan_run(spec, links=links)
    small, large = plan.latency_share(32 << 10), plan.latency_share(8 << 20)
    assert small > 0.9 and large < 0.05            # 4 KiB steps are their latencies; 1 MiB steps their bytes
    no_alpha = dataclasses.replace(spec, model_alpha_us=0.0)
    bare = plan_run(no_alpha, links=EmulatedLinks(BURST, 0.0, "", 0.0))
    for size, share in ((32 << 10, small), (8 << 20, large)):
        without = bare.predictions[size].time_s
        assert share == pytest.approx(1 - without / plan.predictions[size].time_s)
    assert plan_run(no_alpha).latency_share(32 << 10) == 0.0   # the network alone, no latency: none


def test_a_run_names_its_latency_bound_sizes_before_it_starts():
    from emulator.model.buckets import EmulatedLinks
    from emulator.preflight import latency_bound
    from emulator.plan.run_plan import plan_run
    from emulator.spec.experiment import make_run
    spec = make_run({"topology": "bigraph:m=2,n=4", "sizes": [32 << 10, 8 << 20], "host_rate_mbps": 50,
                     "switch_rate_mbps": 50})
    plan = plan_run(spec, links=EmulatedLinks(BURST, 1e-3, "", 1e-4))
    line = latency_bound(plan)
    assert line.startswith("# latency-bound: ") and f"32K ({plan.latency_share(32 << 10):.0%})" in line
    assert "8M" not in line
    assert latency_bound(plan_run(make_run({"topology": "bigraph:m=2,n=4", "sizes": [8 << 20]}))) == ""
