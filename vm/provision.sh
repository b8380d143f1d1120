#!/bin/sh
# Set up a machine for bigraph-emu: system packages, Open vSwitch running,
# the project's virtual environment with its Python dependencies.
# Idempotent; run as root on Debian 12 or Ubuntu 22.04/24.04.
#   vm/provision.sh            set up everything
#   vm/provision.sh --userspace-tso on|off
#                              Open vSwitch's userspace TSO (default on: the
#                              userspace datapath's `offload = "tso"` needs it, and
#                              "auto" takes it; Open vSwitch restarts when the
#                              setting changes and no bridge is in use)
#   vm/provision.sh --no-services
#                              packages and virtual environment only, no
#                              service started (building a VM image in a chroot)
#   vm/provision.sh --clients  also the real clients' packages, the extra
#                              `clients` of setup.cfg (MPICH, mpi4py, torch),
#                              for experiments/real-clients/; combines with the others
#   vm/provision.sh --notebooks
#                              also what the labs of experiments/notebooks/ need to
#                              run, the extra `notebooks` of setup.cfg (nbformat,
#                              nbclient, ipykernel; docs/python.md says how to open
#                              them in JupyterLab); combines with the others
#   vm/provision.sh --cluster  a server of a fabric over several (or its head's
#                              tests): also sshd (docs/servers.md); without systemd
#                              it is installed, not started
#   vm/provision.sh --dask     a machine of a sweep's Dask cluster: checks the
#                              `dask` command and prints how to start a worker
#                              here (docs/sweeps.md); with --no-services, a worker
#                              for model points only
# Environment: BIGRAPH_VENV (default: <project>/.venv)
set -eu

PROJECT_DIR=$(cd "$(dirname "$0")/.." && pwd)
VENV=${BIGRAPH_VENV:-$PROJECT_DIR/.venv}
# python3-setuptools: Mininet 2.3.0 imports distutils, gone from Python 3.12
# sudo and ssh: Mininet's cluster classes reach other servers with `sudo -E ssh`
PACKAGES="python3-setuptools mininet openvswitch-switch iperf3 ethtool iproute2 iputils-ping fping procps tcpdump python3-venv sudo openssh-client"
# Debian's chromium and chromium-driver: the web view's browser tests (headless,
# driven by Selenium). Ubuntu ships Chromium only as a snap: there they skip.
if grep -qs '^ID=debian' /etc/os-release; then
    PACKAGES="$PACKAGES chromium chromium-driver"
fi

say() { echo "provision: $*"; }

USERSPACE_TSO=true
TSO_ASKED=no
SERVICES=yes
CLIENTS=no
NOTEBOOKS=no
DASK=no
CLUSTER=no
while [ $# -gt 0 ]; do
    case "$1" in
        --no-services) SERVICES=no ;;
        --clients) CLIENTS=yes ;;
        --notebooks) NOTEBOOKS=yes ;;
        --dask) DASK=yes ;;
        --cluster) CLUSTER=yes ;;
        --userspace-tso)
            case "${2:-}" in
                on) USERSPACE_TSO=true; TSO_ASKED=yes ;;
                off) USERSPACE_TSO=false; TSO_ASKED=yes ;;
                *) echo "provision: --userspace-tso takes on or off, got '${2:-}'" >&2; exit 2 ;;
            esac
            shift ;;
        *) echo "provision: unknown option '$1'; usage: $0 [--userspace-tso on|off | --no-services] [--clients] [--notebooks] [--dask] [--cluster]" >&2; exit 2 ;;
    esac
    shift
done

if [ "$(id -u)" != 0 ]; then
    echo "provision: must run as root (Mininet and Open vSwitch need it); try: sudo $0" >&2
    exit 1
fi

