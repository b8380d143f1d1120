"""Workloads in lock-step (emulator.model.lockstep) against the exact simulation."""
import pytest

from emulator.model.lockstep import JOBS_LOCKSTEP
from emulator.plan.run_plan import model_workload
from emulator.spec.experiment import SpecError, make_run

DP = 'template = "data-parallel"\n'


def run(tmp_path, jobs: str, **fields):
    path = tmp_path / "w.toml"
    path.write_text(jobs)
    return make_run({"workload": str(path), "repetitions": 1, "warmup": 0, **fields})


def both(spec):
    """The exact rows and the lock-step rows, and how lock-step predicted them."""
    _, exact, approximation, why = model_workload(spec, "exact")
    assert approximation == why == ""
    ranks, fast, approximation, why = model_workload(spec, "lockstep")
    assert len(fast) == len(exact) and ranks == sum({r["job"]: r["ranks"] for r in exact}.values()) and why == ""
    return exact, fast, approximation


def worst_error(exact, fast, keys=("end_s", "comm_s")) -> float:
    """Largest relative error of `keys` over every iteration. Not start_s: an
    iteration starts with its first rank, and where ranks drift apart in the
    exact simulation, in lock-step they all start with the last."""
    return max(abs(f[k] - e[k]) / (e[k] or 1.0) for e, f in zip(exact, fast) for k in keys)


@pytest.mark.parametrize("placement, algorithm", [("hdrm", "ring"), ("hdrm", "halving-doubling"),
                                                  ("naive", "ring"), ("naive", "halving-doubling")])
def test_an_uncongested_data_parallel_job_in_lock_step_is_the_exact_prediction(tmp_path, placement, algorithm):
    spec = run(tmp_path, f'[[job]]\nname = "dp"\nranks = 32\niterations = 2\nplacement = "{placement}"\n'
               f'{DP}params = {{algorithm = "{algorithm}"}}\n', topology="bigraph:m=4,n=8")
    exact, fast, how = both(spec)
    assert how.startswith(JOBS_LOCKSTEP)
    assert worst_error(exact, fast) < 1e-6
    assert [r["compute_s"] for r in fast] == pytest.approx([r["compute_s"] for r in exact], rel=1e-12)
    assert fast[0]["time_s"] == pytest.approx(exact[0]["time_s"], rel=1e-6)


def test_a_congested_job_in_lock_step_is_near_the_exact_prediction(tmp_path):
    """Ranks drift apart on a congested fabric; lock-step holds them
    together (measured: 4.3e-2 here, halving-doubling; rings of 16 to 32
    ranks on fat-tree, leaf-spine and BiGraph with random placement stay
    within 2e-14, 128 on fattree:k=8 within 0.8 %)."""
    spec = run(tmp_path, f'[[job]]\nname = "dp"\nranks = 16\niterations = 2\nplacement = "random"\n{DP}'
               'params = {algorithm = "halving-doubling"}\n', topology="fattree:k=4", policy="ecmp")
    exact, fast, how = both(spec)
    error = worst_error(exact, fast, ("end_s",))
    print(f"lock-step against exact, congested halving-doubling: {error:.2e}")
    assert how.startswith(JOBS_LOCKSTEP) and 1e-3 < error < 0.1


def hosts(first: int) -> str:
    return "[" + ", ".join(f'"bgh{h}"' for h in range(first, first + 8)) + "]"


def test_jobs_on_links_of_their_own_are_lock_stepped_each_by_itself(tmp_path):
    """Two jobs, each on the hosts of one switch, one given a duration, and
    one that only computes."""
    spec = run(tmp_path, f'[[job]]\nname = "a"\nranks = 8\nplacement = {hosts(0)}\niterations = 2\n{DP}'
               f'[[job]]\nname = "b"\nranks = 8\nplacement = {hosts(8)}\nstart_ms = 30\nduration_ms = 90000\n'
               'ops = [{op = "compute", ms = 5}, {op = "allreduce", bytes = "4M"}]\n'
               '[[job]]\nname = "c"\nranks = 4\nops = [{op = "compute", ms = 5}]\n', topology="bigraph:m=4,n=8")
    exact, fast, how = both(spec)
    assert how.startswith(JOBS_LOCKSTEP) and "each job by itself" in how
    assert worst_error(exact, fast) < 1e-6
    assert sum(r["job"] == "b" for r in fast) > 1 and all(r["slowdown"] == 1.0 for r in fast)


