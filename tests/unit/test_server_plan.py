"""A fabric over several servers (pure): the bytes every link carries, the
two placements, the servers a run needs, and `bigraph-emu plan`."""
import dataclasses
import itertools

import numpy as np
import pytest

from emulator import cli
from emulator.model.simulation import link_bytes
from emulator.plan import capacity, servers
from emulator.plan.run_plan import plan_run
from emulator.plan.servers import Server
from emulator.spec.experiment import make_run


def _plan(topology="bigraph:m=2,n=4", mapping="hdrm", algorithm="halving-doubling", **more):
    return plan_run(make_run({"topology": topology, "mapping": mapping, "algorithm": algorithm, "sizes": ["4M"],
                              "repetitions": 1, "warmup": 0, **more}))


def test_link_bytes_of_a_ring_are_its_bytes_on_every_link_it_crosses():
    # ring allreduce of S bytes on p ranks: every rank sends 2(p-1) chunks of S/p
    plan = _plan(mapping="naive", algorithm="ring", policy="shortest")
    got = link_bytes(plan.fabric, plan.table, plan.schedules[4 << 20], plan.hosts)
    p, size = 8, 4 << 20
    per_sender = 2 * (p - 1) * size / p
    for host in plan.fabric.hosts:
        assert got[(host.name, 0)] == pytest.approx(per_sender)   # every NIC sends its share
    # every byte is counted once per link it crosses: the switches forward it again
    switch_bytes = sum(b for (node, _), b in got.items() if plan.fabric.is_switch(node))
    assert switch_bytes == pytest.approx(sum(per_sender * len(_switches(plan, a, b))
                                             for a, b in _ring_pairs(plan)))


def _ring_pairs(plan):
    hosts = plan.hosts
    return [(hosts[r], hosts[(r + 1) % len(hosts)]) for r in range(len(hosts))]


def _switches(plan, src, dst):
    from emulator.routes.routing import switch_path
    return switch_path(plan.fabric, plan.table, src, dst)


def test_switch_bin_is_mininets_switch_bin_placer():
    from mininet.examples.cluster import SwitchBinPlacer
    plan = _plan(topology="fattree:k=4", mapping="naive")
    names = ["a", "b", "c"]
    ours = servers.switch_bin(servers.traffic_of(plan), [Server(n, 1e9, 256) for n in names])
    fabric = plan.fabric
    theirs = SwitchBinPlacer(servers=names, nodes=[n.name for n in fabric.switches + fabric.hosts],
                             hosts=[h.name for h in fabric.hosts], switches=[s.name for s in fabric.switches],
                             controllers=[], links=[(link.a, link.b) for link in fabric.links])
    assert {node: names[s] for node, s in ours.where.items()} == {n: theirs.place(n) for n in ours.where}


def test_a_switch_and_its_hosts_always_share_a_server():
    plan = _plan(topology="bigraph:m=4,n=8", mapping="naive")
    traffic = servers.traffic_of(plan)
    for method in servers.PLACEMENTS:
        placement = servers.place(traffic, [Server("a", 1500, 256), Server("b", 1500, 256),
                                            Server("c", 1500, 256)], method)
        for host in plan.fabric.hosts:
            assert placement.where[host.name] == placement.where[host.switch]


def test_crossing_bytes_are_the_bytes_of_the_links_between_servers():
    plan = _plan(topology="bigraph:m=4,n=8", mapping="naive")
    traffic = servers.traffic_of(plan)
    carried = link_bytes(plan.fabric, plan.table, plan.schedules[4 << 20], plan.hosts)
    for method in servers.PLACEMENTS:
        p = servers.place(traffic, [Server("a", 2000, 256), Server("b", 2000, 256)], method)
        across = sum(b for (node, port), b in carried.items()
                     if p.where[node] != p.where[plan.fabric.peer(node, port)[0]])
        assert p.cross_bytes == pytest.approx(across)
        assert sum(p.hosts) == 32 and sum(p.switches) == 8


def test_traffic_placement_sends_fewer_bytes_across_within_budgets():
    # 32-host BiGraph, HDRM halving-doubling: half of switch-bin's bytes across
    plan = _plan(topology="bigraph:m=4,n=8")
    traffic = servers.traffic_of(plan)
    two = [Server("a", 2200, 256), Server("b", 2200, 256)]
    binned, placed = servers.switch_bin(traffic, two), servers.by_traffic(traffic, two)
    assert not placed.overloaded()
    assert placed.cross_bytes == pytest.approx(binned.cross_bytes / 2)


