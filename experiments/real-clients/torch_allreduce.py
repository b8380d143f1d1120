#!/usr/bin/env python3
"""torch.distributed allreduce benchmark (gloo, CPU tensors), printed like nccl-tests.

Rendezvous is init_method="env://": RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT from the environment (GLOO_SOCKET_IFNAME names the interface
gloo binds). Each rank sends rank+1 in every element and checks the sum
n(n+1)/2 after every repetition. A repetition's time is the slowest rank's
(barrier, then all_reduce, in place); a row shows the median over the
counted repetitions. Exits 1 on any wrong element.

    RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 GLOO_SOCKET_IFNAME=lo \\
        python torch_allreduce.py -b 64K -e 8M -f 2 -n 5 -w 1 --csv times.csv
"""
from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bench  # noqa: E402  (beside this file, not an installed module)

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int32": torch.int32}
SHOWN_ENV = ("MASTER_", "GLOO_", "TORCH_", "LOCAL_WORLD_SIZE")


def one_size(size_bytes: int, dtype: str, iters: int, warmup: int,
             corrupt: bool = False) -> tuple[int, list[float], int]:
    """(element count, each counted repetition's slowest-rank time, wrong elements on all ranks)."""
    rank, ranks = dist.get_rank(), dist.get_world_size()
    count = size_bytes // bench.ITEMSIZE[dtype]
    buf = torch.empty(count, dtype=DTYPES[dtype])
    expected = ranks * (ranks + 1) // 2
    times = torch.zeros(iters, dtype=torch.float64)
    wrong = 0
    for i in range(warmup + iters):
        buf.fill_(rank + 1)                # all_reduce works in place
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        elapsed = time.perf_counter() - t0
        if corrupt and rank == 0:
            buf[0] += 1
        wrong += int((buf != expected).sum())
        if i >= warmup:
            times[i - warmup] = elapsed
    dist.reduce(times, dst=0, op=dist.ReduceOp.MAX)
    total_wrong = torch.tensor([wrong], dtype=torch.int64)
    dist.all_reduce(total_wrong, op=dist.ReduceOp.SUM)
    return count, times.tolist(), int(total_wrong)


def preamble(args) -> str:
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(SHOWN_ENV))
    return (f"# torch_allreduce: {dist.get_world_size()} ranks, {args.datatype}, -n {args.iters} "
            f"-w {args.warmup_iters}, torch {torch.__version__} gloo\n# env: {env}")


def main(argv=None) -> int:
    args, sizes = bench.parse_args(bench.parser("torch_allreduce.py", __doc__.splitlines()[0]), argv)
    # fill and compare are the only tensor work: one thread per rank keeps
    # many ranks on a few cores from fighting over them
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    try:
        rank = dist.get_rank()
        report = bench.Report("torch-gloo", dist.get_world_size(), args.csv) if rank == 0 else None
        if report:
            print(preamble(args))
            print(bench.header(), flush=True)
        wrong = 0
        for size in sizes:
            count, times, bad = one_size(size, args.datatype, args.iters, args.warmup_iters, args.corrupt)
            wrong += bad
            if report:
                report.size_done(count * bench.ITEMSIZE[args.datatype], count, args.datatype, times, bad)
        if report:
            report.close()
    finally:
        dist.destroy_process_group()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
