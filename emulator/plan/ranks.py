"""The ranks of a user's program on the emulated hosts (`bigraph-emu exec`):
who runs where, with which environment, and what they left. Pure logic;
emulator/replay/programs.py starts the processes.

A program is started once per rank, inside that rank's host, in rank order
of the run's mapping, through emulator/replay/rank.py, which records the rank's
start, end and exit code beside its stdout and stderr. With MPI, rank 0's
host runs `mpiexec`, whose launcher enters each host instead of using ssh.
"""
from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass

MASTER_PORT = 29500        # torch.distributed's default; every host has its own ports
RANKS_FOLDER = "ranks"     # ranks/<rank>/: the rank's cwd, TMPDIR, stdout, stderr, exit.json
EXIT_FILE = "exit.json"
HOSTFILE = "hostfile"      # the ranks' addresses, one a line, in rank order
STDERR_TAIL_LINES = 8      # of a failed rank, in the error
RANK_COLUMNS = ["run", "rank", "host", "address", "exit_code", "start_s", "end_s", "cpu_s", "cpu_wait_s", "label"]


@dataclass(frozen=True)
class Slot:
    """Where one rank runs: its host, the host's address and fabric interface."""
    rank: int
    host: str
    address: str
    interface: str


def slots(fabric, hosts: list[str]) -> list[Slot]:
    """Rank r on hosts[r] (the mapping's order); a host's one interface is
    HOST-eth0 (Mininet's name for port 0)."""
    return [Slot(rank, h, fabric.host(h).ip, f"{h}-eth0") for rank, h in enumerate(hosts)]


def check_one_rank_per_host(hosts: list[str]) -> None:
    """MASTER_ADDR, the hostfile and MPI's one-rank-per-host all name a rank by its host."""
    twice = sorted({h for h in hosts if hosts.count(h) > 1})
    if twice:
        raise ValueError(f"exec runs one rank per host, and {', '.join(twice[:4])} would hold several")


def rank_dir(out: str, rank: int) -> str:
    return os.path.join(out, RANKS_FOLDER, str(rank))


def hostfile_text(ranks: list[Slot]) -> str:
    """One address per line in rank order: what MPICH's -f takes."""
    return "".join(f"{s.address}\n" for s in ranks)


def rank_env(ranks: list[Slot], rank: int, hostfile: str, folder: str) -> dict[str, str]:
    """What every rank finds in its environment (torch.distributed's env://
    needs nothing else). The hosts share the machine's hostname, so gloo
    and NCCL must be told their interface."""
    me = ranks[rank]
    # no LOCAL_WORLD_SIZE: some gloo versions take shared memory when it equals the world size
    return {"RANK": str(rank), "WORLD_SIZE": str(len(ranks)), "LOCAL_RANK": "0",
            "MASTER_ADDR": ranks[0].address, "MASTER_PORT": str(MASTER_PORT),
            "GLOO_SOCKET_IFNAME": me.interface, "NCCL_SOCKET_IFNAME": me.interface,
            "BIGRAPH_HOSTFILE": hostfile, "BIGRAPH_HOST": me.host, "BIGRAPH_ADDRESS": me.address,
            "TMPDIR": folder}


def over_ssh(env: dict[str, str], argv: list[str]) -> list[str]:
    """argv with `env`, for a host on another server: Mininet's remote popen
    hands its argv to ssh, which passes no environment and joins the words
    with spaces for the server's shell; so the environment goes through
    env(1), and every word is quoted."""
    return [shlex.quote(word) for word in ["env", *(f"{k}={v}" for k, v in env.items()), *argv]]


def wrapped(python: str, folder: str, command: list[str]) -> list[str]:
    """CMD run by emulator/replay/rank.py: in `folder`, with its outputs and exit kept there."""
    return [python, "-m", "emulator.replay.rank", "--dir", folder, "--", *command]


# --- MPI ---------------------------------------------------------------------------------

# MPICH's ranks poll for progress: 8 of them took 90% of a 2-core machine
# that a real cluster gives each rank a core of, and ran 1.18x our agents;
# yielding halved their CPU and the gap (docs/exec.md). A user's own
# setting of the variable wins.
YIELD = "MPIR_CVAR_ENABLE_HEAVY_YIELD"


# MPICH from PyPI: ch4 over libfabric's tcp provider, told the host's one
# interface, and no shared memory between ranks (the hosts share one kernel,
# hostname and /dev/shm); see experiments/real-clients/README.md
def mpi_env(slot: Slot, environ=os.environ) -> dict[str, str]:
    yielding = {} if YIELD in environ else {YIELD: "1"}
    return {**yielding, "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": slot.interface,
            "MPIR_CVAR_NOLOCAL": "1"}


def mpiexec_argv(mpiexec: str, launcher: str, ranks: list[Slot], python: str, out: str, hostfile: str,
                 command: list[str], away: dict[int, str] | None = None) -> list[str]:
    """mpiexec in rank 0's host: one MPMD block per rank, in rank order (rank
    i on the hostfile's line i), each with its own folder and interface;
    `launcher` starts hydra's proxies in the other hosts (instead of rsh).
    `away`: rank -> the folder on another server that holds its rank's
    folder and a copy of the hostfile."""
    argv = [mpiexec, "-launcher", "rsh", "-launcher-exec", launcher, "-f", hostfile]
    for slot in ranks:
        there = (away or {}).get(slot.rank)
        folder = rank_dir(there or out, slot.rank)
        env = {**rank_env(ranks, slot.rank, os.path.join(there, HOSTFILE) if there else hostfile, folder),
               **mpi_env(slot)}
        block = ["-n", "1"]   # on the hostfile's line of its rank
        for key, value in env.items():
            block += ["-env", key, value]
        argv += ([":"] if slot.rank else []) + block + wrapped(python, folder, command)
    return argv


