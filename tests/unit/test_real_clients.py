"""The real clients of experiments/real-clients/ on this machine, without
root or a fabric: one rank, and two ranks over loopback, each run a few
seconds. The optional client packages (`pip install -e .[clients]`) may be
absent: then these tests skip, unless BIGRAPH_REQUIRE_CLIENTS=1 (CI), which
makes a missing package a failure."""
from __future__ import annotations

import csv
import functools
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest

CLIENTS = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "real-clients")
sys.path.insert(0, CLIENTS)
import bench_common as bench  # noqa: E402

MPI_CLIENT = os.path.join(CLIENTS, "mpi_allreduce.py")
TORCH_CLIENT = os.path.join(CLIENTS, "torch_allreduce.py")
TIMEOUT_S = 120
# MPICH as the fabric runs it (experiments/real-clients/README.md), on
# loopback: libfabric's tcp provider on one interface, no shared memory
MPICH_TCP = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo", "MPIR_CVAR_NOLOCAL": "1"}


# ---- no packages needed ---------------------------------------------------

@pytest.mark.parametrize("text,size", [("64K", 65536), ("8M", 8 << 20), ("1G", 1 << 30), ("100", 100),
                                       ("64KB", 65536), ("2m", 2 << 20), (" 4k ", 4096)])
def test_parse_size(text, size):
    assert bench.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "K", "1.5M", "-1", "0", "1T", "１K", "8 M"])
def test_parse_size_refuses(text):
    with pytest.raises(Exception, match="is not a byte count"):
        bench.parse_size(text)


def test_size_sweep():
    assert bench.size_sweep(65536, 8 << 20, 2) == [65536 << i for i in range(8)]
    assert bench.size_sweep(1024, 1024, 2) == [1024]
    assert bench.size_sweep(1000, 5000, 2) == [1000, 2000, 4000]
    with pytest.raises(ValueError):
        bench.size_sweep(2048, 1024, 2)
    with pytest.raises(ValueError):
        bench.size_sweep(1024, 2048, 1)


def test_bad_flags_exit_2():
    p = bench.parser("x", "x")
    for argv in (["-b", "8M", "-e", "1M"], ["-n", "0"], ["-b", "2", "-e", "2"], ["-b", "1.5M"]):
        with pytest.raises(SystemExit) as e:
            bench.parse_args(p, argv)
        assert e.value.code == 2, argv


def test_row_under_its_header():
    """Every value ends where its column's name and unit end, as in nccl-tests."""
    names, units = bench.header().splitlines()
    r = bench.row(65536, 16384, "float32", 0.0125, 4, 0)
    ends = [sum(w for _, _, w in bench.COLUMNS[:i + 1]) for i in range(len(bench.COLUMNS))]
    for (name, unit, _), end in zip(bench.COLUMNS, ends):
        assert names[:end].endswith(name) and r[end - 1] != " ", (name, names, r)
        if unit:
            assert units[:end].endswith(f"({unit})"), (unit, units)
    fields = r.split()
    assert fields[:3] == ["65536", "16384", "float32"]
    assert float(fields[3]) == 12.5                                       # ms
    assert float(fields[4]) == pytest.approx(65536 * 8 / 0.0125 / 1e6, abs=0.01)  # Mbit/s
    assert float(fields[5]) == pytest.approx(float(fields[4]) * 1.5, abs=0.01)   # 2(n-1)/n at n = 4


# ---- running the clients --------------------------------------------------

def need(what: str, missing: str | None):
    if missing is None:
        return
    if os.environ.get("BIGRAPH_REQUIRE_CLIENTS") == "1":
        pytest.fail(f"{what} is required (BIGRAPH_REQUIRE_CLIENTS=1) but {missing}")
    pytest.skip(f"{what} not installed ({missing}); install it with: pip install -e .[clients]")


