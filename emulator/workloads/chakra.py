"""Chakra execution traces (pure): the per-rank traces ASTRA-sim 2 replays
become one job whose every rank runs its own trace (`--workload chakra:FOLDER`).

The format: a folder of `NAME.<rank>.et` files, one per rank 0..N-1, each a
sequence of protobuf messages with a varint byte count before each (Chakra's
protolib encodeMessage): a GlobalMetadata, then Node messages. The messages
are declared below from the published schema, schema/protobuf/et_def.proto
of mlcommons/chakra 1.0.0 (its field numbers and enum values; no generated
code). Attributes are read from the fields Chakra's feeder reads them from;
a whole number is taken from whichever integer field holds it.

What a node becomes (NODE_TYPES):
- COMP_NODE: compute of duration_micros (ms = micros / 1000 x compute_scale),
  whether is_cpu_op or not; a rank's compute runs one op at a time.
- COMM_COLL_NODE: comm_type ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER,
  ALL_TO_ALL becomes our collective of comm_size bytes (taken as is, as
  ASTRA-sim hands it to its collective); the others are refused. pg_name ""
  or "0" is every rank (as ASTRA-sim); another process group's ranks are
  the ranks whose traces use it, and must be one of the job's groups (world,
  dp, tp, pp with the options tp and pp), or it is refused.
- COMM_SEND_NODE / COMM_RECV_NODE: a send to comm_dst, a receive from
  comm_src (global ranks), of comm_size bytes; comm_tag is not read: the
  messages between two ranks match in order.
- METADATA_NODE, INVALID_NODE, compute of 0 us, communication of 0 bytes
  and collectives on a group of one rank are skipped: no time, no traffic;
  what depends on them depends on what they depend on.
- MEM_LOAD_NODE, MEM_STORE_NODE are refused (ASTRA-sim's remote-memory
  model, not rank-to-rank traffic), as is a type the schema does not have.

Order: data_deps and ctrl_deps are both dependencies. A rank's nodes are
put in a topological order (among the nodes ready at once, communication
first, then by id, so that it starts as early as it may); a cycle is
refused. A communication node that the next node in that order depends on
is blocking; any other is issued non-blocking (tag `node<id>`) and waited
for right before the first node that depends on it (or at the end). So a
communication node starts after the op placed before it, and a rank's
non-blocking communication runs one after another, as on one stream.
The ranks must agree: every group's members run the same collectives
(kind, bytes) in the same order, and a send's bytes match the receive.
"""
from __future__ import annotations

import dataclasses
import heapq
import os
import re
from collections import defaultdict
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from emulator.inputs import InputError, read_bytes
from emulator.workloads.job import GROUPS, MAX_RANKS, Job, Op, WorkloadError, group_of

NODE_TYPES = {0: "INVALID_NODE", 1: "METADATA_NODE", 2: "MEM_LOAD_NODE", 3: "MEM_STORE_NODE", 4: "COMP_NODE",
              5: "COMM_SEND_NODE", 6: "COMM_RECV_NODE", 7: "COMM_COLL_NODE"}
SKIPPED = {"INVALID_NODE": "no op (ASTRA-sim skips it too)",
           "METADATA_NODE": "process-group metadata: no time, no traffic"}
REFUSED = {"MEM_LOAD_NODE": "a remote-memory load (ASTRA-sim's memory model), not rank-to-rank traffic",
           "MEM_STORE_NODE": "a remote-memory store (ASTRA-sim's memory model), not rank-to-rank traffic"}

COMM_TYPES = {0: "ALL_REDUCE", 1: "REDUCE", 2: "ALL_GATHER", 3: "GATHER", 4: "SCATTER", 5: "BROADCAST",
              6: "ALL_TO_ALL", 7: "REDUCE_SCATTER", 8: "REDUCE_SCATTER_BLOCK", 9: "BARRIER"}
COLLECTIVES = {"ALL_REDUCE": "allreduce", "ALL_GATHER": "allgather", "REDUCE_SCATTER": "reduce-scatter",
               "ALL_TO_ALL": "all-to-all"}   # ours, by Chakra's name
