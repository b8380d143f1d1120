"""Per algorithm and size, from a run's steps.csv (8 ranks): a step's median time, and its median latency: the
step's end minus the later of its own start and the start of the rank it receives from (a ring's predecessor,
a halving-doubling step's partner), beside the model's step (its model_end_s).

    /work/main/.venv/bin/python steps.py ring-steps.csv.gz hd-steps.csv.gz > steps.txt
"""
import collections
import csv
import gzip
import statistics
import sys

RANKS = 8


def source(algorithm: str, rank: int, step: int) -> int:
    if algorithm == "ring":
        return (rank - 1) % RANKS
    half = RANKS.bit_length() - 1                       # log2(ranks) steps a phase
    return rank ^ (1 << (step if step < half else 2 * half - 1 - step))


for path in sys.argv[1:]:
    rows = list(csv.DictReader(gzip.open(path, "rt") if path.endswith(".gz") else open(path)))
    by = {(r["algorithm"], int(r["size_bytes"]), int(r["repetition"]), int(r["rank"]), int(r["step"])): r
          for r in rows}
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    for (algorithm, size, rep, rank, step), r in by.items():
        p = by[(algorithm, size, rep, source(algorithm, rank, step), step)]
        start, end = float(r["start_s"]), float(r["end_s"])
        o = out[(algorithm, size)]
        o["step"].append(end - start)
        o["latency"].append(end - max(start, float(p["start_s"])))
        if step:
            o["model"].append(float(r["model_end_s"]) - float(by[(algorithm, size, rep, rank, step - 1)]["model_end_s"]))
    for (algorithm, size), o in sorted(out.items()):
        calls = {k[2] for k in by if k[:2] == (algorithm, size)}
        call = statistics.median(max(float(r["end_s"]) for k, r in by.items() if k[:3] == (algorithm, size, c))
                                 for c in calls)
        steps = max(k[4] for k in by if k[:2] == (algorithm, size)) + 1
        print(f"{algorithm:17} {size >> 10:4} KiB  a call's time a step {call / steps * 1e3:5.2f} ms; a rank's step: "
              f"median {statistics.median(o['step']) * 1e3:5.2f} ms, latency median "
              f"{statistics.median(o['latency']) * 1e3:5.2f} ms; the model's step {statistics.median(o['model']) * 1e3:5.2f} ms")
