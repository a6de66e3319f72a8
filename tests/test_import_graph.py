"""The packages' import graph: no module imports itself through a cycle, and dependencies go one
way (docs/development.md, Layout): ``train/`` knows nothing of the curation packages; ``taggers/`` and
``mixers/`` use ``dolma_pipe`` and never each other; in ``dolma_pipe`` only the CLI knows them.

Every import counts, also those inside functions (a local import that hides a cycle is still a
cycle), but those only type checkers read (under ``if TYPE_CHECKING:``). A module importing its
own parent package is no cycle: Python has begun initialising the parent before any child.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO_ROOT

PACKAGES = ("dolma_pipe", "taggers", "mixers", "train")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO_ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of import nodes under ``if TYPE_CHECKING:``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_only(tree)
        is_pkg = path.name == "__init__.py"
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".")
                    keep = len(parts) - node.level + (1 if is_pkg else 0)
                    base = ".".join(parts[:keep] + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = {m for m in found if m in modules and m != name and m not in ancestors}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_through_a_cycle():
    assert cycles(import_graph()) == []


def test_the_check_finds_a_cycle_and_ignores_a_parent_package():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"p": {"p.x"}, "p.x": set()}) == []


def test_dependencies_go_one_way():
    graph = import_graph()
    wrong = []
    for module, deps in graph.items():
        top = module.split(".")[0]
        for dep in deps:
            other = dep.split(".")[0]
            if top == "train" and other != "train":
                wrong.append((module, dep))  # the trainer reads token shards and knows nothing else
            if {top, other} == {"taggers", "mixers"}:
                wrong.append((module, dep))
            if top == "dolma_pipe" and other in ("taggers", "mixers") and module != "dolma_pipe.cli":
                wrong.append((module, dep))
    assert wrong == []
