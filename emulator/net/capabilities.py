"""What the running kernel offers, read from files only: no root, no
modules loaded, no qdisc created. Used to refuse, before anything is built,
a spec that asks for what this kernel cannot do.
"""
from __future__ import annotations

import gzip
import os

from emulator.fabric.queues import DISCIPLINES, FIFO, NETEM, NETEM_CONFIG


def _read(path: str) -> str:
    """A text file's content ('' if missing); .gz files are decompressed."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rt", errors="replace") as f:
                return f.read()
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _config_value(root: str, release: str, option: str) -> str | None:
    """'y', 'm' or 'n' for a kernel config option; None if no config is readable."""
    for path in (f"{root}/proc/config.gz", f"{root}/boot/config-{release}"):
        text = _read(path)
        if not text:
            continue
        for line in text.splitlines():
            if line.startswith(option + "="):
                return line.split("=", 1)[1].strip()
        return "n"   # a readable config without the option: "is not set"
    return None


def _module_listed(root: str, release: str, module: str) -> bool:
    """Built in (modules.builtin), or installed and loadable (modules.dep or the file)."""
    base = f"{root}/lib/modules/{release}"
    if f"/{module}.ko" in _read(f"{base}/modules.builtin"):
        return True
    if not os.path.exists(f"{root}/proc/modules"):   # kernel without loadable modules
        return False
    if f"/{module}.ko" in _read(f"{base}/modules.dep"):
        return True
    folder = f"{base}/kernel/net/sched"
    try:
        return any(name.startswith(module + ".ko") for name in os.listdir(folder))
    except OSError:
        return False


def netem_available(root: str = "", release: str | None = None) -> bool:
    """Can tc add a netem qdisc (delay, loss) on this kernel?"""
    return qdisc_available(NETEM, NETEM_CONFIG, root, release)


def qdisc_available(module: str, config_option: str, root: str = "", release: str | None = None) -> bool:
    """Can tc add the qdisc of kernel module `module` (e.g. sch_netem)?

    Loaded (/sys/module, /proc/modules), built in or a loadable module
    (kernel config, modules.builtin, modules.dep, the module file under
    /lib/modules/<release>). `root` and `release` let tests point at a fake tree.
    """
    release = release or os.uname().release
    if os.path.isdir(f"{root}/sys/module/{module}"):
        return True
    if any(line.split(" ", 1)[0] == module for line in _read(f"{root}/proc/modules").splitlines()):
        return True
    config = _config_value(root, release, config_option)
    if config == "y":
        return True
    if config == "n":
        return False
    return _module_listed(root, release, module)


def qdiscs() -> dict[str, bool]:
    """Whether this kernel offers each qdisc a run may ask for, by module."""
    wanted = {d.module: d.config for d in DISCIPLINES.values() if d is not FIFO}
    return {module: qdisc_available(module, config) for module, config in {**wanted, NETEM: NETEM_CONFIG}.items()}


def congestion_controls(root: str = "", release: str | None = None) -> list[str]:
    """TCP congestion controls this kernel offers: those it has
    (tcp_available_congestion_control) and those a module would add
    (tcp_NAME.ko under /lib/modules, where modules load: setting one loads it)."""
    release = release or os.uname().release
    offered = _read(f"{root}/proc/sys/net/ipv4/tcp_available_congestion_control").split()
    if os.path.exists(f"{root}/proc/modules"):
        try:
            names = os.listdir(f"{root}/lib/modules/{release}/kernel/net/ipv4")
        except OSError:
            names = []
        offered += [n.split(".ko")[0][len("tcp_"):] for n in names if n.startswith("tcp_") and ".ko" in n]
    return sorted(set(offered))
