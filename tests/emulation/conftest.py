"""Emulation tests run against real Mininet, OVS and os-ken, as root.

Outside root they are skipped, unless BIGRAPH_REQUIRE_EMULATION=1 (set by
CI), which turns a missing prerequisite into a failure: CI must run them.
Every test checks that the machine is left as it was found.
"""
import os
import shutil
import subprocess

import pytest

from emulator.net import processes


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
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("BIGRAPH_REQUIRE_EMULATION") == "1":
        raise pytest.UsageError(f"emulation tests required but cannot run: {reason}")
    for item in items:
        if "emulation" in str(item.fspath):
            item.add_marker(pytest.mark.skip(reason=reason))


SOCKET_DEFAULTS = ["/proc/sys/net/core/wmem_default", "/proc/sys/net/core/rmem_default"]


def machine_state() -> dict:
    return {"bridges": processes.leftover_bridges(), "links": processes.leftover_links(),
            "processes": processes.leftover_processes(),
            "socket defaults": [open(p).read().strip() for p in SOCKET_DEFAULTS]}


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
