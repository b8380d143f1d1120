"""Every file in experiments/ is a tested example, as Mininet's examples/test/
does for its examples (pure: no root, no network, well under a minute).

- every experiment file is parsed and run through the flow model at its
  own size (`bigraph-emu model --experiment FILE --out DIR`, each takes a
  second or less here): one prediction per run, naming its collective (and
  a positive time for every size) or its workload (every job of it, with a
  positive time for every iteration), and model_steps.csv written;
- every workload file and example trace, the same through `bigraph-emu
  model --workload`, on the fabric its own comment or its experiment gives;
- every sweep file: `bigraph-emu sweep FILE --dry-run`, then one point (the
  first) through the sweep's own worker function: the whole of
  sweep-placement-32.toml takes about 40 s of model on one core here, and
  a Dask pool's worker processes would cost more than the point itself;
- the real clients need MPICH or torch and root to run: each is compiled,
  and the `bigraph-emu exec` command of experiments/real-clients/README.md
  is checked as exec checks it before it builds anything (without --mpi's
  search for mpiexec: tests/unit/test_real_clients.py runs the clients);
- transport_table.py makes its table and plot from a small results folder
  shaped as the transport experiment's;
- every file under experiments/ is one of the above (FILES), so a new file
  cannot go untested, and experiments/README.md names each of them and
  its commands parse.

Each case calls what a user types (emulator.cli.main, in process) or the
project's own loader, and its id names the file (e.g.
test_experiment_runs_through_the_model[eflops.toml])."""
from __future__ import annotations

import csv
import glob
import importlib.util
import json
import os
import py_compile
import re
import shlex
import tomllib

import pytest

from emulator import execute
from emulator.cli import main
from emulator.flags import check_values, flag_values, parser
from emulator.spec.experiment import load_experiment, load_workload
from emulator.spec.sweep import load_sweep
from emulator.sweep import points

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXPERIMENTS = os.path.join(REPO, "experiments")
README = os.path.join(EXPERIMENTS, "README.md")
CLIENTS_README = os.path.join(EXPERIMENTS, "real-clients", "README.md")

# experiment files ([defaults] and [[runs]]): `bigraph-emu run --experiment FILE`
EXPERIMENT_FILES = ("demo.toml", "dragonfly.toml", "eflops.toml", "eflops-server.toml", "geo.toml", "imported.toml",
                    "moe.toml", "multi-tenant.toml", "nccl-algorithms.toml", "own-policy.toml", "policies-bigraph.toml",
                    "policies-fattree.toml", "policies-leafspine.toml", "straggler.toml", "torus.toml",
                    "training-scaling.toml", "transport.toml")

SMALL_BIGRAPH = ["-t", "bigraph:m=2,n=4"]
GEO = ["-t", "leafspine:leaves=2,spines=1,hosts=4", "--bw", "50", "--link", "leaf-spine:rate=10,delay=10"]
TENANTS = ["-t", "fattree:k=4", "-p", "ecmp", "--bw", "20"]
# workload files ([[job]] tables) -> the flags `bigraph-emu model --workload FILE` runs them with: the
# command in their own comment, else the fabric of the experiment that uses them
WORKLOAD_FILES = {
    "background.toml": [],   # its comment's command: the default fabric (bigraph:m=2,n=4, 50 Mbit/s)
    "elastic.toml": [],      # likewise
    "workloads/geo-hierarchical.toml": GEO,   # geo.toml
    "workloads/geo-ring.toml": GEO,
    "workloads/lockstep.toml": SMALL_BIGRAPH + ["--bw", "20"],   # straggler.toml
    "workloads/lockstep-straggler.toml": SMALL_BIGRAPH + ["--bw", "20"],
    "workloads/moe.toml": SMALL_BIGRAPH + ["--bw", "20"],   # moe.toml
    "workloads/resnet-like.toml": SMALL_BIGRAPH + ["-a", "halving-doubling", "-m", "hdrm", "--bw", "8"],
    "workloads/tenant-a.toml": TENANTS,   # multi-tenant.toml
    "workloads/tenants.toml": TENANTS,    # 16 ranks: two jobs of 8 do not fit 8 hosts
    "workloads/two-tenants.toml": SMALL_BIGRAPH + ["-m", "round-robin"],   # its comment's command
}