def test_traffic_placement_is_a_local_optimum_no_move_or_swap_does_better():
    # fat-tree with the naive mapping: uneven traffic, budgets that bind
    plan = _plan(topology="fattree:k=4", mapping="random", algorithm="ring")
    traffic = servers.traffic_of(plan)
    budget = traffic.load.sum() * 0.45
    three = [Server(n, budget, 8) for n in "abc"]
    placed = servers.by_traffic(traffic, three)
    owner = np.array([placed.where[s] for s in traffic.switches])

    def cost(o):
        over, hosts = servers._overload(traffic, three, o)
        return round(over, 6), hosts, traffic.between[o[:, None] != o[None, :]].sum() / 2

    best = cost(owner)
    n = len(owner)
    for u, s in itertools.product(range(n), range(3)):
        trial = owner.copy()
        trial[u] = s
        assert cost(trial) >= best or np.isclose(cost(trial)[2], best[2])
    for u, v in itertools.combinations(range(n), 2):
        trial = owner.copy()
        trial[u], trial[v] = owner[v], owner[u]
        assert cost(trial) >= best or np.isclose(cost(trial)[2], best[2])


def test_a_run_that_fits_one_server_stays_on_the_head():
    plan = _plan()
    placed = servers.by_traffic(servers.traffic_of(plan), [Server("a", 1e6, 256), Server("b", 1e6, 256)])
    assert placed.cross_bytes == 0 and placed.hosts == [8, 0]


def test_host_limits_bind_as_budgets_do():
    plan = _plan(topology="bigraph:m=4,n=8")
    placed = servers.by_traffic(servers.traffic_of(plan), [Server(n, 1e6, 12) for n in "abc"])
    assert not placed.overloaded() and max(placed.hosts) <= 12


def test_servers_needed_is_the_fewest_that_hold_the_run():
    plan = _plan(topology="bigraph:m=4,n=8")
    traffic = servers.traffic_of(plan)
    peak = traffic.load.sum()
    placement = servers.servers_needed(traffic, Server("s", peak / 2.5, 256))
    assert len(placement.servers) == 3 and not placement.overloaded()
    assert len(servers.servers_needed(traffic, Server("s", peak, 256)).servers) == 1
    assert len(servers.servers_needed(traffic, Server("s", 1e9, 8)).servers) == 4   # 32 hosts, 8 per server
    with pytest.raises(ValueError, match="one switch alone"):
        servers.servers_needed(traffic, Server("s", 10, 256))


def test_tunnel_rate_counts_the_tunnels_headers():
    plan = _plan(host_rate_mbps=100, switch_rate_mbps=100)
    p = servers.switch_bin(servers.traffic_of(plan), [Server("a", 1e6, 256), Server("b", 1e6, 256)])
    links = servers.crossing_links(plan.fabric, p)
    need = servers.tunnel_mbps(plan.fabric, p, 9000)
    assert need[(0, 1)] == pytest.approx(100 * len(links) * (9014 + 50) / 9014)


@pytest.mark.parametrize("text, names", [("3", ["server1", "server2", "server3"]),
                                         ("head,lab2", ["head", "lab2"]), ("root@10.0.0.2", ["root@10.0.0.2"])])
def test_servers_flag_takes_a_count_or_names(text, names):
    assert servers.parse_servers(text) == names


@pytest.mark.parametrize("text, what", [("0", "1 to"), ("a,,b", "not a host"), ("a,a", "twice"),
                                        ("a b", "not a host"), ("-x", "not a host")])
def test_bad_servers_flag_is_named(text, what):
    with pytest.raises(ValueError, match=what):
        servers.parse_servers(text)


def test_a_servers_budget_is_the_calibration_over_its_cores_times_its_cores():
    cal = capacity.Calibration("box, 4 CPUs", "2026-12-02", [capacity.Point("user", 9000, "off", 8000, 4000, 300)],
                               "/x.json")
    assert capacity.faithful_budget(cal, "user", 9000, "off", cores=2).faithful_mbps == 2000
    assert capacity.REFERENCE.cpus == 2
    with pytest.raises(LookupError, match="cores"):
        capacity.faithful_budget(capacity.Calibration("box", "", cal.points, "/x.json"), "user", 9000, "off", 2)


