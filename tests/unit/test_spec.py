"""Unit tests of experiment specs (emulator/spec/experiment.py): flags and TOML ->
validated RunSpec, and experiment files."""
from __future__ import annotations

import dataclasses
import os

import pytest

from emulator import preflight
from emulator.net import capabilities
from emulator.spec.experiment import (FIELDS, LinkOverride, MAX_SIZE_BYTES, LinkEvent, RunSpec, SpecError, load_experiment, make_run,
                           parse_link_event, validate)

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
TWO_TENANTS = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "workloads", "two-tenants.toml")
FROM_STRINGS = {
    "topology": ("fattree:k=4", "fattree:k=4"),
    "accelerators": ("4", 4),
    "nics": ("2", 2),
    "interconnect": ("nvlink", "nvlink"),
    "interconnect_mbps": ("75", 75.0),
    "hosts_per_switch": ("2", 2),
    "collective": ("all-to-all", "all-to-all"),
    "algorithm": ("halving-doubling", "halving-doubling"),
    "mapping": ("random", "random"),
    "policy": ("spread", "spread"),
    "ranks": ("8", 8),
    "seed": ("7", 7),
    "sizes": ("64K", (64 * K,)),
    "repetitions": ("3", 3),
    "warmup": ("0", 0),
    "servers": ("localhost, lab2", ("localhost", "lab2")),
    "placement": ("switch-bin", "switch-bin"),
    "tcp": ("reno", "reno"),
    "queue_discipline": ("red-ecn", "red-ecn"),
    "ecn_threshold_packets": ("12", 12),
    "host_rate_mbps": ("12.5", 12.5),
    "switch_rate_mbps": ("25", 25.0),
    "host_queue_packets": ("30", 30),
    "switch_queue_packets": ("40", 40),
    "mtu": ("9000", 9000),
    "datapath": ("user", "user"),
    "offload": ("tso", "tso"),
    "connections": ("4", 4),
    "link_delay_ms": ("0", 0.0),
    "link_loss_pct": ("0", 0.0),
    "link_events": ("1.5:bgs0-bgs2:down", (LinkEvent(1.5, "bgs0", "bgs2", "down"),)),
    "monitor_interval_ms": ("50", 50.0),
    "model_alpha_us": ("0", 0.0),
    "sharing": ("max-min", "max-min"),
    "label": ("hello world", "hello world"),
    "workload": (TWO_TENANTS, TWO_TENANTS),
    "link_overrides": ("bgs0-bgs2:5", (LinkOverride("bgs0", "bgs2", 5.0),)),
    "capture": ("bgs0-bgs2,bgh3", ("bgs0-bgs2", "bgh3")),
}


def test_link_overrides_change_exactly_the_links_they_name():
    spec = make_run({"link_overrides": ["bgs0-bgs2:5", "bgh3:10"], "host_rate_mbps": 50, "switch_rate_mbps": 40})
    rates = {(l.a, l.b): l.rate_mbps for l in spec.fabric().links}
    assert rates[("bgs0", "bgs2")] == 5.0 and rates[("bgh3", "bgs1")] == 10.0
    assert sorted(set(rates.values())) == [5.0, 10.0, 40.0, 50.0]
    assert sum(r == 5.0 for r in rates.values()) == 1 and sum(r == 10.0 for r in rates.values()) == 1
    import json
    again = make_run(json.loads(json.dumps(dataclasses.asdict(spec))))   # spec.json, as report reads it
    assert again.link_overrides == spec.link_overrides
    for bad, words in (("bgs0-bgs1:5", "no such link"), ("bgs0-bgs2", "A-B:MBPS"), ("bgs0-bgs2:0", "rate must be"),
                       ("bgh99:5", "no such link"), ("bgs0-bgs2:rate=5,rate=6", "rate is given twice"),
                       ("bgs0-bgs2:delay=x", "delay must be a number"), ("bgs0-bgs2:loss=101", "loss must be"),
                       ("bgs0-bgs2:jitter=3", "unknown setting 'jitter'"), ("leaf-spine:delay=5", "its tiers are")):
        msg = spec_error({"link_overrides": [bad]})
        assert msg.startswith("link_overrides:") and words in msg, msg


