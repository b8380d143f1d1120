"""Per run and size: the median call over the model, the calls' range, and the verdicts, with TCP segments as
runs take them and with segments of at most a quarter of the links' burst (`*-segments-quarter-*`): the 8-host
ring and halving-doubling at 50 Mbit/s, then the 32-host halving-doubling of 256 KiB at 50 Mbit/s, both in turn, twice
(`h32-*`).

    /work/main/.venv/bin/python segments.py > segments.txt
"""
import collections
import csv
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
for name in ("ring", "ring-segments-quarter", "hd", "hd-segments-quarter", "h32-burst-1", "h32-segments-quarter-1",
             "h32-burst-2", "h32-segments-quarter-2"):
    calls, models, verdicts = collections.defaultdict(list), collections.defaultdict(list), collections.Counter()
    for r in csv.DictReader(open(os.path.join(HERE, f"{name}-collectives.csv"))):
        size = int(r["size_bytes"]) >> 10
        calls[size].append(float(r["time_s"]) * 1e3)
        models[size].append(float(r["model_time_s"]) * 1e3)
        verdicts["ok" if r["fidelity"] == "ok" else r["fidelity"].split(":")[0]] += 1
    print(f"{name}: verdicts {dict(verdicts)}")
    for size, times in sorted(calls.items()):
        model = statistics.median(models[size])
        print(f"  {size:4} KiB  median {statistics.median(times):6.2f} ms, model {model:6.2f}: "
              f"{statistics.median(times) / model:.2f}x; calls {min(times) / model:.2f}-{max(times) / model:.2f}x")
