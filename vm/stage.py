#!/usr/bin/env python3
"""The VM stage: the project's tests in a fresh Debian VM under qemu, on the
Open vSwitch kernel datapath with netem, as a user's VM would run them.

  python3 vm/stage.py [--flavour 12|13] [--command CMD] [--out DIR]

Builds a Debian image with debootstrap (packages installed in the chroot,
the project's virtual environment included; reused while nothing it is
built from changed), boots it under qemu with no network (KVM only when a
short probe boots with it, otherwise software emulation), shares a copy of
the checkout read-only at /bigraph-emu and an output folder, runs
`vm/provision.sh` and then `vm/guest-stage.sh` in it, and brings the output
and the serial console's log back into --out. Needs root, qemu-system-x86,
qemu-utils, debootstrap and e2fsprogs (vm/stage.py --install-tools).
Standard library only: it runs before any virtual environment exists.
"""
from __future__ import annotations

import argparse
import hashlib
import inspect
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)
CACHE = os.environ.get("BIGRAPH_VM_CACHE", "/var/cache/bigraph-emu/vm")
MIRROR = os.environ.get("BIGRAPH_VM_MIRROR", "http://deb.debian.org/debian")
TOOLS = {"qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils",
         "debootstrap": "debootstrap", "mkfs.ext4": "e2fsprogs"}
# The files an image is built from; with the recipe below (image_key), a
# change to any of them builds it again, and nothing else does.
IMAGE_INPUTS = ["vm/provision.sh", "setup.cfg", "pyproject.toml"]
BASE_PACKAGES = "linux-image-amd64,initramfs-tools,systemd-sysv,udev,kmod,ca-certificates,python3"
DISK_GIB = 6
MIN_FREE_GIB = 12        # debootstrap folder, disk image and the run's overlay
VENV = "/opt/bigraph-emu/venv"
SHARE_PROJECT, SHARE_OUT = "/bigraph-emu", "/vm-out"
# --cluster: the two VMs' private segment (198.18.0.0/15 is the fabric's and the
# benchmarking range; its top /24 here), reached through qemu's socket backend
# on the host's loopback, nothing else
CLUSTER_NET = "198.19.255"
KILL_REQUEST = "kill-server"   # the head's test writes it into its output: the stage kills the server VM


@dataclass(frozen=True)
class Flavour:
    name: str       # what --flavour takes
    suite: str      # Debian's suite


FLAVOURS = {f.name: f for f in (Flavour("12", "bookworm"), Flavour("13", "trixie"))}


class StageError(Exception):
    """A problem the user can act on; printed without a traceback."""


def say(msg: str) -> None:
    print(f"vm-stage: {msg}", file=sys.stderr, flush=True)


def run(argv: list[str], **kw) -> None:
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if result.returncode:
        tail = "\n".join(result.stdout.strip().splitlines()[-15:])
        raise StageError(f"{argv[0]} failed with exit code {result.returncode}:\n{tail}")


# --- checks before anything is built -------------------------------------------
def check_host(need_gib: float) -> None:
    if os.geteuid() != 0:
        raise StageError("must run as root (debootstrap and chroot need it)")
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise StageError(f"missing packages: {' '.join(missing)}; install them with "
                         f"`apt-get install {' '.join(missing)}` or `python3 vm/stage.py --install-tools`")
    os.makedirs(CACHE, exist_ok=True)
    free = shutil.disk_usage(CACHE).free / 2**30
    if free < need_gib:
        raise StageError(f"{CACHE} has {free:.1f} GiB free; the VM stage needs {need_gib:.0f} GiB")


def install_tools() -> None:
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if not missing:
        say("qemu, debootstrap and e2fsprogs are installed")
        return
    say(f"installing {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(["apt-get", "update", "-q"], env=env)
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], env=env)


# --- the image -----------------------------------------------------------------
def image_key(flavour: Flavour) -> str:
    recipe = [flavour.suite, MIRROR, BASE_PACKAGES, str(DISK_GIB), VENV, GUEST_UNIT, GUEST_ENTRY,
              *(inspect.getsource(f) for f in (_build, _prepare_chroot, _finish_chroot))]
    h = hashlib.sha256("\0".join(recipe).encode())
    for rel in IMAGE_INPUTS:
        with open(os.path.join(PROJECT, rel), "rb") as f:
            h.update(rel.encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def project_files() -> list[str]:
    """The checkout as a user has it: tracked and new files, not ignored ones."""
    out = subprocess.run(["git", "-C", PROJECT, "ls-files", "-co", "--exclude-standard", "-z"],
                         capture_output=True, text=True)
    if out.returncode:
        raise StageError(f"cannot list the checkout's files: {out.stderr.strip()}")
    return [p for p in out.stdout.split("\0") if p and os.path.isfile(os.path.join(PROJECT, p))]


def copy_project(dest: str) -> None:
    for rel in project_files():
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(PROJECT, rel), target)


