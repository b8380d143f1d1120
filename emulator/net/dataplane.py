"""What the kernel offers: the OVS kernel datapath or only the userspace one.

Users' VMs usually have the openvswitch module; our CI machines have no
loadable modules at all, so the userspace datapath is the fallback there.
(Delay and loss need netem: see capabilities.netem_available.)
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Dataplane:
    datapath: str          # "kernel" or "user" (Mininet's OVSSwitch datapath)
    tx_offload_off: bool   # TCP over the userspace datapath needs tx offload off
    reason: str

    def describe(self) -> str:
        offload = ", host tx/TSO/GSO offload off" if self.tx_offload_off else ""
        return f"OVS {self.datapath}space datapath{offload} ({self.reason})".replace("kernelspace", "kernel")


def _module_loaded(name: str) -> bool:
    return os.path.isdir(f"/sys/module/{name}")


def _try_modprobe(name: str) -> bool:
    if not os.path.exists("/proc/modules"):   # kernel without loadable modules
        return False
    subprocess.run(["modprobe", "-q", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return _module_loaded(name)


def detect(force: str | None = None) -> Dataplane:
    """Pick the datapath; `force` ("kernel"/"user") overrides detection."""
    if force not in (None, "auto", "kernel", "user"):
        raise ValueError(f"datapath must be auto, kernel or user, got {force!r}")
    if force == "user":
        return Dataplane("user", True, "forced by the experiment")
    if _module_loaded("openvswitch") or _try_modprobe("openvswitch"):
        return Dataplane("kernel", False, "openvswitch kernel module present")
    if force == "kernel":
        raise RuntimeError("the experiment asks for the OVS kernel datapath, "
                           "but this kernel has no openvswitch module")
    return Dataplane("user", True, "no openvswitch kernel module")
