"""The Chakra importer, on traces written here in Chakra's format (one
NAME.<rank>.et per rank, length-delimited protobuf messages)."""
import json
import os
import tomllib

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from emulator import cli
from emulator.fabric.topology import build
from emulator.pipeline import keep_workloads
from emulator.spec.experiment import make_run
from emulator.workloads.chakra import (COLLECTIVES, AttributeProto, GlobalMetadata, Node, data_parallel_trace, encode,
                                       trace_node, write_traces)
from emulator.workloads.importers import import_job
from emulator.workloads.job import Op, Workload, WorkloadError
from emulator.workloads.program import compile_workload
from emulator.workloads.workload import parse_workload
from test_bad_input import assert_refused, guarded  # noqa: F401  (guarded: autouse, nothing can be built)

MiB = 1 << 20
EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "chakra-dp4")


def comp(node_id, micros, deps=(), **kw):
    return trace_node(node_id, "COMP_NODE", deps, duration_micros=micros, **kw)


def coll(node_id, comm_type, nbytes, deps=(), **kw):
    return trace_node(node_id, "COMM_COLL_NODE", deps, comm_type=comm_type, comm_size=nbytes, **kw)


def traces(tmp_path, ranks, name="t"):
    folder = str(tmp_path / "trace")
    write_traces(folder, name, ranks)
    return folder


def dp(ranks=4):
    """compute, allreduce, compute on every rank."""
    return [[comp(0, 1000), coll(1, "ALL_REDUCE", MiB, [0]), comp(2, 2000, [1])] for _ in range(ranks)]


# --- what a trace becomes ------------------------------------------------------------------

def test_a_data_parallel_trace_becomes_the_same_ops_on_every_rank(tmp_path):
    job = import_job("chakra:" + traces(tmp_path, dp()))
    assert (job.name, job.ranks, job.rank_ops) == ("trace", 4, ())
    assert list(job.ops) == [Op("compute", ms=1.0), Op("allreduce", nbytes=MiB), Op("compute", ms=2.0)]
    compiled = compile_workload(Workload((job,)), build("bigraph:m=2,n=4"))
    assert len(compiled.hosts) == 4


def test_send_and_recv_between_two_ranks_become_per_rank_ops_with_their_peer(tmp_path):
    sender = [comp(0, 500), trace_node(1, "COMM_SEND_NODE", [0], comm_dst=1, comm_size=4096, comm_tag=7)]
    receiver = [trace_node(0, "COMM_RECV_NODE", comm_src=0, comm_dst=1, comm_size=4096), comp(1, 500, [0])]
    job = import_job("chakra:" + traces(tmp_path, [sender, receiver]))
    assert job.ops == ()
    assert job.rank_ops == (
        (Op("compute", ms=0.5), Op("send", nbytes=4096, peer="1")),   # blocking, though nothing waits for it
        (Op("recv", nbytes=4096, peer="0"), Op("compute", ms=0.5)))
    steps = compile_workload(Workload((job,)), build("bigraph:m=1,n=2")).schedule.steps
    sends = [(t, s.channel) for s in steps[0] for t in s.sends]
    recvs = [(t, s.channel) for s in steps[1] for t in s.recvs]
    assert [(t.peer, t.nbytes) for t, _ in sends] == [(1, 4096)] and [(t.peer, t.nbytes) for t, _ in recvs] == [(0, 4096)]
    assert sends[0][1] == recvs[0][1]   # the agents match a transfer's two ends by their channel


def test_a_collective_nothing_waits_for_next_is_nonblocking_with_a_wait_before_its_first_dependent(tmp_path):
    # B depends on A only: it overlaps the allreduce; D needs both
    nodes = [comp(0, 1000), coll(1, "ALL_GATHER", MiB, [0]), comp(2, 3000, [0]), comp(3, 1000, [1, 2])]
    job = import_job("chakra:" + traces(tmp_path, [nodes] * 2))
    assert list(job.ops) == [Op("compute", ms=1.0), Op("allgather", nbytes=MiB, nonblocking=True, tag="node1"),
                             Op("compute", ms=3.0), Op("wait", tag="node1"), Op("compute", ms=1.0)]


