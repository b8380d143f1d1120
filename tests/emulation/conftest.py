"""Emulation tests run against real Mininet, OVS and os-ken, as root.

Outside root they are skipped, unless BIGRAPH_REQUIRE_EMULATION=1 (set by
CI), which turns a missing prerequisite into a failure: CI must run them.
Every test checks that the machine is left as it was found.
"""
import os
import shutil
import subprocess
import warnings

import pytest

from emulator.net import capabilities, congestion, processes


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ovs-vsctl", "mnexec", "tc", "ethtool"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (run vm/provision.sh)"
    if subprocess.run(["ovs-vsctl", "--timeout=3", "show"], capture_output=True).returncode != 0:
        return "Open vSwitch is not running (run vm/provision.sh)"
    return None


def pytest_collection_modifyitems(config, items):
    _skip_what_this_kernel_lacks(items)
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("BIGRAPH_REQUIRE_EMULATION") == "1":
        raise pytest.UsageError(f"emulation tests required but cannot run: {reason}")
    for item in items:
        if "emulation" in str(item.fspath):
            item.add_marker(pytest.mark.skip(reason=reason))


# Under software emulation (the VM stage) the machine is several times slower
# than the fabric's rates assume: checks of speed and fidelity are recorded
# in the test report there, not asserted. Everything else is asserted.
TIMING_RECORDED = os.environ.get("BIGRAPH_TIMING") == "record"


@pytest.fixture
def timing(record_property):
    """timing(ok, what): a check of speed or fidelity."""
    def check(ok: bool, what) -> None:
        if not TIMING_RECORDED:
            assert ok, what
            return
        record_property("timing", f"{'ok' if ok else 'FAILED'}: {what}")
        if not ok:
            warnings.warn(f"timing check failed (recorded, not asserted): {what}", stacklevel=2)
    return check


def _netem_missing() -> str | None:
    return None if capabilities.netem_available() else "no sch_netem in this kernel"


def _kernel_queues_missing() -> str | None:
    from emulator.fabric.queues import FQ_CODEL, RED_ECN
    for d in (RED_ECN, FQ_CODEL):
        if not capabilities.qdisc_available(d.module, d.config):
            return f"no {d.module} in this kernel"
    if "dctcp" not in capabilities.congestion_controls():
        return "no tcp_dctcp in this kernel"
    return None


# What our own machines lack and the VM stage has: each marker's tests skip here
# and, where the VM stage sets the variable to 1, fail rather than skip there.
VM_KERNEL_MARKERS = {"netem": (_netem_missing, "BIGRAPH_REQUIRE_NETEM"),
                     "kernel_queues": (_kernel_queues_missing, "BIGRAPH_REQUIRE_KERNEL_QUEUES")}


def _skip_what_this_kernel_lacks(items) -> None:
    for marker, (missing, required) in VM_KERNEL_MARKERS.items():
        reason = missing()
        if reason is None:
            continue
        if os.environ.get(required) == "1":
            raise pytest.UsageError(f"{marker} tests required but cannot run: {reason}")
        for item in items:
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=f"{reason} (vm/stage.py runs them in a VM)"))


SOCKET_DEFAULTS = ["/proc/sys/net/core/wmem_default", "/proc/sys/net/core/rmem_default"]


def agents() -> list[int]:
    """Host agents and controllers alive, recorded or not (an agent started
    through sudo, as on a server, is not the process the emulator recorded;
    a controller interrupted as it started was never recorded)."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"emulator.replay.agent" in argv or argv[1:4] == [b"-m", b"controller", b"--fabric"]:
            alive.append(int(pid))
    return alive


def machine_state() -> dict:
    return {"bridges": processes.leftover_bridges(), "links": processes.leftover_links(),
            "processes": processes.leftover_processes() + agents(),
            "socket defaults": [open(p).read().strip() for p in SOCKET_DEFAULTS + [congestion.ALLOWED]]}


@pytest.fixture
def clean_machine():
    """Asserts the test left no bridge, link, recorded process (Mininet's
    shells hold the hosts' namespaces) or raised socket default behind."""
    before = machine_state()
    yield
    left = machine_state()
    processes.sweep()   # never leave them for the next test, even on failure
    assert left == {"bridges": [], "links": [], "processes": [],
                    "socket defaults": before["socket defaults"]}, f"left behind: {left}"
