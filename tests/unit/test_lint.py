"""Lint (ruff, configured in pyproject.toml) is part of the tests, so CI's
`pytest tests` runs it."""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert "No module named ruff" not in proc.stderr, "ruff is missing: pip install -e .[test]"
    assert proc.returncode == 0, proc.stdout + proc.stderr
