"""Per call of a corpus kept by `capacity_check.py --out FOLDER`: its
tail-loss probes beside its verdict. Usage: python probes.py FOLDER"""
import csv
import glob
import os
import statistics
import sys


def calls(folder):
    for run in sorted(glob.glob(os.path.join(folder, "*/"))):
        for name in ("collectives.csv", "jobs.csv"):
            path = os.path.join(run, name)
            if os.path.exists(path):
                yield from ((os.path.basename(run.rstrip("/")), c) for c in csv.DictReader(open(path))
                            if c.get("fidelity"))
                break


def main(folder):
    trusted, failed = [], []
    for run, c in calls(folder):
        ok = c["fidelity"] == "ok" or c["fidelity"].startswith("network")
        (trusted if ok else failed).append((run, c))
    probes = [int(c["tcp_loss_probes"] or 0) for _, c in trusted]
    print(f"trusted calls: {len(trusted)}; tail-loss probes: none in {probes.count(0)}, median "
          f"{statistics.median(probes)}, max {max(probes)}")
    uncongested = [int(c["tcp_loss_probes"] or 0) for _, c in trusted if c["fidelity"] == "ok"]
    print(f"  of those 'ok': {len(uncongested)}, probes up to {max(uncongested)}")
    print(f"failed calls: {len(failed)}")
    for run, c in failed:
        print(f"  {run}: {c['tcp_loss_probes']} probes, {c['tcp_spurious']} spurious of {c['tcp_retrans']} "
              f"retransmissions, ovs_cpu {float(c['ovs_cpu']):.2f}: {c['fidelity']}")


if __name__ == "__main__":
    main(sys.argv[1])