def test_link_overrides_set_delay_and_loss_per_link_and_per_tier():
    spec = make_run({"topology": "leafspine:leaves=2,spines=1,hosts=2", "link_delay_ms": 1,
                     "link_overrides": ["leaf-spine:rate=10,delay=20ms", "bgh0:loss=0.5%", "bgs0-bgs2:delay=30"]})
    links = {(l.a, l.b): (l.rate_mbps, l.delay_ms, l.loss_pct) for l in spec.fabric().links}
    tiers = {s.name: s.tier for s in spec.fabric().switches}
    for (a, b), (rate, delay, loss) in links.items():
        if {tiers.get(a), tiers.get(b)} == {"leaf", "spine"}:
            assert (rate, delay) == (10, 30 if {a, b} == {"bgs0", "bgs2"} else 20), (a, b)   # the later one wins
        else:
            assert (rate, delay, loss) == (spec.host_rate_mbps, 1, 0.5 if a == "bgh0" else 0), (a, b)
    assert str(spec.link_overrides[0]) == "leaf-spine:rate=10,delay=20"
    import json
    again = make_run(json.loads(json.dumps(dataclasses.asdict(spec))))
    assert again.link_overrides == spec.link_overrides
    with pytest.raises(SpecError, match="link_overrides: bgh0:loss=0.5: delay and loss need netem"):
        validate(make_run({"link_overrides": ["bgh0:loss=0.5"]}), lambda: False)


def test_string_table_covers_every_field():
    assert set(FROM_STRINGS) == set(FIELDS)


# keys that mean something only beside another
NEEDS = {"ecn_threshold_packets": {"queue_discipline": "red-ecn"},
         "hosts_per_switch": {"topology": f"file:{os.path.join(REPO, 'experiments', 'topologies', 'abilene.graphml')}"},
         **{key: {"accelerators": 4} for key in ("nics", "interconnect", "interconnect_mbps")}}


@pytest.mark.parametrize("key", sorted(FROM_STRINGS))
def test_each_key_converted_from_string(key):
    text, want = FROM_STRINGS[key]
    context = NEEDS.get(key, {})
    spec = make_run({key: text, **context})
    got = getattr(spec, key)
    assert got == want
    assert type(got) is type(want)
    # all other keys stay at their defaults
    for other in FIELDS:
        if other != key and other not in context:
            assert getattr(spec, other) == getattr(RunSpec(), other)


def test_all_keys_from_strings_at_once():
    values = {**{k: v[0] for k, v in FROM_STRINGS.items()}, "link_events": "1.5:bgs8-bgs0:down",  # fat-tree links
              "link_overrides": "bgs0-bgs8:5", "capture": "bgs8-bgs0,bgh3", "servers": "",
              "hosts_per_switch": ""}   # a GraphML file's only
    spec = make_run({k: v for k, v in values.items() if v != ""})
    for k, (_, want) in FROM_STRINGS.items():
        if k not in ("link_events", "link_overrides", "capture", "servers", "hosts_per_switch"):
            assert getattr(spec, k) == want
    assert spec.link_events == (LinkEvent(1.5, "bgs8", "bgs0", "down"),)
    assert spec.link_overrides == (LinkOverride("bgs0", "bgs8", 5.0),)
    assert spec.capture == ("bgs8-bgs0", "bgh3")


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

def spec_error(values, has_netem=None) -> str:
    with pytest.raises(SpecError) as e:
        make_run(values, has_netem)
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


@pytest.mark.parametrize("topology", ["hypercube:k=4", "bigraph:m=2,x=4", "bigraph:m=two", "fattree:k", ""])
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
                                 "host_queue_packets", "switch_queue_packets", "connections"])
@pytest.mark.parametrize("value", [1.5, "1.5", "abc", True, None, [1]])
def test_non_integer_ints_rejected(key, value):
    msg = spec_error({key: value})
    assert msg.startswith(f"{key}:")


def test_integer_valued_float_rejected_for_int_keys():
    # TOML `repetitions = 2.0` is a float: refused rather than truncated
    assert "repetitions" in spec_error({"repetitions": 2.0})


