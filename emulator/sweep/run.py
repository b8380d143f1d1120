"""`bigraph-emu sweep FILE` top to bottom: expand and check the sweep,
run its points on a pool (the model by default; emulations where asked or
to confirm the model's best and worst), append their rows to sweep.csv as
they finish, then the summary and the plots.

  load     the sweep file expanded and checked whole (spec.sweep)
  plan     the points the folder lacks (--resume), the estimate (--dry-run)
  run      model points on any worker, emulation points one per machine
  confirm  the N best and N worst points emulated, their order compared
  report   best and worst, what moves the time most, plots
"""
from __future__ import annotations

import os
import random
import shutil
import sys
import threading
import time

from emulator import version
from emulator.inputs import size_name
from emulator.progress import duration
from emulator.preflight import results_dir
from emulator.plan.predictions import model_version
from emulator.results import sweeps
from emulator.spec.experiment import SpecError
from emulator.spec.sweep import Sweep, confirm_spec, load_sweep
from emulator.sweep import points, pool

SHOWN_POINTS = 5       # the dry run's first points
ESTIMATE_SAMPLE = 5    # points the dry run times to estimate the sweep
ESTIMATE_BUDGET_S = 10  # ... for at most this long
BRING_UP_S = 30        # an emulation's bring-up and teardown, beside its calls (a 32-host fabric here)


def sweep(path: str, out: str | None = None, resume: str | None = None, scheduler: str | None = None,
          workers: int | None = None, emulate: bool = False, confirm: int = 0, dry_run: bool = False,
          yes: bool = False) -> int:
    plan = load_sweep(path, yes)
    if confirm < 0:
        raise SpecError(f"--confirm: give how many best and worst points to emulate (1 or more), got {confirm}")
    emulated = [(p, _emulated_spec(plan, p)) for p in plan.points] if emulate else []
    if dry_run:
        print_plan(plan, emulated, workers)
        return 0
    stamp = {"version": version(), "model_version": model_version()}
    folder, done = _folder(plan, path, out, resume, stamp)
    address = pool.scheduler_address(scheduler)
    todo_model = [p for p in plan.points if p.key not in done["model"]]
    todo_emulate = [(p, s) for p, s in emulated if p.key not in done["emulated"]]
    with pool.open_pool(address, workers) as client:   # a scheduler that does not answer: nothing created
        if resume is None:
            os.makedirs(folder)
            shutil.copy(path, os.path.join(folder, "sweep.toml"))
        print(f"# sweep {plan.name}: {len(plan.points)} points ({len(todo_model)} to model"
              + (f", {len(todo_emulate)} to emulate" if emulate else "") + f") on {_describe_pool(client)}; "
              f"rows in {folder}/{sweeps.FILE}", flush=True)
        table = sweeps.SweepTable(folder, plan.factors)
        try:   # the model first: nothing of it runs beside an emulation
            _run(client, todo_model, todo_emulate, folder, stamp, table)
            if confirm:
                _confirm(client, plan, folder, stamp, table, confirm)
        finally:
            table.close()
    report(plan, folder, confirm)
    return 0


def _run(client, model: list, emulate: list, folder: str, stamp: dict, table) -> None:
    """Model points, then emulation points, each point's rows to the table as it finishes."""
    progress = Progress(len(model) + len(emulate))
    try:
        for todo_model, todo_emulate in ((model, []), ([], emulate)):
            pool.run(client, todo_model, todo_emulate, os.path.abspath(folder), stamp,
                     lambda kind, point, rows: (table.add(rows), progress.tick()))
    finally:
        progress.end()


def _emulated_spec(plan: Sweep, point):
    """The run that emulates a point: the point as it is, or with [confirm]'s keys."""
    try:
        return confirm_spec(point, plan.confirm)
    except SpecError as e:
        raise SpecError(f"[confirm]: point {point.index + 1} ({point.label}): {e}") from None


def _folder(plan: Sweep, path: str, out: str | None, resume: str | None, stamp: dict) -> tuple[str, dict]:
    """The results folder (new, checked but not made yet; or --resume's)
    and the keys of the points it already holds."""
    if resume is None:
        return results_dir(out, plan.name), {"model": set(), "emulated": set()}
    if not os.path.isfile(os.path.join(resume, sweeps.FILE)):
        raise SpecError(f"--resume {resume}: no {sweeps.FILE} there; name the folder of an earlier sweep")
    sweeps.check_columns(resume, plan.factors)
    rows = sweeps.read_rows(resume)
    other = sorted({r["model_version"] for r in rows} - {stamp["model_version"]})
    if other:
        raise SpecError(f"--resume {resume}: its rows come from another version of the model ({', '.join(other)}; "
                        f"this one is {stamp['model_version']}): start a new sweep rather than mix them")
    return resume, sweeps.done_keys(rows)


def _describe_pool(client) -> str:
    info = client.scheduler_info()
    machines = {w.get("host") for w in info["workers"].values()}
    return f"{len(info['workers'])} Dask workers on {len(machines)} machine(s), scheduler {info.get('address', '?')}"


