"""Bring-up and teardown of the emulated fabric, against plain Mininet and
against a reactive controller, all measured in the same run. Needs root.

For every topology, one after another (one emulation at a time; the script
waits for the machine-wide lock before each):

1. plain Mininet builds the same switches, hosts and links (the Fabric of
   emulator.fabric.topology.build) with OVS bridges in standalone mode and no
   controller, userspace datapath (--datapath kernel: the kernel's); times build+start ("up") and stop
   ("down"). No traffic is sent: standalone bridges flood, and BiGraph and
   fat-trees have loops (IPv6 is switched off before the bridges exist, so
   the kernel's own router solicitations cannot start a flood either).
2. `Emulation(plan, run_dir)`: enter (controller, Mininet with shaping, MTU,
   offloads and static ARP, every switch's rules confirmed by barrier, read
   back from OVS, every host pinging every other, probe packets on every
   route shape) and exit; with the time of each phase.
3. (with --reactive, default on for up to 32 hosts) the same EmulatedFabric with
   benchmarks/reactive_controller.py, which installs a destination's route
   on the first packet-in: time until every switch is connected, and until
   every host has reached every other (the first packets teach the
   routes), against ours: routes confirmed, then all pairs reached.

    .venv/bin/python benchmarks/bringup.py [--quick] [-t TOPOLOGY ...] [--reactive-max-hosts N] [--datapath kernel]

Targets: 32-host BiGraph up with routes verified < 15 s and torn
down < 5 s; a 128-host BiGraph up at all.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import traceback

import benchlib
from benchlib import PhaseTimer, fmt, ratio, wrap

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch
from mininet.link import Link

from emulator.emulation import Emulation
from emulator.fabric.graph import ADDRESS_BASE, PREFIX_LEN
from emulator.net import interrupts, ovs_buffers, processes
from emulator.net.controller_process import ControllerProcess, free_port
from emulator.net.dataplane import detect
from emulator.net.network import EmulatedFabric
from emulator.plan.run_plan import plan_run
from emulator.spec.experiment import RunSpec
from emulator.fabric.topology import build

TOPOLOGIES = ["bigraph:m=2,n=4", "bigraph:m=4,n=8", "bigraph:m=8,n=8", "bigraph:m=8,n=16", "fattree:k=4"]
QUICK_TOPOLOGIES = ["bigraph:m=2,n=4", "bigraph:m=4,n=8"]
FLOOD_PACKETS = 5000   # more packets than this into a standalone baseline's switch ports: a flood
TARGET_UP_S, TARGET_DOWN_S = 15.0, 5.0

# where the time goes (wrapped, not edited)
wrap(Mininet, "addSwitch", "mininet add")
wrap(Mininet, "addHost", "mininet add")
wrap(Mininet, "addLink", "mininet add")
wrap(Mininet, "build", "mininet build")
wrap(Mininet, "start", "mininet start")
wrap(Mininet, "stop", "mininet stop")
wrap(ControllerProcess, "start", "controller start")
wrap(ControllerProcess, "wait_routes", "routes confirmed")
wrap(ControllerProcess, "stop", "controller stop")
wrap(EmulatedFabric, "start", "fabric up")
wrap(EmulatedFabric, "_run_scripts", "interfaces")
wrap(EmulatedFabric, "ping_all", "ping all")
wrap(EmulatedFabric, "stop", "network stop")
wrap(Emulation, "_verify", "verify")
wrap(Emulation, "_probe", "probes")
if hasattr(Emulation, "_settled_rules"):
    wrap(Emulation, "_settled_rules", "settle")
wrap(EmulatedFabric, "dump_flows", "dump flows")
wrap(EmulatedFabric, "probe", "probe pings")
wrap(Emulation, "_sweep", "sweep")


def quiet(*_):
    pass


def log_warnings(line: str) -> None:
    if "WARNING" in line or "pinging them again" in line:   # the second chance of a slow machine's pings too
        print(line, flush=True)


# --- 1. plain Mininet, standalone bridges ---------------------------------------------

def plain_mininet(topology: str, datapath: str) -> dict:
    fabric = build(topology)
    datapath = detect(datapath).datapath
    setLogLevel("error")
    out = {}
    with benchlib.held_lock(), ovs_buffers.large_socket_buffers():
        ticks0 = benchlib.ovs_ticks()
        net = Mininet(topo=None, build=False, controller=None, link=Link,
                      ipBase=f"{ADDRESS_BASE}/{PREFIX_LEN}", autoSetMacs=False)
        try:
            t0 = time.perf_counter()
            for s in fabric.switches:
                net.addSwitch(s.name, cls=OVSSwitch, dpid="%016x" % s.dpid, datapath=datapath,
                              failMode="standalone")
            for h in fabric.hosts:
                net.addHost(h.name, ip=f"{h.ip}/{PREFIX_LEN}", mac=h.mac)
            for link in fabric.links:
                net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port)
            net.build()
            t1 = time.perf_counter()
            processes.record(*(node.pid for node in net.hosts + net.switches))
            benchlib.disable_ipv6(net, fabric)   # not timed: only there to keep loops quiet
            t2 = time.perf_counter()
            net.start()
            t3 = time.perf_counter()
            out["packets"] = benchlib.switch_rx_packets(fabric)
            if out["packets"] > FLOOD_PACKETS:
                print(f"# WARNING: {out['packets']} packets entered the standalone bridges: a flood; "
                      "stopping at once", flush=True)
        finally:
            t4 = time.perf_counter()
            net.stop()
            t5 = time.perf_counter()
        out.update(build=t1 - t0, start=t3 - t2, up=(t1 - t0) + (t3 - t2), down=t5 - t4,
                   ovs_cpu_s=(benchlib.ovs_ticks() - ticks0) / os.sysconf("SC_CLK_TCK"))
        processes.sweep()   # forgets the recorded shells (all gone) and nothing else
    return out


# --- 2. the emulator --------------------------------------------------------------------

FLAKY = "packets did not follow their routes"


def emulated(topology: str, datapath: str, attempts: int = 3) -> dict:
    """Emulation enter and exit; a bring-up that fails its probe check (see
    the README: OVS updates rule counters late) is tried again, and counted."""
    flakes = []
    for _ in range(attempts):
        out = _emulated(topology, datapath)
        if not (out["error"] and FLAKY in out["error"]):
            break
        flakes.append(out)
        print(f"#   ours: bring-up failed its probe check after {out['up']:.1f} s; trying again: "
              f"{out['error'][:200]}", flush=True)
        benchlib.wait_for_lock()
    out["probe_failures"] = len(flakes)
    return out


def _emulated(topology: str, datapath: str) -> dict:
    spec = RunSpec(topology=topology, datapath=datapath, sizes=(1 << 20,), repetitions=1, warmup=0)
    plan = plan_run(spec)
    rd = benchlib.run_dir("bringup")
    out = {"error": None}
    try:
        with PhaseTimer() as timer:
            emu = Emulation(plan, rd, log=log_warnings)
            t0 = time.perf_counter()
            try:
                emu.__enter__()
            except Exception as e:
                traceback.print_exc()   # an empty message (Mininet's asserts) names nothing by itself
                out.update(error=f"{type(e).__name__}: {e}", up=time.perf_counter() - t0)
                out["phases"] = dict(timer.seconds)
                return out
            t1 = time.perf_counter()
            # when the controller had confirmed every switch's rules, from the moment the switches started
            ready = os.path.getmtime(os.path.join(rd, "controller-ready.json"))
            out["routes_after_start"] = ready - timer.first_start["mininet start"]
            emu.__exit__(None, None, None)
            t2 = time.perf_counter()
        out.update(up=t1 - t0, down=t2 - t1, phases=dict(timer.seconds),
                   rounds=timer.calls.get("probes", 0), dumps=timer.calls.get("dump flows", 0))
        return out
    finally:
        shutil.rmtree(rd, ignore_errors=True)


# --- 3. a reactive controller -------------------------------------------------------------

def reactive(topology: str, datapath: str) -> dict:
    fabric = build(topology)
    rd = benchlib.run_dir("reactive")
    fabric_json, ready, stats = (os.path.join(rd, n) for n in ("fabric.json", "ready.json", "stats.json"))
    fabric.save(fabric_json)
    port = free_port()
    out = {"error": None}
    net = proc = None
    with benchlib.held_lock():
        try:
            log = open(os.path.join(rd, "controller.log"), "w")
            proc = subprocess.Popen([sys.executable, os.path.join(benchlib.REPO, "benchmarks", "reactive_controller.py"),
                                     "--fabric", fabric_json, "--port", str(port), "--ready-file", ready,
                                     "--stats-file", stats], stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            log.close()
            processes.record(proc.pid)
            _wait(lambda: _listening(port), 20, "the reactive controller did not listen")
            net = EmulatedFabric(fabric, detect(datapath), port, 9000)
            with ovs_buffers.large_socket_buffers():
                with PhaseTimer() as timer:
                    t0 = time.perf_counter()
                    net.start()
                    t1 = time.perf_counter()
                _wait(lambda: os.path.exists(ready), 60, "not every switch connected to the reactive controller")
                t2 = time.perf_counter()
                failed = net.ping_all()
                tries = 1
                while failed and tries < 3:
                    failed = net.ping(failed)
                    tries += 1
                t3 = time.perf_counter()
                again = net.ping_all()   # every route in place now: what pinging alone costs
                t4 = time.perf_counter()
            out.update(fabric_up=t1 - t0, connected=t2 - t1, reached=t3 - t1, unreached=len(failed), tries=tries,
                       ping_again=t4 - t3, unreached_again=len(again),
                       connected_after_start=os.path.getmtime(ready) - timer.first_start["mininet start"])
        except Exception as e:
            traceback.print_exc()
            out["error"] = f"{type(e).__name__}: {e}"
        finally:
            if net is not None:
                net.stop()
            if proc is not None:
                processes.stop_pid(proc.pid)
            processes.sweep()
    try:
        with open(stats) as f:
            out.update(json.load(f))
    except (OSError, ValueError):
        pass
    shutil.rmtree(rd, ignore_errors=True)
    return out


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(ok, timeout_s: float, message: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{message} within {timeout_s:.0f} s")
        time.sleep(0.05)


# --- the tables -----------------------------------------------------------------------------

PHASES = ["controller start", "fabric up", "mininet add", "mininet build", "mininet start", "interfaces",
          "routes confirmed", "verify", "ping all", "probes", "settle", "probe pings", "dump flows"]
DOWN_PHASES = ["network stop", "mininet stop", "controller stop", "sweep"]
SHORT = {"controller start": "ctl start", "fabric up": "fabric up", "mininet add": "mn add",
         "mininet build": "mn build", "mininet start": "mn start",
         "interfaces": "intf cfg", "routes confirmed": "routes", "verify": "verify",
         "ping all": "ping all", "probes": "probes", "settle": "settle", "probe pings": "probe ping",
         "dump flows": "dumps", "network stop": "net stop", "mininet stop": "mn stop",
         "controller stop": "ctl stop", "sweep": "sweep"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK_TOPOLOGIES)}")
    p.add_argument("--topology", "-t", action="append", default=[],
                   help="a topology to measure (repeatable); default: " + " ".join(TOPOLOGIES))
    p.add_argument("--reactive-max-hosts", type=int, default=32,
                   help="run the reactive baseline up to this many hosts (default 32; 0: never)")
    p.add_argument("--no-baseline", action="store_true", help="skip plain Mininet")
    p.add_argument("--datapath", choices=["user", "kernel"], default="user",
                   help="Open vSwitch datapath of every measurement (default user; kernel needs the module)")
    args = p.parse_args()
    interrupts.unwind_on_signals()   # SIGTERM and a hang-up tear down like Ctrl-C
    if os.geteuid() != 0:
        raise SystemExit("bringup.py needs root (Mininet and Open vSwitch)")
    topologies = args.topology or (QUICK_TOPOLOGIES if args.quick else TOPOLOGIES)
    results = []
    for topology in topologies:
        fabric = build(topology)
        row = {"topology": topology, "hosts": len(fabric.hosts), "switches": len(fabric.switches),
               "links": len(fabric.links)}
        print(f"# {topology}: {row['switches']} switches, {row['hosts']} hosts, {row['links']} links", flush=True)
        for name, fn, wanted in (("mininet", plain_mininet, not args.no_baseline),
                                 ("ours", emulated, True),
                                 ("reactive", reactive, row["hosts"] <= args.reactive_max_hosts)):
            if not wanted:
                continue
            try:
                row[name] = benchlib.with_lock_retry(lambda: fn(topology, args.datapath))
            except Exception as e:   # report and go on with the next measurement
                traceback.print_exc()
                row[name] = {"error": f"{type(e).__name__}: {e}"}
            row[name]["clean"] = benchlib.check_clean(f"{name} {topology}")
            print(f"#   {name}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                          for k, v in row[name].items() if k != "phases"), flush=True)
        results.append(row)
    report(results)


def report(results: list[dict]) -> None:
    print()
    print("# bring-up and teardown, seconds; x = ours / plain Mininet (standalone OVS, no controller)")
    print(f"{'topology':18} {'hosts':>5} {'sw':>3} {'links':>5} | {'mn up':>7} {'ours up':>7} {'x':>6} | "
          f"{'mn down':>7} {'ours down':>9} {'x':>6} | clean")
    for r in results:
        mn, ours = r.get("mininet", {}), r.get("ours", {})
        up = None if ours.get("error") else ours.get("up")
        print(f"{r['topology']:18} {r['hosts']:5d} {r['switches']:3d} {r['links']:5d} | "
              f"{fmt(mn.get('up'))} {fmt(up)} {ratio(up, mn.get('up'))} | "
              f"{fmt(mn.get('down'))} {fmt(ours.get('down'), 9)} {ratio(ours.get('down'), mn.get('down'))} | "
              + f"{'yes' if all(r[k].get('clean', True) for k in ('mininet', 'ours', 'reactive') if k in r) else 'NO'}"
              + (f"  ERROR: {ours['error']}" if ours.get("error") else ""))
    print()
    print("# where our bring-up and teardown go, seconds: fabric up = mn add (nodes, veths) + mn build + mn start "
          "(bridges) + intf cfg; intf cfg = "
          "MTU, tc, ethtool, static ARP, sysctls (one script per namespace, all at once); routes = until every switch confirmed its rules; "
          "verify = rules read back + ping all + probes; probes = rounds x (settle: wait until OVS's rule counters "
          "stop moving + probe ping + dumps until the probes show); dumps = every `ovs-ofctl dump-flows` pass "
          "over all switches (n = passes); net stop = Mininet stop (mn stop) + controller shells")
    print(f"{'topology':18} " + " ".join(f"{SHORT[k]:>9}" for k in PHASES) + f" {'rounds':>6} {'n':>4} | "
          + " ".join(f"{SHORT[k]:>9}" for k in DOWN_PHASES))
    for r in results:
        if "ours" in r:
            ph = r["ours"].get("phases", {})
            print(f"{r['topology']:18} " + " ".join(fmt(ph.get(k), 9) for k in PHASES)
                  + f" {r['ours'].get('rounds', 0):6d} {r['ours'].get('dumps', 0):4d} | "
                  + " ".join(fmt(ph.get(k), 9) for k in DOWN_PHASES))
    print()
    if not any(r.get("reactive") for r in results):
        _targets(results)
        return
    print("# routes ready, seconds. ours: the controller confirmed every switch's rules 'rules@start' after the "
          "switches started (Mininet start; the fabric's own configuration runs meanwhile), then every host "
          "pinged every other in 'reach' after the fabric was up. reactive: every switch connected "
          "'conn@start' after the switches started; 'reach' = the first all-pairs ping after the fabric was up "
          "(its packets teach the routes); 'again' = the same pings with every route in place; "
          "learn = reach - again; x = reactive reach / ours reach")
    print(f"{'topology':18} {'hosts':>5} | {'rules@start':>11} {'reach':>6} | {'conn@start':>10} {'reach':>6} "
          f"{'again':>6} {'learn':>6} {'x':>5} {'packet-ins':>10} {'flow-mods':>9}")
    for r in results:
        ours, re = r.get("ours", {}), r.get("reactive")
        if not re:
            continue
        ph = ours.get("phases", {})
        ours_reach = (ph.get("routes confirmed", 0) + ph["ping all"]) if "ping all" in ph else None
        reach = None if re.get("error") or re.get("unreached") else re.get("reached")
        learn = reach - re["ping_again"] - re.get("connected", 0) if reach is not None else None
        print(f"{r['topology']:18} {r['hosts']:5d} | {fmt(ours.get('routes_after_start'), 11)} {fmt(ours_reach, 6)} | "
              f"{fmt(re.get('connected_after_start'), 10)} {fmt(reach, 6)} {fmt(re.get('ping_again'), 6)} "
              f"{fmt(learn, 6)} {ratio(reach, ours_reach, 5)} {re.get('packet_ins', '-'):>10} "
              f"{re.get('flow_mods', '-'):>9}"
              + (f"  ERROR: {re['error']}" if re.get("error") else "")
              + (f"  {re['unreached']} pairs never reached" if re.get("unreached") else ""))
    _targets(results)


def _targets(results: list[dict]) -> None:
    print()
    for r in results:
        ours = r.get("ours", {})
        if r["topology"] == "bigraph:m=4,n=8" and not ours.get("error"):
            print(f"# 32-host BiGraph: up and verified in {ours['up']:.1f} s (target < {TARGET_UP_S:g} s: "
                  f"{'met' if ours['up'] < TARGET_UP_S else 'MISSED'}), torn down in {ours['down']:.1f} s "
                  f"(target < {TARGET_DOWN_S:g} s: {'met' if ours['down'] < TARGET_DOWN_S else 'MISSED'})")
        if r["topology"] == "bigraph:m=8,n=16":
            print("# 128-host BiGraph: " + (f"up and verified in {ours['up']:.1f} s" if not ours.get("error")
                                           else f"NOT up: {ours.get('error')}"))


if __name__ == "__main__":
    main()