@pytest.mark.parametrize("key", ["host_rate_mbps", "switch_rate_mbps", "model_alpha_us", "link_delay_ms",
                                 "link_loss_pct", "monitor_interval_ms"])
@pytest.mark.parametrize("value", ["fast", None, [1], True, "nan"])
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
    ("mtu", 1500), ("datapath", "user"), ("link_delay_ms", 5), ("link_loss_pct", 1),
    ("link_events", ["1:bgs0-bgs2:down"]),
])
def test_fabric_key_differs_for_fabric_keys(key, value, monkeypatch):
    monkeypatch.setattr(capabilities, "netem_available", lambda: True)
    assert make_run({key: value}).fabric_key() != RunSpec().fabric_key()


def test_fabric_key_ignores_connections_and_monitoring():
    a = make_run({"connections": 4, "monitor_interval_ms": 20})
    assert a.fabric_key() == RunSpec().fabric_key()


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


@pytest.mark.parametrize("text, words", [("", ["empty"]), ("# only a comment\n", ["empty"]),
                                         ("runs = []\n", ["runs = []", "no run"])])
def test_an_experiment_that_asks_for_nothing_is_refused(tmp_path, text, words):
    """An empty file or `runs = []` is a mistake, not a request for the defaults."""
    with pytest.raises(SpecError) as e:
        load_experiment(write(tmp_path, text))
    assert all(w in str(e.value) for w in words), e.value


def test_defaults_alone_are_one_run(tmp_path):
    exp = load_experiment(write(tmp_path, '[defaults]\ncollective = "broadcast"\n'))
    assert exp.runs == [dataclasses.replace(RunSpec(), collective="broadcast")]


@pytest.mark.parametrize("name", ["../../x", "/tmp/x", ".hidden", "a/b", "", "x" * 65, ["a"]])
def test_an_experiment_name_never_becomes_a_path(tmp_path, name):
    import json
    with pytest.raises(SpecError, match="name"):
        load_experiment(write(tmp_path, f"name = {json.dumps(name)}\n[defaults]\n"))


def test_a_file_name_is_made_safe_as_the_default_name(tmp_path):
    assert load_experiment(write(tmp_path, "[defaults]\n", name="my sweep (2).toml")).name == "my-sweep--2-"


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('[defaults]\nlabel = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(SpecError, match="latin1.toml: line 2: not UTF-8"):
        load_experiment(str(path))


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
    assert [r.mapping for r in exp.runs] == ["naive", "hdrm"]
    for r in exp.runs:
        assert (r.topology, r.collective, r.algorithm) == ("bigraph:m=2,n=4", "allreduce", "halving-doubling")
        assert r.sizes == (2 * M, 4 * M, 8 * M)


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


# --- new keys: ranges ------------------------------------------------------------------

@pytest.mark.parametrize("key, low, high, bad", [
    ("connections", 1, 16, [0, 17, -1]),
    ("link_delay_ms", 0, 1000, [-0.1, 1000.5, "inf"]),
    ("link_loss_pct", 0, 100, [-1, 100.01, 150]),
    ("monitor_interval_ms", 10, 1000, [9.9, 1001, 0]),
    ("host_rate_mbps", 1, 100_000, [0.5, 100_001, -5]),
    ("switch_rate_mbps", 1, 100_000, [0, 1e9]),
    ("host_queue_packets", 1, 100_000, [0, 100_001]),
    ("switch_queue_packets", 1, 100_000, [0, 10 ** 9]),
])
def test_new_ranges(key, low, high, bad, monkeypatch):
    monkeypatch.setattr(capabilities, "netem_available", lambda: True)
    assert getattr(make_run({key: low}), key) == low
    assert getattr(make_run({key: high}), key) == high
    for value in bad:
        msg = spec_error({key: value})
        assert msg.startswith(f"{key}:") and "between" in msg, msg


def test_new_defaults():
    s = RunSpec()
    assert (s.connections, s.link_delay_ms, s.link_loss_pct, s.link_events, s.monitor_interval_ms) == (1, 0, 0, (), 100)


def test_size_limit():
    assert make_run({"sizes": "4G"}).sizes == (MAX_SIZE_BYTES,)
    assert spec_error({"sizes": "5G"}).startswith("sizes:")
    assert spec_error({"sizes": "1M:8G:2"}).startswith("sizes:")


def test_too_many_sizes():
    assert spec_error({"sizes": "1:1G:1.2"}).startswith("sizes: must be 1 to 64 sizes")


# --- netem: refused on a kernel without it, the check injectable ----------------------------

@pytest.mark.parametrize("key", ["link_delay_ms", "link_loss_pct"])
def test_netem_missing_is_refused(monkeypatch, key):
    monkeypatch.setattr(capabilities, "netem_available", lambda: False)
    msg = spec_error({key: 1}, capabilities.netem_available)
    assert msg.startswith(f"{key}:") and "netem (sch_netem)" in msg
    assert make_run({key: 0}, capabilities.netem_available)   # zero needs no netem
    assert make_run({key: 1})              # the model and reports do not check


@pytest.mark.parametrize("key", ["link_delay_ms", "link_loss_pct"])
def test_netem_present_is_accepted(monkeypatch, key):
    monkeypatch.setattr(capabilities, "netem_available", lambda: True)
    assert getattr(make_run({key: 2.5}, capabilities.netem_available), key) == 2.5


def test_validate_takes_the_netem_check():
    spec = RunSpec(link_delay_ms=5.0)
    with pytest.raises(SpecError, match="link_delay_ms"):
        validate(spec, has_netem=lambda: False)
    assert validate(spec, has_netem=lambda: True).topology == spec.topology
    validate(spec)                                             # None: not checked


def test_netem_missing_on_this_machine_matches_detection():
    """On this machine (whatever it has) make_run agrees with capabilities."""
    if capabilities.netem_available():
        assert make_run({"link_loss_pct": 1}, capabilities.netem_available).link_loss_pct == 1
    else:
        assert "netem" in spec_error({"link_loss_pct": 1}, capabilities.netem_available)


def test_experiment_file_netem_check(tmp_path, monkeypatch):
    monkeypatch.setattr(capabilities, "netem_available", lambda: False)
    path = write(tmp_path, "[defaults]\nlink_delay_ms = 2\n")
    with pytest.raises(SpecError, match="run 1: link_delay_ms"):
        load_experiment(path, None, capabilities.netem_available)
    assert load_experiment(path).runs[0].link_delay_ms == 2   # unchecked: the model and reports


# --- capabilities.netem_available on fake trees ------------------------------------------------

REL = "6.1.0-test"


def fake_tree(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".gz"):
            import gzip
            with gzip.open(p, "wt") as f:
                f.write(text)
        else:
            p.write_text(text)
    return str(tmp_path)


@pytest.mark.parametrize("files, want", [
    ({}, False),
    ({"sys/module/sch_netem/refcnt": "0"}, True),
    ({"proc/modules": "sch_htb 1 0 - Live 0x0\nsch_netem 24576 0 - Live 0x0\n"}, True),
    ({"proc/modules": "sch_netem_other 1 0 - Live 0x0\n"}, False),
    ({"proc/config.gz": "CONFIG_NET_SCH_NETEM=y\n"}, True),
    ({"proc/config.gz": "# CONFIG_NET_SCH_NETEM is not set\n",
      f"lib/modules/{REL}/modules.dep": "kernel/net/sched/sch_netem.ko:\n", "proc/modules": ""}, False),
    ({f"boot/config-{REL}": "CONFIG_NET_SCH_NETEM=m\n", "proc/modules": "",
      f"lib/modules/{REL}/modules.dep": "kernel/net/sched/sch_netem.ko.zst:\n"}, True),
    ({f"boot/config-{REL}": "CONFIG_NET_SCH_NETEM=m\n", "proc/modules": ""}, False),   # config says m, not installed
    ({"proc/modules": "", f"lib/modules/{REL}/kernel/net/sched/sch_netem.ko.xz": ""}, True),
    ({f"lib/modules/{REL}/kernel/net/sched/sch_netem.ko": ""}, False),   # no /proc/modules: cannot load
    ({f"lib/modules/{REL}/modules.builtin": "kernel/net/sched/sch_netem.ko\n"}, True),
    ({"proc/modules": "", f"lib/modules/{REL}/modules.dep": "kernel/net/sched/sch_htb.ko:\n"}, False),
])
def test_netem_detection(tmp_path, files, want):
    assert capabilities.netem_available(fake_tree(tmp_path, files), REL) is want


def test_netem_detection_other_release_ignored(tmp_path):
    root = fake_tree(tmp_path, {"proc/modules": "", "lib/modules/9.9/modules.dep": "kernel/net/sched/sch_netem.ko:\n"})
    assert capabilities.netem_available(root, REL) is False
    assert capabilities.netem_available(root, "9.9") is True


def test_netem_detection_on_this_machine_reads_only():
    assert capabilities.netem_available() in (True, False)


# --- link events ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("2.5:bgs1-bgs5:down", LinkEvent(2.5, "bgs1", "bgs5", "down")),
    ("0:bgs5-bgs1:up", LinkEvent(0.0, "bgs5", "bgs1", "up")),
    (" 6 : bgs1 - bgs5 : up ", LinkEvent(6.0, "bgs1", "bgs5", "up")),
    ({"time_s": 1, "a": "bgs0", "b": "bgs2", "action": "down"}, LinkEvent(1.0, "bgs0", "bgs2", "down")),
])
def test_parse_link_event(text, want):
    assert parse_link_event(text) == want


