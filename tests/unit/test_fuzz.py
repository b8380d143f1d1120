"""Property-based fuzzing of every parser (hypothesis): whatever the input,
each returns a value or raises its own error, which the CLI turns into exit
code 2 and a message; nothing else escapes. Where a parser accepts, what it
accepted must also work downstream (a table the report accepts can be
summarised, a fabric it accepts can be laid out). Every parser is also
fuzzed at the limits: huge and tiny numbers, digits of every script, and
special files (a named pipe, a folder, a device) where a regular file
belongs, under an alarm so that a reader that opened a pipe fails the test
instead of hanging it. A few hundred examples each, to stay fast enough for
every CI run."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import signal

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from emulator.plan import capacity

from emulator.results import plots, report, sweeps
from emulator.records import tables

from emulator.flags import NUMBER_FLAGS, check_values, flag_name, parser
from emulator.plan.folders import check_out_folder
from emulator.spec import experiment as spec
from emulator.inputs import (MAX_BYTES, MAX_DIGITS, MAX_INPUT_BYTES, InputError, parse_size, read_bytes, size_sweep,
                             to_float, to_int)
from emulator.spec.experiment import FIELDS, SpecError, load_experiment, make_run
from emulator.spec.sweep import load_sweep
from emulator.fabric.topology import BUILDERS, parse_topology
from emulator.workloads.importers import import_job
from emulator.workloads.templates import MAX_JOB_OPS, MAX_OPS, TEMPLATES, job_ops
from emulator.workloads.workload import parse_workload
from emulator.workloads.job import MAX_COMPUTE_MS, WorkloadError

FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TABLE_FUZZ = settings(FUZZ, max_examples=200)   # each example builds pandas frames: slower

# text that looks like what people type, and what they type by mistake
DIGITISH = st.text(alphabet="0123456789_.-+eE \uff10\uff11\uff12\u0661\u00b2\u2460", min_size=0, max_size=6)
WORDS = st.sampled_from(["", "0", "1", "2", "4", "-1", "1.5", "2.0", "1_0", "\uff12", "nan", "inf", "1e3", "x",
                         "K", "M", "G", "1M", "64K", "4G", "8G", " 3 ", "=", ",", ":", "-"])
# numbers at the limits, as values and as text; digits of every script (Python's int() and float() take
# '١٢' and '１２'; str.isdigit() also takes '²')
HUGE = st.one_of(st.integers(-(10 ** 400), 10 ** 400), st.sampled_from([2 ** 53, 2 ** 53 + 1, 2 ** 63, 2 ** 64, 10 ** 20,
                                                                     -(2 ** 63), 1 << 50, (1 << 50) + 1]))
EXTREME = st.one_of(HUGE, st.floats(), st.sampled_from([1e308, -1e308, 5e-324, -5e-324, 1e-308, -0.0, 1.7976931348623157e308]))
UNICODE_DIGITS = st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=6)
LIMIT_TEXT = st.one_of(UNICODE_DIGITS, EXTREME.map(str), st.sampled_from(
    ["9" * 41, "9" * 5000, "1" + "0" * 400, "1e400", "-1e400", "1e-400", "0x10", "1_000", "\u00b2", "\u0661\u0662",
     "\uff11\uff12", "\U0001d7d9", "+1", "-0", "٣M", "1" + "0" * 40 + "K"]))
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12) | WORDS | EXTREME
                      | LIMIT_TEXT,
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4),
                      max_leaves=8)


# --- topology strings, sizes, link events and overrides -----------------------------------------

@st.composite
def topologies(draw) -> str:
    kind = draw(st.sampled_from([*BUILDERS, "hypercube", ""]))
    keys = [*BUILDERS.get(kind, ({}, {}))[1], "x"]
    items = draw(st.lists(st.tuples(st.sampled_from(keys), DIGITISH | WORDS), max_size=5))
    return f"{kind}:" + draw(st.sampled_from([",", ";", ", "])).join(f"{k}={v}" for k, v in items)


@FUZZ
@given(st.one_of(topologies(), st.text(max_size=40)))
def test_topology_strings(text):
    try:
        kind, params = parse_topology(text)
    except ValueError:
        return
    event("accepted")
    assert kind in BUILDERS and set(params) == set(BUILDERS[kind][1])
    assert all(type(v) is int for v in params.values())
    if all(0 <= v <= 16 for v in params.values()):   # small enough to build here
        try:
            fabric = BUILDERS[kind][0](**params)
        except ValueError:
            return
        assert len(fabric.hosts) >= 2


@FUZZ
@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.text(max_size=12), WORDS,
                 st.builds(lambda a, b: a + b, DIGITISH, st.sampled_from(["", "K", "M", "G", "B", "KB"]))))
def test_sizes(value):
    try:
        size = parse_size(value)
    except ValueError:
        return
    assert type(size) is int and size >= 1 and not isinstance(value, (bool, float))
    assert parse_size(str(size)) == size


@FUZZ
@given(st.integers(1, 1 << 33), st.integers(1, 1 << 33), st.floats(allow_nan=True, allow_infinity=True))
def test_size_sweeps_are_short_increasing_and_within_their_ends(begin, end, factor):
    try:
        sizes = size_sweep(begin, end, factor, spec.MAX_SIZES)
    except ValueError:
        return
    assert 1 <= len(sizes) <= spec.MAX_SIZES
    assert sizes == sorted(set(sizes)) and sizes[0] == begin and sizes[-1] <= end


@FUZZ
@given(st.one_of(VALUES, st.lists(WORDS | DIGITISH, min_size=1, max_size=3).map(":".join)))
def test_size_values_of_a_spec(value):
    try:
        sizes = spec._sizes(value)
    except SpecError:
        return
    assert all(type(s) is int and s >= 1 for s in sizes) and len(set(sizes)) == len(sizes)


@FUZZ
@given(st.one_of(st.text(max_size=30), VALUES,
                 st.builds("{}:{}-{}:{}".format, DIGITISH | WORDS, st.sampled_from(["bgs0", "", "bgs2"]),
                           st.sampled_from(["bgs2", "", "x"]), st.sampled_from(["down", "up", "x"]))))
def test_link_events(value):
    try:
        link_event = spec.parse_link_event(value)
    except SpecError:
        return
    event("accepted")
    if math.isfinite(link_event.time_s):
        assert spec.parse_link_event(str(link_event)) == link_event


@FUZZ
@given(st.one_of(st.text(max_size=30), VALUES,
                 st.builds("{}:{}".format, st.sampled_from(["bgs0-bgs2", "bgh3", "leaf-spine", "", "-"]),
                           st.lists(st.builds("{}={}".format, st.sampled_from(["rate", "delay", "loss", "x"]),
                                              DIGITISH | WORDS), max_size=3).map(",".join) | DIGITISH)))
def test_link_overrides(value):
    try:
        (override,) = spec._link_overrides([value])
    except SpecError:
        return
    event("accepted")
    assert spec._link_overrides([str(override)]) == (override,)


# --- a whole run from keys, experiment files, workload files --------------------------------------

RUN_KEYS = st.sampled_from(sorted(set(FIELDS) - {"workload"}) + ["bogus"])   # workload: its own test below


@FUZZ
@given(st.dictionaries(RUN_KEYS, VALUES | WORDS, max_size=4))
def test_run_keys(values):
    try:
        run = make_run(values)
    except SpecError:
        return
    event("accepted")
    assert len(run.fabric().hosts) >= 2


def toml_value(value) -> str:
    """A TOML rendering of a JSON-like value (JSON's strings are TOML's basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()
                               if v is not None) + "}"
    return json.dumps(value if value is not None else "")