GUEST_UNIT = """[Unit]
Description=bigraph-emu VM stage
After=openvswitch-switch.service local-fs.target
Wants=openvswitch-switch.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/bigraph-vm-stage
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
"""

# In the image, fixed: mount the shares, hand over to the checkout's own
# guest script, power off whatever happens.
GUEST_ENTRY = f"""#!/bin/sh
mkdir -p {SHARE_PROJECT} {SHARE_OUT}
if mount -t 9p -o trans=virtio,version=9p2000.L,ro project {SHARE_PROJECT} \\
   && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out {SHARE_OUT}; then
    BIGRAPH_VENV={VENV} sh {SHARE_PROJECT}/vm/guest-stage.sh
else
    echo "vm-stage: could not mount the shared folders"
fi
sync
poweroff -f
"""


def build_image(flavour: Flavour, key: str) -> str:
    """The image folder for `key`, built if missing; a failed build leaves nothing."""
    final = os.path.join(CACHE, f"debian-{flavour.name}-{key}")
    if os.path.exists(os.path.join(final, "disk.img")):
        say(f"reusing image {final}")
        return final
    for old in os.listdir(CACHE):   # images of earlier inputs: one per flavour is kept
        if old.startswith(f"debian-{flavour.name}-"):
            shutil.rmtree(os.path.join(CACHE, old), ignore_errors=True)
    work = tempfile.mkdtemp(prefix=f".building-{flavour.name}-", dir=CACHE)
    try:
        _build(flavour, work)
        os.rename(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final


def _build(flavour: Flavour, work: str) -> None:
    root = os.path.join(work, "root")
    t0 = time.monotonic()
    say(f"debootstrap Debian {flavour.name} ({flavour.suite}) from {MIRROR}")
    run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", flavour.suite, root, MIRROR])
    _prepare_chroot(root)
    copy_project(os.path.join(root, SHARE_PROJECT.lstrip("/")))
    say("vm/provision.sh --no-services in the chroot (packages and the virtual environment)")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
           "BIGRAPH_VENV": VENV, "PIP_CERT": "/etc/bigraph-host-ca.crt",
           "PIP_DEFAULT_TIMEOUT": "180", "DEBIAN_FRONTEND": "noninteractive"}
    run(["chroot", root, "sh", f"{SHARE_PROJECT}/vm/provision.sh", "--no-services", "--cluster"], env=env)
    _finish_chroot(root)
    boot = os.path.join(root, "boot")
    kernel = sorted(f for f in os.listdir(boot) if f.startswith("vmlinuz-"))[-1]
    initrd = sorted(f for f in os.listdir(boot) if f.startswith("initrd.img-"))[-1]
    shutil.copy(os.path.join(boot, kernel), os.path.join(work, "vmlinuz"))
    shutil.copy(os.path.join(boot, initrd), os.path.join(work, "initrd.img"))
    disk = os.path.join(work, "disk.img")
    say(f"making the {DISK_GIB} GiB disk image")
    with open(disk, "wb") as f:
        f.truncate(DISK_GIB * 2**30)
    run(["mkfs.ext4", "-q", "-F", "-L", "bigraph-root", "-d", root, disk])
    shutil.rmtree(root)
    say(f"image built in {time.monotonic() - t0:.0f} s")


def _prepare_chroot(root: str) -> None:
    # No service starts inside the chroot; apt and pip reach the registries.
    with open(os.path.join(root, "usr/sbin/policy-rc.d"), "w") as f:
        f.write("#!/bin/sh\nexit 101\n")
    os.chmod(os.path.join(root, "usr/sbin/policy-rc.d"), 0o755)
    shutil.copy("/etc/resolv.conf", os.path.join(root, "etc/resolv.conf"))
    # The registries are reached through a path only this machine's trust store knows.
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", os.path.join(root, "etc/bigraph-host-ca.crt"))


