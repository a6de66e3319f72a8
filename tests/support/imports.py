"""Reading a module's imports from its syntax tree (the import-graph and packaging tests)."""

from __future__ import annotations

import ast


def type_checking_only(tree: ast.AST) -> set[int]:
    """ids of import nodes under ``if TYPE_CHECKING:``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip
