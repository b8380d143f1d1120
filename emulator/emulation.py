"""Bring a planned fabric up for real, replay workloads on it, tear it down.

`Emulation` is the one place that sequences the adapters: lock, sweep of
leftovers, controller, Mininet, routes confirmed, flows counted in OVS,
every host pinging every other, then the agents; and teardown always.
"""
from __future__ import annotations

import contextlib
import os
import signal

from emulator.fabric import Fabric
from emulator.net import counters, ovs_buffers, processes
from emulator.net.agents import AgentFleet
from emulator.net.controller_process import ControllerProcess
from emulator.net.dataplane import Dataplane, detect
from emulator.net.network import EmulatedFabric
from emulator.plan import RunPlan
from emulator.results import CallRecord
from emulator.spec import RunSpec


class EmulationError(RuntimeError):
    pass



class Emulation:
    """An emulated fabric and its controller, up inside a `with` block."""

    def __init__(self, fabric: Fabric, spec: RunSpec, run_dir: str, log=print):
        self.fabric, self.spec, self.run_dir, self.log = fabric, spec, run_dir, log
        self.lock = processes.RunLock()
        self.controller: ControllerProcess | None = None
        self.network: EmulatedFabric | None = None
        self.dataplane: Dataplane | None = None
        self.fleet: AgentFleet | None = None   # the agents of the workload under way

    def __enter__(self) -> "Emulation":
        self.lock.__enter__()
        try:
            self._bring_up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _bring_up(self) -> None:
        removed = processes.sweep()
        if removed:
            self.log(f"# removed leftovers of an earlier run: {', '.join(removed)}")
        self.dataplane = detect(self.spec.datapath)
        self.log(f"# dataplane: {self.dataplane.describe()}")
        fabric_json = os.path.join(self.run_dir, "fabric.json")
        self.fabric.save(fabric_json)
        self.controller = ControllerProcess(fabric_json, self.spec.policy, self.run_dir)
        self.controller.start()
        self.network = EmulatedFabric(self.fabric, self.dataplane, self.controller.port, self.spec.mtu)
        with self._ovs_socket_buffers():
            self.network.start()
            ready = self.controller.wait_routes()
            self._verify(ready["rules"])   # the pings make OVS create its send socket
        self.log(f"# {self.fabric.topology}: {len(self.fabric.switches)} switches, {len(self.fabric.hosts)} hosts, "
                 f"routes '{self.spec.policy}' installed and confirmed, all {len(self.fabric.hosts)} hosts reach each other")

    def _ovs_socket_buffers(self):
        """The userspace datapath needs large socket buffers (see ovs_buffers)."""
        if self.dataplane.datapath != "user":
            return contextlib.nullcontext()
        warning = ovs_buffers.status_line(ovs_buffers.send_buffer())
        if warning:
            self.log(warning)
        return ovs_buffers.large_socket_buffers()

    def _verify(self, confirmed: dict[str, int]) -> None:
        """OVS itself must hold what the controller says it installed, and
        every host must reach every other before any traffic is measured."""
        in_ovs = self.network.flow_counts()
        if in_ovs != confirmed:
            raise EmulationError(f"switch rule counts differ: controller confirmed {confirmed}, OVS holds {in_ovs}")
        failed = self.network.ping_all()
        if failed:
            raise EmulationError(f"{len(failed)} host pairs cannot reach each other, e.g. {failed[:5]}")

    def __exit__(self, *exc) -> None:
        """Every step runs even if one before it fails; Ctrl-C and SIGTERM
        wait until teardown is done."""
        old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            with contextlib.ExitStack() as steps:   # runs in reverse order
                steps.callback(self.lock.__exit__, None, None, None)
                steps.callback(self._sweep)
                if self.controller is not None:
                    steps.callback(self.controller.stop)
                if self.network is not None:
                    steps.callback(self.network.stop)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    def _sweep(self) -> None:
        left = processes.sweep()
        if left:
            self.log(f"# teardown removed what Mininet left: {', '.join(left)}")

    # --- workloads -----------------------------------------------------------
    def replay(self, plan: RunPlan) -> list[CallRecord]:
        """Run every call of the plan: the agents' step records and the
        machine's counters around each call."""
        hosts = [self.network.host(h) for h in plan.hosts]
        ips = [self.fabric.host(h).ip for h in plan.hosts]
        calls = [{"collective": plan.spec.collective, "algorithm": plan.spec.algorithm, "size_bytes": c.size_bytes}
                 for c in plan.calls]
        self.fleet = fleet = AgentFleet(hosts, ips, calls, self.run_dir)
        try:
            fleet.start()
            results = []
            host_pids = {h: self.network.host(h).pid for h in plan.hosts}
            for call in plan.calls:
                predicted = plan.predictions[call.size_bytes].time_s
                before = counters.snapshot(host_pids)
                records = fleet.run_call(call.index, timeout_s=max(30.0, 20 * predicted))
                results.append(CallRecord(records, counters.delta(before, counters.snapshot(host_pids))))
            return results
        finally:
            fleet.stop()
