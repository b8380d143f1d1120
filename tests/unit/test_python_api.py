"""The Python interface (bigraph_emu) and its page, docs/python.md: every
```python block of the page runs (but the one that needs root, skipped and
said why); spec, model and read against what the command line gives for
the same input; bad input raises BadInput naming the key, file or row;
emulate without root raises NeedsRoot before anything is made. Pure, fast."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil

import pandas as pd
import pytest

import bigraph_emu as be
from emulator import cli
from emulator.records.links import directed_links
from emulator.results.verdict import trusted

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGE = os.path.join(ROOT, "docs", "python.md")
MEASURED = os.path.join(ROOT, "tests", "fixtures", "results-without-links")
NEEDS_ROOT = "# needs root"   # the first line of a block the tests do not run


def page_blocks() -> list[str]:
    with open(PAGE, encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), re.M | re.S)


def test_the_page_has_examples_and_one_needs_root():
    blocks = page_blocks()
    assert len(blocks) >= 4
    assert sum(b.startswith(NEEDS_ROOT) for b in blocks) == 1


@pytest.mark.parametrize("block", page_blocks(), ids=lambda b: b.splitlines()[0][:40])
def test_every_example_of_the_page_runs(block, monkeypatch, capsys):
    if block.startswith(NEEDS_ROOT):
        pytest.skip("this example emulates (root, Mininet and Open vSwitch): unit tests build no fabric")
    monkeypatch.chdir(ROOT)   # the examples name the repository's files from its folder
    exec(compile(block, PAGE, "exec"), {})
    assert capsys.readouterr().out.strip()   # each example prints what it shows


# --- spec ---------------------------------------------------------------------------------

def test_a_dict_and_a_file_give_the_same_runs(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text('name = "two"\n[defaults]\ntopology = "fattree:k=4"\nsizes = "1M"\n'
                    '[[runs]]\npolicy = "ecmp"\n[[runs]]\npolicy = "spread"\n')
    from_file = be.spec(path)
    from_dict = be.spec({"defaults": {"topology": "fattree:k=4", "sizes": "1M"},
                         "runs": [{"policy": "ecmp"}, {"policy": "spread"}]})
    assert from_file.runs == from_dict.runs
    assert [r.policy for r in from_dict.runs] == ["ecmp", "spread"]


def test_keys_override_every_run_as_flags_do():
    demo = be.spec(os.path.join(ROOT, "experiments", "demo.toml"), sizes="1M", policy="ecmp")
    assert [(r.mapping, r.sizes, r.policy) for r in demo.runs] == [("naive", (1 << 20,), "ecmp"),
                                                                   ("hdrm", (1 << 20,), "ecmp")]


@pytest.mark.parametrize("source, keys, named", [
    ({"topology": "bigraph:m=2,n=4", "mapping": "consecutive"}, {}, "mapping"),
    ({"topologyy": "bigraph:m=2,n=4"}, {}, "topologyy"),
    ({"topology": "bigraph:m=2,n=4"}, {"host_rate_mbps": -5}, "host_rate_mbps"),
    ({"defaults": {"topology": "nothing:k=1"}}, {}, "topology"),
    ("no-such-experiment.toml", {}, "no-such-experiment.toml"),
    (["topology"], {}, "list"),
])
def test_bad_input_raises_bad_input_naming_it(source, keys, named):
    with pytest.raises(be.BadInput, match=re.escape(named)):
        be.spec(source, **keys)
    assert issubclass(be.BadInput, ValueError)


# --- model ----------------------------------------------------------------------------------

def test_model_gives_what_the_command_line_prints(capsys):
    args = ["model", "-t", "bigraph:m=2,n=4", "-a", "halving-doubling", "-m", "naive", "-b", "1M", "-e", "2M",
            "--json"]
    assert cli.main(args) == 0
    printed = json.loads(capsys.readouterr().out)[0]["sizes"]
    got = be.model(be.spec({"topology": "bigraph:m=2,n=4", "algorithm": "halving-doubling", "mapping": "naive",
                            "sizes": "1M:2M:2"}))
    assert got.verdict == "model" and got.folder is None
    assert got.collectives["time_s"].tolist() == [row["time_s"] for row in printed]
    assert got.collectives["busbw_mbps"].tolist() == [row["busbw_mbps"] for row in printed]


def test_model_links_are_the_fabrics_and_show_where_flows_meet():
    experiment = be.spec(os.path.join(ROOT, "experiments", "demo.toml"), sizes="1M")
    got = be.model(experiment)
    labels = {l.label for l in directed_links(experiment.runs[0].fabric())}
    assert set(got.links["link"]) <= labels
    busiest = got.links[got.links["kind"] == "switch"].groupby("mapping")["max_flows"].max()
    per_step = got.steps.groupby("mapping")["max_flows"].max()
    assert busiest.to_dict() == per_step.to_dict()   # the busiest link of the busiest step, seen both ways
    assert busiest["naive"] > busiest["hdrm"] == 1   # HDRM gives every exchange a link of its own


def test_model_of_a_workload_gives_its_jobs():
    got = be.model(be.spec({"topology": "fattree:k=4",
                            "workload": os.path.join(ROOT, "experiments", "workloads", "tenants.toml")}))
    assert len(got.jobs) and {"job", "time_s", "run", "policy"} <= set(got.jobs.columns)
    assert got.collectives.empty


# --- read and emulate --------------------------------------------------------------------------

def test_read_gives_a_folders_tables_and_verdict():
    folder = be.read(MEASURED)
    assert folder.folder == MEASURED and folder.steps.empty and folder.links.empty
    counted = folder.collectives[folder.collectives["repetition"] >= 0]
    assert folder.verdict == ("ok" if counted["fidelity"].map(trusted).all() else "untrusted")
    assert folder.collectives["busbw_mbps"].dtype == float   # a column the report leaves as text, as numbers


def test_read_names_a_damaged_row(tmp_path):
    copy = shutil.copytree(MEASURED, tmp_path / "run")
    table = pd.read_csv(copy / "collectives.csv", dtype=str, keep_default_na=False)
    table.loc[2, "time_s"] = "soon"   # the file's line 4
    table.to_csv(copy / "collectives.csv", index=False)
    with pytest.raises(be.BadInput, match=r"collectives.csv: line 4: time_s"):
        be.read(copy)
    with pytest.raises(be.BadInput, match="no such results folder"):
        be.read(tmp_path / "nothing")


def test_emulate_without_root_builds_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(be.api.os, "geteuid", lambda: 1000)
    out = tmp_path / "out"
    with pytest.raises(be.NeedsRoot, match="needs root"), contextlib.redirect_stdout(io.StringIO()):
        be.emulate(be.spec({"topology": "bigraph:m=2,n=4", "sizes": "1M"}), out=str(out))
    assert not os.listdir(tmp_path)