@pytest.mark.parametrize("text", ["", "2.5", "2.5:bgs1-bgs5", "x:bgs1-bgs5:down", "2:bgs1bgs5:down",
                                  "2:-bgs5:down", "1:2:3:4", 5, None, {"time_s": 1}])
def test_parse_link_event_bad_form(text):
    with pytest.raises(SpecError) as e:
        parse_link_event(text)
    assert str(e.value).startswith("link_events:") and "2.5:bgs1-bgs5:down" in str(e.value)


def test_link_event_str_round_trip():
    e = LinkEvent(2.5, "bgs1", "bgs5", "down")
    assert str(e) == "2.5:bgs1-bgs5:down" and parse_link_event(str(e)) == e


def test_link_events_validated_against_fabric():
    spec = make_run({"topology": "bigraph:m=2,n=8", "link_events": ["2.5:bgs1-bgs5:down", "6:bgs5-bgs1:up"]})
    assert [str(e) for e in spec.link_events] == ["2.5:bgs1-bgs5:down", "6:bgs5-bgs1:up"]


@pytest.mark.parametrize("events, words", [
    (["1:bgs0-bgs1:down"], ["bgs0-bgs1", "not a switch-switch link", "bgs0-bgs2"]),      # both upper
    (["1:bgs0-bgh0:down"], ["not a switch-switch link"]),                                 # a host link
    (["1:bgs0-bgs9:down"], ["bgs0-bgs9"]),
    (["-1:bgs0-bgs2:down"], [">= 0"]),
    (["nan:bgs0-bgs2:down"], [">= 0"]),
    (["1:bgs0-bgs2:sideways"], ["down, up"]),
    (["1:bgs0-bgs2:up"], ["not down"]),
    (["1:bgs0-bgs2:down", "2:bgs2-bgs0:down"], ["already down"]),
    (["3:bgs0-bgs2:up", "1:bgs0-bgs2:down", "2:bgs0-bgs2:up"], ["not down"]),
])
def test_bad_link_events(events, words):
    msg = spec_error({"link_events": events})
    assert msg.startswith("link_events:")
    assert all(w in msg for w in words), msg


def test_link_events_in_toml_and_json_round_trip(tmp_path):
    path = write(tmp_path, '[defaults]\nlink_events = ["1:bgs0-bgs2:down", "2:bgs0-bgs2:up"]\n')
    spec = load_experiment(path).runs[0]
    assert len(spec.link_events) == 2
    again = make_run(dataclasses.asdict(spec))                   # as `report` reads spec.json
    assert again == spec


