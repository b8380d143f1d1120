"""What the kernel and Open vSwitch offer: the OVS kernel datapath or only
the userspace one, and whether hosts may hand the fabric TCP segments of
several frames (TSO).

Users' VMs usually have the openvswitch module; our CI machines have no
loadable modules at all, so the userspace datapath is the fallback there.
The userspace datapath carries TSO segments only when Open vSwitch runs
with other_config:userspace-tso-enable=true (`vm/provision.sh
--userspace-tso on` sets it and restarts Open vSwitch); without it, TCP
checksums are never completed, so hosts must send plain frames.
(Delay and loss need netem: see capabilities.netem_available.)
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from emulator.spec.experiment import OFFLOADS



@dataclass(frozen=True)
class Dataplane:
    datapath: str          # "kernel" or "user" (Mininet's OVSSwitch datapath)
    tso: bool              # hosts send TSO segments (capped at the HTB burst) instead of frames
    reason: str

    @property
    def offload(self) -> str:
        """What the hosts send: "tso" segments or "off" (frames)."""
        return "tso" if self.tso else "off"

    def describe(self) -> str:
        offload = ("host TSO on, segments capped at the HTB burst and an eighth of a queue" if self.tso
                   else "host tx/TSO/GSO offload off")
        return f"OVS {self.datapath}space datapath, {offload} ({self.reason})".replace("kernelspace", "kernel")


def _module_loaded(name: str) -> bool:
    return os.path.isdir(f"/sys/module/{name}")


def _try_modprobe(name: str) -> bool:
    if not os.path.exists("/proc/modules"):   # kernel without loadable modules
        return False
    subprocess.run(["modprobe", "-q", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return _module_loaded(name)


def userspace_tso_enabled() -> bool:
    """Open vSwitch's configuration asks for userspace TSO (it takes effect
    when ovs-vswitchd starts)."""
    out = subprocess.run(["ovs-vsctl", "--timeout=5", "get", "Open_vSwitch", ".",
                          "other_config:userspace-tso-enable"], capture_output=True, text=True, check=False)
    return out.returncode == 0 and out.stdout.strip().strip('"') == "true"


def resolve_offload(datapath: str, offload: str) -> str:
    """The offload a run gets: 'auto' as detect() picks it."""
    if offload != "auto":
        return offload
    try:
        return detect(datapath, offload).offload
    except RuntimeError:   # no kernel datapath where one is asked for: bring-up says so
        return "off"


def detect(force: str | None = None, offload: str = "off") -> Dataplane:
    """Pick the datapath; `force` ("kernel"/"user") overrides detection.
    offload "tso" on the userspace datapath needs Open vSwitch's userspace
    TSO; "auto" takes TSO segments on the userspace datapath where that is
    on (2.6x the faithful budget at MTU 9000 on our machines, and congested
    calls kept their verdict) and frames elsewhere (the kernel datapath's
    TSO failed at every load in our VM, on segments reordered across its
    vCPUs: docs/capacity.md)."""
    if force not in (None, "auto", "kernel", "user"):
        raise ValueError(f"datapath must be auto, kernel or user, got {force!r}")
    if offload not in ("auto", *OFFLOADS):
        raise ValueError(f"offload must be auto, {' or '.join(OFFLOADS)}, got {offload!r}")
    if force == "user":
        datapath, reason = "user", "forced by the experiment"
    elif _module_loaded("openvswitch") or _try_modprobe("openvswitch"):
        datapath, reason = "kernel", "openvswitch kernel module present"
    elif force == "kernel":
        raise RuntimeError("the experiment asks for the OVS kernel datapath, "
                           "but this kernel has no openvswitch module")
    else:
        datapath, reason = "user", "no openvswitch kernel module"
    if offload == "auto":
        return Dataplane(datapath, datapath == "user" and userspace_tso_enabled(), reason + ", offload auto")
    tso = offload == "tso"
    if tso and datapath == "user" and not userspace_tso_enabled():
        raise RuntimeError("offload 'tso' on the userspace datapath needs Open vSwitch's userspace TSO: "
                           "run `vm/provision.sh --userspace-tso on` (it restarts Open vSwitch when no "
                           "bridge is in use), or use offload 'off'")
    return Dataplane(datapath, tso, reason)
