"""The labs of experiments/notebooks/ (docs/python.md): each is stored
without outputs, so it cannot rot into a record of an old run, and runs
headless from top to bottom (nbclient on an ipykernel kernel, this checkout's
bigraph_emu first on the path), every cell without an error and at least
one figure inline. nbclient and ipykernel come with `vm/provision.sh
--notebooks`; without them these tests skip, unless
BIGRAPH_REQUIRE_NOTEBOOKS=1 (CI), which makes a missing package a failure."""
from __future__ import annotations

import glob
import importlib.util
import json
import os

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
NOTEBOOKS = os.path.join(ROOT, "experiments", "notebooks")
# a notebook that reads a results folder recorded by an emulation -> that folder
RECORDED = {"incast.ipynb": os.path.join(NOTEBOOKS, "data", "incast")}
CELL_TIMEOUT_S = 60


def notebooks() -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(NOTEBOOKS, "*.ipynb")))


def required() -> bool:
    return os.environ.get("BIGRAPH_REQUIRE_NOTEBOOKS") == "1"


def need(what: str, missing: str, how: str) -> None:
    """Skip for a missing prerequisite, or fail where CI requires it."""
    if required():
        pytest.fail(f"{what} is required (BIGRAPH_REQUIRE_NOTEBOOKS=1) but {missing}; {how}")
    pytest.skip(f"{what}: {missing}; {how}")


def test_there_are_the_three_labs():
    assert notebooks() == ["ecmp.ipynb", "hdrm.ipynb", "incast.ipynb"]


@pytest.mark.parametrize("name", notebooks())
def test_a_notebook_is_stored_without_outputs(name):
    with open(os.path.join(NOTEBOOKS, name), encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    kept = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"
            and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not kept, (f"{name}: cells {kept} keep outputs; clear them (jupyter nbconvert --clear-output --inplace "
                      f"experiments/notebooks/{name})")
    assert any("bigraph_emu" in "".join(cell["source"]) for cell in cells), f"{name} does not use bigraph_emu"


@pytest.mark.parametrize("name", notebooks())
def test_a_notebook_runs_headless_and_draws(name, monkeypatch):
    for module in ("nbformat", "nbclient", "ipykernel"):
        if importlib.util.find_spec(module) is None:
            need("running the notebooks", f"{module} is not installed", "vm/provision.sh --notebooks installs it")
    if name in RECORDED and not os.path.isdir(RECORDED[name]):
        need(f"{name}'s results folder", f"{os.path.relpath(RECORDED[name], ROOT)} is missing",
             "experiments/README.md gives the command that records it (as root)")
    import nbformat
    from nbclient import NotebookClient
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": NOTEBOOKS}}).execute()   # raises on a cell's error, naming it
    figures = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
               if "image/png" in output.get("data", {})]
    assert figures, f"{name} drew no figure inline"