def test_ctrl_deps_order_too_and_skipped_nodes_pass_their_dependencies_on(tmp_path):
    nodes = [comp(0, 1000), trace_node(1, "METADATA_NODE", [0]), trace_node(2, "INVALID_NODE", ctrl_deps=[1]),
             coll(3, "REDUCE_SCATTER", MiB, ctrl_deps=[2]), comp(4, 0, [3]), comp(5, 2000, [4]),
             coll(6, "ALL_TO_ALL", 0, [5])]
    job = import_job("chakra:" + traces(tmp_path, [nodes] * 2))
    # the 0 us compute and the 0-byte all-to-all are skipped; compute 5 waits for the collective through node 4
    assert list(job.ops) == [Op("compute", ms=1.0), Op("reduce-scatter", nbytes=MiB), Op("compute", ms=2.0)]


def test_communication_goes_first_among_ready_nodes(tmp_path):
    nodes = [comp(0, 1000), coll(1, "ALL_REDUCE", MiB), comp(2, 1000, [0, 1])]
    job = import_job("chakra:" + traces(tmp_path, [nodes] * 2))
    assert list(job.ops) == [Op("allreduce", nbytes=MiB, nonblocking=True, tag="node1"), Op("compute", ms=1.0),
                             Op("wait", tag="node1"), Op("compute", ms=1.0)]


def test_compute_scale_and_process_groups_that_are_the_jobs_groups(tmp_path):
    # pg "1": ranks 0-1, pg "2": ranks 2-3 (tensor-parallel pairs); pg "0" is every rank
    ranks = [[comp(0, 1000), coll(1, "ALL_REDUCE", 2048, [0], pg_name="1" if r < 2 else "2"),
              coll(2, "ALL_REDUCE", 4096, [1], pg_name="0")] for r in range(4)]
    folder = traces(tmp_path, ranks)
    job = import_job("chakra:" + folder, options={"tp": 2, "compute_scale": 0.5})
    assert (job.tp, job.dp) == (2, 2)
    assert list(job.ops) == [Op("compute", ms=0.5), Op("allreduce", nbytes=2048, group="tp"),
                             Op("allreduce", nbytes=4096, nonblocking=True, tag="node2")]
    with pytest.raises(WorkloadError) as e:   # with tp = 1, ranks 0-1 are no group of the job
        import_job("chakra:" + folder)
    assert all(w in str(e.value) for w in ("process group '1'", "ranks 0, 1", "t.0.et node 1", "tp and pp")), e.value


def test_a_collective_on_a_group_of_one_rank_is_skipped(tmp_path):
    # only rank 0 uses process group "1": with tp = 1 it is rank 0's tensor-parallel group, of one rank
    ranks = [[comp(0, 1000), coll(1, "ALL_REDUCE", MiB, [0], pg_name="1"), comp(2, 1000, [0]), comp(3, 1000, [1, 2])],
             [comp(0, 1000)]]
    job = import_job("chakra:" + traces(tmp_path, ranks))
    assert job.rank_ops == ((Op("compute", ms=1.0),) * 3, (Op("compute", ms=1.0),))
    compile_workload(Workload((job,)), build("bigraph:m=1,n=2"))


def test_a_job_of_a_workload_file_imports_a_trace_folder_beside_it(tmp_path):
    traces(tmp_path, dp())
    toml = tmp_path / "jobs.toml"
    toml.write_text('[[job]]\nname = "traced"\nimport = "chakra:trace"\nranks = 4\niterations = 2\n'
                    'params = {compute_scale = 2.0}\n')
    (job,) = parse_workload(tomllib.loads(toml.read_text()), str(toml)).jobs
    assert (job.name, job.ranks, job.iterations, job.ops[0]) == ("traced", 4, 2, Op("compute", ms=2.0))
    toml.write_text('[[job]]\nimport = "chakra:trace"\nranks = 3\n')
    with pytest.raises(WorkloadError, match="ranks = 3, but the folder holds 4 rank files"):
        parse_workload(tomllib.loads(toml.read_text()), str(toml))


