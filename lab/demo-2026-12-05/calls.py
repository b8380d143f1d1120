"""Per demo run: its counted calls, by mapping, over the model (min-max), and their fidelity verdicts.

    .venv/bin/python calls.py RUN_FOLDER...
"""
import collections
import csv
import sys

for folder in sys.argv[1:]:
    by = collections.defaultdict(list)
    verdicts = collections.Counter()
    for r in csv.DictReader(open(f"{folder}/collectives.csv")):
        if int(r["repetition"]) < 0:
            continue
        by[r["mapping"]].append(float(r["time_over_model"]))
        verdicts[r["fidelity"].split(":")[0]] += 1
    print(folder.rstrip("/").split("/")[-1], " ".join(f"{m} {min(v):.2f}-{max(v):.2f}x" for m, v in by.items()),
          dict(verdicts))
