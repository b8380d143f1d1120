"""Experiment specs (pure): parsed and validated before anything touches
the network. A run is one flat set of keys, the same in TOML experiment
files and on the command line; bad input raises SpecError naming the key.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field

from controller.routing import POLICIES
from emulator.mapping import MAPPINGS
from emulator.metrics import parse_size, size_sweep
from emulator.schedule import ALGORITHMS, COLLECTIVES
from emulator.topology import LinkProfile, build

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class RunSpec:
    topology: str = "bigraph:m=2,n=4"
    collective: str = "allreduce"
    algorithm: str = "ring"
    mapping: str = "naive"
    policy: str = "shortest"
    ranks: int = 0                     # 0: one rank on every host
    seed: int = 1                      # for mapping "random"
    sizes: tuple[int, ...] = (1 << 20, 2 << 20, 4 << 20)
    repetitions: int = 2
    warmup: int = 1                    # repetitions run first and not counted
    host_rate_mbps: float = LinkProfile.host_rate_mbps
    switch_rate_mbps: float = LinkProfile.switch_rate_mbps
    host_queue_packets: int = LinkProfile.host_queue_packets
    switch_queue_packets: int = LinkProfile.switch_queue_packets
    mtu: int = 9000                    # jumbo frames: 6x less per-packet work for OVS
    datapath: str = "auto"             # auto, kernel or user
    model_alpha_us: float = 500.0      # per-message latency the model adds
    label: str = ""                    # free text carried into the results

    def link_profile(self) -> LinkProfile:
        return LinkProfile(self.host_rate_mbps, self.host_queue_packets,
                           self.switch_rate_mbps, self.switch_queue_packets)

    def fabric_key(self) -> tuple:
        """Runs with equal keys can share one emulated network."""
        return (self.topology, self.policy, self.host_rate_mbps, self.switch_rate_mbps,
                self.host_queue_packets, self.switch_queue_packets, self.mtu, self.datapath)


FIELDS = {f.name: f for f in dataclasses.fields(RunSpec)}
_CHOICES = {"collective": COLLECTIVES, "algorithm": ALGORITHMS, "mapping": MAPPINGS,
            "policy": tuple(POLICIES), "datapath": ("auto", "kernel", "user")}


def _convert(key: str, value):
    """Coerce one user value to the field's type, or raise naming the key."""
    if key == "sizes":
        return _sizes(value)
    kind = FIELDS[key].type
    try:
        if kind == "int":
            if isinstance(value, float) or isinstance(value, bool):
                raise ValueError
            return int(value)
        if kind == "float":
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise SpecError(f"{key}: expected {kind}, got {value!r}") from None


def _sizes(value) -> tuple[int, ...]:
    """A list of sizes, or a sweep 'begin:end:factor' like nccl-tests -b/-e/-f."""
    try:
        if isinstance(value, str) and ":" in value:
            fields = value.split(":")
            if len(fields) > 3:
                raise ValueError(f"sweep {value!r} has more than begin:end:factor")
            begin, end, factor = (fields + ["2"])[:3]
            return tuple(size_sweep(parse_size(begin), parse_size(end), float(factor)))
        items = value if isinstance(value, (list, tuple)) else [value]
        return tuple(parse_size(v) for v in items)
    except ValueError as e:
        raise SpecError(f"sizes: {e}") from None


def make_run(values: dict) -> RunSpec:
    """A validated RunSpec from user keys (unknown keys are errors)."""
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise SpecError(f"unknown key(s) {', '.join(unknown)}; known keys: {', '.join(FIELDS)}")
    spec = RunSpec(**{k: _convert(k, v) for k, v in values.items()})
    validate(spec)
    return spec


def validate(spec: RunSpec) -> None:
    for key, choices in _CHOICES.items():
        if getattr(spec, key) not in choices:
            raise SpecError(f"{key}: {getattr(spec, key)!r} is not one of: {', '.join(choices)}")
    try:
        build(spec.topology, spec.link_profile())   # pure and quick: checks every parameter
    except ValueError as e:
        raise SpecError(f"topology/link: {e}") from None
    checks = [("repetitions", spec.repetitions >= 1, "at least 1"),
              ("warmup", spec.warmup >= 0, "0 or more"),
              ("ranks", spec.ranks >= 0, "0 (all hosts) or a rank count"),
              ("mtu", 576 <= spec.mtu <= 9000, "between 576 and 9000"),
              ("model_alpha_us", spec.model_alpha_us >= 0, ">= 0"),
              ("sizes", len(spec.sizes) >= 1, "at least one size")]
    for key, ok, need in checks:
        if not ok:
            raise SpecError(f"{key}: must be {need}, got {getattr(spec, key)!r}")


@dataclass
class Experiment:
    name: str
    runs: list[RunSpec] = field(default_factory=list)


def load_experiment(path: str, overrides: dict | None = None) -> Experiment:
    """An experiment file: `name`, a `[defaults]` table, and `[[runs]]`
    tables; each run is defaults + its own keys (+ command-line overrides)."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise SpecError(f"cannot read experiment file {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from None
    extra = sorted(set(doc) - {"name", "defaults", "runs"})
    if extra:
        raise SpecError(f"{path}: unknown top-level key(s) {', '.join(extra)}; use name, [defaults], [[runs]]")
    defaults, runs = doc.get("defaults", {}), doc.get("runs") or [{}]
    if not isinstance(defaults, dict):
        raise SpecError(f"{path}: [defaults] must be a table of keys")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise SpecError(f"{path}: runs must be [[runs]] tables")
    experiment = Experiment(str(doc.get("name", path.rsplit("/", 1)[-1].removesuffix(".toml"))))
    for i, run in enumerate(runs):
        try:
            experiment.runs.append(make_run({**defaults, **run, **(overrides or {})}))
        except SpecError as e:
            raise SpecError(f"{path}: run {i + 1}: {e}") from None
    return experiment
