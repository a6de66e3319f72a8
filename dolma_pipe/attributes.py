"""Documents read together with their attribute files, row by row, ids checked.

Attribute files hold the same rows as their document file in the same order
(Dolma's contract).  :func:`read_with_attributes` walks a document file and any
number of attribute files in lockstep and refuses a mismatch, whether an id
differs or one file runs out before the other, naming both files and lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dolma_pipe import paths
from dolma_pipe.documents import read_attribute_rows, read_documents
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.quarantine import Quarantine


class AttributeMismatchError(DolmaPipeError, ValueError):
    """An attribute file does not line up with its document file."""


_END: Any = object()


def read_with_attributes(
    document_path: str,
    attribute_names: list[str],
    quarantine: Quarantine | None = None,
) -> Iterator[tuple[int, dict, dict]]:
    """(line, document, merged attributes) for every good document of ``document_path``.

    Attribute files are found with :func:`dolma_pipe.paths.attribute_path`.
    Bad document lines go to ``quarantine`` (the attribute writers skip them
    the same way, so the good rows still line up).  Bad attribute rows are
    errors: a missing attribute value is not something to guess.
    """
    attr_paths = [paths.attribute_path(document_path, name) for name in attribute_names]
    attr_iters = [read_attribute_rows(p) for p in attr_paths]
    for lineno, doc in read_documents(document_path, quarantine):
        merged: dict = {}
        for attr_path, it in zip(attr_paths, attr_iters):
            row = next(it, _END)
            if row is _END:
                raise AttributeMismatchError(
                    f"{attr_path}: ends before {document_path} (document id {doc['id']!r} at line {lineno} has no row)"
                )
            attr_line, attr_row = row
            if attr_row["id"] != doc["id"]:
                raise AttributeMismatchError(
                    f"{attr_path}:{attr_line}: id {attr_row['id']!r} does not match {document_path}:{lineno} id {doc['id']!r}"
                )
            merged.update(attr_row.get("attributes") or {})
        yield lineno, doc, merged
    for attr_path, it in zip(attr_paths, attr_iters):
        row = next(it, _END)
        if row is not _END:
            raise AttributeMismatchError(f"{attr_path}:{row[0]}: has more rows than {document_path} (extra id {row[1]['id']!r})")