def test_one_machine_plan_and_placement_check_one_capacity_rule():
    """A 32-host BiGraph ring at 50 Mbit/s asks 2,300 link-Mbit/s at 64
    switch ports, four times the calibration's: the check of a run on one
    machine, `plan` for 2-core servers and the placement of a run over
    servers (budgets from each server's facts) all give it 1,998 on one
    machine, and each of two servers holds its half."""
    plan = _plan(topology="bigraph:m=4,n=8", mapping="naive", algorithm="ring", policy="shortest",
                 host_rate_mbps=50, switch_rate_mbps=50, mtu=9000, offload="tso")
    one = capacity.assess(plan, capacity.REFERENCE, "user", "tso")
    assert one.peak_mbps == pytest.approx(2300, rel=0.01) and one.faithful_mbps == pytest.approx(7994 / 4)
    assert one.fits is False
    planned = Server.of("s", capacity.faithful_budget(capacity.REFERENCE, "user", 9000, "tso", cores=2), 256)
    budget = capacity.faithful_budget(capacity.REFERENCE, "user", 9000, "tso")   # what facts_of answers
    facts = {"faithful_mbps": budget.faithful_mbps, "calibrated_ports": budget.ports, "port_exponent": budget.exponent}
    placed = servers.server_of("head", facts, 256)
    traffic = servers.traffic_of(plan)
    for server in (planned, placed):
        whole = servers.place(traffic, [server], "traffic")
        assert whole.budget_mbps(0) == pytest.approx(one.faithful_mbps) and whole.overloaded()
        alone = servers.as_one_machine(whole, "reference")
        assert alone.faithful_mbps == pytest.approx(one.faithful_mbps) and alone.fits is False
        assert "WARNING" in alone.describe(50)
        two = servers.place(traffic, [server, dataclasses.replace(server, name="lab2")], "traffic")
        assert not two.overloaded() and servers.as_one_machine(two, "") is None
        assert all(two.load_mbps[s] <= two.budget_mbps(s) for s in (0, 1))
    assert len(servers.servers_needed(traffic, planned).servers) == 2


def test_plan_command_prints_both_placements(capsys, monkeypatch):
    monkeypatch.setenv(capacity.ENV_FILE, "/nonexistent/calibration.json")   # the reference figures
    code = cli.main(["plan", "-t", "bigraph:m=4,n=8", "-a", "halving-doubling", "-m", "hdrm", "-b", "4M",
                     "--servers", "head,lab2", "--server-cores", "1", "--offload", "off"])
    out = capsys.readouterr().out
    assert code == 0
    assert "switch-bin (Mininet's SwitchBinPlacer)" in out and "by traffic" in out
    assert "head (head): 4 switches, 16/256 hosts" in out
    assert "1 cores x 1559 per core" in out
    assert "faithful up to 780 at its 32 switch ports" in out   # 1559 at 16 ports, halved at twice as many


def test_plan_command_without_servers_says_how_many(capsys, monkeypatch):
    monkeypatch.setenv(capacity.ENV_FILE, "/nonexistent/calibration.json")
    code = cli.main(["plan", "-t", "bigraph:m=4,n=8", "-a", "halving-doubling", "-m", "hdrm", "-b", "4M",
                     "--server-cores", "1", "--offload", "off"])
    # 3200 link-Mbit/s; a server holds 1559 at up to 16 switch ports, the fabric has 64
    assert code == 0 and "# needs 4 servers" in capsys.readouterr().out


@pytest.mark.parametrize("flags, what", [(["--servers", "a,a"], "twice"), (["--server-cores", "0"], "at least 1"),
                                         (["--server-cores", "x"], "server-cores")])
def test_plan_command_refuses_bad_flags(capsys, flags, what):
    assert cli.main(["plan", *flags]) == 2
    assert what in capsys.readouterr().err


# --- preflight's pure checks ----------------------------------------------------------------

def _facts(**more):
    return {"uid": 0, "boot_id": "b", "mininet": "2.3.0", "ovs": "ovs-vswitchd (Open vSwitch) 3.1.0",
            "project": "0.1.0", "datapath": "kernel", "dataplane": "", **more}


def test_servers_that_agree_with_the_head_pass():
    assert servers.fact_problems({"head": _facts(), "lab2": _facts(datapath="user")}) == []


@pytest.mark.parametrize("changed, said", [({"mininet": "2.3.1"}, "server lab2: mininet '2.3.1', the head has '2.3.0'"),
                                           ({"ovs": "ovs-vswitchd (Open vSwitch) 3.3.0"}, "server lab2: ovs"),
                                           ({"project": "0.2.0"}, "server lab2: project"),
                                           ({"uid": 1000}, "server lab2: ssh reaches it as uid 1000, not root"),
                                           ({"datapath": None, "dataplane": "no OVS"}, "server lab2: no datapath"),
                                           ({"congestion_controls": ["reno", "bbr"]},
                                            "server lab2: its kernel does not offer 'cubic' for tcp (it offers reno, bbr)")])
