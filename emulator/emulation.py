"""Bring a planned fabric up for real, replay workloads on it, tear it down.

`Emulation` is the one place that sequences the adapters: lock, sweep of
leftovers, controller, Mininet, routes confirmed, flows counted in OVS,
every host pinging every other, then the agents; and teardown always.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time

from emulator.routes.routing import given_routes, policy_record, table_from_switch_paths
from emulator.results import linkstats
from emulator.records import links as link_records
from emulator.routes import verification
from emulator.records.captures import capture_file, capture_rows
from emulator.fabric.captured import captured_links
from emulator.fabric.queues import DISCIPLINES
from emulator.net import congestion, interrupts, ovs_buffers, processes
from emulator.measure import counters
from emulator.replay.agents import START_DELAY_S, AgentFleet
from emulator.measure.capture import LinkCapture
from emulator.net.cluster import ALIVE_COUNT, ALIVE_S
from emulator.net.controller_process import ControllerProcess
from emulator.net.dataplane import Dataplane, detect
from emulator.measure.monitor import LinkMonitor
from emulator.net.network import EmulatedFabric
from emulator.plan.run_plan import RunPlan, model_for, route_demands
from emulator.results.calls import CallRecord, append_csv, call_time


PROBES = 3             # packets per probe pair
PING_AGAIN_S = (5, 10)  # how long pairs that did not answer the first ping get, when pinged again


class EmulationError(RuntimeError):
    pass



class Emulation:
    """The fabric of a plan and its controller, up inside a `with` block.
    Later plans may replay on it if their spec has the same fabric_key()."""

    def __init__(self, plan: RunPlan, run_dir: str, log=print):
        self.plan, self.fabric, self.spec, self.run_dir, self.log = plan, plan.fabric, plan.spec, run_dir, log
        self.lock = processes.RunLock(run_dir)
        self.controller: ControllerProcess | None = None
        self.network: EmulatedFabric | None = None
        self.dataplane: Dataplane | None = None
        self.fleet: AgentFleet | None = None   # the agents of the workload under way
        self.servers = None                    # cluster.Servers of a fabric over several servers
        self.allowed_tcp = None                # the hosts' congestion control allowed to namespaces, until teardown
        self.links = link_records.directed_links(self.fabric)
        self.on_sample = None                  # called with the monitor's samples (the live view)

    def __enter__(self) -> "Emulation":
        self.lock.__enter__()
        try:
            self._bring_up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _bring_up(self) -> None:
        self._refuse_leftovers()
        if self.spec.servers:
            self._open_servers()
        self.dataplane = detect(self.spec.datapath, self.spec.offload)
        self.log(f"# dataplane: {self.dataplane.describe()}")
        self.controller = self._controller()
        self.controller.launch()
        self.network = EmulatedFabric(self.fabric, self.dataplane, self.controller.port, self.spec.mtu,
                                      self.servers, self.spec.tcp, DISCIPLINES[self.spec.queue_discipline],
                                      self.spec.ecn_threshold_packets)
        self.allowed_tcp = congestion.allowed(self.spec.tcp)   # until teardown
        self.allowed_tcp.__enter__()
        with self._ovs_socket_buffers():
            self.network.start(before_switches=self.controller.wait_listening)
            try:
                ready = self.controller.wait_routes()
            except RuntimeError as e:   # say which side failed: OVS's connection or the controller
                seen = self.network.controller_connections()
                raise EmulationError(f"{e}; Open vSwitch's controller connections: "
                                     + ", ".join(f"{s} {state}" for s, state in seen.items())) from None
            self._verify(ready["rules"])   # the pings make OVS create its send socket
            self.network.start_loss()
        self.log(f"# {self.fabric.topology}: {len(self.fabric.switches)} switches, {len(self.fabric.hosts)} hosts, "
                 f"routes '{self.spec.policy}' installed, read back from OVS and followed by probe packets; "
                 f"all {len(self.fabric.hosts)} hosts reach each other")

    def _open_servers(self) -> None:
        """Every server checked and its share of the fabric placed, before
        anything is built; what was found goes to servers.json."""
        from emulator.net.cluster import open_servers
        self.servers = open_servers(self.plan, self.log)
        with open(os.path.join(self.run_dir, "servers.json"), "w") as f:
            json.dump({**self.servers.record, "where": self.servers.where}, f, indent=1)

    def _refuse_leftovers(self) -> None:
        """Leftovers of a crashed run would make Mininet fail halfway ("File
        exists"): stop before creating anything and say what to do."""
        left = processes.leftover_bridges() + processes.leftover_links() + \
            [f"process {pid}" for pid in processes.leftover_processes()]
        if left:
            raise EmulationError(f"an earlier run left {', '.join(left[:6])}"
                                 f"{' and more' if len(left) > 6 else ''}; run 'bigraph-emu clean' first")

    def _controller(self) -> ControllerProcess:
        fabric_json = os.path.join(self.run_dir, "fabric.json")
        self.fabric.save(fabric_json)
        demands_json = ""
        demands = route_demands(self.spec, self.plan.schedules, self.plan.hosts)
        if demands is not None:
            demands_json = os.path.join(self.run_dir, "demands.json")
            with open(demands_json, "w") as f:
                json.dump([[a, b, n] for (a, b), n in sorted(demands.items())], f)
        listen = self.servers.controller_ip if self.servers else "127.0.0.1"   # remote switches reach it there
        return ControllerProcess(fabric_json, self.spec.policy, self.run_dir, demands_json, self.spec.seed, listen,
                                 self._given_routes())

    def _given_routes(self) -> str:
        """A file policy's routes as the plan has them, written for the
        controller to install (the user's code ran once, here); "" for ours."""
        if not policy_record(self.spec.policy).routes_given:
            return ""
        routes_json = os.path.join(self.run_dir, "policy-routes.json")
        with open(routes_json, "w") as f:
            json.dump([[a, b, switches] for (a, b), switches in given_routes(self.fabric, self.plan.table).items()], f)
        return routes_json

    def _ovs_socket_buffers(self):
        """The userspace datapath needs large socket buffers (see ovs_buffers)."""
        if self.dataplane.datapath != "user":
            return contextlib.nullcontext()
        warning = ovs_buffers.status_line(ovs_buffers.send_buffer())
        if warning:
            self.log(warning)
        return ovs_buffers.large_socket_buffers()

    def _verify(self, confirmed: dict[str, int]) -> None:
        """Before any traffic is measured: OVS holds exactly the rules the
        policy computed, every host reaches every other, and probe packets
        cross exactly the switches the routes say, one probe per route shape.
        The rules are read after the pings (the pings make OVS create its
        send socket), and each reading's counters are the next round's start.
        On a fabric with nodes, the routes themselves are checked first: a
        pair inside a node stays in it, others leave by the NIC the policy names."""
        if self.fabric.node_shape():
            problems = verification.route_problems(self.fabric, self.plan.table, self.plan.spec.policy)
            if problems:
                raise EmulationError(f"routes through the nodes are wrong: {'; '.join(problems)}")
        failed = self._ping_all()
        installed = self.installed_rules()
        problems = verification.rule_differences(self.fabric, self.plan.table, installed)
        if problems:
            raise EmulationError(f"switches do not hold the computed rules: {'; '.join(problems[:4])}")
        if {s: len(r) for s, r in installed.items()} != confirmed:
            raise EmulationError(f"rule counts differ from what the controller confirmed: {confirmed}")
        if failed:
            raise EmulationError(f"{len(failed)} host pairs cannot reach each other, e.g. {failed[:5]}")
        for pairs in verification.probe_rounds(self.fabric, self.plan.table):
            installed = self._probe(pairs, installed)

    def _ping_all(self) -> list[tuple[str, str]]:
        """The host pairs that cannot reach each other."""
        failed = self.network.ping_all()
        for timeout_s in PING_AGAIN_S:
            if not failed:
                break
            # a busy machine (a VM under software emulation) may answer a
            # burst of first pings late: a pair is unreachable only if it
            # stays silent when pinged again, alone and with longer to answer
            self.log(f"# {len(failed)} host pairs did not answer at once, e.g. {failed[:3]}; "
                     f"pinging them again ({timeout_s} s to answer)")
            failed = self.network.ping(failed, timeout_s)
        return failed

    def installed_rules(self) -> dict:
        """Every switch's rules as OVS reports them, with packet counters."""
        return {s: verification.parse_flows(text) for s, text in self.network.dump_flows().items()}

    def _probe(self, pairs, before: dict, count: int = PROBES) -> dict:
        """Probe `pairs` from the counters `before`; the counters after."""
        lost = self.network.probe(pairs, count)
        if lost:
            raise EmulationError(f"probe packets were lost between {lost[:5]}")
        after = self.installed_rules()
        wrong = self._probe_mismatches(pairs, before, after, count)
        if wrong:
            raise EmulationError(f"packets did not follow their routes: {'; '.join(wrong[:3])}")
        return after

    def _probe_mismatches(self, pairs, before, after, count: int) -> list[str]:
        wrong = []
        for src, dst in pairs:
            crossed = verification.switches_crossed(self.fabric, before, after, src, dst, count)
            mismatch = verification.path_mismatch(self.fabric, self.plan.table, src, dst, crossed)
            if mismatch:
                wrong.append(mismatch)
        return wrong

    def __exit__(self, *exc) -> None:
        """Every step runs even if one before it fails; Ctrl-C, SIGTERM and
        a hang-up wait until teardown is done, then interrupt the run."""
        with interrupts.deferred():
            with contextlib.ExitStack() as steps:   # runs in reverse order
                steps.callback(self.lock.__exit__, None, None, None)
                if self.controller is not None:   # we created something: leave nothing of it
                    steps.callback(self._sweep)
                if self.servers is not None:      # the other servers swept, then their connections closed
                    steps.callback(self.servers.close)
                    if self.controller is not None:
                        steps.callback(self._sweep_servers)
                # the controller stops first, then the network (the reverse of
                # registration): with the controller gone, no port-down event
                # reroutes a fabric that is being dismantled
                if self.allowed_tcp is not None:
                    steps.callback(self.allowed_tcp.__exit__, None, None, None)
                if self.network is not None:
                    steps.callback(self._stop_network)
                if self.controller is not None:
                    steps.callback(self.controller.stop)

    def _stop_network(self) -> None:
        """Mininet's teardown; if an interruption left it unable to finish,
        the sweep after it removes what it left (by name and process id)."""
        try:
            if self.servers is not None:
                self.network.forget(self.servers.lost())
            self.network.stop()
        except Exception as e:   # noqa: BLE001 - whatever Mininet raises, the sweep follows
            self.log(f"# Mininet's teardown stopped early ({type(e).__name__}: {e}); the sweep removes the rest")

    def _sweep_servers(self) -> None:
        lost = self.servers.lost()
        if lost:
            self.log(f"# lost: {', '.join(lost)}; what the run left there stays until `bigraph-emu clean` runs there")
        left = self.servers.sweep()
        if left:
            self.log(f"# teardown removed what Mininet left: {', '.join(left)}")

    def _sweep(self) -> None:
        left = processes.sweep()
        if left:
            self.log(f"# teardown removed what Mininet left: {', '.join(left)}")

    # --- workloads -----------------------------------------------------------
    def replay(self, plan: RunPlan, on_call=None) -> list[CallRecord]:
        """Run every call of the plan: the agents' step records, the
        machine's counters around each call and the link time series.
        `on_call(call, record)` is told of each call as it ends, so what was
        measured is kept even if a later call fails."""
        hosts = [self.network.host(h) for h in plan.hosts]
        ips = [self.fabric.host(h).ip for h in plan.hosts]
        calls = [plan.schedules[c.size_bytes] for c in plan.calls]
        offsets = [self.servers.offset_of(h) for h in plan.hosts] if self.servers else None
        remote = [self.network.remote(h) is not None for h in plan.hosts]
        self.fleet = fleet = AgentFleet(hosts, ips, calls, self.run_dir, plan.spec.connections, offsets, remote,
                                        plan.congestion_controls(), self.servers.lost if self.servers else None)
        events, samplers = None, []
        try:
            samplers = self.samplers(plan)
            fleet.start()
            results = []
            unique = list(dict.fromkeys(plan.hosts))   # each host once
            for call in plan.calls:
                if call.repetition == 0 and events is None and plan.spec.link_events:
                    events = _LinkEvents(plan.spec.link_events, self._link_event)   # the first counted call starts now
                results.append(self._call(plan, call, unique, samplers))
                if on_call is not None:
                    on_call(call, results[-1])
            if events:
                events.finish()
            return results
        except Exception as e:
            lost = self.servers.unreachable() if self.servers else []
            if lost:   # say what failed: the agents' error is only its echo
                self.log(f"# lost server {', '.join(lost)}: the run stops and tears down")
                raise EmulationError(f"lost server {', '.join(lost)} during the run (no answer over ssh for "
                                     f"{ALIVE_S * ALIVE_COUNT} s): {e}") from e
            raise
        finally:
            if events:
                events.stop()
            fleet.stop()
            for sampler in samplers:
                sampler.stop()

    def samplers(self, plan: RunPlan) -> list:
        """A link sampler on every other server that holds switches."""
        from emulator.measure.monitor import RemoteSampler
        if not self.servers:
            return []
        out = []
        for name, remote in self.servers.remotes.items():
            if name in self.servers.shared:
                continue
            devs = [link.dev for link in self.links
                    if not link.egress and self.servers.where[link.dev.split("-")[0]] == name]
            out.append(RemoteSampler(remote, devs, plan.spec.monitor_interval_ms / 1e3))
        return out

    def remote_of(self, node: str):
        """The server that holds a node, None for this machine."""
        return self.servers.remote_of(node) if self.servers else None

    def _installed_paths(self) -> dict:
        """The switches of every pair's route, as the controller last wrote them."""
        with open(os.path.join(self.run_dir, "routes.json")) as f:
            return {tuple(pair.split(">")): switches for pair, switches in json.load(f).items()}

    def _model_on_installed_routes(self, plan: RunPlan, size: int, paths: dict) -> float:
        table = table_from_switch_paths(self.fabric, paths)
        return model_for(self.fabric, table, plan.spec, plan.links)(plan.schedules[size], plan.hosts).time_s

    # --- faults --------------------------------------------------------------
    def _link_event(self, event, t0: float) -> None:
        """Take a switch-switch link down or up (both ends, as a pulled cable
        does) and record when; the controller sees the port change."""
        self.network.set_link(event.a, event.b, event.action == "up")
        row = {"t_s": round(time.monotonic() - t0, 3), "link": f"{event.a}-{event.b}", "action": event.action,
               "planned_t_s": event.time_s}
        append_csv(os.path.join(self.run_dir, "link_events.csv"), list(row), [row])
        self.log(f"# link {event.a}-{event.b} {event.action} at t={row['t_s']:.2f}s")

    def restart_controller(self) -> None:
        """Stop the controller and start it again; switches keep forwarding
        with the rules they hold meanwhile (fail-secure), and the new one
        only sends what differs."""
        self.controller.stop()
        self.controller.start()
        self.controller.wait_routes()

    def _call(self, plan: RunPlan, call, hosts: list[str], samplers) -> CallRecord:
        predicted = plan.predictions[call.size_bytes].time_s
        adapts = policy_record(plan.spec.policy).adapts
        routes_at_start = self._installed_paths() if adapts else None
        tcp_before = counters.hosts_tcp_counts(self.network, hosts)
        links = captured_links(self.fabric, plan.spec.capture) if call.repetition >= 0 else []   # counted calls
        files = [capture_file(plan.run, call.size_bytes, call.repetition, link.name) for link in links]
        wall = time.time() - time.monotonic()   # a pcap keeps the wall clock, the agents the monotonic one
        with LinkCapture(links, self.run_dir, files, self.remote_of) as capture, \
                LinkMonitor(self.links, plan.spec.monitor_interval_ms / 1e3, self.on_sample, samplers,
                            self._iteration_tcp_pids(plan, hosts)) as monitor:
            steps = self.fleet.run_call(call.index, timeout_s=max(30.0, 20 * predicted))
        tcp_after = counters.hosts_tcp_counts(self.network, hosts)
        record = CallRecord(steps, {
            **linkstats.machine_totals(monitor.samples[0], monitor.samples[-1], counters.TICKS),
            **{column: tcp_after[column] - tcp_before[column] for column in tcp_after}})
        if adapts:   # the controller may have moved pairs: model its routes
            record.model_time_s = self._model_on_installed_routes(plan, call.size_bytes, routes_at_start)
        t0 = self.fleet.call_start
        record.links = linkstats.link_rows(call.index, self.links, monitor.samples, t0)
        record.machine = linkstats.machine_rows(call.index, monitor.samples, t0, counters.TICKS)
        record.ports = linkstats.port_rows(call.index, self.controller.port_readings(), t0, monitor.samples[-1].t,
                                           self.fabric)
        record.captures = capture_rows(call.index, links, files, t0 + wall, capture.counts)
        record.counters.update(linkstats.call_figures(record.links, call_time(steps), plan.spec.mtu))
        record.counters_between = functools.partial(linkstats.window_counters, monitor.samples, t0, counters.TICKS,
                                                    record.links, plan.spec.mtu)
        return record

    def _iteration_tcp_pids(self, plan: RunPlan, hosts: list[str]) -> list[int]:
        """The host processes whose TCP counters every sample of a call
        reads, so that each iteration of a workload is judged by its own
        retransmissions: a workload's hosts, if all are on this machine
        (another server's are read once per call); none for a collective."""
        if not plan.is_workload or any(self.network.remote(h) for h in hosts):
            return []
        return [self.network.host(h).pid for h in hosts]


class _LinkEvents:
    """A run's link events, applied in time order by one thread, counted
    from the call about to start. One thread, because each event runs
    commands in the shells of the link's two switches, which take one
    command at a time: under software emulation taking a link down can
    outlast the gap to the next event."""

    def __init__(self, events, apply):
        self.t0 = time.monotonic() + START_DELAY_S
        self.events, self.apply = sorted(events, key=lambda e: e.time_s), apply
        self.stopped, self.error = threading.Event(), None
        self.thread = threading.Thread(target=self._run, name="link-events", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for event in self.events:
                if self.stopped.wait(max(0.0, self.t0 + event.time_s - time.monotonic())):
                    return
                self.apply(event, self.t0)
        except Exception as e:   # noqa: BLE001 - raised in the run's thread by finish()
            self.error = e

    def stop(self) -> None:
        """No more events; the one being applied is finished first."""
        self.stopped.set()
        self.thread.join(timeout=60)

    def finish(self) -> None:
        """stop(), then raise what applying an event raised."""
        self.stop()
        if self.error is not None:
            raise RuntimeError(f"a link event failed: {self.error}") from self.error
