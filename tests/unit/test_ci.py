"""CI cannot pass by accident: `.ci/run`, in a scratch copy whose every step
is a stand-in that records that it ran and exits as told, stops at the
first step that fails, with that failure's exit code."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
# the steps of .ci/run, by the program each one starts
STEPS = {"provision": "vm/provision.sh", "tests": ".venv/bin/python", "stage": "vm/stage.py"}


def scratch_ci(tmp_path, failing: str | None):
    """A copy of .ci/run beside stand-ins for its steps; `failing` exits 7."""
    os.makedirs(tmp_path / ".ci")
    shutil.copy(os.path.join(REPO, ".ci", "run"), tmp_path / ".ci" / "run")
    for name, path in STEPS.items():
        target = tmp_path / path
        os.makedirs(target.parent, exist_ok=True)
        target.write_text(f"#!/bin/sh\necho {name} >> \"{tmp_path}/ran\"\nexit {7 if name == failing else 0}\n")
        target.chmod(target.stat().st_mode | stat.S_IEXEC)
    # `python3 vm/stage.py ...`: a python3 of our own first on PATH runs the stand-in as a shell script
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text('#!/bin/sh\nexec sh "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    return subprocess.run(["sh", str(tmp_path / ".ci" / "run")], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})


def ran(tmp_path) -> list[str]:
    path = tmp_path / "ran"
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("failing", list(STEPS))
def test_ci_stops_at_the_first_step_that_fails(tmp_path, failing):
    got = scratch_ci(tmp_path, failing)
    assert got.returncode == 7, got.stderr
    order = [s for s in ran(tmp_path) if s in STEPS]
    assert order[-1] == failing and failing not in order[:-1]   # nothing after the failed step
    assert set(order) == set(list(STEPS)[:list(STEPS).index(failing) + 1])


def test_ci_passes_only_when_every_step_ran(tmp_path):
    got = scratch_ci(tmp_path, None)
    assert got.returncode == 0, got.stderr
    assert set(ran(tmp_path)) == set(STEPS)


def test_ci_says_how_long_each_step_took(tmp_path):
    got = scratch_ci(tmp_path, None)
    timed = [line for line in got.stdout.splitlines() if line.startswith("ci: '") and line.endswith(" s")]
    assert len(timed) == 5 and "took" in timed[0] and "vm/provision.sh" in timed[0]
