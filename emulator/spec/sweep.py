"""Sweep files (pure): many runs from one TOML file, expanded and checked
whole before anything runs.

  name = "placement"
  [defaults]   keys every point takes (any key of a run)
  [grid]       a list of values per key: every combination is a point
  [[points]]   further points, each [defaults] + its own keys
  [confirm]    keys that replace a point's when it is emulated to confirm
               the model (`topology` may be a table: sweep topology ->
               the one emulated in its place)

A point wrong in itself (an unknown key, a bad value) is refused, naming
the point and the key; a combination a fabric cannot take (HDRM placement
off BiGraph, a rank count a fabric lacks) is left out, with the reason.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import json
import math
import os
from dataclasses import dataclass, field

from emulator.fabric import files
from emulator.fabric.topology import build
from emulator.inputs import as_name, shorten
from emulator.spec.experiment import (RunSpec, SpecError, check_key, load_workload, make_run, policy_beside,
                                      read_toml, workload_file)

MAX_UNASKED_POINTS = 10_000      # a larger sweep needs --yes (or yes = true)
MAX_POINTS = 1_000_000           # expanded and checked in memory: beyond this, split the sweep
TOP_KEYS = ("name", "yes", "defaults", "grid", "points", "confirm")


@dataclass(frozen=True)
class Point:
    """One run of a sweep: its place, the factors that set it apart (key ->
    the value as the file gave it), and the resolved spec."""
    index: int
    factors: dict
    spec: RunSpec

    @property
    def key(self) -> str:
        return point_key(self.spec)

    @property
    def label(self) -> str:
        return " ".join(f"{k}={factor_text(v)}" for k, v in self.factors.items())


@dataclass
class Sweep:
    name: str
    factors: list[str]                    # the keys that vary, in the file's order
    points: list[Point]
    skipped: list[tuple[dict, str]] = field(default_factory=list)   # (factors, why a fabric cannot take them)
    confirm: dict = field(default_factory=dict)
    yes: bool = False

    def skip_reasons(self) -> list[tuple[str, int]]:
        """Why points were left out, most frequent first, with their counts."""
        return collections.Counter(why for _, why in self.skipped).most_common()


def point_key(spec: RunSpec) -> str:
    """A point's identity: a hash of every resolved key but its label, and
    of keys left unset (None: keys newer than a sweep's folder keep its
    points' identities, so `--resume` finds them)."""
    values = {k: v for k, v in dataclasses.asdict(spec).items() if k != "label" and v is not None}
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def factor_text(value) -> str:
    """A factor's value as one cell of a table."""
    if isinstance(value, (list, tuple)):
        return ";".join(factor_text(v) for v in value)
    return str(value)


def load_sweep(path: str, yes: bool = False) -> Sweep:
    doc = read_toml(path, "sweep file")
    extra = sorted(set(doc) - set(TOP_KEYS))
    if extra:
        raise SpecError(f"{path}: unknown top-level key(s) {', '.join(extra)}; use {', '.join(TOP_KEYS)}")
    defaults = _table(doc, "defaults", path)
    grid = _table(doc, "grid", path)
    confirm = _table(doc, "confirm", path)
    extras = doc.get("points", [])
    if not isinstance(extras, list) or not all(isinstance(p, dict) for p in extras):
        raise SpecError(f"{path}: points must be [[points]] tables")
    if not grid and not extras:
        raise SpecError(f"{path}: nothing to sweep; give a [grid] of lists of values and/or [[points]] tables")
    yes = yes or bool(doc.get("yes", False))
    name = doc.get("name", as_name(os.path.basename(path).removesuffix(".toml")))
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SpecError(f"{path}: grid: {key}: give a non-empty list of values, got {shorten(repr(values))}")
    _check_count(path, math.prod(len(v) for v in grid.values()) if grid else 0, len(extras), yes)
    base = _resolve_paths({**defaults}, path)
    _check_alone(path, "defaults", base)
    for key, values in grid.items():
        for value in values:
            _check_alone(path, f"grid: {key} = {shorten(repr(value))}", _resolve_paths({key: value}, path))
    for i, extra in enumerate(extras):
        _check_alone(path, f"point {i + 1}", _resolve_paths(dict(extra), path))
    _check_confirm(path, confirm)
    factors = list(grid) + [k for p in extras for k in p if k not in grid]
    factors = list(dict.fromkeys(factors))
    combos = [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())] if grid else []
    sweep = Sweep(name, factors, [], confirm=confirm, yes=yes)
    keys = set()
    for chosen in combos + [dict(p) for p in extras]:
        values = {**base, **_resolve_paths(dict(chosen), path)}
        try:
            spec = make_run(values)
        except SpecError as e:   # each key was fine alone: the combination is what a fabric cannot take
            sweep.skipped.append((chosen, str(e)))
            continue
        if point_key(spec) in keys:
            sweep.skipped.append((chosen, "the same run as an earlier point"))
            continue
        keys.add(point_key(spec))
        spec = dataclasses.replace(spec, label=" ".join(f"{k}={factor_text(v)}" for k, v in chosen.items()))
        sweep.points.append(Point(len(sweep.points), chosen, spec))
    if not sweep.points:
        reasons = "; ".join(f"{why} ({n}x)" for why, n in sweep.skip_reasons()[:3])
        raise SpecError(f"{path}: every point was left out: {reasons}")
    return sweep


def _table(doc: dict, key: str, path: str) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"{path}: [{key}] must be a table of keys")
    return value


def _check_count(path: str, grid_points: int, extras: int, yes: bool) -> None:
    total = grid_points + extras
    if total > MAX_POINTS:
        raise SpecError(f"{path}: the sweep has {total:,} points; at most {MAX_POINTS:,} are expanded at once: "
                        "split it into several sweep files")
    if total > MAX_UNASKED_POINTS and not yes:
        raise SpecError(f"{path}: the sweep has {total:,} points, more than {MAX_UNASKED_POINTS:,}: give --yes "
                        "(or yes = true in the file) to run them all, or take values out of [grid]")


def _check_alone(path: str, where: str, values: dict) -> None:
    """Every key known and every value well formed by itself (what no other
    key of the point can make right)."""
    try:
        for key, value in values.items():
            check_key(key, value)
            if key == "topology":
                build(value)
            if key == "workload" and value:
                load_workload(value)
    except SpecError as e:
        raise SpecError(f"{path}: {where}: {e}") from None
    except ValueError as e:
        raise SpecError(f"{path}: {where}: topology: {str(e).removeprefix('topology ')}") from None


def _check_confirm(path: str, confirm: dict) -> None:
    topologies = confirm.get("topology")
    if isinstance(topologies, dict):
        for emulated in topologies.values():
            _check_alone(path, "confirm: topology", {"topology": emulated})
    _check_alone(path, "confirm", {k: v for k, v in confirm.items() if not isinstance(v, dict)})


def _resolve_paths(values: dict, path: str) -> dict:
    """A workload file, a topology file and a policy file are named beside the sweep file."""
    if isinstance(values.get("workload"), str) and values["workload"]:
        fmt, file = workload_file(values["workload"])
        values["workload"] = fmt + os.path.abspath(os.path.join(os.path.dirname(path), file))
    if "topology" in values:
        values["topology"] = files.beside(values["topology"], path)
    return policy_beside(values, os.path.abspath(path))


def confirm_spec(point: Point, confirm: dict) -> RunSpec:
    """The run that emulates a point to confirm the model: the point with
    [confirm]'s keys in place of its own."""
    values = {k: v for k, v in confirm.items() if k != "topology"}
    topology = confirm.get("topology", point.spec.topology)
    if isinstance(topology, dict):
        topology = topology.get(point.spec.topology, point.spec.topology)
    spec = dataclasses.asdict(point.spec)
    spec.update(values, topology=topology)
    spec["link_events"] = [str(e) for e in point.spec.link_events]
    spec["link_overrides"] = [str(o) for o in point.spec.link_overrides]
    return make_run(spec)