WORLD_PG = ("", "0")   # pg_name of every rank, as ASTRA-sim takes it

# the attribute field each is written to (where Chakra's feeder reads it)
ATTRIBUTE_FIELDS = {"comm_type": "int64_val", "comm_size": "int64_val", "comm_src": "int32_val",
                    "comm_dst": "int32_val", "comm_tag": "int32_val", "pg_name": "string_val",
                    "is_cpu_op": "bool_val"}

FILE_NAME = re.compile(r"^(.+)\.(0|[1-9][0-9]*)\.et$")
OPTIONS = ("compute_scale", "ranks", "tp", "pp")


# --- the messages, declared from the schema ---------------------------------------------
# Followed: schema/protobuf/et_def.proto of mlcommons/chakra, version 1.0.0 (commit 21585d8),
# package ChakraProtoMsg, proto3: the field numbers and enum values below are that file's.

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = [("double_val", 3, _F.TYPE_DOUBLE), ("float_val", 5, _F.TYPE_FLOAT), ("int32_val", 7, _F.TYPE_INT32),
            ("int64_val", 9, _F.TYPE_INT64), ("uint32_val", 11, _F.TYPE_UINT32), ("uint64_val", 13, _F.TYPE_UINT64),
            ("sint32_val", 15, _F.TYPE_SINT32), ("sint64_val", 17, _F.TYPE_SINT64),
            ("fixed32_val", 19, _F.TYPE_FIXED32), ("fixed64_val", 21, _F.TYPE_FIXED64),
            ("sfixed32_val", 23, _F.TYPE_SFIXED32), ("sfixed64_val", 25, _F.TYPE_SFIXED64),
            ("bool_val", 27, _F.TYPE_BOOL), ("string_val", 29, _F.TYPE_STRING), ("bytes_val", 31, _F.TYPE_BYTES)]
INTEGER_FIELDS = tuple(name for name, _, kind in _SCALARS
                       if kind not in (_F.TYPE_DOUBLE, _F.TYPE_FLOAT, _F.TYPE_BOOL, _F.TYPE_STRING, _F.TYPE_BYTES))