# --- the dry run ---------------------------------------------------------------------

def print_plan(plan: Sweep, emulated: list, workers: int | None) -> None:
    print(f"# sweep {plan.name}: {len(plan.points)} points, {len(plan.skipped)} left out")
    for why, n in plan.skip_reasons():
        print(f"#   left out {n}x: {why}")
    if emulated:
        print(f"# estimate: {duration(_emulation_s(emulated))} on one machine (one emulation at a time)")
    else:
        workers = workers or os.cpu_count() or 1
        seconds, cut = _model_s(plan)
        print(f"# estimate: {'at least ' if cut else ''}{duration(seconds / workers)} on {workers} local workers "
              f"(from {ESTIMATE_SAMPLE} points timed here{f' for {ESTIMATE_BUDGET_S} s' if cut else ''})")
    for point in plan.points[:SHOWN_POINTS]:
        print(f"  {point.index + 1:5d}  {point.label or '(the defaults)'}")
    if len(plan.points) > SHOWN_POINTS:
        print(f"  ... and {len(plan.points) - SHOWN_POINTS} more")


def _emulation_s(emulated: list) -> float:
    """Emulations: the calls the model predicts, plus bring-up."""
    from emulator.preflight import plan_emulated, predicted_calls
    return sum(sum(predicted_calls([plan_emulated(spec)])) + BRING_UP_S for _, spec in emulated)


def _model_s(plan: Sweep) -> tuple[float, bool]:
    """Model points on one worker: the mean time of a few, timed here, times
    their count; (a lower bound, True) when the few took more than
    ESTIMATE_BUDGET_S (the one under way counts as what it took so far)."""
    sample = random.Random(1).sample(plan.points, min(ESTIMATE_SAMPLE, len(plan.points)))
    took: list[float] = []

    def time_them():
        for point in sample:
            t0 = time.perf_counter()
            points.model_point(point, {})
            took.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    worker = threading.Thread(target=time_them, daemon=True)   # not waited for: it ends with the process
    worker.start()
    worker.join(ESTIMATE_BUDGET_S)
    if len(took) == len(sample):
        return sum(took) / len(took) * len(plan.points), False
    return (time.perf_counter() - t0) / (len(took) + 1) * len(plan.points), True


# --- confirming the model ------------------------------------------------------------

def _confirm(client, plan: Sweep, folder: str, stamp: dict, table, n: int) -> None:
    """Emulate the n best and n worst points by the model's time at the largest size."""
    rows = sweeps.read_rows(folder)
    chosen = confirm_points(plan, rows, n)
    done = sweeps.done_keys(rows)["emulated"]
    todo = [(p, _emulated_spec(plan, p)) for p in chosen if p.key not in done]
    print(f"# confirming the model: emulating {len(todo)} of the {len(chosen)} best and worst points", flush=True)
    _run(client, [], todo, folder, stamp, table)


def confirm_points(plan: Sweep, rows: list[dict], n: int) -> list:
    """The n best and n worst points (fewer if the sweep is small), by the
    model's time at the largest size each point has."""
    largest = {}
    for row in rows:
        if row["emulated"] != "yes" and row["model_time_s"]:
            size = int(row["size_bytes"] or 0)
            if row["key"] not in largest or size > largest[row["key"]][0]:
                largest[row["key"]] = (size, float(row["model_time_s"]))
    ranked = sorted((p for p in plan.points if p.key in largest), key=lambda p: (largest[p.key][1], p.index))
    if len(ranked) <= 2 * n:
        return ranked
    return ranked[:n] + ranked[-n:]


# --- what it found ---------------------------------------------------------------------

def report(plan: Sweep, folder: str, confirm: int) -> None:
    rows = sweeps.read_rows(folder)
    failed = [r for r in rows if r["error"]]
    model = [r for r in rows if r["emulated"] != "yes" and not r["error"]]
    print(f"# {len({r['key'] for r in rows})} points in {folder}/{sweeps.FILE}, {len(failed)} failed, "
          f"{len(plan.skipped)} left out")
    for why, n in plan.skip_reasons()[:4]:
        print(f"#   left out {n}x: {why}")
    for r in failed[:3]:
        print(f"#   failed: point {r['point']}: {r['error']}")
    for size, (best, worst) in sorted(sweeps.best_and_worst(model, 1).items(), key=lambda kv: int(kv[0] or 0)):
        where = f" at {int(size)} bytes" if size else ""
        print(f"# best{where}: {float(best[0]['model_time_s']):.4g} s  {_label(plan, best[0])}")
        print(f"# worst{where}: {float(worst[0]['model_time_s']):.4g} s  {_label(plan, worst[0])}")
    effects = sweeps.factor_effects(model, plan.factors)
    if effects:
        print("# what moves the time most (median slowest/fastest among points that differ in it alone):")
        for factor, effect, n in effects:
            print(f"#   {factor:<20} {effect:8.2f}x  ({n} comparisons)")
    if confirm:
        print(confirm_text(rows))
    for path in write_plots(plan, folder, rows):
        print(f"# plot: {path}")
    if len(heatmap_factors(plan)) < 2:
        print("# no sweep.png: it draws the time over two factors besides the topology, and this sweep varies "
              f"{len(heatmap_factors(plan))}")


