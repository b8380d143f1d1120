#!/usr/bin/env python3
"""MPI allreduce benchmark (mpi4py, NumPy buffers), printed like nccl-tests.

Each rank sends rank+1 in every element and checks the sum n(n+1)/2 in
every element after every repetition. A repetition's time is the slowest
rank's (barrier, then MPI_Allreduce, out of place); a row shows the median
over the counted repetitions. Exits 1 on any wrong element.

    mpiexec -n 4 python mpi_allreduce.py -b 64K -e 8M -f 2 -n 5 -w 1 --csv times.csv
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bench  # noqa: E402  (beside this file, not an installed module)

# the variables that choose MPICH's transport and algorithm: printed, so a
# table says what it measured
SHOWN_ENV = ("MPIR_CVAR_", "MPICH_", "FI_", "UCX_", "HYDRA_")


def one_size(comm, size_bytes: int, dtype: str, iters: int, warmup: int,
             corrupt: bool = False) -> tuple[int, list[float], int]:
    """(element count, each counted repetition's slowest-rank time, wrong elements on all ranks)."""
    count = size_bytes // bench.ITEMSIZE[dtype]
    send = np.full(count, comm.rank + 1, dtype=dtype)
    recv = np.empty(count, dtype=dtype)
    expected = comm.size * (comm.size + 1) // 2
    times = np.zeros(iters)
    wrong = 0
    for i in range(warmup + iters):
        recv.fill(0)                       # a repetition that writes nothing is caught
        comm.Barrier()
        t0 = time.perf_counter()
        comm.Allreduce(send, recv, op=MPI.SUM)
        elapsed = time.perf_counter() - t0
        if corrupt and comm.rank == 0:
            recv[0] += 1
        wrong += int(np.count_nonzero(recv != expected))
        if i >= warmup:
            times[i - warmup] = elapsed
    slowest = np.zeros(iters)
    comm.Reduce(times, slowest, op=MPI.MAX, root=0)
    return count, slowest.tolist(), comm.allreduce(wrong, op=MPI.SUM)


def preamble(comm, args) -> str:
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(SHOWN_ENV))
    version = " ".join(MPI.Get_library_version().splitlines()[0].split())
    return (f"# mpi_allreduce: {comm.size} ranks, {args.datatype}, -n {args.iters} -w {args.warmup_iters}, "
            f"{version}\n# env: {env or '(no MPI variables set)'}")


def main(argv=None) -> int:
    args, sizes = bench.parse_args(bench.parser("mpi_allreduce.py", __doc__.splitlines()[0]), argv)
    comm = MPI.COMM_WORLD
    report = bench.Report("mpi", comm.size, args.csv) if comm.rank == 0 else None
    if report:
        print(preamble(comm, args))
        print(bench.header(), flush=True)
    wrong = 0
    for size in sizes:
        count, times, bad = one_size(comm, size, args.datatype, args.iters, args.warmup_iters, args.corrupt)
        wrong += bad
        if report:
            report.size_done(count * bench.ITEMSIZE[args.datatype], count, args.datatype, times, bad)
    if report:
        report.close()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
