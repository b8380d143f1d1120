"""Workload importers (pure): other simulators' workload files become the
same jobs a workload TOML describes. One record per format; a workload
names one as `--workload FORMAT:FILE`, or a job as `import = "FORMAT:FILE"`.
Chakra traces (`chakra`, a folder): emulator.workloads.chakra.

SimAI / ASTRA-sim 1.0 text files (`simai`):

    HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 8 ...
    2
    name  -1  fwd_compute fwd_comm fwd_bytes  ig_compute ig_comm ig_bytes  wg_compute wg_comm wg_bytes  update

(the first line is the parallelism type and, in SimAI's files, the group
sizes; the second the layer count; then a line per layer). One iteration
is: for every layer, its forward compute and forward collective (blocking,
tensor-parallel group: SimAI's forward and input-gradient collectives run
on TP); then for every layer in reverse, its input-gradient compute and
collective, then its weight-gradient compute and the weight-gradient
collective issued without blocking (data-parallel group), which overlaps
the layers after it; the iteration ends when they are all done, plus the
update time. ASTRA-sim's `DATA` files run everything on the data-parallel
group.

Compute times: SimAI and ASTRA-sim count them in cycles of a 1 GHz clock,
i.e. nanoseconds; we assume nanoseconds. `compute_scale` multiplies them
(e.g. 0.001 to make a GPU's milliseconds of compute fit slow emulated
links). Expert-parallel groups (_EP, _DP_EP) are taken as the
data-parallel group, ALLREDUCEALLTOALL as an allreduce; pipeline-parallel
files (pp > 1) are refused, their stage transfers are not imported.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from emulator.workloads import chakra
from emulator.inputs import MAX_BYTES, InputError, read_text, shorten, to_int
from emulator.workloads.job import MAX_COMPUTE_MS, Job, Op, WorkloadError

COLLECTIVE_NAMES = {"ALLREDUCE": "allreduce", "ALLGATHER": "allgather", "REDUCESCATTER": "reduce-scatter",
                    "ALLTOALL": "all-to-all", "ALLREDUCEALLTOALL": "allreduce"}
HEADER_KEYS = {"model_parallel_NPU_group:": "tp", "ep:": "ep", "pp:": "pp", "vpp:": "vpp", "ga:": "ga",
               "all_gpus:": "all_gpus"}
MAX_RANKS = 1 << 20      # a group size or all_gpus, as a workload's ranks
MAX_UNITS = 1 << 53      # a compute time in ns: exact as a float
MAX_SCALE = 1e6          # compute_scale
PARALLELISM = ("DATA", "HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_DLRM", "MODEL",
               "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA")


@dataclass(frozen=True)
class Importer:
    name: str
    description: str
    read: Callable[[str, str, dict], Job]   # (path, job name, options) -> job
    options: tuple[str, ...] = ()


def import_job(reference: str, name: str = "", options: dict | None = None) -> Job:
    """'simai:FILE' -> a Job; WorkloadError names the format, file and line."""
    fmt, colon, path = reference.partition(":")
    if not colon or fmt not in IMPORTERS:
        raise WorkloadError(f"import {reference!r}: give FORMAT:FILE with a format of: {', '.join(IMPORTERS)}")
    importer = IMPORTERS[fmt]
    unknown = sorted(set(options or {}) - set(importer.options))
    if unknown:
        raise WorkloadError(f"import {reference}: unknown option(s) {', '.join(unknown)}; "
                            f"{fmt} takes {', '.join(importer.options)}")
    return importer.read(path, name or os.path.basename(path), options or {})


def read_simai(path: str, name: str, options: dict) -> Job:
    try:
        lines = read_text(path).splitlines()
    except InputError as e:
        raise WorkloadError(f"simai:{e}") from None
    where = f"simai:{path}"
    lines = [(n + 1, line.split()) for n, line in enumerate(lines) if line.strip()]
    if len(lines) < 2:
        raise WorkloadError(f"{where}: needs a header line, a layer count and the layers")
    header = _header(lines[0], where)
    count_line, count = lines[1][0], lines[1][1]
    layers_said = _whole(count[0], 1) if len(count) == 1 else None
    if layers_said is None:
        raise WorkloadError(f"{where}: line {count_line}: the layer count, a whole number >= 1 (ASCII digits), "
                            f"got {' '.join(count)!r}")
    layers = [_layer(n, fields, where) for n, fields in lines[2:]]
    if len(layers) != layers_said:
        raise WorkloadError(f"{where}: line {count_line} says {count[0]} layers, the file has {len(layers)}")
    scale = options.get("compute_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 <= scale <= MAX_SCALE:
        raise WorkloadError(f"{where}: compute_scale must be a number from 0 to {MAX_SCALE:g}, got {scale!r}")
    ranks = options.get("ranks", header["all_gpus"])
    tp = header["tp"] if header["kind"] != "DATA" else 1
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1 or ranks % tp:
        raise WorkloadError(f"{where}: ranks must be a whole number that the tensor-parallel group of {tp} "
                            f"divides, got {ranks!r}")
    try:
        return Job(name, ranks, tp=tp, ops=tuple(_iteration(layers, header["kind"], scale * 1e-6)))
    except WorkloadError as e:
        raise WorkloadError(f"{where}: {e}") from None


def _whole(text: str, least: int, most: int = MAX_UNITS) -> int | None:
    """A whole number of ASCII digits from `least` to `most`, or None."""
    try:
        value = to_int(text)
    except ValueError:
        return None
    return value if least <= value <= most else None


def _header(line, where: str) -> dict:
    n, fields = line
    kind = fields[0]
    if kind not in PARALLELISM:
        raise WorkloadError(f"{where}: line {n}: parallelism {kind!r} is not one of: {', '.join(PARALLELISM)}")
    header = {"kind": kind, "tp": 1, "pp": 1, "all_gpus": 0}
    for i, token in enumerate(fields[1:-1], start=1):
        if token in HEADER_KEYS:
            value = _whole(fields[i + 1], 1, MAX_RANKS)
            if value is None:
                raise WorkloadError(f"{where}: line {n}: {token} {fields[i + 1]!r} is not a whole number from 1 to "
                                    f"{MAX_RANKS} (ASCII digits)")
            header[HEADER_KEYS[token]] = value
    if header["pp"] > 1:
        raise WorkloadError(f"{where}: line {n}: pp: {header['pp']}: pipeline-parallel files are not imported "
                            "(their stage-to-stage transfers are not in the layer lines); use pp: 1")
    if not header["all_gpus"] and kind != "DATA":
        raise WorkloadError(f"{where}: line {n}: all_gpus: is missing (or give the job's ranks)")
    return header


@dataclass(frozen=True)
class _Layer:
    name: str
    fwd: tuple[float, str, int]
    ig: tuple[float, str, int]
    wg: tuple[float, str, int]
    update: float


def _layer(n: int, fields: list[str], where: str) -> _Layer:
    if len(fields) != 12:
        raise WorkloadError(f"{where}: line {n}: a layer has 12 fields (name, -1, then compute, collective and "
                            f"bytes for forward, input gradient and weight gradient, then the update time); "
                            f"got {len(fields)}")

    def number(i: int, what: str, most: int = MAX_UNITS) -> int:
        try:
            value = to_int(fields[i])
        except ValueError as e:
            raise WorkloadError(f"{where}: line {n}: {what}: {shorten(str(e), 200)}") from None
        if not 0 <= value <= most:
            raise WorkloadError(f"{where}: line {n}: {what} {value} must be from 0 to {most}")
        return value

    def phase(i: int, what: str):
        comm = fields[i + 1]
        base = comm.split("_")[0]
        if comm != "NONE" and base not in COLLECTIVE_NAMES:
            raise WorkloadError(f"{where}: line {n}: {what} collective {comm!r} is not NONE or one of: "
                                f"{', '.join(COLLECTIVE_NAMES)} (with _EP or _DP_EP)")
        return number(i, f"{what} compute time"), comm, number(i + 2, f"{what} bytes", MAX_BYTES)
    return _Layer(fields[0], phase(2, "forward"), phase(5, "input-gradient"), phase(8, "weight-gradient"),
                  number(11, "update time"))


def _collective(comm: str, nbytes: int, group: str, **kw) -> list[Op]:
    if comm == "NONE" or nbytes == 0:
        return []
    return [Op(COLLECTIVE_NAMES[comm.split("_")[0]], nbytes=nbytes, group=group, **kw)]


def _iteration(layers: list[_Layer], kind: str, ms_per_unit: float) -> list[Op]:
    model_group = "dp" if kind == "DATA" else "tp"

    def compute(units: float) -> list[Op]:
        ms = units * ms_per_unit
        if ms > MAX_COMPUTE_MS:
            raise WorkloadError(f"a compute time of {units:g} ns (x compute_scale) is {ms:g} ms; at most "
                                f"{MAX_COMPUTE_MS:g} ms")
        return [Op("compute", ms=ms)] if ms > 0 else []
    ops = []
    for layer in layers:
        ops += compute(layer.fwd[0]) + _collective(layer.fwd[1], layer.fwd[2], model_group)
    for layer in reversed(layers):
        ops += compute(layer.ig[0]) + _collective(layer.ig[1], layer.ig[2], model_group)
        ops += compute(layer.wg[0]) + _collective(layer.wg[1], layer.wg[2], "dp", nonblocking=True)
    ops.append(Op("wait"))
    ops += compute(sum(layer.update for layer in layers))
    return ops


IMPORTERS = {i.name: i for i in (
    Importer("simai", "SimAI / ASTRA-sim 1.0 text workload (layers with forward, input-gradient and "
             "weight-gradient compute and collectives)", read_simai, ("compute_scale", "ranks")),
    Importer("chakra", "Chakra execution traces as ASTRA-sim 2 reads them: a folder of NAME.<rank>.et, "
             "every rank its own program", chakra.read_chakra, chakra.OPTIONS),
)}

