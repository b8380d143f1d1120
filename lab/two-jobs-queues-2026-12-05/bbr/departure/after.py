"""When a competing flow leaves a shared link, does the flow left take the whole link? Per counted call of
lag.toml: the shared link's (bgs0:3>bgs2) utilisation in the 0.6 s after the short job's last step ended, and
the link time lost there (1 - utilisation, in ms), from links.csv sampled every 20 ms.
usage: .venv/bin/python after.py JOBS_CSV LINKS_CSV_GZ"""
import csv
import gzip
import sys

jobs = list(csv.DictReader(open(sys.argv[1])))
rows = [r for r in csv.DictReader(gzip.open(sys.argv[2], "rt")) if r["link"] == "bgs0:3>bgs2"]
calls = sorted({int(r["call"]) for r in rows})[1:]   # the first is the warm-up
for rep, call in enumerate(calls):
    js = {j["job"]: j for j in jobs if j["repetition"] == str(rep)}
    end = float(js["short"]["end_s"])
    series = [(float(r["t_s"]), float(r["util"])) for r in rows if int(r["call"]) == call]
    after = [u for t, u in series if end < t <= end + 0.6]
    before = [u for t, u in series if end - 0.6 <= t < end]
    mean = sum(after) / len(after)
    print(f"call {rep}: short job ends at {end:.2f} s; link utilisation 0.6 s before {sum(before) / len(before):.2f}, "
          f"0.6 s after {mean:.2f} ({(1 - mean) * 600:.0f} ms of link time lost)")
