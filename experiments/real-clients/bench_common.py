"""What both allreduce clients share: flags, the size sweep, the table and
the CSV. Plain Python only: the clients run under any Python that has their
library (mpi4py or torch), without the emulator installed."""
from __future__ import annotations

import argparse
import csv
import statistics

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
DTYPES = ("float32", "float64", "int32")
ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4}


def parse_size(text: str) -> int:
    """'64K', '8M', '1G' (binary units, as nccl-tests) or a byte count."""
    t = text.strip().upper().removesuffix("B")
    scale = UNITS.get(t[-1:], 1)
    digits = t[:-1] if scale > 1 else t
    if not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"size {text!r} is not a byte count like 65536, 64K, 8M or 1G")
    return int(digits) * scale


def size_sweep(begin: int, end: int, factor: float) -> list[int]:
    """nccl-tests -b/-e/-f: begin, begin*f, ... while <= end."""
    if begin > end:
        raise ValueError(f"-b {begin} is larger than -e {end}")
    if factor <= 1 and begin != end:
        raise ValueError(f"-f must be > 1, got {factor}")
    sizes, s = [], float(begin)
    while s <= end:
        if not sizes or int(s) != sizes[-1]:
            sizes.append(int(s))
        if factor <= 1:
            break
        s *= factor
    return sizes


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("64K"), help="smallest size (default 64K)")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("8M"), help="largest size (default 8M)")
    p.add_argument("-f", "--stepfactor", type=float, default=2.0, help="size factor between steps (default 2)")
    p.add_argument("-n", "--iters", type=int, default=5, help="counted repetitions per size (default 5)")
    p.add_argument("-w", "--warmup_iters", type=int, default=1, help="uncounted repetitions first (default 1)")
    p.add_argument("-d", "--datatype", choices=DTYPES, default="float32", help="element type (default float32)")
    p.add_argument("--csv", metavar="FILE", help="rank 0 writes every counted repetition here")
    # for the tests: rank 0 spoils one element of its result, so the check must fail
    p.add_argument("--corrupt", action="store_true", help=argparse.SUPPRESS)
    return p


def parse_args(p: argparse.ArgumentParser, argv=None) -> tuple[argparse.Namespace, list[int]]:
    """The flags and the sweep; bad values exit 2 with argparse's message."""
    args = p.parse_args(argv)
    if args.iters < 1 or args.warmup_iters < 0:
        p.error("-n must be at least 1 and -w at least 0")
    try:
        sizes = size_sweep(args.minbytes, args.maxbytes, args.stepfactor)
    except ValueError as e:
        p.error(str(e))
    if sizes[0] < ITEMSIZE[args.datatype]:
        p.error(f"-b {sizes[0]} is smaller than one {args.datatype}")
    return args, sizes


def busbw_factor(ranks: int) -> float:
    """nccl-tests' allreduce factor 2(n-1)/n: busbw compares with the link rate."""
    return 2 * (ranks - 1) / ranks


def mbps(size_bytes: int, time_s: float) -> float:
    return size_bytes * 8 / time_s / 1e6 if time_s > 0 else float("inf")


# (name, unit, width): nccl-tests' two header lines, our units (ms, Mbit/s)
COLUMNS = (("size", "B", 12), ("count", "elements", 13), ("type", "", 9), ("time", "ms", 12),
           ("algbw", "Mb/s", 12), ("busbw", "Mb/s", 12), ("#wrong", "", 8))


def header() -> str:
    names = "".join(name.rjust(width) for name, _, width in COLUMNS)
    units = "".join((f"({unit})" if unit else "").rjust(width) for _, unit, width in COLUMNS)
    return "#" + names[1:] + "\n" + "#" + units[1:].rstrip()


def row(size_bytes: int, count: int, dtype: str, time_s: float, ranks: int, wrong: int) -> str:
    algbw = mbps(size_bytes, time_s)
    return (f"{size_bytes:12d}{count:13d}{dtype:>9}{time_s * 1e3:12.3f}"
            f"{algbw:12.2f}{algbw * busbw_factor(ranks):12.2f}{wrong:8d}")


class Report:
    """Rank 0's output: the table on stdout, each counted repetition in the CSV."""

    CSV_FIELDS = ("client", "ranks", "size_bytes", "count", "dtype", "repetition", "time_s",
                  "algbw_mbps", "busbw_mbps", "wrong")

    def __init__(self, client: str, ranks: int, csv_path: str | None):
        self.client, self.ranks = client, ranks
        self.busbw: list[float] = []
        self.wrong = 0
        self._file = open(csv_path, "w", newline="") if csv_path else None
        self._csv = csv.writer(self._file) if self._file else None
        if self._csv:
            self._csv.writerow(self.CSV_FIELDS)

    def size_done(self, size_bytes: int, count: int, dtype: str, times: list[float], wrong: int) -> None:
        """`times`: each counted repetition's slowest rank; the row shows their median."""
        median = statistics.median(times)
        print(row(size_bytes, count, dtype, median, self.ranks, wrong), flush=True)
        self.busbw.append(mbps(size_bytes, median) * busbw_factor(self.ranks))
        self.wrong += wrong
        for i, t in enumerate(times):
            algbw = mbps(size_bytes, t)
            if self._csv:
                self._csv.writerow((self.client, self.ranks, size_bytes, count, dtype, i, f"{t:.9f}",
                                    f"{algbw:.3f}", f"{algbw * busbw_factor(self.ranks):.3f}", wrong))

    def close(self) -> None:
        """nccl-tests' closing lines: wrong values, then the mean busbw over the sizes."""
        if self._file:
            self._file.close()
        print(f"# Out of bounds values : {self.wrong} {'OK' if self.wrong == 0 else 'FAILED'}")
        print(f"# Avg bus bandwidth    : {statistics.fmean(self.busbw) if self.busbw else float('nan'):.6g}")