def test_a_server_unlike_the_head_is_named(changed, said):
    problems = servers.fact_problems({"head": _facts(), "lab2": _facts(**changed)})
    assert len(problems) == 1 and problems[0].startswith(said), problems


def test_every_server_is_checked_for_what_the_run_and_its_jobs_need(tmp_path):
    """A job's own congestion control, the queue discipline's qdisc and netem
    for delay: named per server before anything is built."""
    workload = tmp_path / "jobs.toml"
    workload.write_text('[[job]]\nname = "a"\nranks = 4\ntcp = "dctcp"\nops = [{op = "allreduce", bytes = "1M"}]\n'
                        '[[job]]\nname = "b"\nranks = 4\nops = [{op = "allreduce", bytes = "1M"}]\n')
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "workload": str(workload), "tcp": "bbr",
                              "queue_discipline": "red-ecn"}))
    needs = servers.needs_of(plan)
    assert set(needs.congestion_controls) == {"bbr", "dctcp"} and "a job's tcp" in needs.congestion_controls["dctcp"]
    assert needs.qdiscs == {"sch_red": "queue_discipline red-ecn"}
    delayed = servers.needs_of(plan_run(make_run({"topology": "bigraph:m=2,n=4", "link_delay_ms": 1.0})))
    assert delayed.qdiscs == {"sch_netem": "link_delay_ms"} and delayed.congestion_controls == {"cubic": "tcp"}
    full = _facts(congestion_controls=["bbr", "cubic", "dctcp"], qdiscs={"sch_red": True, "sch_netem": True})
    assert servers.fact_problems({"head": full, "lab2": full}, needs) == []
    lacking = _facts(congestion_controls=["bbr", "cubic"], qdiscs={"sch_red": False, "sch_netem": True})
    problems = servers.fact_problems({"head": full, "lab2": lacking}, needs)
    assert problems[0].startswith("server lab2: its kernel does not offer 'dctcp' for a job's tcp (rank ")
    assert problems[1] == "server lab2: its kernel has no sch_red for queue_discipline red-ecn"


def test_the_quickest_round_trip_gives_the_clock_offset():
    # the server's clock runs 2.5 s ahead; round trips of 4, 1 and 9 ms
    samples = [(10.0, 12.502, 10.004), (11.0, 13.5005, 11.001), (12.0, 14.506, 12.009)]
    offset, uncertainty = servers.clock_offset(samples)
    assert offset == pytest.approx(2.5) and uncertainty == pytest.approx(0.0005)
    with pytest.raises(ValueError):
        servers.clock_offset([])


def test_the_clock_limit_is_1_percent_of_the_shortest_call():
    slow = _plan(host_rate_mbps=10, switch_rate_mbps=10)
    fast = _plan(host_rate_mbps=10000, switch_rate_mbps=10000, model_alpha_us=0)
    for plan in (slow, fast):
        shortest = min(p.time_s for p in plan.predictions.values())
        assert servers.clock_limit_s(plan.predictions.values()) == pytest.approx(0.01 * shortest)
    assert servers.clock_limit_s(slow.predictions.values()) > 100 * servers.clock_limit_s(fast.predictions.values())


def test_a_placement_that_splits_a_node_of_accelerators_is_named():
    from emulator.fabric.nodes import NodeShape
    from emulator.fabric.topology import build
    from emulator.plan.servers import Placement, Server, split_nodes
    fabric = build("bigraph:m=2,n=4", node=NodeShape(4, 2, "pcie"))   # per node: 2 PCIe switches and a root
    servers = [Server("head", 1000.0, 256), Server("lab2", 1000.0, 256)]
    names = [s.name for s in fabric.switches] + [h.name for h in fabric.hosts]
    whole = {name: 0 for name in names}
    placement = Placement("traffic", servers, whole, [0.0, 0.0], [len(fabric.hosts), 0], [len(fabric.switches), 0], {})
    assert split_nodes(fabric, placement) == []
    root = next(s for s in fabric.switches if s.node == 1 and s.tier == "pcieroot")
    placement.where[root.name] = 1
    (said,) = split_nodes(fabric, placement)
    assert said.startswith("node 1 (") and f"{root.name} on lab2" in said and "on head" in said