def _messages():
    """(GlobalMetadata, Node, AttributeProto) classes. The schema's list
    values (DoubleList ...) and IOInfo are not declared: read as unknown fields."""
    f = descriptor_pb2.FileDescriptorProto(name="bigraph_emu_chakra_et_def.proto", package="ChakraProtoMsg",
                                           syntax="proto3")
    node_type = f.enum_type.add(name="NodeType")
    for number, name in NODE_TYPES.items():
        node_type.value.add(name=name, number=number)

    def message(name, fields, oneof_from=0):
        """fields: (name, number, type[, type name][, "repeated"]); numbers from oneof_from on are oneof `value`."""
        m = f.message_type.add(name=name)
        if oneof_from:
            m.oneof_decl.add(name="value")
        for field_name, number, kind, *more in fields:
            label = _F.LABEL_REPEATED if "repeated" in more else _F.LABEL_OPTIONAL
            field = m.field.add(name=field_name, number=number, type=kind, label=label)
            if kind in (_F.TYPE_MESSAGE, _F.TYPE_ENUM):
                field.type_name = more[0]
            if oneof_from and number >= oneof_from:
                field.oneof_index = 0

    def attributes(number):
        return "attr", number, _F.TYPE_MESSAGE, ".ChakraProtoMsg.AttributeProto", "repeated"
    message("AttributeProto", [("name", 1, _F.TYPE_STRING), ("doc_string", 2, _F.TYPE_STRING), *_SCALARS],
            oneof_from=3)
    message("GlobalMetadata", [("version", 1, _F.TYPE_STRING), attributes(2)])
    message("Node", [("id", 1, _F.TYPE_UINT64), ("name", 2, _F.TYPE_STRING),
                     ("type", 3, _F.TYPE_ENUM, ".ChakraProtoMsg.NodeType"),
                     ("ctrl_deps", 4, _F.TYPE_UINT64, "repeated"), ("data_deps", 5, _F.TYPE_UINT64, "repeated"),
                     ("start_time_micros", 6, _F.TYPE_UINT64), ("duration_micros", 7, _F.TYPE_UINT64),
                     attributes(10)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return tuple(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ChakraProtoMsg.{name}"))
                 for name in ("GlobalMetadata", "Node", "AttributeProto"))


GlobalMetadata, Node, AttributeProto = _messages()


# --- writing (tests and the example traces) ------------------------------------------------

def trace_node(node_id: int, kind: str, deps=(), ctrl_deps=(), duration_micros: int = 0, name: str = "",
               **attrs):
    """A Node message: `kind` a NodeType name; `attrs` by name (comm_type as a
    CollectiveCommType name), each in the field ATTRIBUTE_FIELDS says."""
    types = {v: k for k, v in NODE_TYPES.items()}
    node = Node(id=node_id, name=name or f"{kind.lower()}_{node_id}", type=types[kind], data_deps=list(deps),
                ctrl_deps=list(ctrl_deps), duration_micros=duration_micros)
    for key, value in attrs.items():
        if key == "comm_type":
            value = {v: k for k, v in COMM_TYPES.items()}[value]
        node.attr.append(AttributeProto(name=key, **{ATTRIBUTE_FIELDS[key]: value}))
    return node


def encode(messages) -> bytes:
    """Messages, each after its varint byte count (Chakra's encodeMessage)."""
    out = bytearray()
    for message in messages:
        data = message.SerializeToString()
        size = len(data)
        while size > 0x7F:
            out.append(0x80 | size & 0x7F)
            size >>= 7
        out.append(size)
        out += data
    return bytes(out)


def write_traces(folder: str, name: str, ranks: list[list]) -> list[str]:
    """FOLDER/NAME.<rank>.et for every rank's nodes, each after a GlobalMetadata."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for rank, nodes in enumerate(ranks):
        path = os.path.join(folder, f"{name}.{rank}.et")
        with open(path, "wb") as f:
            f.write(encode([GlobalMetadata(version="0.0.4"), *nodes]))
        paths.append(path)
    return paths


def data_parallel_trace(ranks: int, buckets: int = 2, bucket_bytes: int = 2 << 20, forward_us: int = 200_000,
                        backward_us: int = 200_000, optimizer_us: int = 50_000) -> list[list]:
    """Every rank's nodes of one data-parallel iteration: forward, then per
    gradient bucket a slice of the backward pass and its allreduce (the next
    slice does not wait for it), then the optimizer step after every allreduce."""
    nodes = [trace_node(0, "COMP_NODE", duration_micros=forward_us, name="forward")]
    reduces = []
    for b in range(buckets):
        nodes.append(trace_node(len(nodes), "COMP_NODE", deps=[len(nodes) - 1 - (b > 0)],
                                duration_micros=backward_us // buckets, name=f"backward_{b}"))
        reduces.append(len(nodes))
        nodes.append(trace_node(len(nodes), "COMM_COLL_NODE", deps=[len(nodes) - 1], name=f"allreduce_{b}",
                                comm_type="ALL_REDUCE", comm_size=bucket_bytes))
    nodes.append(trace_node(len(nodes), "COMP_NODE", deps=reduces, duration_micros=optimizer_us, name="optimizer"))
    return [nodes] * ranks


# --- reading ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Node:
    id: int
    deps: tuple[int, ...]
    op: Op | None            # None: skipped
    group: str = ""          # a collective's pg_name
    kind: str = ""           # the node type's name


def read_chakra(folder: str, name: str, options: dict) -> Job:
    """The job of a folder of NAME.<rank>.et traces (the module docstring)."""
    where = f"chakra:{folder}"
    name = name or os.path.basename(os.path.normpath(folder))
    scale, tp, pp = _options(options, where)
    files = trace_files(folder)
    if "ranks" in options and options["ranks"] != len(files):
        raise WorkloadError(f"{where}: ranks = {options['ranks']!r}, but the folder holds {len(files)} rank files")
    if len(files) % (tp * pp):
        raise WorkloadError(f"{where}: tp x pp = {tp * pp} does not divide the {len(files)} ranks of the trace")
    shape = Job(name, len(files), tp=tp, pp=pp)
    nodes = [_read_rank(path, rank, len(files), scale) for rank, path in enumerate(files)]
    groups = _groups(shape, nodes, files, where)
    programs = [_program(_alone_skipped(shape, rank, rank_nodes, groups), groups, path)
                for rank, (rank_nodes, path) in enumerate(zip(nodes, files))]
    _check_collectives(shape, programs, files, where)
    _check_messages(programs, files, where)
    ops = [tuple(op for _, op in program) for program in programs]
    if not any(ops):
        raise WorkloadError(f"{where}: no rank has compute or communication to replay")
    if all(p == ops[0] for p in ops):
        return dataclasses.replace(shape, ops=ops[0])
    return dataclasses.replace(shape, rank_ops=tuple(ops))


def _options(options: dict, where: str) -> tuple[float, int, int]:
    scale = options.get("compute_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale >= 0 or scale == float("inf"):
        raise WorkloadError(f"{where}: compute_scale must be a number >= 0, got {scale!r}")
    shape = []
    for key in ("tp", "pp"):
        value = options.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise WorkloadError(f"{where}: {key} must be a whole number >= 1, got {value!r}")
        shape.append(value)
    return float(scale), shape[0], shape[1]


def trace_files(folder: str) -> list[str]:
    """The folder's NAME.<rank>.et files in rank order, every rank 0..N-1 there."""
    where = f"chakra:{folder}"
    try:
        names = os.listdir(folder)
    except NotADirectoryError:
        raise WorkloadError(f"{where}: not a folder; give the folder of NAME.<rank>.et files") from None
    except OSError as e:
        raise WorkloadError(f"{where}: cannot read it: {e.strerror}") from None
    by_name = defaultdict(dict)
    for file in names:
        match = FILE_NAME.match(file)
        if match:
            by_name[match.group(1)][int(match.group(2))] = os.path.join(folder, file)
    if not by_name:
        raise WorkloadError(f"{where}: holds no NAME.<rank>.et files (one per rank, NAME.0.et first)")
    if len(by_name) > 1:
        raise WorkloadError(f"{where}: holds the traces of {', '.join(sorted(by_name))}; give a folder of one trace")
    (trace, files), = by_name.items()
    if max(files) >= MAX_RANKS:
        raise WorkloadError(f"{where}: {trace}.{max(files)}.et: a job has at most {MAX_RANKS} ranks")
    missing = [r for r in range(max(files) + 1) if r not in files]
    if missing:
        raise WorkloadError(f"{where}: {trace}.{missing[0]}.et is missing (ranks 0 to {max(files)} need a file each)")
    return [files[r] for r in range(len(files))]


def read_messages(path: str) -> tuple[object, list]:
    """(GlobalMetadata, [Node]) of one trace file; WorkloadError names the file and message."""
    try:
        data = read_bytes(path)   # a regular file only, of a bounded size
    except InputError as e:
        raise WorkloadError(str(e)) from None
    if data[:2] == b"\x1f\x8b":
        raise WorkloadError(f"{path}: gzip-compressed; gunzip it first")
    messages, pos = [], 0
    while pos < len(data):
        what = "the GlobalMetadata" if not messages else f"node message {len(messages)}"
        size, pos = _varint(data, pos, f"{path}: {what}")
        if pos + size > len(data):
            raise WorkloadError(f"{path}: {what}: its length prefix says {size} bytes, the file has "
                                f"{len(data) - pos} left (cut short?)")
        message = GlobalMetadata() if not messages else Node()
        try:
            message.ParseFromString(data[pos:pos + size])
        except DecodeError:
            raise WorkloadError(f"{path}: {what} (bytes {pos} to {pos + size}) is not a Chakra "
                                f"{type(message).__name__} message") from None
        messages.append(message)
        pos += size
    if not messages:
        raise WorkloadError(f"{path}: empty; a trace starts with a GlobalMetadata message")
    return messages[0], messages[1:]


def _varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    """A 32-bit varint at pos (Chakra's _DecodeVarint32) and the position after it."""
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise WorkloadError(f"{where}: its length prefix is cut off at the end of the file")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 35:
            raise WorkloadError(f"{where}: its length prefix is not a 32-bit varint (more than 5 bytes)")
    if value >= 1 << 32:
        raise WorkloadError(f"{where}: its length prefix {value} is over 32 bits")
    return value, pos


def _read_rank(path: str, rank: int, ranks: int, scale: float) -> list[_Node]:
    _, messages = read_messages(path)
    nodes, seen = [], set()
    for message in messages:
        if message.id in seen:
            raise WorkloadError(f"{path}: node {message.id}: the id is used twice")
        seen.add(message.id)
        nodes.append(_node(message, rank, ranks, scale, f"{path}: node {message.id}"))
    for node in nodes:
        unknown = [d for d in node.deps if d not in seen]
        if unknown:
            raise WorkloadError(f"{path}: node {node.id}: depends on node {unknown[0]}, which the file does not have")
    return nodes


def _node(message, rank: int, ranks: int, scale: float, where: str) -> _Node:
    kind = NODE_TYPES.get(message.type)
    deps = tuple(dict.fromkeys([*message.data_deps, *message.ctrl_deps]))
    if kind is None:
        raise WorkloadError(f"{where}: node type {message.type} is not one of the schema's: "
                            f"{', '.join(f'{name} = {number}' for number, name in NODE_TYPES.items())}")
    if kind in REFUSED:
        raise WorkloadError(f"{where}: {kind} is not imported: {REFUSED[kind]}")
    if kind in SKIPPED:
        return _Node(message.id, deps, None, kind=kind)
    if kind == "COMP_NODE":
        ms = message.duration_micros / 1e3 * scale
        return _Node(message.id, deps, Op("compute", ms=ms) if ms > 0 else None, kind=kind)
    attrs = {a.name: a for a in message.attr}
    nbytes = _whole(attrs, "comm_size", where)
    if kind == "COMM_COLL_NODE":
        number = _whole(attrs, "comm_type", where)
        comm = COMM_TYPES.get(number, str(number))
        if comm not in COLLECTIVES:
            raise WorkloadError(f"{where}: COMM_COLL_NODE of comm_type {comm}: not imported; the collectives "
                                f"imported are {', '.join(COLLECTIVES)}")
        pg = attrs["pg_name"].string_val if "pg_name" in attrs else ""
        return _Node(message.id, deps, Op(COLLECTIVES[comm], nbytes=nbytes) if nbytes else None, pg, kind)
    mine, theirs = ("comm_src", "comm_dst") if kind == "COMM_SEND_NODE" else ("comm_dst", "comm_src")
    peer = _whole(attrs, theirs, where)
    if mine in attrs and _whole(attrs, mine, where) != rank:
        raise WorkloadError(f"{where}: {kind} with {mine} {_whole(attrs, mine, where)} in rank {rank}'s trace")
    if peer == rank or peer >= ranks:
        raise WorkloadError(f"{where}: {kind} with {theirs} {peer}: not another rank of the {ranks}")
    op = Op("send" if kind == "COMM_SEND_NODE" else "recv", nbytes=nbytes, peer=str(peer))
    return _Node(message.id, deps, op if nbytes else None, kind=kind)


def _whole(attrs: dict, key: str, where: str) -> int:
    """An attribute's whole number >= 0, from whichever integer field holds it."""
    if key not in attrs:
        raise WorkloadError(f"{where}: the attribute {key} is missing")
    field = attrs[key].WhichOneof("value")
    value = getattr(attrs[key], field) if field in INTEGER_FIELDS else None
    if value is None or value < 0:
        raise WorkloadError(f"{where}: the attribute {key} is not a whole number >= 0 "
                            f"({field or 'no value'}{'' if value is None else f' {value}'})")
    return value


# --- groups, order, ops ------------------------------------------------------------------------

def _groups(shape: Job, nodes: list[list[_Node]], files: list[str], where: str) -> dict[str, str]:
    """{pg_name: our group}: the ranks whose traces run collectives on a
    process group must be one of the job's groups."""
    users: dict[str, dict[int, int]] = defaultdict(dict)   # pg -> {rank: a node id}
    for rank, rank_nodes in enumerate(nodes):
        for node in rank_nodes:
            if node.op is not None and node.kind == "COMM_COLL_NODE" and node.group not in WORLD_PG:
                users[node.group].setdefault(rank, node.id)
    out = {pg: "world" for pg in WORLD_PG}
    for pg, ranks in users.items():
        members = sorted(ranks)
        found = [g for g in GROUPS if all(list(group_of(shape, r, g)[0]) == members for r in members)]
        if not found:
            rank, node = next(iter(ranks.items()))
            raise WorkloadError(f"{where}: process group {pg!r} (pg_name, e.g. {files[rank]} node {node}) spans "
                                f"ranks {_short(members)}, which is no group of the job (world, dp, tp, pp with "
                                f"tp = {shape.tp}, pp = {shape.pp}); give the options tp and pp that make it one")
        out[pg] = found[0]
    return out


def _short(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")


def _alone_skipped(shape: Job, rank: int, nodes: list[_Node], groups: dict[str, str]) -> list[_Node]:
    """Collectives on a group of one rank skipped: nothing moves."""
    def alone(node):
        return node.kind == "COMM_COLL_NODE" and len(group_of(shape, rank, groups[node.group])[0]) == 1
    return [dataclasses.replace(node, op=None) if node.op is not None and alone(node) else node for node in nodes]


def _program(nodes: list[_Node], groups: dict[str, str], path: str) -> list[tuple[int, Op]]:
    """A rank's (node id, op) in order; waits carry the id of the node they precede."""
    kept = _contracted(nodes, path)
    order = _order(kept)
    position = {node.id: i for i, node in enumerate(order)}
    first_child: dict[int, int] = {}
    for node in order:
        for dep in node.deps:
            first_child[dep] = min(first_child.get(dep, len(order)), position[node.id])
    waits = defaultdict(list)
    program = []
    for i, node in enumerate(order):
        program += [(node.id, Op("wait", tag=tag)) for tag in waits[i]]
        op = node.op
        if op.kind in ("send", "recv"):
            op = dataclasses.replace(op, group="world")
        elif op.kind != "compute":
            op = dataclasses.replace(op, group=groups[node.group])
        # A send or receive blocks: its peer's program differs, and the agents match a
        # transfer's two ends by their channel (a non-blocking op gets one of its own)
        overlaps = op.kind not in ("compute", "send", "recv")
        if overlaps and first_child.get(node.id) != i + 1:
            op = dataclasses.replace(op, nonblocking=True, tag=f"node{node.id}")
            if node.id in first_child:
                waits[first_child[node.id]].append(op.tag)
        program.append((node.id, op))
    return program


def _contracted(nodes: list[_Node], path: str) -> list[_Node]:
    """The nodes with an op, each depending on the nearest nodes with an op
    before it (skipped nodes passed through); a cycle is refused."""
    by_id = {node.id: node for node in nodes}
    effective: dict[int, tuple[int, ...]] = {}
    for node in _order(nodes, path):
        deps = []
        for dep in node.deps:
            deps += [dep] if by_id[dep].op is not None else effective[dep]
        effective[node.id] = tuple(dict.fromkeys(deps))
    return [dataclasses.replace(node, deps=effective[node.id]) for node in nodes if node.op is not None]


def _order(nodes: list[_Node], path: str = "") -> list[_Node]:
    """Kahn's topological order; among ready nodes communication (and what
    takes no time) first, then by id."""
    by_id = {node.id: node for node in nodes}
    waiting = {node.id: len(node.deps) for node in nodes}
    children = defaultdict(list)
    for node in nodes:
        for dep in node.deps:
            children[dep].append(node.id)

    def key(node):
        return (node.op is not None and node.op.kind == "compute", node.id)
    ready = [key(node) for node in nodes if not node.deps]
    heapq.heapify(ready)
    order = []
    while ready:
        node = by_id[heapq.heappop(ready)[1]]
        order.append(node)
        for child in children[node.id]:
            waiting[child] -= 1
            if not waiting[child]:
                heapq.heappush(ready, key(by_id[child]))
    if len(order) < len(nodes):
        cycle = _cycle(by_id, {n for n, left in waiting.items() if left})
        raise WorkloadError(f"{path}: nodes {' -> '.join(map(str, cycle))} depend on each other in a cycle")
    return order


def _cycle(by_id: dict, left: set[int]) -> list[int]:
    """A cycle among the nodes Kahn's order could not place, as ids."""
    node, seen = min(left), []
    while node not in seen:
        seen.append(node)
        node = next(d for d in by_id[node].deps if d in left)
    return seen[seen.index(node):] + [node]


# --- the ranks agree ---------------------------------------------------------------------------

def _check_collectives(shape: Job, programs: list, files: list[str], where: str) -> None:
    """Every group's members run the same collectives in the same order."""
    calls: dict[tuple, dict[int, list]] = defaultdict(dict)   # (group, members) -> {rank: [(op, node)]}
    for rank, program in enumerate(programs):
        for node, op in program:
            if op.kind not in ("compute", "wait", "send", "recv"):
                members = tuple(group_of(shape, rank, op.group)[0])
                calls[(op.group, members)].setdefault(rank, []).append((op, node))
    for (group, members), by_rank in calls.items():
        first = members[0]
        for rank in members:
            mine, theirs = by_rank.get(first, []), by_rank.get(rank, [])
            for i in range(max(len(mine), len(theirs))):
                a, b = (mine[i] if i < len(mine) else None), (theirs[i] if i < len(theirs) else None)
                if a is None or b is None or (a[0].kind, a[0].nbytes) != (b[0].kind, b[0].nbytes):
                    raise WorkloadError(f"{where}: ranks {first} and {rank} disagree on collective {i + 1} of "
                                        f"group {group} (ranks {_short(list(members))}): "
                                        f"{_call(a, files[first])} against {_call(b, files[rank])}")


def _call(call, path: str) -> str:
    if call is None:
        return f"none in {path}"
    op, node = call
    return f"{op.kind} of {op.nbytes} bytes ({path} node {node})"


def _check_messages(programs: list, files: list[str], where: str) -> None:
    """The sends from a rank to another match that rank's receives from it, in order."""
    sent, received = defaultdict(list), defaultdict(list)
    for rank, program in enumerate(programs):
        for node, op in program:
            if op.kind == "send":
                sent[(rank, int(op.peer))].append((op.nbytes, node))
            elif op.kind == "recv":
                received[(int(op.peer), rank)].append((op.nbytes, node))
    for src, dst in sorted(set(sent) | set(received)):
        sends, recvs = sent[(src, dst)], received[(src, dst)]
        for i in range(max(len(sends), len(recvs))):
            s, r = (sends[i] if i < len(sends) else None), (recvs[i] if i < len(recvs) else None)
            if s is None or r is None or s[0] != r[0]:
                said = f"{s[0]} bytes ({files[src]} node {s[1]})" if s else f"nothing in {files[src]}"
                heard = f"{r[0]} bytes ({files[dst]} node {r[1]})" if r else f"nothing in {files[dst]}"
                raise WorkloadError(f"{where}: message {i + 1} from rank {src} to rank {dst}: sent {said}, "
                                    f"received {heard}")
