"""Workload templates (pure): each one a function that emits a job's ops
for one rank and one iteration. Nothing else special-cases a template:
emulator.workloads.program compiles what they emit like ops written by hand.

A job names one with `template = "data-parallel"` and sets its keys in
`params`; `TEMPLATES[name].defaults` are the keys it takes, RANGES what
each may be. What a template emits is counted before it is emitted: more
than MAX_OPS ops per rank and iteration, or MAX_JOB_OPS over a job's
iterations, is refused (the model would take hours, and its memory).
"""
from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass
from typing import Callable

from emulator.inputs import MAX_BYTES
from emulator.workloads.algorithms import ALGORITHMS
from emulator.workloads.job import MAX_COMPUTE_MS, Job, Op, group_of

MiB = 1 << 20
MAX_OPS = 10_000          # ops one rank runs in one iteration of a template
MAX_JOB_OPS = 1_000_000   # ... and over all the job's iterations


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    defaults: dict
    emit: Callable[[Job, dict, int, int], list[Op]]   # (job, params, iteration, rank) -> ops
    count: Callable[[dict], int]                       # params -> the ops emit() returns, at most
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
    total = _gradient_bytes(p)
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


def _gradient_bytes(p: dict) -> int:
    return int(p["params_m"] * 1e6 * p["bytes_per_param"])


def _data_parallel_ops(p: dict) -> int:
    return 3 + 2 * math.ceil(_gradient_bytes(p) / int(p["bucket_mb"] * MiB))


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
    gradient allreduce at the end.

    A template sees job ranks, never hosts: the groups are Megatron's (tp
    varies fastest, job.group_of) and the placement puts job ranks on hosts.
    On a fabric with nodes, hosts are numbered node by node, so with the
    naive placement (a job starting at a node's first accelerator) and tp
    dividing the accelerators of a node, every tp group is inside one node,
    on its interconnect, and each dp group has N/tp ranks on each node it
    spans: what `algorithm = "hierarchical"` takes for the gradient
    allreduce (L = N/tp ranks a node). On plain hosts, as always."""
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
    weights = [(k + 1) ** -skew for k in range(n)]   # not 1 / (k + 1) ** skew: that overflows
    rng.shuffle(weights)
    total = sum(weights)
    row = tuple(int(per_rank * w / total) for w in weights)
    dispatch = tuple(row for _ in range(n))
    return dispatch, tuple(tuple(row[i] for _ in range(n)) for i in range(n))


def parameter_server(job: Job, p: dict, iteration: int, rank: int) -> list[Op]:
    """Rank 0 serves: every worker computes, pushes its gradients and pulls the parameters."""
    return [Op("compute", ms=p["compute_ms"]),
            Op("parameter-server", nbytes=_gradient_bytes(p))]


# "algorithm": "" takes the run's (-a)
_DP = {"params_m": 25.6, "bytes_per_param": 4, "bucket_mb": 25.0, "forward_ms": 40.0, "backward_ms": 80.0,
       "optimizer_ms": 0.0, "algorithm": ""}
_PP = {"microbatches": 4, "forward_ms": 10.0, "backward_ms": 20.0, "activation_mb": 2.0, "gradient_mb": 0.0,
       "algorithm": ""}
TEMPLATES = {t.name: t for t in (
    Template("data-parallel", "DDP-like: gradient buckets allreduced during the backward pass "
             "(defaults: ResNet-50-like, 25.6 M fp32 parameters, 25 MiB buckets)", _DP, data_parallel,
             _data_parallel_ops, same_on_every_rank=True),
    Template("pipeline", "1F1B over microbatches between pp stages; optional dp gradient allreduce",
             _PP, pipeline, lambda p: 8 * p["microbatches"] + 2, "pp >= 2", lambda job: job.pp >= 2),
    Template("hybrid", "tp x dp x pp: 1F1B, tensor-parallel allreduces per compute, dp gradient allreduce "
             "(with nodes and naive placement, tp groups inside a node when tp divides its accelerators)",
             {**_PP, "tp_mb": 1.0, "gradient_mb": 8.0}, hybrid, lambda p: 10 * p["microbatches"] + 2, "pp >= 2",
             lambda job: job.pp >= 2),
    Template("moe", "mixture of experts: per layer a dispatch and a combine all-to-all with a seeded "
             "skew of tokens per expert, new every iteration",
             {"layers": 2, "tokens_mb": 4.0, "skew": 1.0, "compute_ms": 10.0, "expert_ms": 10.0}, moe,
             lambda p: 4 * p["layers"], same_on_every_rank=True),
    Template("parameter-server", "every worker pushes its gradients to rank 0 and pulls the parameters",
             {"params_m": 1.0, "bytes_per_param": 4, "compute_ms": 20.0}, parameter_server, lambda p: 2,
             "ranks >= 2", lambda job: job.ranks >= 2, same_on_every_rank=True),
)}

# What every key may be, whichever template takes it (least, most): sizes in MiB below
# MAX_BYTES (64 PiB), times of one compute op, counts below what MAX_OPS allows anyway.
_MIB = (0, MAX_BYTES / MiB)
_MS = (0, MAX_COMPUTE_MS)
RANGES = {"params_m": (0, 1e7), "bytes_per_param": (0, 16), "bucket_mb": (0.001, 1e6),
          "forward_ms": _MS, "backward_ms": _MS, "optimizer_ms": _MS, "compute_ms": _MS, "expert_ms": _MS,
          "microbatches": (0, MAX_OPS), "layers": (0, MAX_OPS), "skew": (0, 100),
          "activation_mb": _MIB, "gradient_mb": _MIB, "tp_mb": _MIB, "tokens_mb": _MIB}


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
        elif isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not RANGES[key][0] <= value <= RANGES[key][1] \
                or (isinstance(default, int) and not isinstance(value, int)):
            kind = "a whole number" if isinstance(default, int) else "a number"
            raise ValueError(f"template {job.template}: {key} must be {kind} from {RANGES[key][0]:g} to "
                             f"{RANGES[key][1]:g}, got {value!r}")
    if not template.check(job):
        raise ValueError(f"template {job.template} needs {template.needs}")
    _check_expansion(job, template, {**template.defaults, **params})


def _check_expansion(job: Job, template: Template, params: dict) -> None:
    """ValueError if the template would emit more ops than the model and
    the agents take in reasonable time and memory (MAX_OPS, MAX_JOB_OPS)."""
    ops = template.count(params)
    keys = ", ".join(f"{k} = {params[k]}" for k in template.defaults if k in dict(job.params))
    if ops > MAX_OPS:
        raise ValueError(f"template {job.template}: {keys or 'its defaults'} make {ops:,} ops per rank and "
                         f"iteration; at most {MAX_OPS:,}")
    if ops * job.iterations > MAX_JOB_OPS:
        raise ValueError(f"template {job.template}: {ops:,} ops per rank and iteration, {job.iterations:,} "
                         f"iterations: {ops * job.iterations:,} ops per rank; at most {MAX_JOB_OPS:,}")


def job_ops(job: Job, iteration: int, rank: int) -> list[Op]:
    """The ops of `rank` in `iteration`: the template's, or those written out."""
    if job.rank_ops:
        return list(job.rank_ops[rank])
    if not job.template:
        return list(job.ops)
    template = TEMPLATES[job.template]
    return template.emit(job, {**template.defaults, **dict(job.params)}, iteration, rank)