@st.composite
def experiment_files(draw) -> bytes:
    lines = []
    for key in draw(st.lists(st.sampled_from(["name", "yes", "runs", "other"]), max_size=2, unique=True)):
        lines.append(f"{key} = {toml_value(draw(VALUES | WORDS))}")
    for table in draw(st.lists(st.sampled_from(["[defaults]", "[[runs]]"]), max_size=3)):
        lines.append(table)
        for key, value in draw(st.dictionaries(RUN_KEYS, VALUES | WORDS, max_size=3)).items():
            lines.append(f"{key} = {toml_value(value)}")
    return "\n".join(lines).encode("utf-8", "surrogatepass")


@FUZZ
@given(st.one_of(experiment_files(), st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_experiment_files(tmp_path_factory, data):
    path = os.path.join(tmp_path_factory.mktemp("toml"), "e.toml")
    with open(path, "wb") as f:
        f.write(data)
    try:
        experiment = load_experiment(path)
    except SpecError:
        return
    event("accepted")
    assert experiment.runs and "/" not in experiment.name and not experiment.name.startswith(".")


OPS = st.fixed_dictionaries({"op": st.sampled_from(["compute", "wait", "allreduce", "send", "recv", "all-to-all",
                                                     "x"])},
                            optional={"ms": VALUES, "bytes": VALUES | WORDS, "group": VALUES, "tag": VALUES,
                                      "async": VALUES, "matrix": VALUES, "to": VALUES, "algorithm": VALUES})
JOBS = st.fixed_dictionaries({}, optional={"name": VALUES, "ranks": VALUES, "placement": VALUES, "seed": VALUES,
                                           "iterations": VALUES, "duration_ms": VALUES, "tp": VALUES,
                                           "pp": VALUES, "dp": VALUES, "template": VALUES, "params": VALUES,
                                           "ops": st.lists(OPS, max_size=4) | VALUES, "start_ms": VALUES})


@FUZZ
@given(st.one_of(st.fixed_dictionaries({"job": st.lists(JOBS, max_size=3) | VALUES},
                                       optional={"hosts": VALUES, "share_hosts": VALUES}), VALUES))
def test_workload_documents(doc):
    try:
        workload = parse_workload(doc, "w.toml")
    except WorkloadError:
        return
    event("accepted")
    assert 1 <= len(workload.jobs) <= 64


@FUZZ
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_workload_files(tmp_path_factory, data):
    path = os.path.join(tmp_path_factory.mktemp("workload"), "w.toml")
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(SpecError):   # random bytes are never a workload
        spec.load_workload(path)


# --- calibration files -------------------------------------------------------------------------

POINT = {"datapath": "user", "mtu": 9000, "offload": "off", "raw_mbps": 5000.0, "faithful_mbps": 4000.0,
         "link_rate_mbps": 300.0}


@FUZZ
@given(st.one_of(
    st.lists(st.dictionaries(st.sampled_from([*POINT, "x"]), VALUES), max_size=3)
    .map(lambda points: {"machine": "m", "measured": "d", "points": [{**POINT, **p} for p in points]}),
    VALUES))
def test_calibration_files(tmp_path_factory, doc):
    path = os.path.join(tmp_path_factory.mktemp("cal"), "c.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    try:
        calibration = capacity.load(path)
    except ValueError:
        return
    event("accepted" if calibration.points else "no points")
    for point in calibration.points:
        check = capacity.Assessment(700.0, point.faithful_mbps, "fuzz")
        assert "capacity" in check.describe(50.0) and json.dumps(check.to_dict(), allow_nan=False)


# --- the report's readers: CSV tables, fabric.json --------------------------------------------------

CELLS = st.one_of(WORDS, DIGITISH, st.sampled_from(["ring", "allreduce", "shortest", "switch", "True", "False",
                                                    "ok", "bigraph:m=2,n=4", "naive", "a"]),
                  st.text(max_size=6))


def cell(kind):
    """A cell a column of this kind holds."""
    good = {"text": st.text(max_size=6) | st.sampled_from(["ring", "shortest", "switch", "a", "bigraph:m=2,n=4"]),
            "bool": st.sampled_from(["True", "False", "true"]),
            "int": st.integers(-3, 1 << 40).map(str), "count": st.integers(1, 1 << 40).map(str),
            "number": st.floats(allow_nan=False, allow_infinity=False).map(repr),
            "positive": st.floats(min_value=1e-300, allow_infinity=False).map(repr),
            "number?": st.floats(allow_nan=False, allow_infinity=False).map(repr) | st.just("")}
    return st.sampled_from(kind) if isinstance(kind, tuple) else good[kind]


@st.composite
def csv_tables(draw, name: str) -> str:
    """A table of `name`'s columns (some left out, an extra one, any order) with
    rows of good cells, in half the tables one of them replaced by anything;
    or now and then any text."""
    table = tables.TABLES[name]
    kinds = {**table.may, **table.needs}
    columns = draw(st.permutations([c for c in kinds if c in table.needs or draw(st.booleans())]))
    header = [*columns, *draw(st.lists(st.just("extra"), max_size=1))]
    rows = [[draw(cell(kinds.get(c, "text"))) for c in header] for _ in range(draw(st.integers(0, 6)))]
    if rows and draw(st.booleans()):
        rows[draw(st.integers(0, len(rows) - 1))][draw(st.integers(0, len(header) - 1))] = draw(CELLS)
    out = io.StringIO()
    csv.writer(out).writerows([header, *rows])
    return draw(st.just(out.getvalue()) | st.text(max_size=80))


def _read(tmp_path_factory, name: str, text: str):
    path = os.path.join(tmp_path_factory.getbasetemp(), name)   # one file, rewritten: examples run one by one
    with open(path, "w") as f:
        f.write(text)
    return tables.read_table(path)


def accepted(tmp_path_factory, name: str, text: str):
    """The table read_table accepts, or None (after a TableError)."""
    try:
        table = _read(tmp_path_factory, name, text)
    except tables.TableError:
        return None
    event("accepted" if table is not None else "no rows")
    return table


@TABLE_FUZZ
@given(st.data())
def test_collectives_a_report_accepts_can_be_summarised(tmp_path_factory, data):
    d = accepted(tmp_path_factory, "collectives.csv", data.draw(csv_tables("collectives.csv")))
    if d is not None:
        assert report.format_summary(report.summarise(d))


@TABLE_FUZZ
@given(st.data())
def test_jobs_a_report_accepts_can_be_summarised(tmp_path_factory, data):
    d = accepted(tmp_path_factory, "jobs.csv", data.draw(csv_tables("jobs.csv")))
    if d is not None:
        assert report.format_jobs(report.job_summary(report.with_measured_alone(d)))


@TABLE_FUZZ
@given(st.data())
def test_steps_a_report_accepts_give_a_timeline(tmp_path_factory, data):
    d = accepted(tmp_path_factory, "steps.csv", data.draw(csv_tables("steps.csv")))
    if d is not None:
        assert len(plots.timeline_bars(d)) >= 1


@TABLE_FUZZ
@given(st.data())
def test_links_a_report_accepts_give_a_heatmap(tmp_path_factory, data):
    d = accepted(tmp_path_factory, "links.csv", data.draw(csv_tables("links.csv")))
    if d is not None:
        run = plots.one_run(d)
        labels, times, util = plots.utilisation_matrix(run, plots.default_call(run))
        assert util.shape == (len(labels), len(times))
        peaks, means, _ = plots.call_use(run)
        assert set(peaks) == set(means) <= set(labels) | set(run.link)
        assert plots.heatmap_extent([run])[1] >= 1.0


@TABLE_FUZZ
@given(st.sampled_from(["ops.csv", "link_jobs.csv"]), st.data())
def test_other_tables_read_or_refused(tmp_path_factory, name, data):
    d = accepted(tmp_path_factory, name, data.draw(csv_tables(name)))
    assert d is None or set(tables.TABLES[name].needs) <= set(d.columns)


@pytest.fixture(scope="module")
def fabric_doc():
    return make_run({"topology": "bigraph:m=1,n=4"}).fabric().to_dict()


@FUZZ
@given(st.data())
def test_fabric_files(tmp_path_factory, fabric_doc, data):
    """A real fabric.json with one part replaced by anything."""
    doc = json.loads(json.dumps(fabric_doc))
    part = data.draw(st.sampled_from(["topology", "params", "switches", "hosts", "links", None]))
    if part is not None:
        if isinstance(doc[part], list) and doc[part] and data.draw(st.booleans()):
            item = data.draw(st.integers(0, len(doc[part]) - 1))
            key = data.draw(st.sampled_from([*doc[part][item], "x"]))
            doc[part][item][key] = data.draw(VALUES | WORDS)
        else:
            doc[part] = data.draw(VALUES)
    path = os.path.join(tmp_path_factory.mktemp("f"), "fabric.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    try:
        fabric = tables.read_fabric(path)
    except tables.TableError:
        return
    event("accepted")
    positions = plots.layout(fabric)
    assert all(l.a in positions and l.b in positions for l in fabric.links)
    assert len(plots.link_peaks(fabric, {})) == len(fabric.links)


# --- numbers at the limits -----------------------------------------------------------------------

@FUZZ
@given(st.one_of(LIMIT_TEXT, DIGITISH, WORDS, EXTREME, st.text(max_size=8)))
def test_numbers_are_ascii_and_within_reach(value):
    """to_int and to_float take ASCII digits only (never '١' or '²'), and
    a whole number of at most MAX_DIGITS digits: never Python's error of
    4300 digits, never an OverflowError."""
    for read in (to_int, to_float):
        try:
            number = read(value)
        except ValueError:
            continue
        event(f"{read.__name__} accepted")
        if isinstance(value, str):
            assert value.isascii(), value
        if read is to_int and isinstance(value, str):
            assert len(value.strip().lstrip("+-")) <= MAX_DIGITS and number == int(value)


@FUZZ
@given(st.one_of(LIMIT_TEXT, EXTREME, st.builds(lambda a, b: a + b, LIMIT_TEXT, st.sampled_from(["", "K", "M", "G"]))))
def test_sizes_at_the_limits(value):
    try:
        size = parse_size(value)
    except ValueError:
        return
    event("accepted")
    assert type(size) is int and 1 <= size <= MAX_BYTES
    assert not isinstance(value, str) or value.isascii()


@FUZZ
@given(st.dictionaries(RUN_KEYS, EXTREME | LIMIT_TEXT, min_size=1, max_size=3))
def test_run_keys_at_the_limits(values):
    try:
        run = make_run(values)
    except SpecError:
        return
    event("accepted")
    for key, value in values.items():   # a number the spec took is finite and was ASCII text
        got = getattr(run, key)
        if isinstance(got, float):
            assert math.isfinite(got)
        if isinstance(value, str) and isinstance(got, (int, float)):
            assert value.isascii()


# --- templates: what they take, and that what they take expands within bounds --------------------

@FUZZ
@given(st.sampled_from(sorted(TEMPLATES)), st.data())
def test_templates_at_the_limits(name, data):
    template = TEMPLATES[name]
    keys = data.draw(st.lists(st.sampled_from(sorted(template.defaults)), max_size=3, unique=True))
    params = {k: data.draw(EXTREME | st.integers(0, 20_000) | st.floats(0, 1e4) | WORDS) for k in keys}
    iterations = data.draw(st.integers(1, 10_000))
    job = {"ranks": 8, "pp": 2, "template": name, "iterations": iterations, "params": params}
    try:
        workload = parse_workload({"job": [job]}, "w.toml")
    except WorkloadError:
        return
    event("accepted")
    (parsed,) = workload.jobs
    merged = {**template.defaults, **dict(parsed.params)}
    assert template.count(merged) <= MAX_OPS and template.count(merged) * parsed.iterations <= MAX_JOB_OPS
    ops = job_ops(parsed, 0, 0)   # emitted at once: no hang, no overflow, no division by zero
    assert len(ops) <= template.count(merged)
    assert all(0 <= op.nbytes <= MAX_BYTES and 0 <= op.ms <= MAX_COMPUTE_MS for op in ops)


# --- SimAI files ------------------------------------------------------------------------------------

SIMAI_FIELDS = ["l0", "-1", "100", "ALLREDUCE", "1048576", "100", "ALLREDUCE", "1048576", "100", "ALLREDUCE",
                "1048576", "100"]


@st.composite
def simai_files(draw) -> str:
    """A good SimAI file with some fields replaced by numbers at the limits, digits of other scripts or words."""
    header = ["HYBRID_TRANSFORMER_FWD_IN_BCKWD", "model_parallel_NPU_group:", "2", "ep:", "1", "pp:", "1",
              "all_gpus:", "8"]
    count, layer = ["1"], list(SIMAI_FIELDS)
    for fields in (header, count, layer):
        for _ in range(draw(st.integers(0, 2))):
            i = draw(st.integers(0, len(fields) - 1))
            fields[i] = draw(LIMIT_TEXT | DIGITISH.filter(str.strip) | WORDS.filter(str.strip)).replace(" ", "")
    return "\n".join(" ".join(f) for f in (header, count, layer)) + "\n"


@FUZZ
@given(simai_files())
def test_simai_files(tmp_path_factory, text):
    path = os.path.join(tmp_path_factory.getbasetemp(), "w.txt")   # one file, rewritten: examples run one by one
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)
    try:
        job = import_job("simai:" + path)
    except WorkloadError:
        return
    event("accepted")
    assert 1 <= job.ranks <= 1 << 20
    assert all(0 <= op.nbytes <= MAX_BYTES and 0 <= op.ms <= MAX_COMPUTE_MS for op in job.ops)


# --- the command line's flags ----------------------------------------------------------------------

@FUZZ
@given(st.sampled_from([["model", "--jitter"], ["calibrate", "--steps"], ["sweep", "f", "--confirm"],
                        ["sweep", "f", "--workers"], ["model", "--minbytes"], ["model", "--out"],
                        ["model", "--experiment"], ["model", "--workload"], ["model", "--label"]]),
       st.one_of(LIMIT_TEXT, DIGITISH, WORDS, st.just(""), st.just("  ")))
def test_flags_read_strictly(argv, value):
    args = parser().parse_args([*argv[:-1], f"{argv[-1]}={value}"])
    dest = argv[-1].lstrip("-").replace("-", "_")
    try:
        check_values(args)
    except SpecError as e:
        assert flag_name(dest).split("/")[-1] in str(e)
        return
    event("accepted")
    got = getattr(args, dest)
    if dest in NUMBER_FLAGS:
        assert value.isascii() and isinstance(got, (int, float))
    elif dest != "label":
        assert value.strip()


# --- output folders ------------------------------------------------------------------------------

@FUZZ
@given(st.lists(st.text(st.characters(blacklist_characters="/", blacklist_categories=["Cs"]), min_size=1,
                        max_size=300).filter(lambda p: p not in (".", "..")), min_size=1, max_size=3))
def test_output_folders(tmp_path_factory, parts):
    """Whatever --out is, check_out_folder refuses it with a SpecError, or a
    run's folder (with .partial and its deepest file) can be made there."""
    base = tmp_path_factory.mktemp("out")
    path = os.path.join(base, *parts)
    try:
        check_out_folder(path)
    except SpecError:
        return
    event("accepted")
    work = path + ".partial"
    os.makedirs(os.path.join(work, "captures"))
    with open(os.path.join(work, "captures", "x" * 80 + ".pcap"), "w"):
        pass


# --- special files where regular ones belong --------------------------------------------------------

@contextlib.contextmanager
def alarm(seconds: int = 10):
    """Fail instead of hanging: the alarm's exception also breaks a blocking open() of a named pipe."""
    def hang(*_):
        raise TimeoutError(f"a reader still waits after {seconds} s: it opened a named pipe")
    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def special(path: str, kind: str) -> None:
    if kind == "named pipe":
        os.mkfifo(path)
    elif kind == "folder":
        os.mkdir(path)
    elif kind == "device":
        os.symlink("/dev/zero", path)
    elif kind == "dangling link":
        os.symlink(path + ".nowhere", path)
    elif kind == "too large":
        with open(path, "wb") as f:
            f.truncate(MAX_INPUT_BYTES + 1)   # sparse: no disk space taken


# every parser of a user's file: (what it reads, how it is called on a path, the error it raises)
READERS = {
    "experiment": (lambda p: load_experiment(p), SpecError),
    "workload": (lambda p: spec.load_workload(p), SpecError),
    "simai": (lambda p: import_job("simai:" + p), WorkloadError),
    "sweep file": (lambda p: load_sweep(p), SpecError),
    "calibration": (lambda p: capacity.load(p), ValueError),
    "collectives.csv": (lambda p: tables.read_table(os.path.join(_dir(p), "collectives.csv")), tables.TableError),
    "links.csv": (lambda p: tables.read_table(os.path.join(_dir(p), "links.csv")), tables.TableError),
    "link_loads.csv": (lambda p: tables.read_table(os.path.join(_dir(p), "link_loads.csv")), tables.TableError),
    "fabric.json": (lambda p: tables.read_fabric(os.path.join(_dir(p), "fabric.json")), tables.TableError),
    "spec.json": (lambda p: tables.read_runs(_dir(p)), tables.TableError),
    "sweep.csv": (lambda p: sweeps.read_rows(_dir(p)), SpecError),
    "read_bytes": (lambda p: read_bytes(p), InputError),
}


def _dir(path: str) -> str:
    """A results folder whose file of the reader's name is `path`'s special file."""
    return os.path.dirname(path)


@settings(FUZZ, max_examples=60)
@given(st.sampled_from(sorted(READERS)), st.sampled_from(["named pipe", "folder", "device", "dangling link",
                                                          "too large"]))
def test_special_files_are_refused_and_never_waited_for(tmp_path_factory, reader, kind):
    read, error = READERS[reader]
    folder = str(tmp_path_factory.mktemp("special"))
    name = reader if reader.endswith((".csv", ".json")) else "input"
    path = os.path.join(folder, name)
    special(path, kind)
    with alarm():
        try:
            got = read(path)
        except error as e:
            assert name in str(e) or folder in str(e), str(e)
            event(f"refused: {type(e).__name__}")
            return
    # a missing file is no input for the results' optional tables, nor for the calibration (the reference then)
    assert kind == "dangling link" and (got is None or got is capacity.REFERENCE or got == []), (reader, kind, got)


def test_a_named_pipe_never_blocks_the_reader_even_when_swapped_in_after_the_check(tmp_path, monkeypatch):
    """The reader opens without waiting (O_NONBLOCK) and checks again what it
    opened: a pipe that replaced the file between the two is refused too."""
    from emulator import inputs
    path = tmp_path / "pipe"
    os.mkfifo(path)
    regular = os.stat(__file__)
    monkeypatch.setattr(inputs.os, "stat", lambda p: regular)   # the check before opening sees a file
    with alarm(), pytest.raises(InputError, match="a named pipe"):
        read_bytes(str(path))


def test_a_file_over_the_limit_is_refused_even_when_it_grows_while_read(tmp_path):
    path = tmp_path / "big"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(InputError, match="larger than 1000B"):
        read_bytes(str(path), limit=1000)
    assert read_bytes(str(path), limit=1001) == b"x" * 1001
    assert len(read_bytes("/proc/self/status")) > 0   # /proc's files say they are empty: read all the same
