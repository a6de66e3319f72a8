"""The packages' import graph: no module imports itself through a cycle, and the layers of
docs/development.md (Layers) hold: who may import whom, and that nothing but ``dolma_pipe.__main__``
imports the CLI.

Every import counts, also those inside functions (a local import that hides a cycle is still a
cycle), but those only type checkers read (under ``if TYPE_CHECKING:``). So do imports by string:
a ``"module:Attr"`` literal naming a project module (the CLI's ``COMMANDS`` targets), the literal
argument of ``importlib.import_module``/``__import__``, and the literal after ``"-m"`` in a command
line (a module run in a subprocess). A module importing its own parent package is no cycle: Python
has begun initialising the parent before any child.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.support.imports import type_checking_only
from tests.support.repo import REPO_ROOT

PACKAGES = ("dolma_pipe", "taggers", "mixers", "report", "train")

# Who may import whom (docs/development.md, Layers): a module obeys the most specific entry that
# names it or a package above it, and may import what the entry lists (modules or packages).
LAYERS: dict[str, tuple[str, ...]] = {
    # The top: the command line knows every stage (by string, in COMMANDS) and the taggers' registry.
    "dolma_pipe.cli": PACKAGES,
    "dolma_pipe.__main__": ("dolma_pipe.cli",),
    # The core: I/O, the runner and the stages that need no plugin family. The token-shard format
    # (train.shards: numpy only) is shared by the tokenizer, the index and the trainer.
    "dolma_pipe": ("dolma_pipe", "train.shards"),
    # The warc stage runs Dolma's pre/post taggers (one module of it: its tagging).
    "dolma_pipe.stages.warc.tagging": ("dolma_pipe", "train.shards", "taggers"),
    "taggers": ("taggers", "dolma_pipe"),
    "mixers": ("mixers", "dolma_pipe"),
    # Choosing a mixture trains proxy models: mix-search is the one stage that runs the trainer.
    "mixers.search": ("mixers", "dolma_pipe", "train"),
    # The report reads what every stage wrote, with the stages' own code.
    # A training run's goodput too, from its ledger (train.ledger, train.goodput: no torch).
    "report": ("report", "dolma_pipe", "taggers", "mixers", "train.shards", "train.ledger", "train.goodput"),
    # The trainer reads token shards and knows nothing of the curation packages.
    "train": ("train",),
    "train.shards": ("train.shards",),
    "train.ledger": ("train.ledger",),
    "train.goodput": ("train.goodput", "train.ledger"),
}
CLI = "dolma_pipe.cli"
CLI_IMPORTERS = ("dolma_pipe.__main__",)
# What the token-shard format may import beside the standard library: the core imports it, so it
# must not pull in torch (the `train` extra).
SHARDS_THIRD_PARTY = {"numpy"}

_TARGET = re.compile(rf"^({'|'.join(PACKAGES)})(\.\w+)*:\w+$")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO_ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(name: str, tree: ast.AST, is_pkg: bool) -> set[str]:
    """What the import statements of module ``name`` name (every prefix a ``from`` line implies)."""
    skip = type_checking_only(tree)
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
    return found


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def string_imports(tree: ast.AST) -> set[str]:
    """The modules a module imports by string: ``"pkg.module:Attr"`` literals of a project package,
    ``import_module("...")``/``__import__("...")`` with a literal, and ``"-m", "..."`` in a list."""
    found: set[str] = set()
    for node in ast.walk(tree):
        text = _literal(node)
        if text is not None and _TARGET.match(text):
            found.add(text.partition(":")[0])
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            module = _literal(node.args[0])
            if called in ("import_module", "__import__") and module is not None:
                found.add(module)
        elif isinstance(node, (ast.List, ast.Tuple)):
            for flag, arg in zip(node.elts, node.elts[1:]):
                module = _literal(arg)
                if _literal(flag) == "-m" and module is not None:
                    found.add(module)
    return found


def _in_project(module: str) -> bool:
    return module.split(".")[0] in PACKAGES


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports, by statement or by string. A string naming a
    project module that does not exist is kept (``unknown_modules`` reports it)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        found = {m for m in _imports(name, tree, path.name == "__init__.py") if m in modules}
        found |= {m for m in string_imports(tree) if _in_project(m)}
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = {m for m in found if m != name and m not in ancestors}
    return graph


def third_party_imports(module: str) -> set[str]:
    """The top-level names a module imports that are neither the standard library nor the project."""
    path = _modules()[module]
    tree = ast.parse(path.read_text(), str(path))
    tops = {m.split(".")[0] for m in _imports(module, tree, path.name == "__init__.py") | string_imports(tree) if m}
    return {t for t in tops if t not in sys.stdlib_module_names and t not in PACKAGES and t != "__future__"}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str, layers: dict[str, tuple[str, ...]] = LAYERS) -> str:
    return max((p for p in layers if _under(module, p)), key=len)


def layering_violations(graph: dict[str, set[str]], layers: dict[str, tuple[str, ...]] = LAYERS) -> list[tuple[str, str]]:
    """(module, what it imports) for every import its layer does not allow, and every import of
    the CLI by another module than ``__main__``."""
    wrong = []
    for module, deps in sorted(graph.items()):
        allowed = layers[layer_of(module, layers)]
        for dep in sorted(deps):
            if not any(_under(dep, a) for a in allowed) or (_under(dep, CLI) and module not in CLI_IMPORTERS):
                wrong.append((module, dep))
    return wrong


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
        for w in sorted(graph.get(v, ())):
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


def test_every_string_import_names_a_module():
    modules = _modules()
    unknown = sorted((m, d) for m, deps in import_graph().items() for d in deps if d not in modules)
    assert unknown == []


def test_the_cli_targets_are_string_imports_of_the_cli():
    from dolma_pipe.cli import COMMANDS

    targets = {c.target.partition(":")[0] for c in COMMANDS if c.target}
    assert targets and targets <= import_graph()[CLI]


def test_layers_hold():
    assert layering_violations(import_graph()) == []


def test_the_token_shard_format_needs_no_torch():
    assert third_party_imports("train.shards") <= SHARDS_THIRD_PARTY


def test_the_goodput_ledger_and_its_report_need_the_standard_library_only():
    assert third_party_imports("train.ledger") == third_party_imports("train.goodput") == set()


def test_the_layer_check_finds_a_violation():
    graph = {
        "dolma_pipe.runner": {"mixers.stage"},  # the core reaching up
        "taggers.stage": {"mixers.rules"},  # a plugin family reaching sideways
        "mixers.stage": {"train.trainer"},  # only mix-search runs the trainer
        "mixers.search.stage": {"train.trainer", "train.shards"},
        "report.discover": {"mixers.report", "dolma_pipe.cli"},  # the CLI, from below it
        "train.shards": {"dolma_pipe.storage"},
        "dolma_pipe.__main__": {"dolma_pipe.cli"},
        "dolma_pipe.cli": {"report", "taggers.registry"},
    }
    assert layering_violations(graph) == [
        ("dolma_pipe.runner", "mixers.stage"),
        ("mixers.stage", "train.trainer"),
        ("report.discover", "dolma_pipe.cli"),
        ("taggers.stage", "mixers.rules"),
        ("train.shards", "dolma_pipe.storage"),
    ]


def test_string_imports_are_seen():
    tree = ast.parse(
        'T = "mixers.stage:MixStage"\n'
        'importlib.import_module("report.stage")\n'
        '__import__("taggers")\n'
        'cmd = [sys.executable, "-m", "train", "--config", "x"]\n'
        'note = "time: 12:00"\n'
    )
    assert string_imports(tree) == {"mixers.stage", "report.stage", "taggers", "train"}
