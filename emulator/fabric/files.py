"""Topology files (pure): a fabric the user draws, `-t file:PATH`.

Formats, by the file's extension (docs/reference.md, "Topology files"):

- ``.toml`` / ``.json``: ``switch`` entries (``name``, optional ``role``,
  the tier the drawing and link overrides use, and ``hosts``, a count of
  hosts cabled to it), ``host`` entries (optional ``name``, the
  ``switch`` it is cabled to) and ``link`` entries between two switches
  (``a``, ``b``, optional ``rate_mbps``, ``delay_ms``, ``queue_packets``;
  a link given twice is two parallel links).
- ``.graphml`` (the Internet Topology Zoo's format, read by networkx):
  nodes are switches (named by their ``label``, else their id), edges are
  links; a node's ``hosts`` attribute gives its hosts, else every switch
  has `hosts_per_switch`. Zoo's other attributes are ignored.

This module reads and checks a file into a `Drawing`; the fabric is built
from it by emulator.fabric.topology (the project's own names, `bgs<i>`
and `bgh<i>`, since kernel objects are named after them; the user's names
are kept as labels). Every refusal is a ValueError naming the file and
the element.
"""
from __future__ import annotations

import io
import json
import math
import os
import sys
from dataclasses import dataclass, field
from xml.etree.ElementTree import ParseError

import networkx

from emulator.fabric.nodes import MAX_DELAY_MS, MAX_QUEUE_PACKETS, MAX_RATE_MBPS, MIN_RATE_MBPS, NODE_TIERS
from emulator.inputs import read_bytes, shorten

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PREFIX = "file:"           # -t file:PATH
KIND = "file"              # a file fabric's params["kind"]: no family's policy or mapping takes it
DEFAULT_ROLE = "switch"    # the tier of a switch the file gives no role
SWITCH_KEYS = ("name", "role", "hosts")
HOST_KEYS = ("name", "switch")
LINK_KEYS = ("a", "b", "rate_mbps", "delay_ms", "queue_packets")
TABLES = {"switch": SWITCH_KEYS, "host": HOST_KEYS, "link": LINK_KEYS}
MAX_NAME = 64
MAX_HOSTS_PER_SWITCH = 1 << 17   # as many as a fabric may hold (topology.MAX_HOSTS checks the sum)


@dataclass
class FileSwitch:
    label: str
    role: str = DEFAULT_ROLE
    hosts: list[str] = field(default_factory=list)   # labels of its named hosts
    count: int = 0                                   # and of unnamed ones


@dataclass(frozen=True)
class FileLink:
    a: int            # switch indices
    b: int
    rate_mbps: float | None = None   # None: the run's
    delay_ms: float = 0.0
    queue_packets: int | None = None


@dataclass
class Drawing:
    """What a topology file says, checked: its switches in file order (each
    with its hosts) and the links between them."""
    path: str
    format: str
    switches: list[FileSwitch]
    links: list[FileLink]

    def host_count(self) -> int:
        return sum(len(s.hosts) + s.count for s in self.switches)


def is_file(text: str) -> bool:
    return text.strip().startswith(PREFIX)


def path_of(text: str) -> str:
    return text.strip()[len(PREFIX):]


def beside(topology, path: str):
    """A topology file named in the file at `path` (an experiment, a sweep)
    is found beside it, as its workloads are; any other value unchanged."""
    if not isinstance(topology, str) or not is_file(topology):
        return topology
    return PREFIX + os.path.join(os.path.dirname(path), path_of(topology))


def read(path: str, hosts_per_switch: int = 1) -> Drawing:
    """The file at `path`, checked (ValueError names the file and what is wrong)."""
    if not path:
        raise ValueError("file: give a path, e.g. file:experiments/topologies/abilene.graphml")
    ext = os.path.splitext(path)[1].lower()
    readers = {".toml": _read_tables, ".json": _read_tables, ".graphml": _read_graphml}
    if ext not in readers:
        raise ValueError(f"{path}: unknown topology file extension {shorten(repr(ext))}; "
                         f"give one of: {', '.join(readers)}")
    data = read_bytes(path)
    drawing = readers[ext](path, ext[1:], data, hosts_per_switch)
    _check_whole(drawing)
    return drawing