def test_attributes_are_read_from_any_integer_field_of_the_published_wire_format(tmp_path):
    """A node written byte by byte from et_def.proto's field numbers:
    comm_type in int32_val (7), comm_size in uint64_val (13)."""
    def field(number, wire, payload):
        return bytes([number << 3 | wire]) + payload

    def text(number, data):
        return field(number, 2, bytes([len(data)]) + data)
    attr_type = text(1, b"comm_type") + field(7, 0, b"\x00")         # ALL_REDUCE
    attr_size = text(1, b"comm_size") + field(13, 0, b"\x80\x80\x04")  # 65536
    node = field(1, 0, b"\x01") + field(3, 0, b"\x07") + text(10, attr_type) + text(10, attr_size)
    metadata = text(1, b"0.0.4")
    folder = tmp_path / "wire"
    folder.mkdir()
    for rank in range(2):
        (folder / f"w.{rank}.et").write_bytes(bytes([len(metadata)]) + metadata + bytes([len(node)]) + node)
    assert import_job(f"chakra:{folder}").ops == (Op("allreduce", nbytes=65536, nonblocking=True, tag="node1"),)


# --- bad input -------------------------------------------------------------------------------

def raw(tmp_path, rank_bytes: list[bytes], name="t"):
    folder = tmp_path / "trace"
    folder.mkdir(exist_ok=True)
    for rank, data in enumerate(rank_bytes):
        (folder / f"{name}.{rank}.et").write_bytes(data)
    return str(folder)


GOOD = encode([GlobalMetadata(version="0.0.4"), comp(0, 1000)])


def with_nodes(*nodes):
    return encode([GlobalMetadata(version="0.0.4"), *nodes])


def with_attr(node, name, **value):
    """`node` with its attribute `name` holding `value` (a field of AttributeProto)."""
    kept = [a for a in node.attr if a.name != name]
    del node.attr[:]
    node.attr.extend([*kept, AttributeProto(name=name, **value)])
    return node


def rank_missing(p):
    folder = traces(p, [[comp(0, 1)]] * 4)
    os.remove(os.path.join(folder, "t.2.et"))
    return folder


def two_traces(p):
    traces(p, [[comp(0, 1)]])
    return traces(p, [[comp(0, 1)]], name="u")


def send(node_id, dst, nbytes, deps=(), **kw):
    return trace_node(node_id, "COMM_SEND_NODE", deps, comm_dst=dst, comm_size=nbytes, **kw)


def recv(node_id, src, nbytes, deps=(), **kw):
    return trace_node(node_id, "COMM_RECV_NODE", deps, comm_src=src, comm_size=nbytes, **kw)