install_packages() {
    missing=""
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    if [ -z "$missing" ]; then
        say "system packages already installed"
        return
    fi
    say "installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # Without systemd (containers, CI) a package would start its service at
    # once (sshd on port 22, say): keep them from starting, as Docker's
    # images do, and start what the project needs itself.
    guard=""
    if [ ! -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then
        guard=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' > "$guard" && chmod 755 "$guard"
    fi
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing || { [ -z "$guard" ] || rm -f "$guard"; exit 1; }
    [ -z "$guard" ] || rm -f "$guard"
}

# ovs_service start|restart: with systemd where there is one; otherwise
# (containers, CI) the daemons directly; ovs-ctl then prints a harmless
# ulimit error.
ovs_service() {
    if [ -d /run/systemd/system ]; then
        systemctl "$1" openvswitch-switch
    else
        /usr/share/openvswitch/scripts/ovs-ctl "$1" --system-id=random || true
    fi
    ovs-vsctl --timeout=10 show >/dev/null
}

start_ovs() {
    if ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
        say "Open vSwitch is running"
        return
    fi
    say "starting Open vSwitch"
    ovs_service start
}

# Userspace datapath only (no openvswitch kernel module): ovs-vswitchd sends
# every packet through one socket whose buffer must hold every emulated
# queue (see emulator/net/ovs_buffers.py). The emulator enlarges it when
# ovs-vswitchd creates it; if an earlier ovs-vswitchd already made it small,
# restart Open vSwitch, but only when no bridge is in use.
ovs_send_buffer_ok() {
    [ -d /sys/module/openvswitch ] && return 0
    tb=$(ss -0 -m -p 2>/dev/null | grep '\[0\]:\*' | grep '"ovs-vswitchd"' | grep -o 'tb[0-9]*' | head -1 | tr -d tb)
    [ -z "$tb" ] || [ "$tb" -ge 67108864 ]
}

restart_ovs_if_needed() {
    ovs_send_buffer_ok && return
    if [ -n "$(ovs-vsctl list-br)" ]; then
        say "warning: Open vSwitch's send buffer is small but bridges are in use; not restarting it"
        return
    fi
    say "restarting Open vSwitch so the emulator can enlarge its send buffer"
    ovs_service restart
}

# other_config:userspace-tso-enable takes effect when ovs-vswitchd starts.
set_userspace_tso() {
    now=$(ovs-vsctl --timeout=5 get Open_vSwitch . other_config:userspace-tso-enable 2>/dev/null | tr -d '"' || true)
    if [ "$now" = "$USERSPACE_TSO" ] || { [ "$USERSPACE_TSO" = false ] && [ -z "$now" ]; }; then
        say "userspace TSO is already $USERSPACE_TSO"
        return 0
    fi
    if [ -n "$(ovs-vsctl list-br)" ]; then
        echo "provision: bridges are in use; not changing userspace TSO (run again when no emulation runs)" >&2
        [ "$TSO_ASKED" = no ] && return 0   # the default: runs meanwhile send frames (offload auto)
        exit 1
    fi
    say "userspace TSO $USERSPACE_TSO; restarting Open vSwitch"
    ovs-vsctl --timeout=5 set Open_vSwitch . other_config:userspace-tso-enable=$USERSPACE_TSO
    ovs_service restart
}

make_venv() {
    # System Python with system site packages: the venv sees Debian's Mininet.
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating virtual environment $VENV"
        /usr/bin/python3 -m venv --system-site-packages "$VENV"
    fi
    # A stamp holds what it was installed from, by content: a fresh clone
    # or a copy gives setup.cfg a new time, not new dependencies. The
    # clients and the notebooks' packages have stamps of their own, so a run
    # without --clients (or --notebooks) after one with it finds the project
    # installed and leaves them be.
    stamp="$VENV/.bigraph-installed"
    clients_stamp="$VENV/.bigraph-installed-clients"
    notebooks_stamp="$VENV/.bigraph-installed-notebooks"
    wanted=$(cat "$PROJECT_DIR/setup.cfg" "$PROJECT_DIR/pyproject.toml" | sha256sum | cut -d' ' -f1)
    extras=test
    [ "$CLIENTS" = yes ] && extras=$extras,clients
    [ "$NOTEBOOKS" = yes ] && extras=$extras,notebooks
    if stamped "$stamp" "$wanted" && "$VENV/bin/python" -c "import emulator, controller, os_ken, mininet.net" 2>/dev/null \
        && extra_ready "$CLIENTS" "$clients_stamp" clients_importable \
        && extra_ready "$NOTEBOOKS" "$notebooks_stamp" notebooks_importable; then
        say "project already installed in $VENV ($extras)"
        return
    fi
    say "installing the project and its Python dependencies ($extras)"
    "$VENV/bin/pip" install -q --disable-pip-version-check -e "$PROJECT_DIR[$extras]"
    if ! "$VENV/bin/python" -c "import emulator, controller, os_ken, mininet.net"; then
        echo "provision: the installed environment cannot import Mininet or os-ken (see the error above)" >&2
        exit 1
    fi
    echo "$wanted" > "$stamp"
    if [ "$CLIENTS" = yes ]; then
        if ! clients_importable; then
            echo "provision: the real clients' packages do not load (see the error above)" >&2
            exit 1
        fi
        echo "$wanted" > "$clients_stamp"
    fi
    if [ "$NOTEBOOKS" = yes ]; then
        if ! notebooks_importable; then
            echo "provision: the notebooks' packages do not load (see the error above)" >&2
            exit 1
        fi
        echo "$wanted" > "$notebooks_stamp"
    fi
}

# extra_ready ASKED STAMP CHECK: an extra not asked for, or installed from this setup.cfg and loading
extra_ready() { [ "$1" = no ] || { stamped "$2" "$wanted" && "$3"; }; }

stamped() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# the labs' test runs each notebook with nbclient on an ipykernel kernel
notebooks_importable() {
    "$VENV/bin/python" -c "import nbformat, nbclient, ipykernel"
}

# mpi4py loads MPICH's library without starting MPI; mpiexec is the wheel's
clients_importable() {
    [ -x "$VENV/bin/mpiexec" ] && "$VENV/bin/python" -c \
        "import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; import torch.distributed"
}

[ "$CLUSTER" = yes ] && PACKAGES="$PACKAGES openssh-server"
install_packages
if [ "$SERVICES" = yes ]; then
    start_ovs
    restart_ovs_if_needed
    set_userspace_tso
fi
make_venv
say "ready: $VENV/bin/bigraph-emu"
if [ "$DASK" = yes ]; then
    if ! "$VENV/bin/dask" --version >/dev/null; then
        echo "provision: the dask command does not run (see the error above)" >&2
        exit 1
    fi
    # a worker process per core (the model is Python: threads would share one);
    # the fabric resource where the machine may emulate (its lock lets one run at a time)
    resources=""
    [ "$SERVICES" = yes ] && resources=" --resources fabric=1"
    say "$("$VENV/bin/dask" --version 2>&1 | tail -1); start this machine's workers with:"
    say "  DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False $VENV/bin/dask worker tcp://SCHEDULER:8786 --nworkers $(nproc) --nthreads 1$resources"
fi
