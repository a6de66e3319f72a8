"""The bench scripts run as ``python bench/NAME.py``, which puts bench/ first on the import path:
a script named like a standard module (``tokenize``) or one of the project's packages (``train``)
would be imported in its place by everything that imports that name."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.stem for p in (ROOT / "bench").glob("*.py"))
PROJECT_PACKAGES = {p.parent.name for p in ROOT.glob("*/__init__.py")}


def test_no_bench_script_shadows_a_module_it_could_import():
    assert SCRIPTS and {"dolma_pipe", "train"} <= PROJECT_PACKAGES
    shadowing = {name for name in SCRIPTS if name in sys.stdlib_module_names or name in PROJECT_PACKAGES}
    installed = {name for name in SCRIPTS if name not in {"corpus", "peers"} and importlib.util.find_spec(name) is not None}
    assert not shadowing | installed, "rename these bench scripts"


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s not in {"corpus", "peers"}])
def test_each_bench_script_starts(script):
    """Every import a bench makes resolves (--help parses its arguments and exits before any work)."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / f"{script}.py"), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout
