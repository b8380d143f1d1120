"""Experiments that vary keys (pure): one run per combination of values
(`compare --vary`), each over every run of a base experiment, labelled
with what it varied."""
from __future__ import annotations

import dataclasses
import itertools

from emulator.spec.experiment import FIELDS, RunSpec, SpecError, load_experiment, make_run

MAX_COMPARE_RUNS = 64


def vary_values(text: str, aliases: dict | None = None) -> tuple[str, list[str]]:
    """'policy=shortest,ecmp' -> ('policy', ['shortest', 'ecmp']); ';' separates
    when values hold commas. `aliases`: other names of keys (a flag's long name)."""
    name, eq, rest = text.partition("=")
    key = (aliases or {}).get(name.strip(), name.strip())
    if not eq or key not in FIELDS:
        raise SpecError(f"--vary: {text!r} is not KEY=V1,V2,... with a known key; keys: {', '.join(FIELDS)}")
    values = [v.strip() for v in rest.split(";" if ";" in rest else ",") if v.strip()]
    if not values:
        raise SpecError(f"--vary {key}: give at least one value")
    return key, values


def varied_runs(texts: list[str], values: dict, experiment_file: str | None = None, has_netem=None,
                aliases: dict | None = None) -> tuple[list[str], list[RunSpec]]:
    """(the varied keys, one run per combination of the `--vary` texts over
    `values`, or over every run of `experiment_file`), each labelled 'key=value'."""
    varied = [vary_values(text, aliases) for text in texts]
    keys = [key for key, _ in varied]
    for key in keys:
        if keys.count(key) > 1 or key in values:
            raise SpecError(f"--vary {key}: {key} is given twice (in --vary or also as a flag); give it once")
    runs = []
    for combo in itertools.product(*[[(key, v) for v in vs] for key, vs in varied]):
        tag = " ".join(f"{k}={v}" for k, v in combo)
        combined = {**values, **dict(combo)}
        try:
            specs = (load_experiment(experiment_file, combined, has_netem).runs if experiment_file
                     else [make_run(combined, has_netem)])
        except SpecError as e:
            raise SpecError(f"--vary {tag}: {e}") from None
        runs += [dataclasses.replace(s, label=f"{s.label} {tag}".strip()) for s in specs]
    if len(runs) > MAX_COMPARE_RUNS:
        raise SpecError(f"--vary: {len(runs)} runs; compare at most {MAX_COMPARE_RUNS} at once")
    return keys, runs
