"""Topology files, `-t file:PATH` (emulator/fabric/files.py and
topology.from_file): each format read into a fabric, every kind of bad
input refused naming the element, the shipped files through the model,
their routes verified under every generic policy. Pure and fast."""
from __future__ import annotations

import json
import os

import pytest

from emulator import cli
from emulator.exit_codes import BAD_INPUT
from emulator.fabric.graph import HOST_PREFIX, SWITCH_PREFIX, host_address
from emulator.fabric.nodes import NodeShape
from emulator.fabric.topology import LinkProfile, build
from emulator.plan.run_plan import plan_run
from emulator.routes.routing import POLICIES, forwarding_table
from emulator.routes.verification import route_problems
from emulator.spec.experiment import RunSpec, SpecError, load_experiment, validate

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
ABILENE = os.path.join(REPO, "experiments", "topologies", "abilene.graphml")
TWO_TIER = os.path.join(REPO, "experiments", "topologies", "two-tier.toml")
GENERIC = [p.name for p in POLICIES.values() if p.fabric_kind is None and not p.needs_nodes]

SMALL = {"switch": [{"name": "spine", "role": "spine"}, {"name": "leaf1", "role": "leaf", "hosts": 2},
                    {"name": "leaf2", "role": "leaf"}],
         "host": [{"name": "gpu", "switch": "leaf2"}],
         "link": [{"a": "leaf1", "b": "spine", "rate_mbps": 10, "delay_ms": 2, "queue_packets": 30},
                  {"a": "leaf2", "b": "spine"}, {"a": "leaf2", "b": "spine"}]}


def toml_text(doc: dict) -> str:
    """SMALL-like dicts as TOML ([[switch]], [[host]], [[link]])."""
    out = []
    for table, entries in doc.items():
        for e in entries:
            out.append(f"[[{table}]]")
            out += [f"{k} = {json.dumps(v)}" for k, v in e.items()]
    return "\n".join(out) + "\n"


def graphml(nodes: list[tuple[str, dict]], edges: list[tuple[str, str]], multi: bool = False) -> str:
    keys = ('<key attr.name="label" attr.type="string" for="node" id="label"/>'
            '<key attr.name="hosts" attr.type="int" for="node" id="hosts"/>')
    body = "".join(f'<node id="{n}">' + "".join(f'<data key="{k}">{v}</data>' for k, v in attrs.items()) + "</node>"
                   for n, attrs in nodes)
    body += "".join(f'<edge source="{a}" target="{b}"/>' for a, b in edges)
    kind = ' parse.edges="multi"' if multi else ""
    return (f'<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">{keys}'
            f'<graph edgedefault="undirected"{kind}>{body}</graph></graphml>')


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- each format --------------------------------------------------------------------------

@pytest.mark.parametrize("ext", ["toml", "json"])
def test_tables_build_the_fabric_they_say(tmp_path, ext):
    path = write(tmp_path, f"small.{ext}", toml_text(SMALL) if ext == "toml" else json.dumps(SMALL))
    f = build(f"file:{path}", LinkProfile(40.0, 80, 50.0, 100))
    assert [s.name for s in f.switches] == [f"{SWITCH_PREFIX}{i}" for i in range(3)]
    assert [(s.tier, s.index) for s in f.switches] == [("spine", 0), ("leaf", 0), ("leaf", 1)]
    assert [(h.name, h.switch, h.ip) for h in f.hosts] == [(f"{HOST_PREFIX}{i}", sw, host_address(i)[0])
                                                          for i, sw in enumerate(["bgs1", "bgs1", "bgs2"])]
    assert f.params["kind"] == "file" and f.params["format"] == ext
    assert f.params["labels"] == {"bgs0": "spine", "bgs1": "leaf1", "bgs2": "leaf2", "bgh2": "gpu"}
    links = [(l.a, l.b, l.rate_mbps, l.delay_ms, l.queue_packets) for l in f.links if l.kind == "switch"]
    assert links == [("bgs1", "bgs0", 10.0, 2.0, 30), ("bgs2", "bgs0", 50.0, 0.0, 100),
                     ("bgs2", "bgs0", 50.0, 0.0, 100)]   # the run's switch rate and queue; parallel links kept
    assert {(l.rate_mbps, l.queue_packets) for l in f.links if l.kind == "host"} == {(40.0, 80)}


def test_graphml_hosts_per_switch_and_node_attribute(tmp_path):
    nodes = [("n0", {"label": "Alpha"}), ("n1", {"label": "Beta", "hosts": 0}), ("n2", {"label": "Gamma"})]
    path = write(tmp_path, "g.graphml", graphml(nodes, [("n0", "n1"), ("n1", "n2"), ("n1", "n2")], multi=True))
    f = build(f"file:{path}", hosts_per_switch=3)
    assert [len(f.hosts_on(s.name)) for s in f.switches] == [3, 0, 3]
    assert sum(l.kind == "switch" for l in f.links) == 3   # the multigraph's parallel edges
    assert f.params["labels"] == {"bgs0": "Alpha", "bgs1": "Beta", "bgs2": "Gamma"}
    assert {s.tier for s in f.switches} == {"switch"}