# topology files (emulator/fabric/files.py): `bigraph-emu model -t file:FILE` with these flags
TOPOLOGY_FILES = {
    "topologies/abilene.graphml": ["--hosts-per-switch", "2"],   # 22 hosts: 11 PoPs of 2
    "topologies/two-tier.toml": [],
}

# sweep files ([grid] and/or [[points]]): `bigraph-emu sweep FILE`
SWEEP_FILES = ("sweep-placement.toml", "sweep-placement-32.toml")

# example traces -> (importer, flags of `bigraph-emu model --workload FORMAT:TRACE`, ranks); a Chakra trace
# is a folder of one <prefix>.<rank>.et per rank, every one of which the importer must read
TRACES = {
    "simai-example.txt": ("simai", SMALL_BIGRAPH + ["--bw", "20"], 8),   # imported.toml's fabric; all_gpus: 8
    "chakra-dp4": ("chakra", SMALL_BIGRAPH, 4),
    "chakra-send-recv": ("chakra", SMALL_BIGRAPH, 4),
}

# routing policies of one's own (routes(fabric, demands)) -> the flags `bigraph-emu model -p file:POLICY` runs
# them with: the command in their own comment
POLICY_FILES = {"policies/avoid_busiest.py": SMALL_BIGRAPH + ["-c", "allreduce"]}

# programs for `bigraph-emu exec` (MPICH or torch, and root); bench_common.py is the module both import
REAL_CLIENTS = ("real-clients/mpi_allreduce.py", "real-clients/torch_allreduce.py")
CLIENT_MODULES = REAL_CLIENTS + ("real-clients/bench_common.py",)

TOOLS = ("transport_table.py",)   # the transport experiment's table, from its results folder

# the labs in Jupyter, each run by tests/unit/test_notebooks.py; notebooks/data/ holds the results
# folder an emulation recorded for them (its command: experiments/README.md)
NOTEBOOK_FILES = ("notebooks/hdrm.ipynb", "notebooks/ecmp.ipynb", "notebooks/incast.ipynb")
NOTEBOOK_DATA = "notebooks/data"


def path_of(name: str) -> str:
    return os.path.join(EXPERIMENTS, name)


def trace_files(name: str) -> list[str]:
    """The files an example trace is made of, relative to experiments/."""
    if TRACES[name][0] == "chakra":
        return sorted(os.path.relpath(p, EXPERIMENTS) for p in glob.glob(os.path.join(path_of(name), "*.*.et")))
    return [name]


def covered() -> dict[str, str]:
    """Every file a case below reads -> its kind."""
    files = {name: "experiment" for name in EXPERIMENT_FILES}
    files |= {name: "workload" for name in WORKLOAD_FILES}
    files |= {name: "sweep" for name in SWEEP_FILES}
    files |= {name: "topology" for name in TOPOLOGY_FILES}
    files |= {name: "policy" for name in POLICY_FILES}
    files |= {f: "trace" for name in TRACES for f in trace_files(name)}
    files |= {name: "real client" for name in CLIENT_MODULES}
    files |= {name: "tool" for name in TOOLS}
    files |= {name: "notebook" for name in NOTEBOOK_FILES}
    files |= {name: "notebook data" for name in notebook_data()}
    return files


def notebook_data() -> list[str]:
    """The files of the results folders the notebooks read, relative to experiments/."""
    found = glob.glob(os.path.join(path_of(NOTEBOOK_DATA), "**", "*"), recursive=True)
    return sorted(os.path.relpath(p, EXPERIMENTS) for p in found if os.path.isfile(p))


def is_not_an_example(relative: str) -> bool:
    """README files (what to run, not something to run: the README's own
    test below checks experiments/README.md) and Python's bytecode cache
    (written beside bench_common.py when the real clients' tests import it)."""
    parts = relative.split(os.sep)
    return os.path.basename(relative) == "README.md" or "__pycache__" in parts or relative.endswith(".pyc")


def model(argv: list[str], capsys) -> tuple[int, str, str]:
    """`bigraph-emu model ARGV` in process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main(["model", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def job_names(workload: str) -> list[str]:
    """The jobs (not background load) of a workload, as the project's loader reads them."""
    return [job.name for job in load_workload(workload).jobs if job.background is None]


