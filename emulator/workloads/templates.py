"""Workload templates (pure): each one a function that emits a job's ops
for one rank and one iteration. Nothing else special-cases a template:
emulator.workloads.program compiles what they emit like ops written by hand.

A job names one with `template = "data-parallel"` and sets its keys in
`params`; `TEMPLATES[name].defaults` are the keys it takes.
"""
from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass
from typing import Callable

from emulator.workloads.algorithms import ALGORITHMS
from emulator.workloads.job import Job, Op, group_of

MiB = 1 << 20


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    defaults: dict
    emit: Callable[[Job, dict, int, int], list[Op]]   # (job, params, iteration, rank) -> ops
    needs: str = ""                                    # what the job's shape must have, checked by `check`
    check: Callable[[Job], bool] = lambda job: True
    same_on_every_rank: bool = False                   # what it emits does not depend on the rank


def _buckets(total: int, bucket: int) -> list[int]:
    """Gradient buckets as DDP fills them: full buckets, the last one smaller."""
    full, rest = divmod(total, bucket)
    return [bucket] * full + ([rest] if rest else [])


def data_parallel(job: Job, p: dict, iteration: int, rank: int) -> list[Op]:
    """Forward, then backward in as many slices as there are gradient
    buckets; each bucket's allreduce is issued as soon as its slice of the
    backward pass has produced it, and overlaps the slices after it (DDP)."""
    total = int(p["params_m"] * 1e6 * p["bytes_per_param"])
    buckets = _buckets(total, int(p["bucket_mb"] * MiB))
    ops = [Op("compute", ms=p["forward_ms"])]
    for i, size in enumerate(buckets):
        ops.append(Op("compute", ms=p["backward_ms"] * size / total))
        ops.append(Op("allreduce", nbytes=size, group="dp", algorithm=p["algorithm"], nonblocking=True,
                      tag=f"bucket{i}"))
    ops.append(Op("wait"))
    if p["optimizer_ms"]:
        ops.append(Op("compute", ms=p["optimizer_ms"]))
    return ops


def pipeline(job: Job, p: dict, iteration: int, rank: int) -> list[Op]:
    """1F1B over `microbatches`: stage s runs pp-s-1 forwards first, then
    alternates one forward and one backward, then drains the backwards.
    Activations go to the next stage and gradients back, each exchange a
    batched send/recv."""
    stages, micro = job.pp, p["microbatches"]
    stage = group_of(job, rank, "pp")[1]
    act = int(p["activation_mb"] * MiB)
    warmup = min(stages - stage - 1, micro)
    fwd = [Op("recv", nbytes=act, group="pp", peer="prev", nonblocking=True), Op("wait"),
           Op("compute", ms=p["forward_ms"]), Op("send", nbytes=act, group="pp", peer="next", nonblocking=True)]
    bwd = [Op("recv", nbytes=act, group="pp", peer="next", nonblocking=True), Op("wait"),
           Op("compute", ms=p["backward_ms"]), Op("send", nbytes=act, group="pp", peer="prev", nonblocking=True)]
    ops = []
    for _ in range(warmup):
        ops += fwd
    for _ in range(micro - warmup):
        ops += fwd + bwd
    for _ in range(warmup):
        ops += bwd
    ops.append(Op("wait"))
    if job.dp > 1 and p["gradient_mb"]:
        ops.append(Op("allreduce", nbytes=int(p["gradient_mb"] * MiB), group="dp", algorithm=p["algorithm"]))
    return ops


def hybrid(job: Job, p: dict, iteration: int, rank: int) -> list[Op]:
    """tp x dp x pp: the pipeline's 1F1B, each forward and backward with a
    tensor-parallel allreduce of the activations, and the data-parallel
    gradient allreduce at the end."""
    ops = []
    for op in pipeline(job, p, iteration, rank):
        ops.append(op)
        if op.kind == "compute" and job.tp > 1:
            ops.append(Op("allreduce", nbytes=int(p["tp_mb"] * MiB), group="tp"))
    return ops


def moe(job: Job, p: dict, iteration: int, rank: int) -> list[Op]:
    """Expert parallelism: per layer, compute, a dispatch all-to-all whose
    tokens per expert are skewed anew every iteration (seeded), expert
    compute, and the combine all-to-all back."""
    ops = []
    for layer in range(p["layers"]):
        matrix, transposed = _skewed_matrix(job.ranks, int(p["tokens_mb"] * MiB), p["skew"],
                                            (job.seed, iteration, layer))
        ops += [Op("compute", ms=p["compute_ms"]), Op("all-to-all", matrix=matrix),
                Op("compute", ms=p["expert_ms"]), Op("all-to-all", matrix=transposed)]
    return ops