def _label(plan: Sweep, row: dict) -> str:
    return " ".join(f"{f}={row.get(f)}" for f in plan.factors) or row["key"]


def confirm_text(rows: list[dict]) -> str:
    """Does the emulation order the confirmed points as the model did? Said
    with the fabric and size of each side: [confirm] may emulate a smaller
    fabric, or other sizes, than the sweep modelled; then also whether the
    model of the emulated runs orders them as measured."""
    pairs = confirmed_pairs(rows)
    if len(pairs) < 2:
        return "# confirmed: fewer than two points emulated; no order to compare"
    same, total = sweeps.order_agreement([(p["sweep_model"], p["emulated"]) for p in pairs])
    verdicts = sum(p["verdict"] == "ok" for p in pairs)
    swept, emulated = _sides(pairs, "sweep_"), _sides(pairs, "")
    text = (f"# confirmed: {len(pairs)} points emulated ({verdicts} passed the fidelity verdict); the measured order "
            f"{'matches' if same == total else 'differs from'} the model's ({same} of {total} pairs in the same "
            f"order); model: the points as swept ({swept}); measured: ")
    if swept == emulated:
        return text + "the same fabric and size"
    alike, _ = sweeps.order_agreement([(p["model"], p["emulated"]) for p in pairs])
    return (text + f"[confirm]'s fabric and size ({emulated}), whose own model orders them "
            f"{'as measured' if alike == total else 'otherwise'} ({alike} of {total} pairs)")


def _sides(pairs: list[dict], side: str) -> str:
    """The topologies and sizes of one side of the confirmed pairs, in words."""
    topologies = sorted({p[side + "topology"] for p in pairs})
    sizes = sorted({int(p[side + "size"] or 0) for p in pairs})
    said = ", ".join(topologies)
    return said + (f" at {', '.join(size_name(n) for n in sizes)}" if any(sizes) else "")


def confirmed_pairs(rows: list[dict]) -> list[dict]:
    """Per emulated point, at the largest size of each: the sweep model's
    time, the model's on the emulated run, the emulated time and the
    verdict, and the topology and size of each side."""
    model = {(r["key"], r["size_bytes"]): r for r in rows if r["emulated"] != "yes" and r["model_time_s"]}
    emulated = {}
    for r in rows:
        if r["emulated"] == "yes" and r["emulated_time_s"]:
            emulated.setdefault(r["key"], []).append(r)
    pairs = []
    for key, group in emulated.items():
        row = max(group, key=lambda r: int(r["size_bytes"] or 0))
        sized = [(k, s) for k, s in model if k == key]
        if sized:
            swept = model[max(sized, key=lambda ks: int(ks[1] or 0))]
            pairs.append({"sweep_model": float(swept["model_time_s"]), "model": float(row["model_time_s"]),
                          "emulated": float(row["emulated_time_s"]), "verdict": row["verdict"],
                          "sweep_topology": swept["topology"], "sweep_size": swept["size_bytes"],
                          "topology": row["topology"], "size": row["size_bytes"]})
    return pairs


def heatmap_factors(plan: Sweep) -> list[str]:
    """The factors sweep.png can draw the time over (the topology is its panels)."""
    return [f for f in plan.factors if f != "topology"]


def write_plots(plan: Sweep, folder: str, rows: list[dict]) -> list[str]:
    from emulator.results import plots
    paths = []
    model = [r for r in rows if r["emulated"] != "yes" and not r["error"]]
    pair = heatmap_factors(plan)[:2]
    if len(pair) == 2 and model:
        paths.append(plots.sweep_heatmaps(model, pair, os.path.join(folder, "sweep.png")))
    pairs = confirmed_pairs(rows)
    if len(pairs) >= 2:
        paths.append(plots.confirm_scatter(pairs, os.path.join(folder, "confirm.png")))
    return paths


# --- progress --------------------------------------------------------------------------

class Progress:
    """A line on stderr: points done, their rate, and the time left."""

    def __init__(self, total: int):
        self.total, self.done, self.t0, self.shown = total, 0, time.monotonic(), 0.0

    def tick(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.shown < 1 and self.done < self.total:
            return
        self.shown = now
        rate = self.done / max(now - self.t0, 1e-9)
        left = (self.total - self.done) / rate if rate else 0
        end = "\r" if sys.stderr.isatty() else "\n"
        speed = f"{rate:.1f} points/s" if rate >= 1 else f"{1 / rate:.0f} s per point"
        print(f"[{self.done}/{self.total}] {speed}, ~{duration(left)} left  ", end=end, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.done and sys.stderr.isatty():
            print(file=sys.stderr)

