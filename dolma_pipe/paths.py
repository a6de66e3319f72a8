"""Dolma's path conventions: where attributes live for a document file, and relative names.

For ``X/documents/a/b.jsonl.gz`` the attribute file of experiment ``name`` is
``X/attributes/name/a/b.jsonl.gz``: the first path component equal to
``documents`` is replaced, exactly as Dolma does, so attribute trees written by
either tool are found by the other.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from dolma_pipe import storage
from dolma_pipe.errors import DolmaPipeError

DOCUMENTS = "documents"
_GLOB_CHARS = re.compile(r"[*?\[]")


class PathError(DolmaPipeError, ValueError):
    """An input pattern or output path cannot be used; the message names it."""


def _split(path: str) -> tuple[str, list[str]]:
    if "://" in path:
        scheme, rest = path.split("://", 1)
        return f"{scheme}://", rest.split("/")
    return "", path.split("/")


def documents_index(path: str) -> int:
    _, parts = _split(path)
    try:
        return parts.index(DOCUMENTS)
    except ValueError:
        raise PathError(f"{path}: path has no '{DOCUMENTS}/' component, so attribute paths cannot be derived") from None


def attribute_file_name(document_name: str) -> str:
    """Attribute files are JSON lines even for Parquet documents: ``b.parquet`` -> ``b.jsonl.gz``."""
    return re.sub(r"\.parquet$", ".jsonl.gz", document_name)


def attribute_path(document_path: str, name: str) -> str:
    """The attribute file of experiment ``name`` for one document file (or glob)."""
    if not name or "/" in name:
        raise PathError(f"attribute name {name!r} must be a non-empty name without '/'")
    prefix, parts = _split(document_path)
    idx = documents_index(document_path)
    return attribute_file_name(prefix + "/".join(parts[:idx] + ["attributes", name] + parts[idx + 1 :]))


def attributes_root(document_path: str, name: str) -> str:
    """``X/attributes/name`` for a document path under ``X/documents``."""
    prefix, parts = _split(document_path)
    idx = documents_index(document_path)
    return prefix + "/".join(parts[:idx] + ["attributes", name])


def static_prefix(pattern: str) -> str:
    """The directory part of a glob before its first wildcard."""
    match = _GLOB_CHARS.search(pattern)
    head = pattern if match is None else pattern[: match.start()]
    return head.rsplit("/", 1)[0] if "/" in head else ""


def relative_name(path: str, pattern: str) -> str:
    """Name of ``path`` below its ``documents/`` component, or below the glob's fixed prefix."""
    prefix, parts = _split(path)
    if DOCUMENTS in parts[:-1]:
        idx = parts.index(DOCUMENTS)
        return "/".join(parts[idx + 1 :])
    base = static_prefix(pattern)
    if base and path.startswith(base.rstrip("/") + "/"):
        return path[len(base.rstrip("/")) + 1 :]
    return parts[-1]


def is_under(path: str, root: str) -> bool:
    """Whether ``path`` lies inside directory (or prefix) ``root``."""
    if storage.is_remote(path) or storage.is_remote(root):
        return path.startswith(root.rstrip("/") + "/")
    return os.path.abspath(storage.local_path(path)).startswith(os.path.abspath(storage.local_path(root)) + os.sep)


class InputFile(NamedTuple):
    path: str
    rel: str
    info: storage.FileInfo


def expand(patterns: list[str], exclude_under: str | None = None) -> list[InputFile]:
    """(path, relative name, size/mtime) for every file matched by ``patterns``, sorted and unique.

    A pattern matching nothing is an error naming it; two inputs that map to the
    same relative name would overwrite each other's outputs, so that is refused.
    Files under ``exclude_under`` (a stage's own output root) are never inputs:
    reading a run's outputs, markers or error files back in would feed on itself.
    """
    seen: dict[str, str] = {}
    seen_paths: set[str] = set()
    out: list[InputFile] = []
    for pattern in patterns:
        pattern = storage.local_path(pattern)
        matches = storage.glob_info(pattern)
        if exclude_under is not None:
            kept = [m for m in matches if not is_under(m.path, exclude_under)]
            if matches and not kept:
                raise PathError(
                    f"every file matching {pattern!r} is under the destination {exclude_under!r}; "
                    "a stage never reads its own outputs (choose another destination)"
                )
            matches = kept
        if not matches:
            raise PathError(f"no input files match {pattern!r}")
        for info in matches:
            path = info.path
            if path in seen_paths:
                continue
            seen_paths.add(path)
            rel = relative_name(path, pattern)
            if rel in seen:
                raise PathError(f"inputs {seen[rel]!r} and {path!r} map to the same output name {rel!r}")
            seen[rel] = path
            out.append(InputFile(path, rel, info))
    return sorted(out, key=lambda f: f.rel)
