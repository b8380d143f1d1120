"""Per step of the 8-host rows of ../agent-steps-2026-12-04: its time, how much later the rank it
receives from started, and the latency (end minus the later of the two starts).
usage: .venv/bin/python step_latency.py"""
import collections
import csv
import os
import statistics as st

HERE = os.path.dirname(os.path.abspath(__file__))


def q(a, f):
    a = sorted(a)
    return a[int(f * (len(a) - 1))]


for name, alg in (("ring","ring"),("halving-doubling","hd")):
    rows = list(csv.DictReader(open(f"{HERE}/../agent-steps-2026-12-04/steps-new-bigraph_m_2_n_4-{name}.csv")))
    by = {(int(r["size_bytes"]), int(r["repetition"]), int(r["rank"]), int(r["step"])): r for r in rows}
    hostof = {int(r["rank"]): r["host"] for r in rows}
    for size in (32768, 65536, 131072):
        out = collections.defaultdict(lambda: collections.defaultdict(list))
        for (s, rep, rank, step), r in by.items():
            if s != size:
                continue
            if alg == "ring":
                src, key = (rank - 1) % 8, "all"
            else:
                k = step if step < 3 else 5 - step
                src, key = rank ^ (1 << k), step
            p = by.get((s, rep, src, step))
            a, e = float(r["start_s"]), float(r["end_s"])
            o = out[key]
            o["dur"].append(e - a)
            o["skew"].append(float(p["start_s"]) - a)   # >0: source started later
            o["lat"].append(e - max(a, float(p["start_s"])))
            o["bytes"].append(int(r["bytes_sent"]))
        print(name, size>>10, "K")
        for key, o in sorted(out.items(), key=lambda x: str(x[0])):
            print(f"   step {key}: dur med {q(o['dur'],.5)*1e3:.2f} p90 {q(o['dur'],.9)*1e3:.2f}  src later by med {q(o['skew'],.5)*1e3:.2f}  lat med {q(o['lat'],.5)*1e3:.2f} p90 {q(o['lat'],.9)*1e3:.2f}  bytes {st.mean(o['bytes'])/1024:.0f}K")
    print({r: hostof[r] for r in sorted(hostof)})
