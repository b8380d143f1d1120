"""Helpers of the web view's tests: a small results folder written by the
project's own writers, headless Chromium's flags and whether it is here,
and where screenshots go."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1000"]


def write_results_folder(folder: str, mappings=("naive", "hdrm"), samples: int = 6, keys: dict | None = None) -> list:
    """A demo's results folder (one 2 MiB call per mapping) through the
    writers a run uses: fabric.json, spec.json, then write_call per call
    and write_report. Link use differs per link and sample, so frames differ.
    `keys`: more run keys (nodes of accelerators, say)."""
    from emulator.results import linkstats
    from emulator.records import links as link_records
    from emulator.plan.run_plan import plan_run
    from emulator.results.report import write_report
    from emulator.results.calls import CallRecord, write_call
    from emulator.spec.experiment import make_run
    os.makedirs(folder, exist_ok=True)
    specs = [make_run({"topology": "bigraph:m=2,n=4", "collective": "allreduce", "algorithm": "halving-doubling",
                       "sizes": "2M", "repetitions": 1, "warmup": 0, "host_rate_mbps": 50, "switch_rate_mbps": 50,
                       "mapping": m, "label": f"demo {m}", **(keys or {})}) for m in mappings]
    plans = [dataclasses.replace(plan_run(spec), run=i) for i, spec in enumerate(specs)]
    plans[0].fabric.save(os.path.join(folder, "fabric.json"))
    with open(os.path.join(folder, "spec.json"), "w") as f:
        json.dump({"name": "demo", "runs": [dataclasses.asdict(s) for s in specs]}, f)
    links = link_records.directed_links(plans[0].fabric)
    for plan in plans:
        for call in plan.calls:
            duration = plan.predictions[call.size_bytes].time_s
            record = CallRecord(_steps(plan.schedules[call.size_bytes], duration))
            record.links = linkstats.link_rows(call.index, links, _samples(links, samples, duration, plan.run), 0.0)
            record.counters.update(linkstats.call_figures(record.links, duration, plan.spec.mtu))
            write_call(folder, plan, call, record, "user")
    write_report(folder, plans)
    return plans


def _steps(schedule, duration: float) -> list[list[dict]]:
    """Every rank's step records: the scheduled bytes, steps back to back."""
    per = duration / max(len(s) for s in schedule.steps)
    return [[{"start": k * per, "end": (k + 1) * per, "sent": sum(t.nbytes for t in step.sends),
              "received": sum(t.nbytes for t in step.recvs)} for k, step in enumerate(steps)]
            for steps in schedule.steps]


def _samples(links, count: int, duration: float, seed: int):
    """Counter samples in which link i carries ((i + k + seed) % 5) / 4 of its rate in interval k."""
    from emulator.records.links import Sample
    dt, totals, out = duration / count, {l.dev: 0 for l in links}, []
    for k in range(count + 1):
        s = Sample(k * dt)
        for i, link in enumerate(links):
            share = ((i + k + seed) % 5) / 4 if k else 0.0
            totals[link.dev] += int(share * link.rate_mbps * 1e6 / 8 * dt)
            if link.egress:
                s.sent[link.dev] = (totals[link.dev], totals[link.dev] // 9014, 9014 * (i % 3) * (k % 2), 0, 0)
            else:
                s.received[link.dev] = (totals[link.dev], totals[link.dev] // 9014)
        out.append(s)
    return out


def browser_missing() -> str | None:
    for tool in ("chromium", "chromedriver"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (vm/provision.sh installs Debian's chromium and chromium-driver)"
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install -e .[test])"
    return None


def screenshot_path(tmp_path, name: str) -> str:
    """Where a test's screenshot goes: $BIGRAPH_SCREENSHOT_DIR, or the test's tmp folder."""
    folder = os.environ.get("BIGRAPH_SCREENSHOT_DIR") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, name)


class Output:
    """A command's output lines, read in a thread so its pipe never fills."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self.ended = False
        self._changed = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def wait_for(self, pattern: str, timeout_s: float) -> re.Match:
        """The first line matching `pattern`, waiting for it up to `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for line in self.lines:
                    found = re.search(pattern, line)
                    if found:
                        return found
                left = deadline - time.monotonic()
                if self.ended or left <= 0:
                    raise AssertionError(f"no line matching {pattern!r} within {timeout_s:.0f} s; the command "
                                         f"printed:\n{''.join(self.lines)[-3000:]}")
                self._changed.wait(left)


URL_LINE = r"# web view: (http://\S+)"


class FakeEmulation:
    """Stands in for emulation.Emulation where nothing may be built: the same
    calls to on_sample (synthetic counters, every `interval_s`) and on_call
    (step records with the scheduled bytes), so the pipeline's wiring of the
    live views runs for real without root."""

    def __init__(self, plan, run_dir: str, interval_s: float = 0.0, samples: int = 5):
        from emulator.records import links as link_records
        self.plan, self.run_dir, self.interval_s, self.samples = plan, run_dir, interval_s, samples
        self.links = link_records.directed_links(plan.fabric)
        self.on_sample = None
        self.fleet = None
        self.dataplane = type("Dataplane", (), {"datapath": "user"})()

    def __enter__(self):
        self.plan.fabric.save(os.path.join(self.run_dir, "fabric.json"))
        return self

    def __exit__(self, *exc) -> None:
        pass

    def replay(self, plan, on_call) -> None:
        from emulator.results import linkstats
        from emulator.results.calls import CallRecord
        for call in plan.calls:
            duration = plan.predictions[call.size_bytes].time_s
            series = _samples(self.links, self.samples, duration, call.index)
            self.fleet = type("Fleet", (), {"steps_done": [0] * plan.ranks, "call_start": 0.0})()
            total = len(plan.schedules[call.size_bytes].steps[0])
            for k in range(2, len(series) + 1):
                self.fleet.steps_done = [total * (k - 1) // self.samples] * plan.ranks
                if self.on_sample:
                    self.on_sample(series[:k])
                time.sleep(self.interval_s)
            record = CallRecord(_steps(plan.schedules[call.size_bytes], duration))
            record.links = linkstats.link_rows(call.index, self.links, series, 0.0)
            record.counters.update(linkstats.call_figures(record.links, duration, plan.spec.mtu))
            on_call(call, record)


def drawn_links(browser) -> dict:
    """Every directed switch link's (use, colour) as the page draws it now."""
    return {line.get_attribute("data-link"): (line.get_attribute("data-util"), line.get_attribute("stroke"))
            for line in browser.find_elements("css selector", "line.dir")}


def stop(proc, timeout_s: float) -> None:
    """SIGTERM (the run unwinds as after Ctrl-C) if it still runs, SIGKILL if it
    does not end within `timeout_s`; then its output pipe is closed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc.stdout.close()