# --- TOML and JSON ----------------------------------------------------------------------------

def _read_tables(path: str, fmt: str, data: bytes, hosts_per_switch: int) -> Drawing:
    try:
        text = data.decode("utf-8")
        doc = tomllib.loads(text) if fmt == "toml" else json.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not valid {fmt.upper()}: {shorten(str(e))}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a table of switch, host and link entries")
    unknown = sorted(set(doc) - set(TABLES))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(TABLES)}")
    entries = {key: _entries(path, doc, key) for key in TABLES}
    names: dict[str, str] = {}   # label -> what it names, to refuse a second one
    switches = [_switch(path, i, e, names) for i, e in enumerate(entries["switch"])]
    index = {s.label: i for i, s in enumerate(switches)}
    for i, e in enumerate(entries["host"]):
        where = f"{path}: host {i + 1}"
        sw = _end(where, e, "switch", index)
        label = _label(where, e.get("name", f"{switches[sw].label}.h{len(switches[sw].hosts)}"), names, "host")
        switches[sw].hosts.append(label)
    links = [_link(f"{path}: link {i + 1}", e, index) for i, e in enumerate(entries["link"])]
    return Drawing(path, fmt, switches, links)


def _entries(path: str, doc: dict, key: str) -> list[dict]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise ValueError(f"{path}: {key}: expected a list of tables ([[{key}]] in TOML)")
    for i, e in enumerate(value):
        unknown = sorted(set(e) - set(TABLES[key]))
        if unknown:
            raise ValueError(f"{path}: {key} {i + 1}: unknown key(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(TABLES[key])}")
    return value


def _switch(path: str, i: int, e: dict, names: dict) -> FileSwitch:
    where = f"{path}: switch {i + 1}"
    if "name" not in e:
        raise ValueError(f"{where}: has no name")
    label = _label(where, e["name"], names, "switch")
    where = f"{path}: switch {label!r}"
    return FileSwitch(label, _role(where, e.get("role", DEFAULT_ROLE)), count=_count(where, e.get("hosts", 0)))


def _link(where: str, e: dict, index: dict) -> FileLink:
    a, b = _end(where, e, "a", index), _end(where, e, "b", index)
    where = f"{where} ({e['a']}-{e['b']})"
    if a == b:
        raise ValueError(f"{where}: a link from a switch to itself")
    return FileLink(a, b, _number(where, e, "rate_mbps", MIN_RATE_MBPS, MAX_RATE_MBPS),
                    _number(where, e, "delay_ms", 0.0, MAX_DELAY_MS) or 0.0,
                    _number(where, e, "queue_packets", 1, MAX_QUEUE_PACKETS, whole=True))


def _end(where: str, e: dict, key: str, index: dict) -> int:
    if key not in e:
        raise ValueError(f"{where}: has no {key}")
    if not isinstance(e[key], str) or e[key] not in index:
        raise ValueError(f"{where}: {key}: no switch {shorten(repr(e[key]))} in the file")
    return index[e[key]]


# --- GraphML ----------------------------------------------------------------------------------