def check_workload_prediction(run: dict, workload: str) -> None:
    assert run["run"].startswith(f"workload {workload}"), run["run"]
    expected = job_names(workload)
    assert expected, f"{workload}: no job"
    assert sorted({row["job"] for row in run["jobs"]}) == sorted(expected), run["run"]
    for row in run["jobs"]:
        assert row["time_s"] > 0 and row["end_s"] >= row["time_s"] - 1e-9, row


def read_csv(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---- every file is a case ----------------------------------------------------------------

def test_every_file_in_experiments_is_tested():
    found = set()
    for folder, dirs, files in os.walk(EXPERIMENTS):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found |= {os.path.relpath(os.path.join(folder, f), EXPERIMENTS) for f in files}
    examples = {f for f in found if not is_not_an_example(f)}
    cases = covered()
    untested = sorted(examples - set(cases))
    assert not untested, f"files in experiments/ that no case covers (add each to a table above): {untested}"
    gone = sorted(set(cases) - examples)
    assert not gone, f"the tables above name files experiments/ does not have: {gone}"


@pytest.mark.parametrize("name", [n for n in covered() if n.endswith(".toml")])
def test_a_toml_file_is_of_its_kind(name):
    """A TOML file's table is the kind its top-level keys say: a workload in
    EXPERIMENT_FILES would be refused by --experiment, and so on."""
    with open(path_of(name), "rb") as f:
        keys = set(tomllib.load(f))
    kind = covered()[name]
    said = "workload" if "job" in keys else "sweep" if keys & {"grid", "points"} else \
        "topology" if keys & {"switch", "link"} else "experiment"
    assert kind == said, f"{name}: its keys {sorted(keys)} make it a {said} file, the tables call it a {kind}"


# ---- experiments --------------------------------------------------------------------------

@pytest.mark.parametrize("name", EXPERIMENT_FILES)
def test_experiment_runs_through_the_model(name, tmp_path, capsys):
    path = path_of(name)
    runs = load_experiment(path).runs
    assert runs
    code, out, err = model(["--experiment", path, "--json", "--out", str(tmp_path / "out")], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert len(got) == len(runs)
    for spec, run in zip(runs, got):
        if spec.workload:
            check_workload_prediction(run, spec.workload)
            continue
        assert run["run"].startswith(f"{spec.collective} {spec.algorithm}"), run["run"]
        assert [s["size_bytes"] for s in run["sizes"]] == list(spec.sizes)
        assert all(s["time_s"] > 0 and s["busbw_mbps"] > 0 for s in run["sizes"]), run
    steps = read_csv(str(tmp_path / "out" / "model_steps.csv"))
    collective_runs = {i for i, spec in enumerate(runs) if not spec.workload}
    assert {int(row["run"]) for row in steps} == collective_runs
    assert all(float(row["end_s"]) > 0 for row in steps)


@pytest.mark.parametrize("name", EXPERIMENT_FILES)
def test_experiment_prints_a_table_per_run(name, capsys):
    """What a user reads (without --json): a heading per run naming its
    collective or workload, a row per size with a positive time, and the
    mean bus bandwidth of each collective run."""
    path = path_of(name)
    runs = load_experiment(path).runs
    code, out, err = model(["--experiment", path], capsys)
    assert code == 0, err
    headings = [line for line in out.splitlines() if line.startswith("# ") and " (model" in line]
    assert [h.split()[1] for h in headings] == [spec.collective if not spec.workload else "workload"
                                                for spec in runs], headings
    rows = [line.split() for line in out.splitlines() if re.match(r"\s+\d+\s+[\d.]+\s", line)]
    assert [int(r[0]) for r in rows] == [size for spec in runs if not spec.workload for size in spec.sizes]
    assert all(float(r[1]) > 0 for r in rows)
    assert out.count("# Avg bus bandwidth") == sum(not spec.workload for spec in runs)


# ---- workloads and traces -----------------------------------------------------------------

@pytest.mark.parametrize("name", WORKLOAD_FILES)
def test_workload_runs_through_the_model(name, tmp_path, capsys):
    path = path_of(name)
    code, out, err = model(["--workload", path, *WORKLOAD_FILES[name], "--json", "--out", str(tmp_path / "out")],
                           capsys)
    assert code == 0, err
    (run,) = json.loads(out)
    check_workload_prediction(run, path)
    assert os.path.isfile(tmp_path / "out" / "model_steps.csv")


@pytest.mark.parametrize("name", TRACES)
def test_trace_runs_through_the_model(name, tmp_path, capsys):
    importer, flags, ranks = TRACES[name]
    reference = f"{importer}:{path_of(name)}"
    (job,) = load_workload(reference).jobs
    assert job.name == name and job.ranks == ranks
    if importer == "chakra":   # a file per rank, each read (ops per rank where the ranks' programs differ)
        assert len(trace_files(name)) == ranks and len(job.rank_ops) in (0, ranks)
    code, out, err = model(["--workload", reference, *flags, "--json", "--out", str(tmp_path / "out")], capsys)
    assert code == 0, err
    (run,) = json.loads(out)
    assert run["ranks"] == ranks
    check_workload_prediction(run, reference)


# ---- routing policies ---------------------------------------------------------------------

@pytest.mark.parametrize("name", POLICY_FILES)
def test_policy_runs_through_the_model(name, tmp_path, capsys):
    code, out, err = model(["-p", f"file:{path_of(name)}", *POLICY_FILES[name], "--json"], capsys)
    assert code == 0, err
    (run,) = json.loads(out)
    assert all(s["time_s"] > 0 and s["busbw_mbps"] > 0 for s in run["sizes"]), run


# ---- sweeps -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SWEEP_FILES)
def test_sweep_dry_run_and_one_point(name, capsys):
    path = path_of(name)
    plan = load_sweep(path)
    capsys.readouterr()
    assert main(["sweep", path, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"# sweep {plan.name}: {len(plan.points)} points, {len(plan.skipped)} left out" in out
    assert "# estimate: " in out
    # one point, as a sweep's worker models it (the first: at 4,096 ranks, a ring well under a second)
    point = plan.points[0]
    rows = points.model_point(point, {})
    assert not any(row.get("error") for row in rows), rows
    assert [row["size_bytes"] for row in rows] == list(point.spec.sizes)
    assert all(row["model_time_s"] > 0 for row in rows), rows


# ---- real clients -------------------------------------------------------------------------

@pytest.mark.parametrize("name", CLIENT_MODULES)
def test_real_client_compiles(name, tmp_path):
    py_compile.compile(path_of(name), cfile=str(tmp_path / "client.pyc"), doraise=True)


def readme_commands(path: str, command: str) -> list[list[str]]:
    """Every `bigraph-emu COMMAND ...` of a README, as argv: the lines of its
    code blocks (backslash continuations joined, comments cut) and its
    inline code."""
    text = re.sub(r"\\\n\s*", " ", open(path, encoding="utf-8").read())
    fence = re.compile(r"^```.*?\n(.*?)^```", re.M | re.S)
    lines = [line for block in fence.findall(text) for line in block.splitlines()]
    lines += re.findall(r"`(bigraph-emu [^`]+)`", fence.sub("", text))
    return [shlex.split(line, comments=True) for line in lines if line.startswith(f"bigraph-emu {command} ")]


def load_bench_common():
    spec = importlib.util.spec_from_file_location("bench_common", path_of("real-clients/bench_common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", REAL_CLIENTS)
def test_real_client_exec_command_parses(name, tmp_path, monkeypatch):
    """The command of real-clients/README.md, checked as `exec` checks it
    before building anything (execute.prepare), but not run: that needs root,
    and MPICH or torch. --mpi's search for mpiexec is left out (the clients'
    packages are optional); the program's own flags go through its parser."""
    monkeypatch.chdir(REPO)   # the README's paths are from the repository's folder
    commands = [argv for argv in readme_commands(CLIENTS_README, "exec") if f"experiments/{name}" in argv]
    assert commands, f"real-clients/README.md has no `bigraph-emu exec ... experiments/{name}` command"
    bench = load_bench_common()
    for argv in commands:
        args = check_values(parser().parse_args(argv[1:]))
        program = args.program[1:] if args.program[:1] == ["--"] else args.program
        assert args.mpi == (name == "real-clients/mpi_allreduce.py")
        job = execute.prepare(flag_values(args), program, False, None, str(tmp_path / "out"), args.experiment)
        assert job.command[1] == path_of(name)
        assert len(job.plan.hosts) == 8
        _, sizes = bench.parse_args(bench.parser(os.path.basename(name), ""), program[2:])
        assert sizes
    assert not os.path.exists(tmp_path / "out")


# ---- the transport experiment's table -----------------------------------------------------

def transport_folder(folder) -> list:
    """A results folder shaped as transport.toml's: a row per counted call of
    every run and size in collectives.csv, two switch ports' queue samples
    per call in links.csv, and a host link without a queue sample."""
    runs = load_experiment(path_of("transport.toml")).runs
    calls, links = [], []
    for index, spec in enumerate(runs):
        for size in spec.sizes:
            for rep in range(2):
                call = len(calls)
                calls.append({"run": index, "collective": spec.collective, "tcp": spec.tcp,
                              "queue_discipline": spec.queue_discipline, "size_bytes": size, "repetition": rep,
                              "time_s": (1 + index / 10) * size / 2**20, "queue_drops": index, "queue_marks": rep,
                              "tcp_retrans": 0, "fidelity": "ok"})
                for t in range(3):
                    for link, backlog in (("bgs0-bgs2", 3028 * (t + 1)), ("bgs1-bgs3", 1514), ("bgh0", "")):
                        links.append({"run": index, "size_bytes": size, "repetition": rep, "call": call,
                                      "t_s": t / 10, "link": link, "backlog_bytes": backlog})
    for file, rows in (("collectives.csv", calls), ("links.csv", links)):
        with open(folder / file, "w", newline="") as f:
            writer = csv.DictWriter(f, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return runs


@pytest.mark.parametrize("name", TOOLS)
def test_transport_table_writes_its_table(name, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("transport_table", path_of(name))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    runs = transport_folder(tmp_path)
    assert tool.main([str(tmp_path)]) == 0
    table = (tmp_path / "transport.md").read_text()
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    assert len(rows) == sum(len(spec.sizes) for spec in runs)
    baseline = [r for r in rows if "| cubic | fifo |" in r]
    assert baseline and all("| 1.00 |" in r for r in baseline)   # cubic over drop-tail against itself
    assert all("bgs0-bgs2" in r for r in rows)   # the busiest switch port
    assert (tmp_path / "transport-queues.png").stat().st_size > 0
    assert tool.main([str(tmp_path / "nothing-here")]) == 2


# ---- topology files -----------------------------------------------------------------------

@pytest.mark.parametrize("name", TOPOLOGY_FILES)
def test_topology_file_runs_through_the_model(name, capsys):
    """The file's fabric, at the model's default allreduce: every host a rank."""
    topology = f"file:{path_of(name)}"
    code, out, err = model(["-t", topology, *TOPOLOGY_FILES[name], "-b", "1M", "-e", "1M", "--json"], capsys)
    assert code == 0, err
    [run] = json.loads(out)
    assert topology in run["run"] and run["ranks"] >= 8, run["run"]
    assert all(s["time_s"] > 0 and s["busbw_mbps"] > 0 for s in run["sizes"]), run


# ---- experiments/README.md ----------------------------------------------------------------

def test_readme_names_every_example():
    text = open(README, encoding="utf-8").read()
    names = (set(EXPERIMENT_FILES) | set(WORKLOAD_FILES) | set(SWEEP_FILES) | set(TRACES) | set(REAL_CLIENTS)
             | set(TOPOLOGY_FILES) | set(NOTEBOOK_FILES) | set(POLICY_FILES))
    missing = sorted(n for n in names | set(TOOLS) if n not in text)
    assert not missing, f"experiments/README.md does not name: {missing}"


def test_readme_commands_parse(monkeypatch):
    """Every `bigraph-emu` command of experiments/README.md parses, and the
    files it names exist (run from the repository's folder)."""
    monkeypatch.chdir(REPO)
    commands = [argv for command in ("run", "model", "sweep", "compare", "exec")
                for argv in readme_commands(README, command)]
    assert len(commands) >= len(EXPERIMENT_FILES)
    for argv in commands:
        if any(re.fullmatch(r"[A-Z_]+", word) for word in argv):   # a placeholder: `bigraph-emu sweep FILE`
            continue
        args = check_values(parser().parse_args(argv[1:]))
        for value in (getattr(args, "experiment", None), getattr(args, "file", None),
                      (getattr(args, "workload", None) or "").partition(":")[2] or getattr(args, "workload", None),
                      (getattr(args, "topology", None) or "").partition("file:")[2]):
            assert not value or os.path.exists(value), f"{' '.join(argv)}: no {value}"