@functools.lru_cache(maxsize=64)
def _skewed_matrix(n: int, per_rank: int, skew: float, seed) -> tuple:
    """(dispatch, combine): bytes rank i sends to expert j, and back. Every
    rank's tokens split over the experts by a popularity drawn from a power
    law of exponent `skew` (0: even), the same for every sender in one
    layer and iteration (every rank asks for its matrix: computed once)."""
    rng = random.Random(repr(seed))
    weights = [1 / (k + 1) ** skew for k in range(n)]
    rng.shuffle(weights)
    total = sum(weights)
    row = tuple(int(per_rank * w / total) for w in weights)
    dispatch = tuple(row for _ in range(n))
    return dispatch, tuple(tuple(row[i] for _ in range(n)) for i in range(n))


def parameter_server(job: Job, p: dict, iteration: int, rank: int) -> list[Op]:
    """Rank 0 serves: every worker computes, pushes its gradients and pulls the parameters."""
    return [Op("compute", ms=p["compute_ms"]),
            Op("parameter-server", nbytes=int(p["params_m"] * 1e6 * p["bytes_per_param"]))]


# "algorithm": "" takes the run's (-a)
_DP = {"params_m": 25.6, "bytes_per_param": 4, "bucket_mb": 25.0, "forward_ms": 40.0, "backward_ms": 80.0,
       "optimizer_ms": 0.0, "algorithm": ""}
_PP = {"microbatches": 4, "forward_ms": 10.0, "backward_ms": 20.0, "activation_mb": 2.0, "gradient_mb": 0.0,
       "algorithm": ""}
TEMPLATES = {t.name: t for t in (
    Template("data-parallel", "DDP-like: gradient buckets allreduced during the backward pass "
             "(defaults: ResNet-50-like, 25.6 M fp32 parameters, 25 MiB buckets)", _DP, data_parallel,
             same_on_every_rank=True),
    Template("pipeline", "1F1B over microbatches between pp stages; optional dp gradient allreduce",
             _PP, pipeline, "pp >= 2", lambda job: job.pp >= 2),
    Template("hybrid", "tp x dp x pp: 1F1B, tensor-parallel allreduces per compute, dp gradient allreduce",
             {**_PP, "tp_mb": 1.0, "gradient_mb": 8.0}, hybrid, "pp >= 2", lambda job: job.pp >= 2),
    Template("moe", "mixture of experts: per layer a dispatch and a combine all-to-all with a seeded "
             "skew of tokens per expert, new every iteration",
             {"layers": 2, "tokens_mb": 4.0, "skew": 1.0, "compute_ms": 10.0, "expert_ms": 10.0}, moe,
             same_on_every_rank=True),
    Template("parameter-server", "every worker pushes its gradients to rank 0 and pulls the parameters",
             {"params_m": 1.0, "bytes_per_param": 4, "compute_ms": 20.0}, parameter_server,
             "ranks >= 2", lambda job: job.ranks >= 2, same_on_every_rank=True),
)}


def check_template(job: Job) -> None:
    """ValueError naming the template, key or shape that is wrong."""
    template = TEMPLATES.get(job.template)
    if template is None:
        raise ValueError(f"template {job.template!r} is not one of: {', '.join(TEMPLATES)}")
    params = dict(job.params)
    unknown = sorted(set(params) - set(template.defaults))
    if unknown:
        raise ValueError(f"template {job.template}: unknown key(s) {', '.join(unknown)}; "
                         f"it takes {', '.join(template.defaults)}")
    for key, value in params.items():
        default = template.defaults[key]
        if isinstance(default, str):
            if value not in (*ALGORITHMS, ""):
                raise ValueError(f"template {job.template}: {key} must be one of {', '.join(ALGORITHMS)}, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0 or (isinstance(default, int) and not isinstance(value, int)):
            kind = "a whole number" if isinstance(default, int) else "a number"
            raise ValueError(f"template {job.template}: {key} must be {kind} >= 0, got {value!r}")
    if not template.check(job):
        raise ValueError(f"template {job.template} needs {template.needs}")


def job_ops(job: Job, iteration: int, rank: int) -> list[Op]:
    """The ops of `rank` in `iteration`: the template's, or those written out."""
    if not job.template:
        return list(job.ops)
    template = TEMPLATES[job.template]
    return template.emit(job, {**template.defaults, **dict(job.params)}, iteration, rank)