def _read_graphml(path: str, fmt: str, data: bytes, hosts_per_switch: int) -> Drawing:
    try:
        graph = networkx.read_graphml(io.BytesIO(data))
    except (networkx.NetworkXError, ParseError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not valid GraphML: {shorten(str(e)) or type(e).__name__}") from None
    if graph.is_directed():   # a cable carries both ways: a->b and b->a of a simple graph are one link
        graph = graph.to_undirected()
    names: dict[str, str] = {}
    switches, index = [], {}
    for node, attrs in graph.nodes(data=True):
        where = f"{path}: node {node!r}"
        label = str(attrs.get("label", node)).strip() or str(node)
        if label in names:   # Zoo files repeat a city's label for its several PoPs
            label = f"{label} ({node})"
        label = _label(where, label, names, "switch")
        hosts = _count(where, attrs["hosts"]) if "hosts" in attrs else hosts_per_switch
        index[node] = len(switches)
        switches.append(FileSwitch(label, _role(where, attrs.get("role", DEFAULT_ROLE)), count=hosts))
    links = []
    for a, b, attrs in graph.edges(data=True):
        where = f"{path}: edge {a}-{b} ({switches[index[a]].label}-{switches[index[b]].label})"
        if a == b:
            raise ValueError(f"{where}: a link from a switch to itself")
        links.append(FileLink(index[a], index[b], _number(where, attrs, "rate_mbps", MIN_RATE_MBPS, MAX_RATE_MBPS),
                              _number(where, attrs, "delay_ms", 0.0, MAX_DELAY_MS) or 0.0,
                              _number(where, attrs, "queue_packets", 1, MAX_QUEUE_PACKETS, whole=True)))
    return Drawing(path, fmt, switches, links)


# --- values -----------------------------------------------------------------------------------

def _label(where: str, value, names: dict, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise ValueError(f"{where}: name: expected text of 1 to {MAX_NAME} characters, got {shorten(repr(value))}")
    if value in names:
        raise ValueError(f"{where}: name {value!r} is given twice (a {names[value]} has it)")
    names[value] = what
    return value


def _role(where: str, value) -> str:
    """A tier name: letters, digits and '_' ('-' joins two tiers in a link override)."""
    if not (isinstance(value, str) and value.isascii() and value.replace("_", "").isalnum() and len(value) <= 32):
        raise ValueError(f"{where}: role: expected a word of letters, digits and _, got {shorten(repr(value))}")
    if value in NODE_TIERS or value == "host":
        raise ValueError(f"{where}: role: {value!r} is the project's own tier ({', '.join(NODE_TIERS)}, host)")
    return value


def _count(where: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_HOSTS_PER_SWITCH:
        raise ValueError(f"{where}: hosts: expected a whole number from 0 to {MAX_HOSTS_PER_SWITCH}, "
                         f"got {shorten(repr(value))}")
    return value


def _number(where: str, e: dict, key: str, low: float, high: float, whole: bool = False):
    """`e[key]` in [low, high], None if it is not given."""
    if key not in e:
        return None
    value = e[key]
    ok = isinstance(value, int) if whole else isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or isinstance(value, bool) or not low <= value <= high:
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{where}: {key}: expected {kind} from {low:g} to {high:g}, got {shorten(repr(value))}")
    return value if whole else float(value)


# --- the whole --------------------------------------------------------------------------------

def _check_whole(drawing: Drawing) -> None:
    """At least two switches' worth of sense: 2 hosts, one piece."""
    path, switches = drawing.path, drawing.switches
    if not switches:
        raise ValueError(f"{path}: has no switches")
    if drawing.host_count() < 2:
        raise ValueError(f"{path}: has {drawing.host_count()} hosts; a fabric needs at least 2 (give a switch "
                         "hosts, or --hosts-per-switch for GraphML)")
    cut = unreachable(len(switches), [(link.a, link.b) for link in drawing.links])
    if cut is not None:
        raise ValueError(f"{path}: switch {switches[cut].label!r} cannot be reached from "
                         f"{switches[0].label!r}: every switch must be linked to the others")


def unreachable(count: int, pairs: list[tuple[int, int]]) -> int | None:
    """The first switch (by index) not reachable from switch 0, or None."""
    near: dict[int, list[int]] = {}
    for a, b in pairs:
        near.setdefault(a, []).append(b)
        near.setdefault(b, []).append(a)
    seen, todo = {0}, [0]
    while todo:
        for n in near.get(todo.pop(), ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return next((i for i in range(count) if i not in seen), None)
