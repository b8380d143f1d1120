"""This machine as two servers (sshd on 127.0.0.2, as tests/emulation/test_servers.py
does): exec of the MPI allreduce program over both, then a ring with a capture
of a link on the second server, opened by `report`. Run as root from the
project's root: .venv/bin/python lab/exec-servers-2026-12-06/two_servers.py OUT"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
from sshtools import LoopbackServer  # noqa: E402

OUT = sys.argv[1]
SERVERS = ["--servers", "localhost,127.0.0.2", "--placement", "switch-bin"]
CLIENT = os.path.abspath("experiments/real-clients/mpi_allreduce.py")


def cli(*args):
    print("$ bigraph-emu", " ".join(args), flush=True)
    done = subprocess.run([sys.executable, "-m", "emulator.cli", *args], env=server.env(), text=True,
                          capture_output=True)
    print(done.stdout[-4000:], done.stderr[-2000:], f"exit {done.returncode}", flush=True)


with LoopbackServer() as server:
    cli("exec", "-t", "bigraph:m=2,n=4", "--bw", "20", *SERVERS, "--mpi", "--timeout", "240",
        "--out", f"{OUT}/mpi", "--", sys.executable, CLIENT, "-b", "1M", "-e", "4M", "-f", "2", "-n", "3", "-w", "1")
    cli("run", "-t", "bigraph:m=2,n=4", "-a", "ring", "-m", "naive", "-b", "2M", "-n", "1", "-w", "0", "--bw", "20",
        *SERVERS, "--capture", "bgh7", "--out", f"{OUT}/capture")
    cli("report", f"{OUT}/capture")
