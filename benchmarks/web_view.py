"""CPU the live web page's server costs per monitor sample, no root.

Feeds synthetic counter samples of a fabric through what a run with --web
does per sample (link rows, the sample's JSON, publish to every viewer)
at the monitor's period, with viewers reading the event stream from other
processes (curl), and prints this process's CPU per sample and as a share
of one core, beside the same loop without the page (link rows alone: what
the terminal's live view already computes).

  .venv/bin/python benchmarks/web_view.py [--quick] [--viewers 2]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from webtools import _samples  # noqa: E402  (the tests' synthetic counters)

from emulator.results import linkstats
from emulator.records import links as link_records
from emulator.plan.run_plan import plan_run  # noqa: E402
from emulator.spec.experiment import make_run  # noqa: E402
from emulator.web import view  # noqa: E402
from emulator.web.server import WebView  # noqa: E402


def cpu_per_sample(topology: str, samples: int, interval_s: float, web: WebView | None) -> float:
    plan = plan_run(make_run({"topology": topology, "collective": "allreduce", "algorithm": "ring",
                              "sizes": "1M", "repetitions": 1, "warmup": 0}))
    links = link_records.directed_links(plan.fabric)
    series = _samples(links, samples, samples * interval_s, 0)
    roles = view.rank_roles(plan)
    if web:
        web.publish(view.fabric_message(plan.fabric))
    start, next_at = time.process_time(), time.monotonic()
    for k in range(1, len(series)):
        rows = linkstats.link_rows(0, links, series[k - 1:k + 1], 0.0)
        if web:
            web.publish(view.sample_message("bench", rows, [k] * plan.ranks, roles, k * interval_s))
        next_at += interval_s
        time.sleep(max(0.0, next_at - time.monotonic()))
    return (time.process_time() - start) / samples


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="50 samples per fabric instead of 200")
    p.add_argument("--viewers", type=int, default=2, help="event streams read by curl processes (default 2)")
    args = p.parse_args()
    samples, interval = (50 if args.quick else 200), 0.1
    print(f"# {samples} samples every {interval * 1e3:.0f} ms, {args.viewers} viewers")
    print(f"{'topology':20} {'links':>6} {'without page (ms)':>18} {'with page (ms)':>15} {'page, share of a core':>22}")
    for topology in ("bigraph:m=2,n=4", "bigraph:m=4,n=8", "bigraph:m=8,n=16"):
        alone = cpu_per_sample(topology, samples, interval, None)
        with WebView() as web:
            viewers = [subprocess.Popen(["curl", "-sN", web.url + "events"], stdout=subprocess.DEVNULL)
                       for _ in range(args.viewers)]
            try:
                time.sleep(0.5)
                with_page = cpu_per_sample(topology, samples, interval, web)
            finally:
                for v in viewers:
                    v.terminate()
                    v.wait()
        n = len(make_run({"topology": topology}).fabric().links) * 2
        print(f"{topology:20} {n:6d} {alone * 1e3:18.2f} {with_page * 1e3:15.2f} "
              f"{(with_page - alone) / interval:22.1%}")


if __name__ == "__main__":
    main()