def test_link_events_any_order_of_switches_and_time():
    spec = make_run({"link_events": ["4:bgs2-bgs0:up", "1:bgs0-bgs2:down"]})
    assert len(spec.link_events) == 2


# --- checks against the fabric -------------------------------------------------------------------

def test_hdrm_needs_power_of_two_ranks():
    msg = spec_error({"topology": "bigraph:m=3,n=4", "mapping": "hdrm"})
    assert msg.startswith("mapping:") and "power-of-two" in msg and "12" in msg
    assert make_run({"topology": "bigraph:m=4,n=4", "mapping": "hdrm"}).mapping == "hdrm"


def test_hdrm_on_part_of_a_fabric_needs_a_bigraph():
    assert make_run({"topology": "bigraph:m=4,n=8", "mapping": "hdrm", "ranks": 16}).ranks == 16
    msg = spec_error({"topology": "leafspine:leaves=4,spines=2,hosts=4", "mapping": "hdrm", "ranks": 8})
    assert msg.startswith("mapping:") and "every host" in msg


@pytest.mark.parametrize("collective", ["reduce-scatter", "allgather"])
def test_halving_doubling_rs_ag_need_power_of_two(collective):
    msg = spec_error({"topology": "bigraph:m=3,n=4", "collective": collective, "algorithm": "halving-doubling"})
    assert msg.startswith("algorithm:") and "power-of-two" in msg
    assert make_run({"topology": "bigraph:m=3,n=4", "algorithm": "halving-doubling"})   # allreduce: any count


@pytest.mark.parametrize("ranks", [1, 9, 100])
def test_ranks_must_fit(ranks):
    msg = spec_error({"ranks": ranks})
    assert msg.startswith("ranks:") and "2 to 8" in msg


def test_bigraph_policy_needs_bigraph():
    """The 'bigraph' routing policy routes BiGraph only; the error lists the policies that fit."""
    for topology in ("fattree:k=4", "leafspine:leaves=4,spines=2,hosts=2"):
        msg = spec_error({"policy": "bigraph", "topology": topology})
        assert msg.startswith("policy:") and "bigraph fabrics only" in msg and topology in msg
        assert "ecmp" in msg and "'bigraph'" in msg and ", bigraph" not in msg
    assert make_run({"policy": "bigraph", "topology": "bigraph:m=2,n=4"}).policy == "bigraph"


def test_policy_choices_follow_routing():
    from emulator.routes.routing import POLICIES
    for policy, record in POLICIES.items():
        if record.needs_nodes or record.fabric_kind not in (None, "bigraph"):   # pxn: rail nodes; other families
            continue                                                           # (test_nodes, test_dragonfly, ...)
        values = {"policy": policy, "topology": "bigraph:m=2,n=4"}
        assert make_run(values).policy == policy
    assert all(p in spec_error({"policy": "bogus"}) for p in POLICIES)


def test_capture_and_servers_go_together():
    spec = make_run({"servers": "localhost,lab2", "capture": "bgh0"})
    assert spec.capture == ("bgh0",) and spec.servers == ("localhost", "lab2")


@pytest.mark.parametrize("bad", ["Cubic", "cu bic", "", "a" * 17, "../x"])
def test_a_congestion_control_is_named_as_the_kernel_names_them(bad):
    assert "tcp: " in spec_error({"tcp": bad}) and "congestion control" in spec_error({"tcp": bad})


def test_the_congestion_control_is_stated_not_inherited():
    assert RunSpec().tcp == "cubic"


def test_congestion_controls_are_what_the_kernel_has_and_its_modules_add(tmp_path):
    (tmp_path / "proc/sys/net/ipv4").mkdir(parents=True)
    (tmp_path / "proc/sys/net/ipv4/tcp_available_congestion_control").write_text("reno cubic\n")
    assert capabilities.congestion_controls(str(tmp_path), "6.1") == ["cubic", "reno"]   # no modules load
    (tmp_path / "proc/modules").write_text("")
    mods = tmp_path / "lib/modules/6.1/kernel/net/ipv4"
    mods.mkdir(parents=True)
    (mods / "tcp_dctcp.ko.xz").write_text("")
    (mods / "tcp_bbr.ko").write_text("")
    (mods / "udp_diag.ko").write_text("")
    assert capabilities.congestion_controls(str(tmp_path), "6.1") == ["bbr", "cubic", "dctcp", "reno"]


