"""Each run's median call over the model, per algorithm and size, and the per-step times behind them.
Usage (in this folder): python spread.py"""
import collections
import csv
import glob
import statistics

STEPS = {"halv": 6, "ring": 14}   # 8 ranks: halving-doubling's 2 log2(8), the ring's 2 (8 - 1)
runs, times = collections.defaultdict(list), collections.defaultdict(list)
for path in sorted(glob.glob("*-collectives.csv")):
    algorithm = path[:4]
    by_size = collections.defaultdict(list)
    for row in csv.DictReader(open(path)):
        size = int(row["size_bytes"]) >> 10
        by_size[size].append(float(row["time_over_model"]))
        times[(algorithm, size)].append((float(row["time_s"]), float(row["model_time_s"])))
    for size, ratios in by_size.items():
        runs[(algorithm, size)].append(statistics.median(ratios))
for (algorithm, size), medians in sorted(runs.items()):
    measured = statistics.median(t for t, _ in times[(algorithm, size)]) * 1e3
    model = statistics.median(m for _, m in times[(algorithm, size)]) * 1e3
    print(f"{algorithm} {size:3} KiB  run medians {' '.join(f'{m:.2f}' for m in medians)}  "
          f"(spread {min(medians):.2f}-{max(medians):.2f}); call {measured:.2f} ms against the model's {model:.2f}, "
          f"{measured / STEPS[algorithm]:.2f} ms a step against {model / STEPS[algorithm]:.2f}")