def test_a_directed_graphml_pair_is_one_cable(tmp_path):
    text = graphml([("a", {}), ("b", {})], [("a", "b"), ("b", "a")]).replace("undirected", "directed")
    f = build(f"file:{write(tmp_path, 'd.graphml', text)}")
    assert sum(l.kind == "switch" for l in f.links) == 1


def test_abilene_is_the_zoo_shape():
    f = build(f"file:{ABILENE}")
    assert (len(f.switches), sum(l.kind == "switch" for l in f.links), len(f.hosts)) == (11, 14, 11)
    assert "Kansas City" in f.params["labels"].values()


def test_nodes_of_accelerators_on_a_file_fabric():
    f = build(f"file:{TWO_TIER}", LinkProfile(), NodeShape(4, 1, "nvlink"))
    assert len(f.hosts) == 12 * 4 and f.node_shape().accelerators == 4


def test_a_file_link_delay_wins_over_the_runs(tmp_path):
    path = write(tmp_path, "d.toml", toml_text(SMALL))
    delays = [l.delay_ms for l in RunSpec(topology=f"file:{path}", link_delay_ms=5.0).fabric().links
              if l.kind == "switch"]
    assert delays == [2.0, 5.0, 5.0]


def test_an_experiment_finds_its_topology_file_beside_it(tmp_path):
    folder = tmp_path / "exp"
    folder.mkdir()
    write(folder, "fabric.json", json.dumps(SMALL))
    [run] = load_experiment(write(folder, "e.toml", 'name = "e"\n[defaults]\ntopology = "file:fabric.json"\n')).runs
    assert run.topology == f"file:{folder / 'fabric.json'}" and len(run.fabric().hosts) == 3


def test_a_file_link_delay_needs_netem_and_fifo(tmp_path):
    spec = RunSpec(topology=f"file:{write(tmp_path, 'd.toml', toml_text(SMALL))}")
    with pytest.raises(SpecError, match="topology: link bgs1-bgs0 .* delay and loss need netem"):
        validate(spec, has_netem=lambda: False)
    with pytest.raises(SpecError, match="red-ecn cannot be combined with topology: link bgs1-bgs0"):
        validate(RunSpec(topology=spec.topology, queue_discipline="red-ecn"))


# --- bad input ------------------------------------------------------------------------------

def _with(table: str, index: int, **changes) -> dict:
    doc = json.loads(json.dumps(SMALL))
    doc[table][index].update(changes)
    return doc


BAD_TABLES = [
    ("unknown top key", {**SMALL, "router": [{"name": "r1"}]}, ["router"]),
    ("unknown switch key", _with("switch", 0, colour="red"), ["switch 1", "colour"]),
    ("unknown link key", _with("link", 1, speed=5), ["link 2", "speed"]),
    ("switch without a name", {**SMALL, "switch": [{"role": "x"}] + SMALL["switch"]}, ["switch 1", "no name"]),
    ("duplicate switch", {**SMALL, "switch": SMALL["switch"] + [{"name": "leaf1"}]}, ["leaf1", "twice"]),
    ("host named as a switch", _with("host", 0, name="spine"), ["host 1", "spine", "twice"]),
    ("link to a missing switch", _with("link", 0, b="spine9"), ["link 1", "spine9"]),
    ("host on a missing switch", _with("host", 0, switch="leaf7"), ["host 1", "leaf7"]),
    ("self-loop", _with("link", 1, a="spine"), ["link 2", "spine-spine", "itself"]),
    ("rate too high", _with("link", 0, rate_mbps=1e9), ["link 1", "rate_mbps"]),
    ("rate not a number", _with("link", 0, rate_mbps="fast"), ["link 1", "rate_mbps"]),
    ("delay too long", _with("link", 0, delay_ms=5000), ["link 1", "delay_ms"]),
    ("queue of zero", _with("link", 0, queue_packets=0), ["link 1", "queue_packets"]),
    ("role with a dash", _with("switch", 0, role="top-tier"), ["spine", "role"]),
    ("role of a node", _with("switch", 0, role="nvswitch"), ["spine", "role"]),
    ("negative hosts", _with("switch", 1, hosts=-1), ["leaf1", "hosts"]),
    ("too many hosts", _with("switch", 1, hosts=10**9), ["leaf1", "hosts"]),
    ("too many hosts in all", {**SMALL, "switch": [{"name": f"s{i}", "hosts": 100_000} for i in range(2)],
                               "host": [], "link": [{"a": "s0", "b": "s1"}]}, ["200000 hosts is more than"]),
    ("disconnected", {**SMALL, "switch": SMALL["switch"] + [{"name": "island", "hosts": 1}]}, ["island", "reached"]),
    ("one host", {"switch": [{"name": "a", "hosts": 1}]}, ["1 hosts", "at least 2"]),
    ("no switches", {"switch": []}, ["no switches"]),
]