def launcher_script(host_pids: dict[str, int], through: dict[str, list[str]] | None = None,
                    root_pid: int = 1) -> str:
    """The program hydra calls in place of rsh, as `PROG HOST COMMAND` (ssh's
    options, if any, skipped): it runs COMMAND, a remote shell's command
    line, in the namespaces of the host with that address (mnexec -a);
    for an address in `through`, on another server, through that ssh
    argv, the command line quoted for the server's shell. ssh runs in
    `root_pid`'s network namespace (the head's), the only one that reaches
    the servers; on a connection of its own, since one connection carries
    at most sshd's MaxSessions (10 by default) and the head's carries the
    hosts' shells already."""
    through = through or {}

    def enter(addr: str, pid: int) -> str:
        if addr in through:
            return f"exec nsenter --net=/proc/{root_pid}/ns/net {shlex.join(through[addr])} \"mnexec -a {pid} /bin/sh -c '$q'\""
        return f"exec mnexec -a {pid} /bin/sh -c \"$*\""
    cases = "".join(f"        {addr}) {enter(addr, pid)} ;;\n" for addr, pid in sorted(host_pids.items()))
    return ("#!/bin/sh\n"
            "# written by bigraph-emu exec: hydra's launcher, in place of rsh\n"
            "while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done\n"
            "host=$1; shift\n"
            "q=$(printf '%s' \"$*\" | sed \"s/'/'\\\\\\\\''/g\")\n"
            "case $host in\n" + cases +
            "        *) echo \"bigraph-emu launcher: no emulated host $host\" >&2; exit 255 ;;\n"
            "esac\n")


# --- what the ranks left ----------------------------------------------------------------

@dataclass
class RankExit:
    """What emulator/replay/rank.py wrote for one rank; exit_code None: it never finished."""
    rank: int
    exit_code: int | None
    start_s: float | None   # time.monotonic() of the machine
    end_s: float | None
    cpu_s: float | None = None   # its processes' CPU seconds, as the wrapper's rusage counted them


def read_exit(out: str, rank: int) -> RankExit:
    try:
        with open(os.path.join(rank_dir(out, rank), EXIT_FILE)) as f:
            data = json.load(f)
        return RankExit(rank, data.get("exit_code"), data.get("start"), data.get("end"), data.get("cpu_s"))
    except (OSError, ValueError):
        return RankExit(rank, None, None, None)


def rank_rows(run: int, ranks: list[Slot], exits: list[RankExit], t0: float, label: str,
              cpu: dict[str, tuple[float, float]]) -> list[dict]:
    """ranks.csv: times from the start of the program (t0), like links.csv's;
    `cpu`: per host, its processes' seconds on a core and waiting for one
    (blank for a host not read: on another server)."""
    def since(t):
        return "" if t is None else round(t - t0, 6)
    rows = []
    for s, e in zip(ranks, exits):
        on_cpu, waiting = cpu.get(s.host, ("", ""))
        rows.append({"run": run, "rank": s.rank, "host": s.host, "address": s.address,
                     "exit_code": "" if e.exit_code is None else e.exit_code, "start_s": since(e.start_s),
                     "end_s": since(e.end_s), "cpu_s": _rounded(on_cpu), "cpu_wait_s": _rounded(waiting),
                     "label": label})
    return rows


def program_cpu_s(ranks: list[Slot], exits: list[RankExit], cpu: dict[str, tuple[float, float]]) -> float:
    """The CPU seconds of the program's ranks on this machine (`cpu`: per
    host read here, its processes' seconds on a core): per rank the larger
    of its host's threads as polled (which miss a thread's last poll) and its
    wrapper's rusage (the program and what it waited for, not the wrapper)."""
    return sum(max(cpu[s.host][0], e.cpu_s or 0.0) for s, e in zip(ranks, exits) if s.host in cpu)


def _rounded(seconds):
    return round(seconds, 3) if seconds != "" else ""


def failures(out: str, exits: list[RankExit]) -> list[str]:
    """A line per rank that exited non-zero or never finished, with the
    last lines of its stderr."""
    lines = []
    for e in exits:
        if e.exit_code == 0:
            continue
        what = "did not finish" if e.exit_code is None else f"exited with code {e.exit_code}"
        tail = stderr_tail(out, e.rank)
        lines.append(f"rank {e.rank} {what}" + ("; its stderr ends:\n    " + "\n    ".join(tail) if tail else ""))
    return lines


MPIEXEC_LOG = "mpiexec"   # ranks/mpiexec.stdout and .stderr: what mpiexec itself said


def mpiexec_failure(out: str, code: int | None) -> list[str]:
    """A line if mpiexec itself failed (before, beside or after the ranks)."""
    if code in (0, None):
        return []
    tail = _tail(os.path.join(out, RANKS_FOLDER, MPIEXEC_LOG + ".stderr"), STDERR_TAIL_LINES)
    return [f"mpiexec exited with code {code}" + ("; its stderr ends:\n    " + "\n    ".join(tail) if tail else "")]


def stderr_tail(out: str, rank: int, lines: int = STDERR_TAIL_LINES) -> list[str]:
    return _tail(os.path.join(rank_dir(out, rank), "stderr"), lines)


def _tail(path: str, lines: int) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip("\n") for line in f.readlines()[-lines:]]
    except OSError:
        return []


def describe_command(command: list[str]) -> str:
    return shlex.join(command)
