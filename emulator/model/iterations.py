"""A job's iterations from its step times (pure): when each began and ended,
and how much of it was exposed communication; the same arithmetic over the
model's step ends and over the agents' step records."""
from __future__ import annotations


def iterations(layout, start_of, end_of) -> list[dict]:
    """Per iteration of a job: first rank's start to last rank's end, and
    the compute and exposed communication of the rank that finished last
    (its time in the iteration that was not compute). start_of(rank, k) and
    end_of(rank, k) give step k of a global rank. Only the ranks that run
    an iteration count in it (an elastic job's group of that iteration)."""
    out = []
    for i in range(layout.job.iterations):
        ends = {}
        members = range(layout.job.ranks_in(i))
        for local in members:
            first, end = layout.iterations[local][i]
            rank = layout.offset + local
            ends[local] = max(end_of(rank, k) for k in range(first, end)) if end > first else start_of(rank, first)
        last = max(ends, key=ends.get)
        first = layout.iterations[last][i][0]
        start = min(start_of(layout.offset + local, layout.iterations[local][i][0]) for local in members)
        began = start_of(layout.offset + last, first)
        compute = layout.compute_s[last][i]
        out.append({"iteration": i, "start_s": start, "end_s": ends[last], "time_s": ends[last] - start,
                    "compute_s": compute, "comm_s": max(0.0, ends[last] - began - compute)})
    return out


def modelled(prediction, offset: int = 0):
    """start_of and end_of over a Prediction (a step starts when the one
    before it on its rank ended: true of every iteration's first step)."""
    ends = prediction.step_end_s

    def end_of(rank, k):
        return ends[rank - offset][k]

    def start_of(rank, k):
        return ends[rank - offset][k - 1] if k > 0 else 0.0
    return start_of, end_of


def measured(records):
    return (lambda rank, k: records[rank][k]["start"]), (lambda rank, k: records[rank][k]["end"])