@functools.cache
def mpi_missing() -> str | None:
    """Why mpi4py cannot load an MPI library here, or None; loads it without MPI_Init."""
    if importlib.util.find_spec("mpi4py") is None:
        return "no module mpi4py"
    proc = subprocess.run([sys.executable, "-c", "import mpi4py; mpi4py.rc.initialize = False; "
                           "from mpi4py import MPI; print(MPI.Get_library_version())"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return "mpi4py cannot load an MPI library: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
    if "MPICH" not in proc.stdout:
        return "mpi4py loads another MPI than MPICH: " + proc.stdout.splitlines()[0]
    return None


def mpiexec() -> str | None:
    """The mpich wheel's mpiexec, beside this Python (a system one may be another MPI)."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.access(beside, os.X_OK) else shutil.which("mpiexec")


def torch_missing() -> str | None:
    return None if importlib.util.find_spec("torch") else "no module torch"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def clean_env(tmp_path):
    """The environment a client runs in: its temporary files in tmp_path;
    afterwards /dev/shm must hold nothing new."""
    shm_before = set(os.listdir("/dev/shm"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MPIR_CVAR_", "FI_", "UCX_", "HYDRA_", "PMI_", "MASTER_", "GLOO_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    env["TMPDIR"] = str(tmp_path)
    yield env
    assert set(os.listdir("/dev/shm")) - shm_before == set(), "a client left files in /dev/shm"


def start(argv, env, cwd) -> subprocess.Popen:
    # its own session: the process group's id ends everything it started
    return subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    """Wait (bounded); then nothing of its process group may be left."""
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{proc.args} ran past {TIMEOUT_S} s:\n{out}\n{err}")
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"{proc.args} left processes behind (ended now)")
    except ProcessLookupError:
        pass
    return proc.returncode, out, err


def run(argv, env, cwd) -> tuple[int, str, str]:
    return finish(start(argv, env, cwd))


def table(out: str) -> list[list[str]]:
    """The rows of the table: every line that is not a '#' comment."""
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]


def check_ok(code, out, err, ranks, sizes, tmp_path, client):
    assert code == 0, out + err
    rows = table(out)
    assert [int(r[0]) for r in rows] == sizes, out
    for r in rows:
        assert r[2] == "float32" and int(r[1]) == int(r[0]) // 4 and r[6] == "0", r
        assert float(r[3]) > 0 and float(r[4]) > 0
        assert (float(r[5]) > 0) == (ranks > 1), r   # busbw = algbw * 2(n-1)/n: 0 for one rank
    assert "# Out of bounds values : 0 OK" in out
    assert out.rstrip().splitlines()[-1].startswith("# Avg bus bandwidth    : ")
    with open(tmp_path / "times.csv") as f:
        lines = list(csv.DictReader(f))
    assert len(lines) == 2 * len(sizes)                # -n 2 per size
    assert {(line["client"], line["ranks"]) for line in lines} == {(client, str(ranks))}
    assert all(float(line["time_s"]) > 0 for line in lines)


SWEEP = ["-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"]
SIZES = [1024, 8192, 65536]


def test_mpi_one_rank(clean_env, tmp_path):
    """MPI singleton init: no mpiexec."""
    need("mpi4py with MPICH", mpi_missing())
    code, out, err = run([sys.executable, MPI_CLIENT, *SWEEP, "--csv", "times.csv"], clean_env, tmp_path)
    check_ok(code, out, err, 1, SIZES, tmp_path, "mpi")
    assert out.startswith("# mpi_allreduce: 1 ranks, float32, -n 2 -w 1, MPICH Version: ")


def test_mpi_two_ranks_forced_algorithm(clean_env, tmp_path):
    """mpiexec on loopback with the fabric's settings and Rabenseifner's
    allreduce forced: MPICH refuses an algorithm that does not apply
    (COLLECTIVE_FALLBACK=error), so the sweep passing means it ran."""
    need("mpi4py with MPICH", mpi_missing())
    need("mpiexec", None if mpiexec() else "no mpiexec")
    env = clean_env | MPICH_TCP | {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "reduce_scatter_allgather",
                                   "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}
    code, out, err = run([mpiexec(), "-n", "2", sys.executable, MPI_CLIENT, *SWEEP, "--csv", "times.csv"],
                         env, tmp_path)
    check_ok(code, out, err, 2, SIZES, tmp_path, "mpi")
    assert "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=reduce_scatter_allgather" in out   # the table says what ran
    # one float on two ranks is fewer elements than ranks: not Rabenseifner's
    code, out, err = run([mpiexec(), "-n", "2", sys.executable, MPI_CLIENT, "-b", "4", "-e", "4"], env, tmp_path)
    assert code != 0 and "User set collective algorithm is not usable" in err, out + err


def test_mpi_wrong_result_fails(clean_env, tmp_path):
    need("mpi4py with MPICH", mpi_missing())
    code, out, err = run([sys.executable, MPI_CLIENT, "-b", "1K", "-e", "1K", "-n", "2", "--corrupt"],
                         clean_env, tmp_path)
    assert code == 1, out + err
    assert table(out)[0][6] == "3" and "# Out of bounds values : 3 FAILED" in out   # 1 warm-up + 2 counted


def torch_env(env, rank: int, ranks: int, port: int) -> dict:
    return env | {"RANK": str(rank), "WORLD_SIZE": str(ranks), "LOCAL_RANK": "0",
                  "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo"}


def test_torch_one_rank(clean_env, tmp_path):
    need("torch", torch_missing())
    code, out, err = run([sys.executable, TORCH_CLIENT, *SWEEP, "--csv", "times.csv"],
                         torch_env(clean_env, 0, 1, free_port()), tmp_path)
    check_ok(code, out, err, 1, SIZES, tmp_path, "torch-gloo")
    assert out.startswith("# torch_allreduce: 1 ranks, float32, -n 2 -w 1, torch ")


def test_torch_two_ranks(clean_env, tmp_path):
    """Two ranks over loopback, as `bigraph-emu exec` starts them: only rank 0 prints."""
    need("torch", torch_missing())
    port = free_port()
    (tmp_path / "r1").mkdir()
    procs = [start([sys.executable, TORCH_CLIENT, *SWEEP, "--csv", "times.csv"],
                   torch_env(clean_env, rank, 2, port), tmp_path / f"r{rank}" if rank else tmp_path)
             for rank in (0, 1)]
    (code, out, err), (code1, out1, err1) = [finish(p) for p in procs]
    assert code1 == 0 and out1 == "", out1 + err1
    check_ok(code, out, err, 2, SIZES, tmp_path, "torch-gloo")


def test_torch_wrong_result_fails(clean_env, tmp_path):
    need("torch", torch_missing())
    code, out, err = run([sys.executable, TORCH_CLIENT, "-b", "1K", "-e", "1K", "-n", "2", "--corrupt"],
                         torch_env(clean_env, 0, 1, free_port()), tmp_path)
    assert code == 1, out + err
    assert table(out)[0][6] == "3" and "# Out of bounds values : 3 FAILED" in out


def test_provision_knows_clients():
    """Options are read before the root check: a typo is refused with a usage naming --clients."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "vm", "provision.sh")
    proc = subprocess.run(["sh", script, "--client"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "[--clients]" in proc.stderr, proc.stderr
