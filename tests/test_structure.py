"""The product's size rules (docs/development.md, "Writing a stage"): no class over 400 lines,
and the runner, which every stage goes through, readable in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dolma_pipe", "taggers", "mixers", "report", "train")
MAX_CLASS_LINES = 400
MAX_RUNNER_LINES = 350


def _classes() -> list[tuple[int, str]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    assert node.end_lineno is not None
                    out.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(ROOT)}:{node.name}"))
    return out


def test_no_class_is_over_400_lines():
    classes = _classes()
    assert len(classes) > 100, "the walk found the product's classes"
    too_long = sorted((n, name) for n, name in classes if n > MAX_CLASS_LINES)
    assert not too_long, f"classes over {MAX_CLASS_LINES} lines (cut them along what they hold): {too_long}"


def test_the_runner_reads_in_one_sitting():
    lines = (ROOT / "dolma_pipe" / "runner.py").read_text(encoding="utf-8").count("\n")
    assert lines < MAX_RUNNER_LINES, f"dolma_pipe/runner.py has {lines} lines: move what it holds into its own module"