# (case, the folder made in tmp_path, words the error holds)
BAD = [
    ("missing folder", lambda p: str(p / "nowhere"), ["chakra:", "nowhere", "cannot read it"]),
    ("a file, not a folder", lambda p: raw(p, [GOOD]) + "/t.0.et", ["t.0.et", "not a folder"]),
    ("no trace files", lambda p: str(p), ["holds no NAME.<rank>.et files"]),
    ("a rank file missing", rank_missing, ["t.2.et is missing", "ranks 0 to 3"]),
    ("two traces in one folder", two_traces, ["traces of t, u"]),
    ("empty file", lambda p: raw(p, [b"", GOOD]), ["t.0.et", "empty"]),
    ("gzip file", lambda p: raw(p, [b"\x1f\x8b\x08\x00rest", GOOD]), ["t.0.et", "gzip"]),
    ("truncated varint", lambda p: raw(p, [GOOD, GOOD + b"\x85"]),
     ["t.1.et", "node message 2", "length prefix is cut off"]),
    ("varint over 32 bits", lambda p: raw(p, [GOOD + b"\xff\xff\xff\xff\xff\x01", GOOD]),
     ["t.0.et", "node message 2", "32-bit"]),
    ("message cut short", lambda p: raw(p, [GOOD + b"\x32\x08\x01", GOOD]), ["t.0.et", "50 bytes", "2 left"]),
    ("a message that does not parse", lambda p: raw(p, [GOOD, GOOD + b"\x02\x08\x80"]),
     ["t.1.et", "node message 2", "not a Chakra Node message"]),
    ("metadata that does not parse", lambda p: raw(p, [b"\x01\x80", GOOD]),
     ["t.0.et", "the GlobalMetadata", "not a Chakra GlobalMetadata message"]),
    ("unknown node type", lambda p: raw(p, [GOOD, with_nodes(comp(0, 1), Node(id=5, type=42))]),
     ["t.1.et", "node 5", "node type 42", "COMM_COLL_NODE = 7"]),
    ("memory node", lambda p: traces(p, [[trace_node(3, "MEM_LOAD_NODE")]] * 2),
     ["t.0.et", "node 3", "MEM_LOAD_NODE", "not imported"]),
    ("broadcast", lambda p: traces(p, [[coll(4, "BROADCAST", MiB)]] * 2),
     ["t.0.et", "node 4", "comm_type BROADCAST", "ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL"]),
    ("comm type not in the schema", lambda p: traces(p, [[with_attr(coll(4, "ALL_REDUCE", 8), "comm_type",
                                                                    int64_val=12)]] * 2),
     ["t.0.et", "node 4", "comm_type 12"]),
    ("comm type missing", lambda p: traces(p, [[trace_node(4, "COMM_COLL_NODE", comm_size=1)]] * 2),
     ["t.0.et", "node 4", "comm_type is missing"]),
    ("comm size missing", lambda p: traces(p, [[trace_node(2, "COMM_COLL_NODE", comm_type="ALL_REDUCE")]] * 2),
     ["t.0.et", "node 2", "comm_size is missing"]),
    ("comm size text", lambda p: traces(p, [[with_attr(coll(2, "ALL_REDUCE", 8), "comm_size", string_val="1M")]] * 2),
     ["t.0.et", "node 2", "comm_size is not a whole number", "string_val"]),
    ("comm size negative", lambda p: traces(p, [[with_attr(coll(2, "ALL_REDUCE", 8), "comm_size", int64_val=-8)]] * 2),
     ["node 2", "comm_size is not a whole number >= 0", "-8"]),
    ("a cycle", lambda p: traces(p, [[comp(0, 1), comp(1, 1, [0, 2]), comp(2, 1, [1])]] * 2),
     ["t.0.et", "nodes 1 -> 2 -> 1", "cycle"]),
    ("a dependency on no node", lambda p: traces(p, [[comp(0, 1), comp(1, 1, [9])]] * 2),
     ["t.0.et", "node 1", "depends on node 9"]),
    ("an id twice", lambda p: traces(p, [[comp(0, 1), comp(0, 1)]] * 2), ["t.0.et", "node 0", "used twice"]),
    ("a send to itself", lambda p: traces(p, [[send(1, 0, 1)], [comp(0, 1)]]),
     ["t.0.et", "node 1", "comm_dst 0", "not another rank"]),
    ("a receive from a rank not there", lambda p: traces(p, [[comp(0, 1)], [recv(1, 5, 1)]]),
     ["t.1.et", "node 1", "comm_src 5"]),
    ("a receive without its source", lambda p: traces(p, [[comp(0, 1)], [trace_node(1, "COMM_RECV_NODE", comm_size=1)]]),
     ["t.1.et", "node 1", "comm_src is missing"]),
    ("a send in another rank's trace", lambda p: traces(p, [[send(1, 1, 1, comm_src=1)], [comp(0, 1)]]),
     ["t.0.et", "node 1", "comm_src 1 in rank 0's trace"]),
    ("ranks disagree on a collective's size",
     lambda p: traces(p, [[coll(1, "ALL_REDUCE", 1024)], [coll(1, "ALL_REDUCE", 2048)]]),
     ["ranks 0 and 1 disagree on collective 1", "allreduce of 1024 bytes (", "t.0.et node 1", "t.1.et node 1"]),
    ("ranks disagree on the order",
     lambda p: traces(p, [[coll(1, "ALL_REDUCE", 8), coll(2, "ALL_GATHER", 8, [1])],
                          [coll(1, "ALL_GATHER", 8), coll(2, "ALL_REDUCE", 8, [1])]]),
     ["disagree on collective 1", "allreduce of 8 bytes", "allgather of 8 bytes"]),
    ("a rank lacks a collective", lambda p: traces(p, [[coll(1, "ALL_REDUCE", 8)], [comp(0, 1)]]),
     ["disagree on collective 1", "none in", "t.1.et"]),
    ("a send nobody receives", lambda p: traces(p, [[send(1, 1, 64)], [comp(0, 1)]]),
     ["message 1 from rank 0 to rank 1", "sent 64 bytes", "t.0.et node 1", "received nothing in"]),
    ("a receive of other bytes", lambda p: traces(p, [[send(1, 1, 64)], [recv(3, 0, 32)]]),
     ["sent 64 bytes", "received 32 bytes", "t.1.et node 3"]),
    ("nothing to replay", lambda p: traces(p, [[trace_node(0, "METADATA_NODE")]] * 2), ["no rank has compute"]),
]