def test_jobs_sharing_links_are_simulated_exactly_and_it_says_which(tmp_path):
    spec = run(tmp_path, "".join(f'[[job]]\nname = "{n}"\nranks = 16\nplacement = "round-robin"\n'
                                 'ops = [{op = "allreduce", bytes = "8M"}]\n' for n in "ab"), topology="bigraph:m=4,n=8")
    _, rows, approximation, why = model_workload(spec, "lockstep")
    assert approximation == "" and why.startswith("jobs 'a' and 'b' share link")
    assert rows == model_workload(spec, "exact")[1] and rows[0]["slowdown"] > 1.5


@pytest.mark.parametrize("job, words", [
    ('ranks = 8\npp = 2\ntemplate = "pipeline"\n', "template pipeline gives its ranks different ops"),
    ('ranks = 8\ntp = 2\nops = [{op = "allreduce", bytes = "1M", group = "dp"}]\n', "a part of the job's ranks"),
    ('ranks = 8\nops = [{op = "broadcast", bytes = "1M"}]\n', "broadcast (ring) has no lock-step rounds"),
    ('ranks = 8\nplacement = ["bgh0", "bgh1", "bgh2", "bgh3", "bgh4", "bgh5", "bgh6", "bgh7"]\n'
     'ops = [{op = "compute", ms = 1}]\n[hosts]\nbgh3 = 0.5\n',
     "hosts compute at different speeds"),
])
def test_what_lock_step_cannot_hold_is_simulated_exactly_and_it_says_why(tmp_path, job, words):
    spec = run(tmp_path, f'[[job]]\nname = "j"\n{job}', topology="bigraph:m=4,n=8")
    _, rows, approximation, why = model_workload(spec, "lockstep")
    assert approximation == "" and why.startswith("job 'j': ") and why.endswith(words)
    assert rows == model_workload(spec, "exact")[1]


def test_auto_simulates_few_flows_exactly_and_a_bad_method_is_refused(tmp_path):
    spec = run(tmp_path, f'[[job]]\nname = "dp"\nranks = 8\n{DP}', topology="bigraph:m=4,n=8")
    assert model_workload(spec, "auto")[2:] == ("", "")
    with pytest.raises(SpecError, match="unknown model method 'fast'"):
        model_workload(spec, "fast")


def test_the_model_command_says_how_it_predicted_a_workload(tmp_path, capsys):
    import json

    from emulator import cli
    path = tmp_path / "w.toml"
    path.write_text(f'[[job]]\nname = "dp"\nranks = 32\nplacement = "hdrm"\n{DP}')
    argv = ["model", "--workload", str(path), "-t", "bigraph:m=4,n=8"]
    assert cli.main(argv + ["--method", "lockstep"]) == 0
    out = capsys.readouterr().out
    assert f"#   approximated: {JOBS_LOCKSTEP}" in out and "  dp  " in out
    assert cli.main(argv + ["--json"]) == 0   # auto: few flows, exact
    run, = json.loads(capsys.readouterr().out)
    assert run["approximation"] == "" and run["jobs"][0]["job"] == "dp"
    assert cli.main(argv + ["--jitter", "0.1"]) == 2
    assert "--jitter" in capsys.readouterr().err
    path.write_text('[[job]]\nname = "pp"\nranks = 8\npp = 2\ntemplate = "pipeline"\n')
    assert cli.main(argv + ["--method", "lockstep"]) == 0
    assert "#   exact: job 'pp': template pipeline gives its ranks different ops" in capsys.readouterr().out
