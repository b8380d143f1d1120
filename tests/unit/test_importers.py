"""The SimAI / ASTRA-sim importer, on files written here in that format."""
import pytest

from emulator.workloads.importers import import_job
from emulator.workloads.program import compile_workload
from emulator.spec.experiment import SpecError, make_run
from emulator.fabric.topology import build
from emulator.workloads.workload import parse_workload
from emulator.workloads.job import Op, Workload, WorkloadError

HEADER = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0"
LAYERS = ["embedding -1 1000000 NONE 0 2000000 NONE 0 3000000 ALLREDUCE 4096 500000",
          "attention -1 4000000 ALLREDUCE 1024 5000000 ALLGATHER 2048 6000000 REDUCESCATTER_DP_EP 8192 500000"]


def write(tmp_path, lines, name="w.txt"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_simai_file_becomes_one_iteration_of_ops(tmp_path):
    job = import_job("simai:" + write(tmp_path, [HEADER, "2", *LAYERS]))
    assert (job.name, job.ranks, job.tp, job.dp) == ("w.txt", 8, 2, 4)
    assert list(job.ops) == [
        Op("compute", ms=1.0),                                   # forward, layer by layer (ns -> ms)
        Op("compute", ms=4.0), Op("allreduce", nbytes=1024, group="tp"),
        Op("compute", ms=5.0), Op("allgather", nbytes=2048, group="tp"),   # backward, last layer first
        Op("compute", ms=6.0), Op("reduce-scatter", nbytes=8192, group="dp", nonblocking=True),
        Op("compute", ms=2.0),
        Op("compute", ms=3.0), Op("allreduce", nbytes=4096, group="dp", nonblocking=True),
        Op("wait"), Op("compute", ms=1.0)]                         # the update times, summed
    compile_workload(Workload((job,)), build("bigraph:m=2,n=4"))


def test_compute_scale_and_ranks_come_from_the_workload_file(tmp_path):
    simai = write(tmp_path, [HEADER, "2", *LAYERS])
    toml = tmp_path / "jobs.toml"
    toml.write_text(f'[[job]]\nname = "gpt"\nimport = "simai:{simai.rsplit("/", 1)[1]}"\nranks = 4\n'
                    'iterations = 3\nplacement = "round-robin"\nparams = {compute_scale = 0.5}\n')
    import tomllib
    (job,) = parse_workload(tomllib.loads(toml.read_text()), str(toml)).jobs
    assert (job.name, job.ranks, job.iterations, job.placement) == ("gpt", 4, 3, "round-robin")
    assert job.ops[0] == Op("compute", ms=0.5)
    spec = make_run({"workload": str(toml)})
    assert spec.workload == str(toml)


@pytest.mark.parametrize("lines,words", [
    (["NEURAL model_parallel_NPU_group: 2", "1", LAYERS[0]], ["line 1", "'NEURAL'", "DATA"]),
    ([HEADER, "3", *LAYERS], ["line 2 says 3 layers", "has 2"]),
    ([HEADER, "two", *LAYERS], ["line 2", "layer count"]),
    ([HEADER, "2", LAYERS[0], "attention -1 4000000 ALLREDUCE 1024"], ["line 4", "12 fields", "got 5"]),
    ([HEADER, "2", LAYERS[0], LAYERS[1].replace("ALLGATHER", "BROADCAST")], ["line 4", "'BROADCAST'"]),
    ([HEADER, "2", LAYERS[0], LAYERS[1].replace("5000000", "fast")], ["line 4", "input-gradient compute time", "'fast'"]),
    ([HEADER.replace("pp: 1", "pp: 4"), "2", *LAYERS], ["line 1", "pp: 4", "pipeline-parallel"]),
    ([HEADER.replace("all_gpus: 8", "all_gpus: 7"), "2", *LAYERS], ["ranks", "tensor-parallel group of 2", "7"]),
])
def test_malformed_files_name_the_line(tmp_path, lines, words):
    with pytest.raises(WorkloadError) as e:
        import_job("simai:" + write(tmp_path, lines))
    assert all(w in str(e.value) for w in words), str(e.value)


def test_bad_references_and_binary_files_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(SpecError, match="workload: .*cannot read"):
        make_run({"workload": "simai:" + str(tmp_path / "missing.txt")})
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SpecError, match="not a text file"):
        make_run({"workload": "simai:" + str(binary)})
    with pytest.raises(WorkloadError, match="FORMAT:FILE"):
        import_job("nosuch:trace.et")
