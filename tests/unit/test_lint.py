"""Lint (ruff) and the import layers (import-linter), configured in pyproject.toml, are part of the tests, so CI's
`pytest tests` runs them."""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert "No module named ruff" not in proc.stderr, "ruff is missing: pip install -e .[test]"
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_layers_hold():
    """import-linter's contracts (pyproject.toml): stages import only the
    stages below them, pure stages no adapter, no import circles."""
    lint_imports = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    assert os.path.exists(lint_imports), "import-linter is missing: pip install -e .[test]"
    proc = subprocess.run([lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 5 kept, 0 broken." in proc.stdout, proc.stdout


def test_test_files_have_unique_names():
    """The test folders are not packages, so pytest imports each file by its
    basename: two files of one name in different folders stop collection."""
    seen = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        for name in files:
            if name.startswith("test_") and name.endswith(".py"):
                seen.setdefault(name, []).append(os.path.relpath(folder, ROOT))
    assert {n: f for n, f in seen.items() if len(f) > 1} == {}
