"""Dolma's path conventions: where attributes live for a document file, and relative names.

For ``X/documents/a/b.jsonl.gz`` the attribute file of experiment ``name`` is
``X/attributes/name/a/b.jsonl.gz``: the first path component equal to
``documents`` is replaced, exactly as Dolma does, so attribute trees written by
either tool are found by the other.
"""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

import orjson

from dolma_pipe import storage
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.manifest import MANIFEST

DOCUMENTS = "documents"
_GLOB_CHARS = re.compile(r"[*?\[]")
# How many folders, from an input file's own upward, are searched for a run's manifest: a mix
# writes ``<root>/<name>-NNNN.jsonl.gz`` (or ``<root>/<stream path>/...``) and a Dolmino mix
# ``<root>/seed-<n>/documents/<source>-NNNN.jsonl.gz``, so its manifest is at most two folders up.
MANIFEST_LEVELS = 3


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


def attributes_root(document_path: str, name: str, document_dir: str = DOCUMENTS) -> str:
    """``X/attributes/name`` for a document path under ``X/<document_dir>`` (Dolma's rule;
    ``documents`` unless a dedup config's ``dedupe.document_dir`` says otherwise)."""
    prefix, parts = _split(document_path)
    if document_dir not in parts:
        key = "" if document_dir == DOCUMENTS else " (dedupe.document_dir)"
        raise PathError(f"{document_path}: path has no '{document_dir}/' component{key}, so attribute paths cannot be derived")
    idx = parts.index(document_dir)
    return prefix + "/".join(parts[:idx] + ["attributes", name])


def attribute_output_root(patterns: list[str], name: str, destination: str | None = None, document_dir: str = DOCUMENTS) -> str:
    """Where a stage that writes attributes writes set ``name`` (tag, dedup): ``<destination>/<name>``,
    else ``X/attributes/<name>`` for documents under ``X/<document_dir>/``. A wildcard in the
    documents component (Dolma's tests use ``doc*/``) is decided by each matching file, as in
    Dolma; documents from several trees need a destination."""
    if destination:
        return storage.join(destination, name)
    roots: set[str] = set()
    for pattern in patterns:
        try:
            roots.add(attributes_root(pattern, name, document_dir))
        except PathError:
            matches = storage.glob(storage.local_path(pattern))
            if not matches:
                raise
            roots.update(attributes_root(m, name, document_dir) for m in matches)
    if len(roots) > 1:
        raise PathError(f"documents come from several trees ({', '.join(sorted(roots))}); give --destination")
    return roots.pop()


def relative_below(path: str, folder: str) -> str | None:
    """``path`` below its first ``folder`` component (``a/b.jsonl.gz`` of ``X/documents/a/b.jsonl.gz``), or None."""
    _, parts = _split(path)
    return "/".join(parts[parts.index(folder) + 1 :]) if folder in parts[:-1] else None


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
    refuse_unfinished([f.path for f in out], own_root=exclude_under)
    return sorted(out, key=lambda f: f.rel)


def _norm(path: str) -> str:
    return path.rstrip("/") if storage.is_remote(path) else os.path.abspath(storage.local_path(path))


def _parent(folder: str) -> str | None:
    """The folder holding ``folder`` (normalised), or None at the top (``/``, an S3 bucket)."""
    if storage.is_remote(folder):
        scheme, rest = folder.split("://", 1)
        return f"{scheme}://{rest.rsplit('/', 1)[0]}" if "/" in rest else None
    up = os.path.dirname(folder)
    return None if up == folder else up


def _unfinished_run(folder: str) -> dict[str, Any] | None:
    """The manifest in ``folder`` when it is a dolma-pipe run's whose status is not ``complete``."""
    path = storage.join(folder, MANIFEST)
    if not storage.exists(path):
        return None
    try:
        data = orjson.loads(storage.read_bytes(path))
    except (orjson.JSONDecodeError, FileNotFoundError):
        return None  # not a manifest this tool wrote (they are written whole, by rename)
    if not isinstance(data, dict) or not isinstance(data.get("stage"), str) or "status" not in data or data["status"] == "complete":
        return None
    inputs = data.get("inputs")
    ins = {_norm(str(f["path"])) for f in inputs if isinstance(f, dict) and "path" in f} if isinstance(inputs, list) else set()
    return {"path": path, "stage": data["stage"], "status": data["status"], "inputs": ins}


def refuse_unfinished(files: list[str], own_root: str | None = None) -> None:
    """Refuse input files that are the outputs of an unfinished run.

    A killed ``mix`` or ``tokenize`` leaves complete-looking shards under their final names; only
    its ``_manifest.json`` (status ``running`` or ``failed``) says the set is partial.  So a file
    in a folder whose manifest, or whose parent's or grandparent's (:data:`MANIFEST_LEVELS`), is a
    run's that did not complete is refused with one line naming that manifest, unless the file is
    one of that run's own inputs (a run whose root holds its inputs) or the manifest is the current
    run's (``own_root``: a resumed run reads past its own manifest).  Each folder is read once.
    """
    own = _norm(own_root) if own_root else None
    seen: dict[str, dict[str, Any] | None] = {}
    for path in files:
        p = _norm(path)
        folder = _parent(p)
        for _ in range(MANIFEST_LEVELS):
            if folder is None:
                break
            if folder not in seen:
                seen[folder] = None if folder == own else _unfinished_run(folder)
            run = seen[folder]
            if run is not None and p not in run["inputs"]:
                stage, status = run["stage"], run["status"]
                raise PathError(
                    f"{run['path']}: these inputs (e.g. {path}) are the output of an unfinished {stage} run "
                    f"(status {status}); rerun that {stage} to finish it"
                )
            folder = _parent(folder)