@pytest.mark.parametrize("case, make, words", BAD, ids=[b[0] for b in BAD])
def test_bad_traces_name_the_file_and_node(tmp_path, case, make, words):
    folder = make(tmp_path)
    with pytest.raises(WorkloadError) as e:
        import_job("chakra:" + folder)
    assert all(w in str(e.value) for w in words), str(e.value)


@pytest.mark.parametrize("options, words", [
    ({"compute_scale": -1}, ["compute_scale", ">= 0", "-1"]),
    ({"compute_scale": "fast"}, ["compute_scale", "'fast'"]),
    ({"tp": 0}, ["tp must be a whole number >= 1", "0"]),
    ({"pp": 1.5}, ["pp", "1.5"]),
    ({"tp": 3}, ["tp x pp = 3 does not divide the 4 ranks"]),
    ({"ranks": 8}, ["ranks = 8", "4 rank files"]),
    ({"speed": 2}, ["unknown option(s) speed", "compute_scale, ranks, tp, pp"]),
])
def test_bad_options_are_refused(tmp_path, options, words):
    with pytest.raises(WorkloadError) as e:
        import_job("chakra:" + traces(tmp_path, dp()), options=options)
    assert all(w in str(e.value) for w in words), str(e.value)


@pytest.fixture
def folders(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / "collectives.csv").write_text("topology,time_s\nbigraph:m=2,n=4,0.5\n")
    return {"dir": str(tmp_path), "old": str(old), "out": str(tmp_path / "out")}


@pytest.mark.parametrize("case", ["a rank file missing", "a cycle", "truncated varint", "broadcast",
                                  "ranks disagree on a collective's size"])
def test_the_command_line_refuses_bad_traces_before_anything_exists(capsys, folders, tmp_path, case):
    _, make, words = next(b for b in BAD if b[0] == case)
    folder = make(tmp_path)
    assert_refused(capsys, ["run", "-t", "bigraph:m=2,n=4", "--workload", "chakra:" + folder], ["workload", *words],
                   folders)


FUZZ = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
# a graph every rank runs: (kind, dependencies on earlier nodes, collective, bytes or micros)
GRAPHS = st.lists(st.tuples(st.sampled_from(["compute", "collective", "exchange", "metadata"]),
                            st.sets(st.integers(0, 9), max_size=3), st.sampled_from([*COLLECTIVES, "BROADCAST"]),
                            st.sampled_from([0, 64, 4096])), min_size=1, max_size=8)


def fuzzed_rank(graph, rank: int, ranks: int) -> list:
    """The graph's nodes on `rank`; an exchange sends to the next rank and receives from the one before."""
    nodes = []
    for kind, deps, comm, amount in graph:
        deps = sorted(d for d in deps if d < len(nodes))
        if kind == "compute":
            nodes.append(comp(len(nodes), amount, deps))
        elif kind == "collective":
            nodes.append(coll(len(nodes), comm, amount, deps))
        elif kind == "metadata":
            nodes.append(trace_node(len(nodes), "METADATA_NODE", deps))
        else:
            nodes.append(send(len(nodes), (rank + 1) % ranks, amount, deps))
            nodes.append(recv(len(nodes), (rank - 1) % ranks, amount, deps))
    return nodes


