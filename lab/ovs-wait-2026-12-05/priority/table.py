"""Per case of this folder (its *-collectives.csv), per size: the median call over the model (and the
slowest), Open vSwitch on a core and waiting for one, the machine's CPU, tail-loss probes, calls trusted.
Usage: python table.py FOLDER"""
import collections
import csv
import glob
import os
import statistics
import sys


def median(rows, column):
    return statistics.median(float(r[column]) for r in rows)


for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-collectives.csv"))):
    by_size = collections.defaultdict(list)
    for row in csv.DictReader(open(path)):
        by_size[int(row["size_bytes"])].append(row)
    for size, rows in sorted(by_size.items()):
        trusted = sum(r["fidelity"] == "ok" or r["fidelity"].startswith("network") for r in rows)
        slowest = max(float(r["time_over_model"]) for r in rows)
        print(f"{os.path.basename(path)[:-16]:22} {size >> 10:6}K  x{median(rows, 'time_over_model'):.2f} (max {slowest:.2f})  "
              f"ovs {median(rows, 'ovs_cpu'):.2f} wait {median(rows, 'ovs_wait'):.2f} cpu {median(rows, 'cpu_busy'):.2f} "
              f"probes {median(rows, 'tcp_loss_probes'):.0f}  ok {trusted}/{len(rows)}")
