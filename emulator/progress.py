"""What a run prints while it runs: its header, a line per call with the
time left, the tables at the end, the live terminal view and the web
page's updates."""
from __future__ import annotations

import os
import time

from emulator.records.metrics import TABLE_HEADER, algbw_mbps, avg_busbw_line, table_row
from emulator.inputs import size_name
from emulator.plan.modelled_jobs import PLACEMENT_WIDTH, placement_cell
from emulator.spec.experiment import RunSpec


def describe(spec: RunSpec, ranks: int) -> str:
    if spec.workload:
        return (f"# workload {spec.workload} (where it leaves them open: {spec.algorithm}, mapping {spec.mapping}), "
                f"policy {spec.policy}, {spec.topology} ({ranks} ranks), links {spec.host_rate_mbps:g} Mbit/s host / "
                f"{spec.switch_rate_mbps:g} Mbit/s switch{_link_extras(spec)}, MTU {spec.mtu}"
                + (f", {spec.label}" if spec.label else ""))
    extra = ""
    if spec.connections > 1:
        extra += f", {spec.connections} connections per peer"
    if spec.link_events:
        extra += ", link events " + " ".join(map(str, spec.link_events))
    if spec.capture:
        extra += ", capturing " + " ".join(spec.capture)
    return f"# {spec.collective} {spec.algorithm}, {describe_fabric_run(spec, ranks)}{extra}"


def describe_fabric_run(spec: RunSpec, ranks: int) -> str:
    """Mapping, policy, fabric (its nodes of accelerators too) and its
    links: what every run says of itself."""
    shape = spec.node_shape()
    nodes = f" in nodes of {shape.resolved(spec.host_rate_mbps).describe()}" if shape else ""
    return (f"mapping {spec.mapping}, policy {spec.policy}, {spec.topology} ({ranks} ranks{nodes}), links "
            f"{spec.host_rate_mbps:g} Mbit/s host / {spec.switch_rate_mbps:g} Mbit/s switch, queues "
            f"{spec.host_queue_packets}/{spec.switch_queue_packets} packets, MTU {spec.mtu}{_link_extras(spec)}")


def _link_extras(spec: RunSpec) -> str:
    netem = (f", netem {spec.link_delay_ms:g} ms / {spec.link_loss_pct:g}% loss"
             if spec.link_delay_ms or spec.link_loss_pct else "")
    queue = "" if spec.queue_discipline == RunSpec.queue_discipline else f" {spec.queue_discipline}"
    threshold = f" (marking from {spec.ecn_threshold_packets} packets)" if spec.ecn_threshold_packets else ""
    return (netem + (f", links {' '.join(map(str, spec.link_overrides))}" if spec.link_overrides else "")
            + f", tcp {spec.tcp}" + (f", switch queues{queue}{threshold}" if queue else ""))


def print_table(rows: list[dict]) -> None:
    """One line per size: the median over repetitions, as summary.txt has it."""
    import pandas as pd
    from emulator.results.report import summarise
    print(TABLE_HEADER)
    summary = summarise(pd.DataFrame(rows))
    for r in summary.itertuples():
        print(table_row(r.size_bytes, r.time_s, algbw_mbps(r.size_bytes, r.time_s), r.busbw_mbps, r.model_time_s))
    print(avg_busbw_line(summary.busbw_mbps))


JOB_HEADER = "#  job              ranks  placement             iter   time(ms)  compute(ms)  exposed comm(ms)"


def print_jobs(rows: list[dict], measured: bool = True) -> None:
    """A line per job and iteration: time, compute and exposed communication
    of the rank that finished last, and the slowdown against the job alone
    (both from the model when `measured` is False)."""
    print(JOB_HEADER + ("   model(ms)  slowdown  verdict" if measured else "   alone(ms)  slowdown"))
    for r in rows:
        placed = placement_cell(r["placement"])
        line = (f"  {r['job'][:16]:16} {r['ranks']:>6}  {placed:{PLACEMENT_WIDTH}} {r['iteration']:>5} "
                f"{r['time_s'] * 1e3:>10.1f} {r['compute_s'] * 1e3:>12.1f} {r['comm_s'] * 1e3:>17.1f}")
        if measured:
            line += f" {r['model_time_s'] * 1e3:>11.1f} {r['slowdown']:>9.2f}  {r['fidelity']}"
        else:
            line += f" {r['alone_s'] * 1e3:>11.1f} {r['slowdown']:>9.2f}"
        print(line)


