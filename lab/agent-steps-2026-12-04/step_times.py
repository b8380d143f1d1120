"""Per size: a step's mean and median time, bytes, the gap between steps and
the first step's start after the call's instant, from steps CSVs.

    python step_times.py steps-new-bigraph_m_2_n_4-ring.csv steps-new-bigraph_m_2_n_4-halving-doubling.csv
"""
import csv
import sys
import collections
import statistics as st
for name in sys.argv[1:]:
    rows = list(csv.DictReader(open(name)))
    by = collections.defaultdict(list)
    for r in rows:
        by[(int(r["size_bytes"]), int(r["repetition"]), int(r["rank"]))].append(r)
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    for (size, _rep, _rank), steps in by.items():
        steps.sort(key=lambda r: int(r["step"]))
        for i, s in enumerate(steps):
            d = float(s["end_s"]) - float(s["start_s"])
            out[size]["dur"].append(d)
            out[size]["bytes"].append(int(s["bytes_sent"]))
            if i:
                out[size]["gap"].append(float(s["start_s"]) - float(steps[i-1]["end_s"]))
            else:
                out[size]["first"].append(float(s["start_s"]))
    print(name)
    for size in sorted(out):
        o = out[size]
        print(f"  {size>>10:5d}K steps {len(o['dur'])//len(o['first']):2d} mean step {st.mean(o['dur'])*1e3:6.2f} ms (median {st.median(o['dur'])*1e3:6.2f}) "
              f"mean bytes {st.mean(o['bytes'])/1024:7.1f}K  gap {st.mean(o['gap'])*1e3:5.3f} ms  first start {st.mean(o['first'])*1e3:5.2f} ms")
