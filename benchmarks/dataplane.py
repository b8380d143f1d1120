"""Dataplane capacity used with fidelity, as a fraction of the raw capacity,
both measured in the same run on this machine. Needs root.

raw: iperf3 between two Mininet hosts through one unshaped OVS switch
(the datapath the emulator picks, MTU 9000, host tx/TSO/GSO offloads off
as emulator/net/network.py sets them), --seconds long, one TCP flow and
--flows flows. iperf3 reports TCP payload; it is also shown as the wire
rate (Ethernet frames, what HTB shapes): payload / payload_efficiency(MTU).

used with fidelity: ring allreduce on bigraph:m=2,n=4 (naive mapping,
shortest routes: no two flows share a link, so every flow runs at the link
rate R) at rising R; each rate is a fresh Emulation (the rate is part of
the fabric) replaying one warm-up and --reps counted calls sized to last
about 1.5 s. A rate passes when every counted call's fidelity verdict is
"ok" (emulator/results.py: within 15% of the model, saturated links at
>= 90% of their rate, the machine >= 10% idle) and bytes_ok; a failing
rate is tried once more (the machine is shared). The load is counted in
link-Mbit/s summed over every switch traversal:
  offered = R * (switch traversals of all flows running at once)
  carried = bytes * traversals * 8 / measured call time (the average).
After the first failing rate, one rate half-way back is tried.

Unless --quick or --no-diagnose, two raw variants show where the gap
between raw and emulated capacity comes from: one switch with the
emulator's HTB + FIFO on every port (at a rate that never limits) and its
TCP small-queues limit on the hosts, and a chain of three unshaped
switches (does the budget divide by switch traversals?). Every figure
comes with ovs-vswitchd's CPU (cores) and link-Mbit/s per ovs core.

    .venv/bin/python benchmarks/dataplane.py [--quick] [--rates 50,100,...] [--seconds 10]

Issue 7's target: at least 80% of the raw capacity usable with fidelity.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import time

import benchlib
from benchlib import fmt

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch
from mininet.link import Link

from controller.routing import switch_path
from emulator.emulation import Emulation
from emulator.fabric import ADDRESS_BASE, PREFIX_LEN, host_address
from emulator.metrics import payload_efficiency
from emulator.net import ovs_buffers, processes
from emulator.net.dataplane import detect
from emulator.net.network import TSQ_FRAMES
from emulator.net.shaping import tc_commands
from emulator.plan import plan_run
from emulator.results import collective_rows
from emulator.spec import RunSpec
from emulator.topology import LinkProfile

TOPOLOGY = "bigraph:m=2,n=4"
MTU = 9000
RATES = [50, 75, 100, 125, 150, 175, 200, 250, 300]
QUICK_RATES = [50, 100, 150, 200, 250]
CALL_SECONDS = 1.5
IPERF_PORT = 5201
SHAPED_MBPS = 20000.0   # HTB present on every port, never the limit
TARGET = 0.80


# --- raw: iperf3 through one switch -------------------------------------------------------

def raw_capacity(seconds: int, flows: list[int], switches: int = 1, shaped: bool = False) -> dict:
    """iperf3 between two hosts at the ends of a chain of `switches` OVS
    switches (standalone: a chain has no loop), with each number of
    parallel flows: {flows: (payload Mbit/s, ovs-vswitchd cores busy)}.
    shaped: every port and host NIC gets the emulator's HTB + FIFO at a
    rate that does not limit (SHAPED_MBPS) and hosts the emulator's TCP
    small-queues limit, to see what shaping itself costs."""
    dp = detect("auto")
    setLogLevel("error")
    results = {}
    with benchlib.held_lock(), ovs_buffers.large_socket_buffers():
        net = Mininet(topo=None, build=False, controller=None, link=Link,
                      ipBase=f"{ADDRESS_BASE}/{PREFIX_LEN}", autoSetMacs=False)
        try:
            chain = [net.addSwitch(f"bgs{i}", cls=OVSSwitch, dpid="%016x" % (i + 1), datapath=dp.datapath,
                                   failMode="standalone") for i in range(switches)]
            for a, b in zip(chain, chain[1:]):
                net.addLink(a, b)
            hosts = []
            for i, switch in enumerate((chain[0], chain[-1])):
                ip, mac = host_address(i)
                hosts.append(net.addHost(f"bgh{i}", ip=f"{ip}/{PREFIX_LEN}", mac=mac))
                net.addLink(hosts[-1], switch)
            net.build()
            processes.record(*(n.pid for n in net.hosts + net.switches))
            net.start()
            for link in net.links:
                for intf in (link.intf1, link.intf2):
                    _must(intf.node, f"ip link set dev {intf.name} mtu {MTU}")
                    if dp.tx_offload_off and intf.node in hosts:
                        _must(intf.node, f"ethtool -K {intf.name} tx off tso off gso off")
                    if shaped:
                        for argv in tc_commands(intf.name, SHAPED_MBPS, LinkProfile.host_queue_packets, MTU):
                            _must(intf.node, " ".join(argv))
            if shaped:
                for h in hosts:
                    _must(h, f"sysctl -q -w net.ipv4.tcp_limit_output_bytes={TSQ_FRAMES * (MTU + 14)}")
            server_ip = host_address(1)[0]
            for n in flows:
                ticks0, t0 = benchlib.ovs_ticks(), time.monotonic()
                mbps = _iperf(hosts[0], hosts[1], server_ip, seconds, n)
                cores = (benchlib.ovs_ticks() - ticks0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)
                results[n] = (mbps, cores)
        finally:
            net.stop()
            processes.sweep()
    return results


def _must(node, command: str) -> None:
    out = node.cmd(command + " 2>&1; echo __rc=$?")
    body, _, rc = out.rpartition("__rc=")
    if rc.strip() != "0":
        raise RuntimeError(f"{node.name}: `{command}` failed: {body.strip()}")


def _iperf(client, server, server_ip: str, seconds: int, flows: int) -> float:
    srv = server.popen(["iperf3", "-s", "-1", "-p", str(IPERF_PORT)])
    processes.record(srv.pid)
    try:
        time.sleep(0.5)
        cli = client.popen(["iperf3", "-c", server_ip, "-p", str(IPERF_PORT), "-t", str(seconds),
                            "-P", str(flows), "-J"])
        processes.record(cli.pid)
        try:
            out, _ = cli.communicate(timeout=seconds + 30)
        finally:
            if cli.poll() is None:
                processes.stop_pid(cli.pid)
        report = json.loads(out)
        if "error" in report:
            raise RuntimeError(f"iperf3: {report['error']}")
        return report["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        if srv.poll() is None:
            processes.stop_pid(srv.pid)


# --- used with fidelity: an emulated allreduce at rising rates -------------------------------

def size_for(rate: float) -> int:
    """Bytes per rank for a ring allreduce call of about CALL_SECONDS at `rate`."""
    ranks = 8
    per_byte = 2 * (ranks - 1) / ranks * 8 / (rate * 1e6 * payload_efficiency(MTU))
    mib = max(1, round(CALL_SECONDS / per_byte / (1 << 20)))
    return mib << 20


def traversals(plan, size: int) -> tuple[int, int]:
    """(switch traversals of the flows of step 0, which all run at once;
    bytes * traversals summed over every step of every rank)."""
    sched = plan.schedules[size]
    hops = {}

    def length(a: int, b: int) -> int:
        key = (a, b)
        if key not in hops:
            hops[key] = len(switch_path(plan.fabric, plan.table, plan.hosts[a], plan.hosts[b]))
        return hops[key]

    first = sum(length(r, t.peer) for r in range(sched.ranks) for t in sched.steps[r][0].sends)
    byte_hops = sum(t.nbytes * length(r, t.peer) for r in range(sched.ranks) for s in sched.steps[r] for t in s.sends)
    return first, byte_hops


def emulated_at(rate: float, reps: int) -> dict:
    size = size_for(rate)
    spec = RunSpec(topology=TOPOLOGY, collective="allreduce", algorithm="ring", mapping="naive",
                   policy="shortest", datapath="user", mtu=MTU, host_rate_mbps=rate, switch_rate_mbps=rate,
                   sizes=(size,), repetitions=reps, warmup=1, label="benchmarks/dataplane.py")
    plan = plan_run(spec)
    rd = benchlib.run_dir("dataplane")
    try:
        with Emulation(plan, rd, log=lambda line: print(line, flush=True) if "WARNING" in line else None) as emu:
            records = emu.replay(plan)
            datapath = emu.dataplane.datapath
        rows = collective_rows(plan, records, datapath)
    finally:
        shutil.rmtree(rd, ignore_errors=True)
    first, byte_hops = traversals(plan, size)
    verdicts = [r["fidelity"] if r["bytes_ok"] else "FAIL: bytes" for r in rows]
    return {"rate": rate, "size": size, "traversals": first, "offered": first * rate,
            "max_flows_per_link": max(plan.predictions[size].max_flows_per_step),
            "time_over_model": benchlib.median(r["time_over_model"] for r in rows),
            "busbw": benchlib.median(r["busbw_mbps"] for r in rows),
            "carried": benchlib.median(byte_hops * 8 / r["time_s"] / 1e6 for r in rows),
            "cpu_busy": benchlib.median(_num(r["cpu_busy"]) for r in rows),
            "ovs_cpu": benchlib.median(_num(r["ovs_cpu"]) for r in rows),
            "saturated_util": benchlib.median(_num(r["saturated_util"]) for r in rows),
            "retrans": sum(_num(r["tcp_retrans"]) or 0 for r in rows),
            "ok": all(v == "ok" for v in verdicts), "verdicts": verdicts}


def _num(x):
    return None if x in ("", None) else float(x)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="5 s iperf3, one flow, coarser rates, one counted call")
    p.add_argument("--seconds", type=int, default=10, help="iperf3 duration (default 10)")
    p.add_argument("--flows", type=int, default=4, help="also measure raw with this many parallel flows (0: no)")
    p.add_argument("--rates", default="", help="link rates to try, Mbit/s, ascending")
    p.add_argument("--reps", type=int, default=2, help="counted calls per rate (default 2)")
    p.add_argument("--no-retry", action="store_true", help="stop at the first failing rate")
    p.add_argument("--burst-ms", type=float, default=0.0,
                   help="experiment: HTB burst of this many ms of traffic at the link rate (the emulator's "
                        "emulator.net.shaping.burst_bytes is replaced in this process only; default: its own, 1 ms)")
    p.add_argument("--no-diagnose", dest="diagnose", action="store_false",
                   help="skip the raw variants (shaped ports; a chain of 3 switches) that explain the gap")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("dataplane.py needs root (Mininet and Open vSwitch)")
    seconds = 5 if args.quick else args.seconds
    if args.burst_ms:
        import emulator.net.shaping as shaping
        shaping.burst_bytes = lambda rate_mbps, mtu: max(2 * (mtu + 14), int(rate_mbps * 1e6 / 8 * args.burst_ms / 1e3))
        print(f"# experiment: HTB burst = {args.burst_ms:g} ms of traffic at the link rate (emulator default: 1 ms)")
    flows = [1] + ([args.flows] if args.flows > 1 and not args.quick else [])
    rates = [float(r) for r in args.rates.split(",")] if args.rates else QUICK_RATES if args.quick else RATES
    reps = 1 if args.quick else args.reps
    eff = payload_efficiency(MTU)

    raw = benchlib.with_lock_retry(lambda: raw_capacity(seconds, flows))
    benchlib.check_clean("raw iperf3")
    for n, (mbps, cores) in raw.items():
        print(f"# raw: iperf3, {n} flow{'s' if n > 1 else ''}, {seconds} s, one OVS switch, MTU {MTU}: "
              f"{mbps:.0f} Mbit/s payload = {mbps / eff:.0f} Mbit/s on the wire; ovs-vswitchd {cores:.2f} cores "
              f"({mbps / max(cores, 1e-3):.0f} payload link-Mbit/s per ovs core)", flush=True)
    diag = {}
    if args.diagnose and not args.quick:
        for label, kw in (("one switch, every port shaped (HTB+FIFO at 20 Gbit/s, emulator's TSQ)",
                           {"shaped": True}),
                          ("chain of 3 switches, unshaped", {"switches": 3})):
            got = benchlib.with_lock_retry(lambda: raw_capacity(seconds, [1], **kw))[1]
            benchlib.check_clean("raw iperf3 variant")
            links = got[0] * kw.get("switches", 1)
            diag[label] = (got[0], links, got[1])
            print(f"# raw variant, {label}: {got[0]:.0f} Mbit/s payload, {links:.0f} payload link-Mbit/s "
                  f"({links / raw[1][0]:.0%} of raw); ovs-vswitchd {got[1]:.2f} cores "
                  f"({links / max(got[1], 1e-3):.0f} per ovs core)", flush=True)
    raw = {n: v[0] for n, v in raw.items()}
    raw_wire = raw[1] / eff

    print(f"# used with fidelity: ring allreduce on {TOPOLOGY}; link-Mbit/s summed over switch traversals")
    header = (f"{'rate':>6} {'size':>6} {'trav':>4} {'offered':>8} {'x raw':>6} {'carried':>8} {'busbw':>7} "
              f"{'t/model':>7} {'cpu':>5} {'ovs':>5} {'/ovs':>6} {'sat':>5} {'retr':>5}  verdict")
    print(header, flush=True)
    runs, best = [], None
    rates, bisect = list(rates), not args.quick
    while rates:
        rate = rates.pop(0)
        result = None
        for attempt in range(1 if args.no_retry else 2):
            result = benchlib.with_lock_retry(lambda: emulated_at(rate, reps))
            benchlib.check_clean(f"allreduce at {rate:g} Mbit/s")
            runs.append(result)
            r = result
            print(f"{r['rate']:6.0f} {r['size'] >> 20:5d}M {r['traversals']:4d} {r['offered']:8.0f} "
                  f"{r['offered'] / raw_wire:6.2f} {fmt(r['carried'], 8, 0)} {fmt(r['busbw'], 7, 1)} "
                  f"{fmt(r['time_over_model'], 7)} {fmt(r['cpu_busy'], 5)} {fmt(r['ovs_cpu'], 5)} "
                  f"{fmt(r['carried'] / r['ovs_cpu'] if r['carried'] and r['ovs_cpu'] else None, 6, 0)} "
                  f"{fmt(r['saturated_util'], 5)} {r['retrans']:5.0f}  "
                  f"{'ok' if r['ok'] else '; '.join(sorted(set(v for v in r['verdicts'] if v != 'ok')))}"
                  + ("" if attempt == 0 else "  (second try)"), flush=True)
            if result["ok"]:
                break
        if not result["ok"]:
            # one step between the last rate that passed and this one
            if best is not None and bisect and rate - best["rate"] > 10:
                rates, bisect = [round((rate + best["rate"]) / 2)], False
                continue
            break
        best = result
    print()
    for n, mbps in raw.items():
        print(f"# raw capacity ({n} flow{'s' if n > 1 else ''}): {mbps:.0f} Mbit/s payload, "
              f"{mbps / eff:.0f} link-Mbit/s on the wire")
    if best is None:
        print("# no rate passed the fidelity verdict")
        return
    frac = best["offered"] / raw_wire
    print(f"# used with fidelity: {best['offered']:.0f} link-Mbit/s offered ({best['traversals']} switch traversals "
          f"x {best['rate']:g} Mbit/s), {best['carried']:.0f} carried on average over the call")
    print(f"# fraction of raw (1 flow): {frac:.0%} offered, {best['carried'] / (raw[1]):.0%} carried "
          f"(payload/payload); target >= {TARGET:.0%}: {'met' if frac >= TARGET else 'MISSED'}"
          + (f"; of raw with {max(raw)} flows: {best['offered'] / (raw[max(raw)] / eff):.0%}" if len(raw) > 1 else ""))


if __name__ == "__main__":
    main()