class Progress:
    """One line per finished call: which, its verdict, and the time left,
    estimated from the model's time of every call (sizes differ a lot)."""

    def __init__(self, predicted_s: list[float]):
        self.predicted, self.total, self.done, self.start = predicted_s, len(predicted_s), 0, time.monotonic()

    def call_done(self, label: str, verdict: str = "") -> None:
        self.done += 1
        share = sum(self.predicted[:self.done]) / max(1e-9, sum(self.predicted))
        print(progress_line(self.done, self.total, time.monotonic() - self.start, label, share) + verdict,
              flush=True)


def progress_line(done_calls: int, total_calls: int, elapsed_s: float, label: str,
                  work_done: float | None = None) -> str:
    """'[ 3/12] label ... ~40 s left': calls done so far, and the time left
    if the remaining work goes as fast as the done work. `work_done` is the
    share of the work done (by default, of the calls)."""
    line = f"[{done_calls:>{len(str(total_calls))}}/{total_calls}] {label}"
    if total_calls and done_calls >= total_calls:
        return f"{line} ... done in {duration(elapsed_s)}"
    if done_calls <= 0 or elapsed_s <= 0:
        return f"{line} ..."
    share = work_done if work_done else done_calls / total_calls
    return f"{line} ... ~{duration(elapsed_s * (1 - share) / share)} left"


def duration(seconds: float) -> str:
    """'40 s', '5 min', '2 h 05 min' (rounded half up)."""
    seconds = max(1, int(seconds + 0.5))
    if seconds < 100:
        return f"{seconds} s"
    minutes = int(seconds / 60 + 0.5)
    if minutes < 100:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def call_label(plan, call) -> str:
    what = "warm-up" if call.repetition < 0 else f"rep {call.repetition + 1}/{plan.spec.repetitions}"
    if plan.is_workload:
        return f"workload {os.path.basename(plan.spec.workload)} {what}"
    return f"{plan.spec.algorithm} {plan.spec.mapping} {size_name(call.size_bytes)} {what}"


def sample_listener(emu, views):
    """The monitor's callback: the last interval's link rows, computed once,
    with the ranks' progress, to every view's update(rows, steps_done, elapsed_s)."""
    from emulator.results import linkstats

    def on_sample(samples) -> None:
        if len(samples) < 2 or emu.fleet is None:
            return
        rows = linkstats.link_rows(0, emu.links, samples[-2:], samples[0].t)
        for v in views:
            v.update(rows, emu.fleet.steps_done, samples[-1].t - emu.fleet.call_start)
    return on_sample


class LiveView:
    """Redraws the busiest links and the step progress in place while a
    call runs (only on a terminal)."""

    def __init__(self, plan, progress: Progress):
        self.progress = progress
        self.steps_total = max(len(s) for s in plan.schedules[max(plan.schedules)].steps)
        self.lines = 0

    def update(self, rows, steps_done, elapsed_s: float) -> None:
        from emulator.results import liveview
        text = liveview.render(f"[{self.progress.done + 1}/{self.progress.total}]", rows,
                               steps_done, self.steps_total, elapsed_s)
        up = f"\x1b[{self.lines}F\x1b[J" if self.lines else ""
        print(up + text, flush=True)
        self.lines = text.count("\n") + 1

    def clear(self) -> None:
        if self.lines:
            print(f"\x1b[{self.lines}F\x1b[J", end="", flush=True)
            self.lines = 0


class WebRun:
    """Sends one plan's samples and finished calls to the web page."""

    def __init__(self, page, plan, progress: Progress):
        from emulator.web.view import rank_roles
        self.page, self.plan, self.progress = page, plan, progress
        self.roles = rank_roles(plan)
        self.call = plan.calls[0]   # the call under way

    def update(self, rows, steps_done, elapsed_s: float) -> None:
        from emulator.web.view import sample_message
        label = f"[{self.progress.done + 1}/{self.progress.total}] {call_label(self.plan, self.call)}"
        self.page.publish(sample_message(label, rows, steps_done, self.roles, elapsed_s))

    def call_done(self, call, record, written) -> None:
        from emulator.web.view import call_message
        self.page.publish(call_message(self.plan, call, record, written, call_label(self.plan, call)))
        self.call = self.plan.calls[min(call.index + 1, len(self.plan.calls) - 1)]
