"""Elastic jobs: `resize` and `stop_ms` read and checked; an elastic job
compiled as one job whose iterations run on the group of their rank count
(the ranks it adds on hosts other jobs left free, a rendezvous at each
resize); the model's iteration times follow the closed form of each
group; stop_ms cuts iterations; jobs.csv presents it as one job."""
import tomllib

import pytest

from emulator.fabric.topology import LinkProfile, build
from emulator.model.iterations import iterations, modelled
from emulator.model.simulation import predict
from emulator.records.metrics import payload_efficiency
from emulator.routes.routing import forwarding_table
from emulator.workloads.job import TOKEN_BYTES, WorkloadError
from emulator.workloads.program import compile_workload
from emulator.workloads.workload import parse_workload

MiB = 1 << 20
SIZE = 8 * MiB
RING = f'ops = [{{op = "allreduce", bytes = {SIZE}, algorithm = "ring"}}]\n'
ONE_SWITCH = "leafspine:leaves=1,spines=1,hosts=8"   # every ring on it is uncongested


def read(text: str):
    return parse_workload(tomllib.loads(text), "w.toml")


def fabric(topology=ONE_SWITCH, rate=100.0):
    return build(topology, LinkProfile(host_rate_mbps=rate, switch_rate_mbps=rate))


def elastic(resize="[{at_iteration = 2, ranks = 8}]", iterations=4, ranks=4, extra=""):
    return f'[[job]]\nname = "e"\nranks = {ranks}\niterations = {iterations}\nresize = {resize}\n{extra}{RING}'


# --- reading --------------------------------------------------------------------------------

def test_a_resize_gives_every_iteration_its_rank_count():
    job = read(elastic("[{at_iteration = 2, ranks = 8}, {at_iteration = 3, ranks = 2}]", 5,
                       extra="stop_ms = 9000\n")).jobs[0]
    assert job.resize == ((2, 8), (3, 2)) and job.stop_s == 9.0
    assert [job.ranks_in(i) for i in range(5)] == [4, 4, 8, 2, 2] and job.most_ranks == 8
    assert job.at(2).ranks == 8 and job.at(2).dp == 8 and job.at(0) is job


def test_groups_follow_the_resize():
    job = read('[[job]]\nranks = 4\ntp = 2\niterations = 3\nresize = [{at_iteration = 1, ranks = 8}]\n'
               'ops = [{op = "allreduce", bytes = "1M", group = "dp"}]\n').jobs[0]
    assert (job.dp, job.at(1).dp) == (2, 4)


BAD = [
    ("not a list", "resize = 8", "", "resize must be a list of tables"),
    ("empty", "resize = []", "", "resize must be a list of tables"),
    ("not tables", "resize = [8]", "", "resize must be a list of tables"),
    ("no ranks", "resize = [{at_iteration = 2}]", "", "resize 1: give at_iteration and ranks"),
    ("no iteration", "resize = [{ranks = 8}]", "", "resize 1: give at_iteration and ranks"),
    ("unknown key", "resize = [{at_iteration = 2, ranks = 8, when = 3}]", "", r"nothing else \(not when\)"),
    ("at zero", "resize = [{at_iteration = 0, ranks = 8}]", "", "resize 1: at_iteration must be a whole number from 1 to 3"),
    ("at the end", "resize = [{at_iteration = 4, ranks = 8}]", "", "at_iteration must be a whole number from 1 to 3"),
    ("out of order", "resize = [{at_iteration = 2, ranks = 8}, {at_iteration = 2, ranks = 2}]", "",
     "resize 2: at_iteration must be a whole number from 3 to 3"),
    ("at a float", "resize = [{at_iteration = 2.0, ranks = 8}]", "", "at_iteration must be a whole number"),
    ("ranks zero", "resize = [{at_iteration = 2, ranks = 0}]", "", "resize 1: ranks must be a whole number from 1"),
    ("ranks text", 'resize = [{at_iteration = 2, ranks = "8"}]', "", "resize 1: ranks must be a whole number"),
    ("same ranks", "resize = [{at_iteration = 2, ranks = 4}]", "", "ranks = 4 is the rank count it already has"),
    ("tp x pp", "resize = [{at_iteration = 2, ranks = 6}]", "tp = 4\n", "resize 1: tp x pp = 4 does not divide ranks = 6"),
]


