"""Unit tests of experiment specs (emulator/spec.py): flags and TOML ->
validated RunSpec, and experiment files."""
from __future__ import annotations

import dataclasses
import os

import pytest

from emulator.spec import FIELDS, RunSpec, SpecError, load_experiment, make_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
M = 1 << 20
K = 1 << 10


def write(tmp_path, text, name="exp.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# --- make_run: defaults and conversion ----------------------------------------

def test_make_run_empty_equals_defaults():
    assert make_run({}) == RunSpec()


def test_defaults_are_valid_and_sane():
    s = RunSpec()
    assert s.topology == "bigraph:m=2,n=4"
    assert s.sizes == (M, 2 * M, 4 * M)
    assert s.repetitions >= 1 and s.warmup >= 0


# Every key as the CLI passes it: a string.
FROM_STRINGS = {
    "topology": ("fattree:k=4", "fattree:k=4"),
    "collective": ("all-to-all", "all-to-all"),
    "algorithm": ("halving-doubling", "halving-doubling"),
    "mapping": ("random", "random"),
    "policy": ("spread", "spread"),
    "ranks": ("8", 8),
    "seed": ("7", 7),
    "sizes": ("64K", (64 * K,)),
    "repetitions": ("3", 3),
    "warmup": ("0", 0),
    "host_rate_mbps": ("12.5", 12.5),
    "switch_rate_mbps": ("25", 25.0),
    "host_queue_packets": ("30", 30),
    "switch_queue_packets": ("40", 40),
    "mtu": ("9000", 9000),
    "datapath": ("user", "user"),
    "model_alpha_us": ("0", 0.0),
    "label": ("hello world", "hello world"),
}


def test_string_table_covers_every_field():
    assert set(FROM_STRINGS) == set(FIELDS)


@pytest.mark.parametrize("key", sorted(FROM_STRINGS))
def test_each_key_converted_from_string(key):
    text, want = FROM_STRINGS[key]
    spec = make_run({key: text})
    got = getattr(spec, key)
    assert got == want
    assert type(got) is type(want)
    # all other keys stay at their defaults
    for other in FIELDS:
        if other != key:
            assert getattr(spec, other) == getattr(RunSpec(), other)


def test_all_keys_from_strings_at_once():
    spec = make_run({k: v[0] for k, v in FROM_STRINGS.items()})
    for k, (_, want) in FROM_STRINGS.items():
        assert getattr(spec, k) == want


def test_toml_native_types():
    spec = make_run({"ranks": 4, "seed": 3, "repetitions": 5, "warmup": 2, "host_rate_mbps": 12,
                     "switch_rate_mbps": 7.5, "host_queue_packets": 30, "mtu": 9000,
                     "model_alpha_us": 100, "sizes": [K, "2K"]})
    assert spec.ranks == 4 and spec.seed == 3 and spec.repetitions == 5 and spec.warmup == 2
    assert spec.host_rate_mbps == 12.0 and isinstance(spec.host_rate_mbps, float)
    assert spec.switch_rate_mbps == 7.5
    assert spec.model_alpha_us == 100.0 and isinstance(spec.model_alpha_us, float)
    assert spec.host_queue_packets == 30 and spec.mtu == 9000
    assert spec.sizes == (K, 2 * K)


@pytest.mark.parametrize("value, want", [
    ("1M:8M:2", (M, 2 * M, 4 * M, 8 * M)),
    ("1M:8M", (M, 2 * M, 4 * M, 8 * M)),           # factor defaults to 2
    ("1M:16M:4", (M, 4 * M, 16 * M)),
    ("1M:1M:2", (M,)),
    (["64K", 1048576], (64 * K, M)),
    (("1K", "3K"), (K, 3 * K)),
    ("4M", (4 * M,)),
    (65536, (64 * K,)),
    ("100", (100,)),
])
def test_sizes_forms(value, want):
    spec = make_run({"sizes": value})
    assert spec.sizes == want
    assert isinstance(spec.sizes, tuple)
    assert all(type(s) is int for s in spec.sizes)


# --- make_run: errors name the key ---------------------------------------------

def spec_error(values) -> str:
    with pytest.raises(SpecError) as e:
        make_run(values)
    return str(e.value)


def test_unknown_key_named_and_known_keys_listed():
    msg = spec_error({"topolgy": "bigraph:m=2,n=4"})
    assert "topolgy" in msg
    assert "topology" in msg          # the list of known keys helps spot the typo


def test_several_unknown_keys_all_named():
    msg = spec_error({"foo": 1, "bar": 2, "topology": "bigraph:m=2,n=4"})
    assert "foo" in msg and "bar" in msg


@pytest.mark.parametrize("key", ["collective", "algorithm", "mapping", "policy", "datapath"])
def test_bad_choice_named(key):
    msg = spec_error({key: "bogus"})
    assert msg.startswith(f"{key}:")
    assert "bogus" in msg


def test_choice_is_case_sensitive():
    assert "collective" in spec_error({"collective": "AllReduce"})


@pytest.mark.parametrize("topology", ["torus:k=4", "bigraph:m=2,x=4", "bigraph:m=two", "fattree:k", ""])
def test_bad_topology_named(topology):
    msg = spec_error({"topology": topology})
    assert "topology" in msg


@pytest.mark.parametrize("values, key", [
    ({"repetitions": 0}, "repetitions"),
    ({"repetitions": "-2"}, "repetitions"),
    ({"warmup": -1}, "warmup"),
    ({"warmup": "-1"}, "warmup"),
    ({"ranks": -1}, "ranks"),
    ({"mtu": 575}, "mtu"),
    ({"mtu": 9001}, "mtu"),
    ({"mtu": "100"}, "mtu"),
    ({"model_alpha_us": -1}, "model_alpha_us"),
    ({"sizes": []}, "sizes"),
])
def test_out_of_range_named(values, key):
    msg = spec_error(values)
    assert msg.startswith(f"{key}:")


@pytest.mark.parametrize("mtu", [576, 9000])
def test_mtu_bounds_inclusive(mtu):
    assert make_run({"mtu": mtu}).mtu == mtu


@pytest.mark.parametrize("key", ["ranks", "seed", "repetitions", "warmup", "mtu",
                                 "host_queue_packets", "switch_queue_packets"])
@pytest.mark.parametrize("value", [1.5, "1.5", "abc", True, None, [1]])
def test_non_integer_ints_rejected(key, value):
    msg = spec_error({key: value})
    assert msg.startswith(f"{key}:")


def test_integer_valued_float_rejected_for_int_keys():
    # TOML `repetitions = 2.0` is a float: refused rather than truncated
    assert "repetitions" in spec_error({"repetitions": 2.0})


@pytest.mark.parametrize("key", ["host_rate_mbps", "switch_rate_mbps", "model_alpha_us"])
@pytest.mark.parametrize("value", ["fast", None, [1]])
def test_non_numeric_floats_rejected(key, value):
    assert spec_error({key: value}).startswith(f"{key}:")


@pytest.mark.parametrize("key", ["host_rate_mbps", "switch_rate_mbps", "host_queue_packets",
                                 "switch_queue_packets"])
def test_zero_link_parameter_named(key):
    msg = spec_error({key: 0})
    assert key in msg


@pytest.mark.parametrize("value", ["1X", "abc", "0", "-1K", "", "K", "1M:8X:2", "8M:1M:2", "1M:8M:1",
                                   "1M:8M:x", ["1M", "bad"], [0]])
def test_bad_sizes_named(value):
    assert spec_error({"sizes": value}).startswith("sizes:")


@pytest.mark.parametrize("value", ["inf", "1M:inf:2"])
def test_infinite_size_is_spec_error(value):
    assert spec_error({"sizes": value}).startswith("sizes:")


def test_sweep_with_too_many_fields_rejected():
    assert spec_error({"sizes": "1M:8M:2:9"}).startswith("sizes:")


def test_topology_with_impossible_parameters_rejected_by_make_run():
    assert "topology" in spec_error({"topology": "bigraph:m=2,n=3"})


def test_infinite_rate_rejected():
    assert "host_rate_mbps" in spec_error({"host_rate_mbps": "inf"})


def test_spec_error_is_value_error():
    assert issubclass(SpecError, ValueError)


# --- fabric_key ------------------------------------------------------------------

def test_fabric_key_ignores_algorithm_mapping_and_traffic():
    a = make_run({"topology": "bigraph:m=4,n=8", "algorithm": "ring", "mapping": "naive"})
    b = make_run({"topology": "bigraph:m=4,n=8", "algorithm": "halving-doubling", "mapping": "hdrm",
                  "collective": "allgather", "sizes": "64K", "repetitions": 5, "warmup": 0,
                  "seed": 9, "label": "x", "model_alpha_us": 0})
    assert a != b
    assert a.fabric_key() == b.fabric_key()


@pytest.mark.parametrize("key, value", [
    ("topology", "bigraph:m=4,n=8"), ("policy", "spread"), ("host_rate_mbps", 10),
    ("switch_rate_mbps", 10), ("host_queue_packets", 10), ("switch_queue_packets", 10),
    ("mtu", 1500), ("datapath", "user"),
])
def test_fabric_key_differs_for_fabric_keys(key, value):
    assert make_run({key: value}).fabric_key() != RunSpec().fabric_key()


def test_link_profile_follows_spec():
    p = make_run({"host_rate_mbps": 10, "switch_rate_mbps": 20, "host_queue_packets": 30,
                  "switch_queue_packets": 40}).link_profile()
    assert (p.host_rate_mbps, p.switch_rate_mbps, p.host_queue_packets, p.switch_queue_packets) == (10, 20, 30, 40)


# --- load_experiment ---------------------------------------------------------------

def test_experiment_defaults_runs_and_override_precedence(tmp_path):
    path = write(tmp_path, """
name = "prec"
[defaults]
topology = "bigraph:m=4,n=8"
algorithm = "ring"
repetitions = 3
host_rate_mbps = 12
sizes = "1M:4M:2"

[[runs]]
mapping = "naive"

[[runs]]
algorithm = "halving-doubling"
mapping = "hdrm"
repetitions = 1
""")
    exp = load_experiment(path)
    assert exp.name == "prec"
    assert len(exp.runs) == 2
    r1, r2 = exp.runs
    assert r1.topology == r2.topology == "bigraph:m=4,n=8"
    assert (r1.algorithm, r1.mapping, r1.repetitions) == ("ring", "naive", 3)        # defaults
    assert (r2.algorithm, r2.mapping, r2.repetitions) == ("halving-doubling", "hdrm", 1)  # run wins
    assert r1.host_rate_mbps == 12.0 and r1.sizes == (M, 2 * M, 4 * M)
    assert r1.warmup == RunSpec().warmup                                                 # built-in default

    # command-line overrides win over both the defaults and the run's own keys
    exp = load_experiment(path, {"repetitions": "7", "sizes": "64K", "mapping": "random"})
    assert [r.repetitions for r in exp.runs] == [7, 7]
    assert [r.mapping for r in exp.runs] == ["random", "random"]
    assert [r.algorithm for r in exp.runs] == ["ring", "halving-doubling"]
    assert all(r.sizes == (64 * K,) for r in exp.runs)


def test_experiment_without_runs_is_one_run_of_defaults(tmp_path):
    exp = load_experiment(write(tmp_path, '[defaults]\ncollective = "broadcast"\n'))
    assert len(exp.runs) == 1
    assert exp.runs[0] == dataclasses.replace(RunSpec(), collective="broadcast")


def test_empty_file_is_one_default_run(tmp_path):
    exp = load_experiment(write(tmp_path, ""))
    assert exp.runs == [RunSpec()]


def test_experiment_name_defaults_to_file_name(tmp_path):
    exp = load_experiment(write(tmp_path, '[[runs]]\nmapping = "naive"\n', name="my-sweep.toml"))
    assert exp.name == "my-sweep"


def test_unknown_top_level_key_rejected(tmp_path):
    path = write(tmp_path, 'name = "x"\ntopology = "bigraph:m=2,n=4"\n')
    with pytest.raises(SpecError) as e:
        load_experiment(path)
    assert "topology" in str(e.value) and path in str(e.value)


def test_unknown_key_in_defaults_rejected(tmp_path):
    path = write(tmp_path, '[defaults]\nbogus_key = 1\n')
    with pytest.raises(SpecError) as e:
        load_experiment(path)
    assert "bogus_key" in str(e.value) and "run 1" in str(e.value)


def test_invalid_toml_names_file(tmp_path):
    path = write(tmp_path, 'name = "unterminated\n[[runs]\n')
    with pytest.raises(SpecError) as e:
        load_experiment(path)
    assert path in str(e.value) and "TOML" in str(e.value)


def test_missing_file_names_file(tmp_path):
    path = str(tmp_path / "nope.toml")
    with pytest.raises(SpecError) as e:
        load_experiment(path)
    assert path in str(e.value)


def test_error_in_second_run_says_run_2(tmp_path):
    path = write(tmp_path, """
[[runs]]
mapping = "naive"
[[runs]]
mapping = "bogus"
[[runs]]
mapping = "naive"
""")
    with pytest.raises(SpecError) as e:
        load_experiment(path)
    msg = str(e.value)
    assert "run 2" in msg and "mapping" in msg and path in msg


def test_bad_override_is_reported(tmp_path):
    path = write(tmp_path, '[[runs]]\nmapping = "naive"\n')
    with pytest.raises(SpecError) as e:
        load_experiment(path, {"mtu": "1"})
    assert "mtu" in str(e.value)


@pytest.mark.parametrize("text", ['defaults = 5\n', 'runs = ["ring"]\n'])
def test_malformed_structure_is_spec_error(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as e:
        load_experiment(path)
    assert path in str(e.value)


# --- the shipped experiment files -------------------------------------------------

def test_demo_toml_loads():
    exp = load_experiment(os.path.join(REPO, "experiments", "demo.toml"))
    assert exp.name == "demo"
    assert len(exp.runs) == 1
    r = exp.runs[0]
    assert (r.topology, r.collective, r.algorithm, r.mapping) == ("bigraph:m=2,n=4", "allreduce", "ring", "naive")
    assert r.sizes == (M, 2 * M, 4 * M)


def test_eflops_toml_loads():
    exp = load_experiment(os.path.join(REPO, "experiments", "eflops.toml"))
    assert exp.name == "eflops"
    assert len(exp.runs) == 6
    assert {r.topology for r in exp.runs} == {"bigraph:m=4,n=8", "leafspine:leaves=8,spines=4,hosts=4"}
    assert all(r.mtu == 9000 and r.host_rate_mbps == r.switch_rate_mbps for r in exp.runs)
    assert all(r.sizes == (512 * K, M, 2 * M, 4 * M, 8 * M) for r in exp.runs)
    assert [(r.algorithm, r.mapping) for r in exp.runs[:3]] == [
        ("ring", "naive"), ("halving-doubling", "naive"), ("halving-doubling", "hdrm")]
    # the three runs per topology can share one emulated network
    assert len({r.fabric_key() for r in exp.runs}) == 2