def test_a_congestion_control_the_kernel_lacks_is_refused_naming_what_it_offers(monkeypatch):
    from emulator import preflight
    monkeypatch.setattr(capabilities, "congestion_controls", lambda: ["bbr", "cubic", "reno"])
    with pytest.raises(SpecError, match=r"tcp: this kernel does not offer 'dctcp'; it offers bbr, cubic, reno\. "
                                        r"A kernel that loads modules adds it with `modprobe tcp_dctcp`"):
        preflight.plan_emulated(make_run({"tcp": "dctcp"}))
    assert preflight.plan_emulated(make_run({"tcp": "reno"})).spec.tcp == "reno"


@pytest.mark.parametrize("values, problem", [
    ({"queue_discipline": "red"}, "queue_discipline: 'red' is not one of: fifo, red-ecn, fq_codel"),
    ({"ecn_threshold_packets": 10}, "only queue_discipline red-ecn has a marking threshold, not fifo"),
    ({"queue_discipline": "fq_codel", "ecn_threshold_packets": 10}, "red-ecn has a marking threshold, not fq_codel"),
    ({"queue_discipline": "red-ecn", "ecn_threshold_packets": 100}, "must be below the switch queue's depth"),
    ({"queue_discipline": "red-ecn", "ecn_threshold_packets": -1}, "ecn_threshold_packets"),
    ({"queue_discipline": "red-ecn", "link_delay_ms": 2}, "red-ecn cannot be combined with link_delay_ms"),
    ({"queue_discipline": "fq_codel", "link_overrides": "bgh0:rate=8,delay=5"}, "fq_codel cannot be combined with link_ov"),
])
def test_a_queue_discipline_is_checked_with_its_threshold(values, problem):
    assert problem in spec_error(values)


def test_the_queue_discipline_and_its_threshold_tell_fabrics_apart():
    fifo, red = make_run({}), make_run({"queue_discipline": "red-ecn"})
    assert fifo.fabric_key() != red.fabric_key()
    assert red.fabric_key() != make_run({"queue_discipline": "red-ecn", "ecn_threshold_packets": 30}).fabric_key()


def test_a_queue_discipline_the_kernel_lacks_is_refused_naming_what_it_offers(monkeypatch):
    monkeypatch.setattr(capabilities, "qdisc_available", lambda module, config: module == "sch_fq_codel")
    with pytest.raises(SpecError, match=r"queue_discipline: this kernel has no sch_red for 'red-ecn'; it offers "
                                        r"fifo, fq_codel\. A kernel that loads modules adds it with `modprobe sch_red`"):
        preflight.plan_emulated(make_run({"queue_discipline": "red-ecn"}))
    assert preflight.plan_emulated(make_run({"queue_discipline": "fq_codel"})).spec.queue_discipline == "fq_codel"


def test_a_qdisc_is_available_built_in_as_a_module_or_loaded(tmp_path):
    assert not capabilities.qdisc_available("sch_red", "CONFIG_NET_SCH_RED", str(tmp_path), "6.1")   # nothing known
    (tmp_path / "proc").mkdir()
    config = tmp_path / "boot/config-6.1"
    config.parent.mkdir()
    config.write_text("CONFIG_NET_SCH_RED=y\n# CONFIG_NET_SCH_FQ_CODEL is not set\n")
    assert capabilities.qdisc_available("sch_red", "CONFIG_NET_SCH_RED", str(tmp_path), "6.1")
    assert not capabilities.qdisc_available("sch_fq_codel", "CONFIG_NET_SCH_FQ_CODEL", str(tmp_path), "6.1")
    (tmp_path / "sys/module/sch_fq_codel").mkdir(parents=True)   # loaded
    assert capabilities.qdisc_available("sch_fq_codel", "CONFIG_NET_SCH_FQ_CODEL", str(tmp_path), "6.1")