@pytest.mark.parametrize("resize, extra, words", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_resizes_are_refused_naming_the_job_and_key(resize, extra, words):
    with pytest.raises(WorkloadError, match="job 'e': .*" + words):
        read(f'[[job]]\nname = "e"\nranks = 4\niterations = 4\n{resize}\n{extra}{RING}')


@pytest.mark.parametrize("text, words", [
    ('[[job]]\nname = "e"\niterations = 4\nresize = [{at_iteration = 2, ranks = 8}]\n' + RING,
     "resize needs the job's first rank count: give ranks"),
    ('[[job]]\nname = "e"\nranks = 4\nresize = [{at_iteration = 1, ranks = 8}]\n' + RING,
     "resize needs iterations >= 2"),
    ('[[job]]\nname = "e"\nranks = 4\nduration_ms = 100\nresize = [{at_iteration = 1, ranks = 8}]\n' + RING,
     "resize needs iterations, not duration_ms"),
    ('[[job]]\nname = "e"\nranks = 4\niterations = 3\nstop_ms = 0\n' + RING, "stop_ms = 0 must come after start_ms = 0"),
    ('[[job]]\nname = "e"\nranks = 4\niterations = 3\nstart_ms = 50\nstop_ms = 50\n' + RING,
     "stop_ms = 50 must come after start_ms = 50"),
    ('[[job]]\nname = "e"\nranks = 4\niterations = 3\nstop_ms = -5\n' + RING, "stop_ms must be a number from 0"),
    ('[[job]]\nname = "e"\nranks = 4\niterations = 3\nstop_ms = "soon"\n' + RING, "stop_ms must be a number"),
    ('[[job]]\nname = "e"\nranks = 4\nduration_ms = 500\nstop_ms = 900\n' + RING,
     "stop_ms cuts the job's iterations: give iterations, not duration_ms"),
    ('[[job]]\nname = "e"\nranks = 4\niterations = 3\ntemplate = "parameter-server"\n'
     'resize = [{at_iteration = 1, ranks = 1}]\n', r"template parameter-server needs ranks >= 2 \(at 1 ranks\)"),
    ('[[job]]\nname = "e"\nimport = "simai:x.txt"\niterations = 3\nresize = [{at_iteration = 1, ranks = 8}]\n',
     "import = .* not with resize"),
])
def test_bad_elastic_jobs_are_refused(text, words):
    with pytest.raises(WorkloadError, match=words):
        read(text)


# --- compiled --------------------------------------------------------------------------------

def test_iterations_run_on_the_group_of_their_rank_count():
    compiled = compile_workload(read(elastic("[{at_iteration = 2, ranks = 8}, {at_iteration = 3, ranks = 2}]", 4)),
                                fabric())
    (layout,) = compiled.jobs
    assert list(layout.ranks) == list(range(8)) and compiled.hosts == [f"bgh{i}" for i in range(8)]
    for rank in range(8):
        steps = compiled.schedule.steps[rank]
        for i, size in enumerate([4, 4, 8, 2]):
            first, end = layout.iterations[rank][i]
            if rank >= size:
                assert end == first, (rank, i)   # not in this iteration's group
                continue
            ring = steps[first:end]
            assert len(ring) == 2 * (size - 1)   # a ring allreduce of `size` ranks
            assert {t.peer for s in ring for t in s.sends} == {(rank + 1) % size}
            assert sum(t.nbytes for s in ring for t in s.sends) == pytest.approx(2 * (size - 1) / size * SIZE, abs=2 * size)


def test_a_resize_is_a_rendezvous_through_rank_0():
    """4 -> 8 at iteration 2, 8 -> 2 at 3: the old group's ranks tell rank 0
    they have ended, then rank 0 tells the new group's ranks to begin."""
    compiled = compile_workload(read(elastic("[{at_iteration = 2, ranks = 8}, {at_iteration = 3, ranks = 2}]", 4)),
                                fabric())
    (layout,) = compiled.jobs

    def rendezvous(rank):
        """(peers sent to, peers received from) of each rendezvous step, and where it is."""
        steps = compiled.schedule.steps[rank]
        return [([t.peer for t in s.sends], [t.peer for t in s.recvs], k) for k, s in enumerate(steps)
                if s.phase == "rendezvous"]

    def peers(rank):
        return [(sends, recvs) for sends, recvs, _ in rendezvous(rank)]

    everyone = list(range(1, 8))
    assert peers(0) == [([], [1, 2, 3]), (everyone, []), ([], everyone), ([1], [])]
    assert peers(1) == [([0], []), ([], [0])] * 2
    assert peers(5) == [([], [0]), ([0], [])]   # joins at iteration 2, leaves at 3
    bounds = layout.iterations[5]
    assert [k for *_, k in rendezvous(5)] == [bounds[2][0] - 1, bounds[2][1]]   # between iterations
    assert all(t.nbytes == TOKEN_BYTES for r in range(8) for s in compiled.schedule.steps[r]
               if s.phase == "rendezvous" for t in s.sends + s.recvs)


def test_added_ranks_go_on_hosts_other_jobs_left_free_and_the_first_keep_theirs():
    w = read(elastic("[{at_iteration = 2, ranks = 5}]", ranks=2, extra='placement = "round-robin"\n')
             + '[[job]]\nname = "other"\nranks = 3\nplacement = "naive"\nops = [{op = "compute", ms = 1}]\n')
    e, other = compile_workload(w, fabric("bigraph:m=2,n=4")).jobs   # 2 hosts per switch
    assert e.hosts[:2] == ["bgh0", "bgh2"]                     # round-robin, first
    assert other.hosts == ["bgh1", "bgh3", "bgh4"]              # then the other job, on what was free
    assert e.hosts[2:] == ["bgh5", "bgh6", "bgh7"]              # the leftovers, round-robin: a switch at a time


def test_a_host_list_names_every_rank_an_elastic_job_ever_has():
    hosts = '["bgh7", "bgh6", "bgh5", "bgh4", "bgh3", "bgh2", "bgh1", "bgh0"]'
    (layout,) = compile_workload(read(elastic(extra=f"placement = {hosts}\n")), fabric()).jobs
    assert layout.hosts == [f"bgh{i}" for i in range(7, -1, -1)]
    with pytest.raises(WorkloadError, match="placement: the host list names 4 hosts for 8 ranks"):
        compile_workload(read(elastic(extra='placement = ["bgh0", "bgh1", "bgh2", "bgh3"]\n')), fabric())


def test_sharing_hosts_an_elastic_job_still_adds_ranks_on_hosts_other_than_its_own():
    w = read("share_hosts = true\n" + elastic(extra='placement = "naive"\n'))
    (layout,) = compile_workload(w, fabric()).jobs
    assert layout.hosts == [f"bgh{i}" for i in range(8)]


def test_no_leftover_hosts_for_the_ranks_a_job_adds_is_refused():
    w = read(elastic() + '[[job]]\nname = "rest"\nops = [{op = "compute", ms = 1}]\n')   # takes every free host
    with pytest.raises(WorkloadError, match="job 'e': resize to 8 ranks: the 4 ranks it adds: 4 ranks do not fit "
                                            "the 0 free hosts"):
        compile_workload(w, fabric())


# --- the model ------------------------------------------------------------------------------

EFFICIENCY = payload_efficiency(9000)   # the model's payload share of the wire at MTU 9000


def ring_s(ranks: int, rate_mbps: float = 100.0) -> float:
    """A ring allreduce's closed form, uncongested, without latency: 2(n-1)/n of the size at the link rate."""
    return 2 * (ranks - 1) / ranks * SIZE * 8 / (rate_mbps * 1e6)


def test_the_model_times_each_iteration_by_its_group():
    fab = fabric()
    compiled = compile_workload(read(elastic("[{at_iteration = 2, ranks = 8}, {at_iteration = 3, ranks = 2}]", 4)), fab)
    prediction = predict(fab, forwarding_table(fab, "shortest"), compiled.schedule, compiled.hosts)
    its = iterations(compiled.jobs[0], *modelled(prediction))
    assert [it["time_s"] for it in its] == pytest.approx([ring_s(4), ring_s(4), ring_s(8), ring_s(2)], rel=1e-6)
    assert its[2]["start_s"] >= its[1]["end_s"]   # the new group starts after the rendezvous


def model_rows(tmp_path, text: str, method: str, **keys):
    from emulator.plan.run_plan import model_workload
    from emulator.spec.experiment import make_run
    path = tmp_path / "w.toml"
    path.write_text(text)
    spec = make_run({"workload": str(path), "topology": ONE_SWITCH, "host_rate_mbps": 100, "switch_rate_mbps": 100,
                     "model_alpha_us": 0, "mtu": 9000, **keys})
    return model_workload(spec, method)


def test_lock_step_and_exact_agree_on_an_elastic_job(tmp_path):
    text = elastic("[{at_iteration = 1, ranks = 8}, {at_iteration = 3, ranks = 4}]", 4)
    ranks, exact, _, _ = model_rows(tmp_path, text, "exact")
    _, fast, approximation, why = model_rows(tmp_path, text, "lockstep")
    assert ranks == 8 and why == "" and approximation.startswith("lock-step")
    assert [r["ranks"] for r in exact] == [r["ranks"] for r in fast] == [4, 8, 8, 4]
    assert [r["time_s"] for r in fast] == pytest.approx([r["time_s"] for r in exact], rel=1e-6)
    # 4 -> 8 ranks: each rank sends 2(n-1)/n of the size: 1.5 -> 1.75
    assert fast[1]["time_s"] / fast[0]["time_s"] == pytest.approx(ring_s(8) / ring_s(4), rel=1e-6)


@pytest.mark.parametrize("method", ["exact", "lockstep"])
def test_stop_ms_cuts_the_iterations_that_end_after_it(tmp_path, method):
    four, eight = ring_s(4, 100 * EFFICIENCY), ring_s(8, 100 * EFFICIENCY)
    ends = [four, 2 * four, 2 * four + eight]   # then more 8-rank iterations
    stop_ms = (ends[2] + 0.5 * eight) * 1e3
    _, rows, _, _ = model_rows(tmp_path, elastic(iterations=6, extra=f"stop_ms = {stop_ms}\n"), method)
    assert [r["iteration"] for r in rows] == [0, 1, 2] and [r["ranks"] for r in rows] == [4, 4, 8]
    assert [r["end_s"] for r in rows] == pytest.approx(ends, rel=1e-6)
    _, rows, _, _ = model_rows(tmp_path, elastic(iterations=6, extra=f"stop_ms = {1e3 * ends[1] * 0.99}\n"), method)
    assert [r["ranks"] for r in rows] == [4]   # the resize at 2 never comes
    _, rows, _, _ = model_rows(tmp_path, elastic(iterations=6, extra="stop_ms = 1\n"), method)
    assert len(rows) == 1                      # the first iteration always runs


def test_a_run_plans_only_the_iterations_before_the_stop_and_drops_later_resizes(tmp_path):
    from emulator.plan.run_plan import plan_run
    from emulator.spec.experiment import make_run
    path = tmp_path / "w.toml"
    path.write_text(elastic(iterations=6, extra=f"stop_ms = {1.5 * ring_s(4, 100 * EFFICIENCY) * 1e3}\n"))
    plan = plan_run(make_run({"workload": str(path), "topology": ONE_SWITCH, "host_rate_mbps": 100,
                              "switch_rate_mbps": 100, "model_alpha_us": 0}))
    (layout,) = plan.programs[0].jobs
    assert layout.job.iterations == 1 and layout.job.resize == () and plan.hosts == ["bgh0", "bgh1", "bgh2", "bgh3"]


def test_jobs_csv_presents_an_elastic_job_as_one_job_with_its_ranks_per_iteration(tmp_path):
    from emulator.plan.run_plan import Call, plan_run
    from emulator.results.jobs import job_rows, op_rows
    from emulator.results.calls import CallRecord
    from emulator.spec.experiment import make_run
    path = tmp_path / "w.toml"
    path.write_text(elastic())
    plan = plan_run(make_run({"workload": str(path), "repetitions": 1, "warmup": 0, "topology": ONE_SWITCH}))
    ends = plan.predictions[0].step_end_s
    records = [[{"start": min(ends[r][k - 1], ends[r][k]) if k else 0.0, "end": ends[r][k], "sent": sum(t.nbytes for t in s.sends),
                 "received": sum(t.nbytes for t in s.recvs)} for k, s in enumerate(plan.schedules[0].steps[r])]
               for r in range(plan.ranks)]
    rows = job_rows(plan, Call(0, 0, 0), CallRecord(records, {}))
    assert [(r["job"], r["iteration"], r["ranks"], r["jobs"]) for r in rows] == \
        [("e", 0, 4, 1), ("e", 1, 4, 1), ("e", 2, 8, 1), ("e", 3, 8, 1)]
    assert all(r["time_s"] == pytest.approx(r["model_time_s"]) and r["fidelity"] == "ok" for r in rows)
    ops = op_rows(plan, Call(0, 0, 0), records)
    assert sorted({(r["iteration"], r["rank"]) for r in ops}) == [(i, r) for i in range(4) for r in
                                                                    range(4 if i < 2 else 8)]