def _finish_chroot(root: str) -> None:
    os.remove(os.path.join(root, "usr/sbin/policy-rc.d"))
    os.remove(os.path.join(root, "etc/bigraph-host-ca.crt"))
    shutil.rmtree(os.path.join(root, SHARE_PROJECT.lstrip("/")))   # the share takes its place
    os.makedirs(os.path.join(root, SHARE_PROJECT.lstrip("/")))
    with open(os.path.join(root, "etc/resolv.conf"), "w"):
        pass   # the VM has no network
    with open(os.path.join(root, "etc/fstab"), "w") as f:
        f.write("/dev/vda / ext4 rw,errors=remount-ro 0 1\n")
    with open(os.path.join(root, "etc/hostname"), "w") as f:
        f.write("bigraph-vm\n")
    with open(os.path.join(root, "etc/hosts"), "w") as f:   # sudo warns on every call about a name it cannot resolve
        f.write("127.0.0.1 localhost\n127.0.1.1 bigraph-vm\n")
    # the two VMs of --cluster reach each other as root with a key made now,
    # on their private segment only
    ssh = os.path.join(root, "root/.ssh")
    os.makedirs(ssh, mode=0o700, exist_ok=True)
    run(["chroot", root, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", "/root/.ssh/id_ed25519"])
    shutil.copy(os.path.join(ssh, "id_ed25519.pub"), os.path.join(ssh, "authorized_keys"))
    with open(os.path.join(ssh, "config"), "w") as f:
        f.write(f"Host {CLUSTER_NET}.*\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                "  LogLevel ERROR\n")
    with open(os.path.join(root, "usr/local/sbin/bigraph-vm-stage"), "w") as f:
        f.write(GUEST_ENTRY)
    os.chmod(os.path.join(root, "usr/local/sbin/bigraph-vm-stage"), 0o755)
    unit = "etc/systemd/system/bigraph-vm-stage.service"
    with open(os.path.join(root, unit), "w") as f:
        f.write(GUEST_UNIT)
    wants = os.path.join(root, "etc/systemd/system/multi-user.target.wants")
    os.makedirs(wants, exist_ok=True)
    os.symlink("/" + unit, os.path.join(wants, "bigraph-vm-stage.service"))


# --- booting it ----------------------------------------------------------------
# Software emulation's CPU model. qemu's default (qemu64) lacks SSE4.2 and
# NumPy dies with SIGILL; with "max" (AVX2 and more, new in qemu 7.2's
# emulation) pandas crashed with a segmentation fault in the VM on a report
# that works on the host. Nehalem has SSE4.2 and POPCNT and no AVX.
TCG_CPU = "Nehalem"


def qemu_argv(image: str, overlay: str, share: str, out: str, accel: str, console: str,
              cpus: int = 2, tcg_cpu: str = TCG_CPU, net: tuple[str, ...] = ()) -> list[str]:
    """`net`: a NIC on a private segment (--cluster), beside no other network."""
    cpu = ["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else ["-accel", "tcg", "-cpu", tcg_cpu]
    return ["qemu-system-x86_64", *cpu, "-smp", str(cpus), "-m", "6144", "-display", "none",
            "-monitor", "none", "-parallel", "none", "-serial", f"file:{console}", "-no-reboot",
            "-nic", "none",   # no network: nothing of the VM reaches or listens outside it
            "-kernel", os.path.join(image, "vmlinuz"), "-initrd", os.path.join(image, "initrd.img"),
            # panic=-1: a kernel that cannot boot reboots, which -no-reboot turns into qemu's exit
            "-append", "root=/dev/vda rw console=ttyS0 quiet systemd.show_status=false panic=-1",
            "-drive", f"file={overlay},format=qcow2,if=virtio",
            "-virtfs", f"local,path={share},mount_tag=project,security_model=none,readonly=on",
            "-virtfs", f"local,path={out},mount_tag=out,security_model=none", *net]


BOOT_TIMEOUT_S = 300   # until the stage's first line on the console
# Under TCG a boot can hang in the kernel (RCU stalls, "timer wakeup didn't
# happen" on CPU 0: seen once, with the host busy): the tests never ran, so
# one more boot on a fresh disk says more than a failure
BOOT_ATTEMPTS = 2


def boot(argv: list[str], console: str, timeout_s: float) -> str | int:
    """Run qemu to its end: its exit code, or why it was killed ("no boot",
    "timeout"). Killed too when this script is interrupted."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
    t0 = time.monotonic()
    try:
        while proc.poll() is None:
            elapsed = time.monotonic() - t0
            if elapsed > timeout_s:
                return "timeout"
            if elapsed > BOOT_TIMEOUT_S and not _console_has(console, b"vm-stage:"):
                return "no boot"
            time.sleep(1)
        return proc.returncode
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _console_has(console: str, text: bytes) -> bool:
    try:
        with open(console, "rb") as f:
            return text in f.read()
    except FileNotFoundError:
        return False


def kvm_boots(image: str, scratch: str) -> bool:
    """KVM only if a guest started with it prints its kernel's banner soon:
    on some machines /dev/kvm accepts a VM that then hangs in its firmware."""
    if not os.path.exists("/dev/kvm"):
        return False
    console = os.path.join(scratch, "kvm-probe.log")
    argv = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "512", "-display", "none",
            "-monitor", "none", "-serial", f"file:{console}", "-no-reboot", "-nic", "none",
            "-kernel", os.path.join(image, "vmlinuz"), "-append", "console=ttyS0 panic=-1"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10   # a working KVM prints it within a second
    seen = False
    while time.monotonic() < deadline and proc.poll() is None and not seen:
        time.sleep(0.5)
        seen = _console_has(console, b"Linux version")
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return seen


def stage(flavour: Flavour, command: str, out: str, timeout_s: float, accel: str, cpus: int = 2,
          tcg_cpu: str = TCG_CPU) -> int:
    check_host(MIN_FREE_GIB)
    image = build_image(flavour, image_key(flavour))
    scratch = tempfile.mkdtemp(prefix="run-", dir=CACHE)
    try:
        share, vm_out = os.path.join(scratch, "project"), os.path.join(scratch, "out")
        copy_project(share)
        os.makedirs(vm_out)
        with open(os.path.join(vm_out, "command"), "w") as f:
            f.write(command + "\n")
        overlay = os.path.join(scratch, "overlay.qcow2")
        if accel == "auto":
            accel = "kvm" if kvm_boots(image, scratch) else "tcg"
        console = os.path.join(vm_out, "console.log")
        say(f"booting Debian {flavour.name} ({accel}); console log: {out}/console.log")
        t0 = time.monotonic()
        try:
            for attempt in range(1, BOOT_ATTEMPTS + 1):
                run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                     os.path.join(image, "disk.img"), overlay])   # a fresh disk: nothing of a hung boot
                status = boot(qemu_argv(image, overlay, share, vm_out, accel, console, cpus, tcg_cpu), console,
                              timeout_s)
                if status != "no boot" or attempt == BOOT_ATTEMPTS:
                    break
                hung = os.path.join(vm_out, f"console-hung-{attempt}.log")
                os.replace(console, hung)
                say(f"the VM hung before the stage (kept in {out}/{os.path.basename(hung)}); booting it again")
        finally:   # also when interrupted: what the VM wrote so far comes out
            if os.path.exists(out):
                shutil.rmtree(out)
            shutil.copytree(vm_out, out, symlinks=True)   # pytest leaves links to guest paths
        return _outcome(status, out, time.monotonic() - t0, timeout_s)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def stage_cluster(flavour: Flavour, out: str, timeout_s: float, accel: str, tcg_cpu: str = TCG_CPU) -> int:
    """Two VMs of one CPU each on a private segment of their own: the head
    runs tests/emulation/test_two_servers.py with the other as its second
    server, and may ask (KILL_REQUEST) for the server VM to be killed."""
    check_host(MIN_FREE_GIB + 2)
    image = build_image(flavour, image_key(flavour))
    scratch = tempfile.mkdtemp(prefix="cluster-", dir=CACHE)
    procs: dict[str, subprocess.Popen] = {}
    try:
        share = os.path.join(scratch, "project")
        copy_project(share)
        if accel == "auto":
            accel = "kvm" if kvm_boots(image, scratch) else "tcg"
        port = _free_port()
        outs = {}
        for n, (role, end) in enumerate((("head", "listen"), ("server", "connect")), start=1):
            vm_out = outs[role] = os.path.join(scratch, role)
            os.makedirs(vm_out)
            with open(os.path.join(vm_out, "command"), "w") as f:
                f.write(f"cluster-{role}\n")
            overlay = os.path.join(scratch, f"{role}.qcow2")
            run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", os.path.join(image, "disk.img"),
                 overlay])
            net = ("-netdev", f"socket,id=cluster,{end}=127.0.0.1:{port}",
                   "-device", f"virtio-net-pci,netdev=cluster,mac=52:54:00:12:34:{n:02x}")
            argv = qemu_argv(image, overlay, share, vm_out, accel, os.path.join(vm_out, "console.log"), 1,
                             tcg_cpu, net)
            procs[role] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
            time.sleep(2)   # the head's end listens before the server's connects
        say(f"booted two Debian {flavour.name} VMs ({accel}, 1 CPU each) on {CLUSTER_NET}.0/24; "
            f"console logs: {out}/head/console.log, {out}/server/console.log")
        t0 = time.monotonic()
        status = _watch_cluster(procs, outs["head"], t0, timeout_s)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if os.path.exists(scratch):
            if os.path.exists(out):
                shutil.rmtree(out)
            os.makedirs(out)
            for role in ("head", "server"):
                if os.path.isdir(os.path.join(scratch, role)):
                    shutil.copytree(os.path.join(scratch, role), os.path.join(out, role), symlinks=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return _outcome(status, os.path.join(out, "head"), time.monotonic() - t0, timeout_s)


def _watch_cluster(procs: dict, head_out: str, t0: float, timeout_s: float) -> str | int:
    """Until the head VM powers off: the server VM killed when the head asks."""
    while procs["head"].poll() is None:
        if time.monotonic() - t0 > timeout_s:
            return "timeout"
        if os.path.exists(os.path.join(head_out, KILL_REQUEST)) and procs["server"].poll() is None:
            os.killpg(procs["server"].pid, signal.SIGKILL)
            procs["server"].wait()
            say("killed the server VM, as the head's test asked")
        time.sleep(0.5)
    return procs["head"].returncode


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _outcome(status: str | int, out: str, elapsed: float, timeout_s: float) -> int:
    rc_file = os.path.join(out, "rc")
    if status == "timeout":
        say(f"the VM did not finish within {timeout_s:.0f} s; killed. See {out}/console.log")
        return 1
    if status == "no boot":
        say(f"the VM did not reach the stage within {BOOT_TIMEOUT_S} s (kernel or systemd stuck?); killed. "
            f"See {out}/console.log")
        return 1
    if status != 0:
        say(f"qemu exited with code {status} after {elapsed:.0f} s (did the VM boot?). See {out}/console.log")
        return 1
    if not os.path.exists(rc_file):
        say(f"the VM powered off after {elapsed:.0f} s without running the stage. See {out}/console.log")
        return 1
    rc = int(open(rc_file).read().strip() or 1)
    say(f"the stage in the VM exited with {rc} after {elapsed:.0f} s; its output is in {out}")
    if rc != 0:
        _print_tail(os.path.join(out, "stage.log"))
    return rc


def _print_tail(path: str, lines: int = 120) -> None:
    """A failed stage's last lines (its failures' summary) where CI shows
    them: a CI machine's results folder is gone after the run."""
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            tail = f.readlines()[-lines:]
        say(f"the last {len(tail)} lines of {path}:")
        sys.stderr.write("".join(tail))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flavour", default="12", choices=sorted(FLAVOURS), help="Debian release (default 12)")
    ap.add_argument("--command", default="tests",
                    help="what vm/guest-stage.sh runs: tests (default: the demo and the kernel-datapath tests), all-tests, demo, or a shell command")
    ap.add_argument("--out", default="results/vm-stage", help="where the VM's output and console log go")
    ap.add_argument("--timeout", type=float, default=2700, help="seconds before the VM is killed")
    ap.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"],
                    help="auto: KVM if a short probe boots with it, else software emulation")
    ap.add_argument("--cpus", type=int, default=2, choices=range(1, 9), metavar="1..8", help="the VM's CPUs")
    ap.add_argument("--cpu-model", default=TCG_CPU, help=f"qemu's -cpu under software emulation (default {TCG_CPU})")
    ap.add_argument("--cluster", action="store_true",
                    help="two VMs (1 CPU each) on a private segment: one fabric over both (docs/servers.md)")
    ap.add_argument("--install-tools", action="store_true", help="install qemu and debootstrap, then stop")
    ap.add_argument("--build-only", action="store_true", help="build (or find) the image, do not boot it")
    args = ap.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):   # unwind: qemu and the scratch folder go too
        if signal.getsignal(sig) != signal.SIG_IGN:   # nohup stays nohup
            signal.signal(sig, lambda signum, _: sys.exit(128 + signum))
    try:
        if args.install_tools:
            install_tools()
            return 0
        if args.build_only:
            check_host(MIN_FREE_GIB)
            flavour = FLAVOURS[args.flavour]
            say(f"image ready: {build_image(flavour, image_key(flavour))}")
            return 0
        if args.cluster:
            return stage_cluster(FLAVOURS[args.flavour], os.path.abspath(args.out), args.timeout, args.accel,
                                 args.cpu_model)
        return stage(FLAVOURS[args.flavour], args.command, os.path.abspath(args.out), args.timeout, args.accel,
                     args.cpus, args.cpu_model)
    except StageError as e:
        say(str(e))
        return 2
    except KeyboardInterrupt:
        say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