@FUZZ
@given(GRAPHS, st.integers(1, 4))
def test_any_graph_imports_with_every_node_and_compiles_or_is_refused(tmp_path_factory, graph, ranks):
    """A WorkloadError, or a job with an op for every node that takes time
    or moves bytes, whose every rank compiles (every wait has its op in flight;
    a collective on a group of one rank is skipped)."""
    folder = str(tmp_path_factory.mktemp("fuzz"))
    write_traces(folder, "f", [fuzzed_rank(graph, r, ranks) for r in range(ranks)])
    try:
        job = import_job("chakra:" + folder)
    except WorkloadError:
        return
    event("accepted")
    for rank, nodes in enumerate([fuzzed_rank(graph, r, ranks) for r in range(ranks)]):
        ops = [op for op in (job.rank_ops[rank] if job.rank_ops else job.ops) if op.kind != "wait"]
        moving = ranks > 1   # on one rank a collective moves nothing
        timed = [n for n in nodes if n.duration_micros or moving and any(a.name == "comm_size" and a.int64_val
                                                                         for a in n.attr)]
        assert len(ops) == len(timed)
    compile_workload(Workload((job,)), build("bigraph:m=2,n=4"), block_s=lambda *call: 0.0)


@FUZZ
@given(st.binary(max_size=80))
def test_any_bytes_after_a_good_trace_are_read_or_refused(tmp_path_factory, tail):
    folder = raw(tmp_path_factory.mktemp("bytes"), [GOOD, GOOD + tail])
    try:
        job = import_job("chakra:" + folder)
    except WorkloadError:
        return
    event("accepted")
    assert job.ranks == 2


# --- the model, results folders and the shipped example ------------------------------------------

def model_time(argv, capsys) -> float:
    assert cli.main(["model", "-t", "bigraph:m=2,n=4", "--json", *argv]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    return run["jobs"][0]["time_s"]


def test_the_model_runs_an_imported_trace_as_the_same_ops_written_out(tmp_path, capsys):
    folder = traces(tmp_path, dp())
    imported = model_time(["--workload", "chakra:" + folder], capsys)
    toml = tmp_path / "same.toml"
    toml.write_text('[[job]]\nname = "same"\nranks = 4\nops = [{op = "compute", ms = 1}, '
                    '{op = "allreduce", bytes = 1048576}, {op = "compute", ms = 2}]\n')
    assert imported == model_time(["--workload", str(toml)], capsys)
    assert imported > 0.003   # the compute, and an allreduce that takes time


def test_the_model_runs_per_rank_traces_and_overlap_shortens_them(tmp_path, capsys):
    def ranks(overlap: bool):   # per rank: their first computes differ
        return [[comp(0, first), coll(1, "ALL_REDUCE", 4 * MiB, [0]), comp(2, 200_000, [0] if overlap else [1])]
                for first in (50_000, 80_000)]
    serial = model_time(["--workload", "chakra:" + traces(tmp_path / "s", ranks(False))], capsys)
    overlapped = model_time(["--workload", "chakra:" + traces(tmp_path / "o", ranks(True))], capsys)
    assert 0.25 < overlapped < serial


def test_a_results_folder_keeps_the_trace_folder_whole(tmp_path):
    folder = traces(tmp_path, dp())
    spec = make_run({"workload": "chakra:" + folder})
    copies = keep_workloads([spec], str(tmp_path / "out"))
    copy = copies["chakra:" + folder]
    assert copy == "chakra:" + os.path.join("workloads", "0", "trace")
    assert sorted(os.listdir(tmp_path / "out" / "workloads" / "0" / "trace")) == [f"t.{r}.et" for r in range(4)]
    assert import_job("chakra:" + str(tmp_path / "out" / copy[len("chakra:"):])).ops == import_job("chakra:" + folder).ops


def test_the_shipped_example_is_what_the_writer_writes(tmp_path):
    write_traces(str(tmp_path), "dp", data_parallel_trace(4))
    shipped = sorted(f for f in os.listdir(EXAMPLE) if f.endswith(".et"))
    assert shipped == [f"dp.{r}.et" for r in range(4)]
    for name in shipped:
        with open(os.path.join(EXAMPLE, name), "rb") as f:
            assert f.read() == (tmp_path / name).read_bytes(), name
    job = import_job("chakra:" + EXAMPLE)
    assert (job.ranks, [op.kind for op in job.ops]) == (
        4, ["compute", "compute", "allreduce", "compute", "allreduce", "wait", "compute"])