@pytest.mark.parametrize("case,doc,words", BAD_TABLES, ids=[c[0] for c in BAD_TABLES])
def test_bad_tables_are_refused_naming_the_element(tmp_path, case, doc, words):
    path = write(tmp_path, "bad.toml", toml_text(doc))
    with pytest.raises(SpecError) as e:
        validate(RunSpec(topology=f"file:{path}"))
    assert all(w in str(e.value) for w in ["topology", path, *words]), str(e.value)


BAD_FILES = [
    ("missing", "nothing.toml", None, ["nothing.toml"]),
    ("unknown extension", "t.yaml", "a: 1", ["unknown topology file extension", ".yaml"]),
    ("malformed TOML", "t.toml", "[[switch]\nname=", ["not valid TOML"]),
    ("malformed JSON", "t.json", '{"switch": [', ["not valid JSON"]),
    ("JSON not a table", "t.json", "[1, 2]", ["expected a table"]),
    ("malformed GraphML", "t.graphml", "<graphml><graph>", ["not valid GraphML"]),
    ("GraphML self-loop", "t.graphml", graphml([("a", {}), ("b", {})], [("a", "b"), ("b", "b")]), ["edge b-b", "itself"]),
    ("GraphML disconnected", "t.graphml", graphml([("a", {"label": "A"}), ("b", {"label": "B"}), ("c", {"label": "C"})],
                                                  [("a", "b")]), ["'C'", "reached"]),
]


@pytest.mark.parametrize("case,name,text,words", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_files_are_refused(tmp_path, case, name, text, words):
    path = write(tmp_path, name, text) if text is not None else str(tmp_path / name)
    with pytest.raises(SpecError) as e:
        validate(RunSpec(topology=f"file:{path}"))
    assert all(w in str(e.value) for w in words), str(e.value)


def test_the_cli_refuses_a_bad_file_with_exit_2(tmp_path, capsys):
    path = write(tmp_path, "bad.toml", toml_text(_with("link", 0, b="spine9")))
    assert cli.main(["model", "-t", f"file:{path}"]) == BAD_INPUT
    err = capsys.readouterr().err
    assert "spine9" in err and "link 1" in err


def test_hosts_per_switch_is_for_graphml_only(capsys):
    assert cli.main(["model", "-t", f"file:{TWO_TIER}", "--hosts-per-switch", "2"]) == BAD_INPUT
    assert "hosts_per_switch" in capsys.readouterr().err


def test_bigraph_policy_is_refused_on_a_file_fabric():
    with pytest.raises(SpecError, match="bigraph fabrics only"):
        validate(RunSpec(topology=f"file:{ABILENE}", policy="bigraph"))


# --- the shipped files through the model and the routes -----------------------------------

@pytest.mark.parametrize("path,extra", [(ABILENE, ["--hosts-per-switch", "2"]), (TWO_TIER, [])],
                         ids=["abilene", "two-tier"])
def test_model_runs_on_the_shipped_files(path, extra, capsys):
    argv = ["model", "-t", f"file:{path}", *extra, "-c", "allreduce", "-b", "1M", "-e", "1M", "--json"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    [run] = json.loads(capsys.readouterr().out)
    assert f"file:{path}" in run["run"] and run["ranks"] == (22 if path == ABILENE else 12)
    assert run["sizes"][0]["time_s"] > 0


@pytest.mark.parametrize("path", [ABILENE, TWO_TIER], ids=["abilene", "two-tier"])
@pytest.mark.parametrize("policy", GENERIC)
def test_routes_arrive_without_loops(path, policy):
    spec = RunSpec(topology=f"file:{path}", policy=policy, hosts_per_switch=1)
    fabric = validate(spec)
    table = plan_run(spec, fabric).table if POLICIES[policy].needs_demands else forwarding_table(fabric, policy)
    assert route_problems(fabric, table, policy) == []


def test_topo_names_the_files_labels(capsys):
    assert cli.main(["topo", "-t", f"file:{ABILENE}"]) == 0
    out = capsys.readouterr().out
    assert "bgs0=New York" in out and "11 switches" in out


def test_switches_without_roles_are_drawn_on_a_ring():
    from emulator.results.plots import layout
    f = build(f"file:{ABILENE}")
    pos = layout(f)
    radii = {round((x * x + y * y) ** 0.5, 6) for x, y in (pos[s.name] for s in f.switches)}
    assert len(radii) == 1 and len(set(pos.values())) == len(f.switches) + len(f.hosts)
    radius = radii.pop()
    assert all((x * x + y * y) ** 0.5 > radius for x, y in (pos[h.name] for h in f.hosts))   # hosts outside
