"""Which attribute keys a stream's documents carry, found by reading the first rows of its files.

The shorthand resolves names against these keys when the spec loads. Keys are read from the
first rows of each attribute set's files (and from the ``attributes`` the documents themselves
carry), a few hundred rows at first and more only when a name is not found yet, so a typo fails
in a fraction of a second while a key that only rare documents hold is still found. A set made by
``dolma-pipe dedup`` writes a name only on the rows it marks, so a set with no duplicates (or
none in its first rows) holds none: the names its finished run's manifest declares
(``results.attribute_names``) count as found, as span lists.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import orjson

from dolma_pipe import paths, storage
from dolma_pipe.compression import decompressed
from dolma_pipe.documents import DocumentError, lines_codec
from dolma_pipe.manifest import ManifestError, read_manifest

FIRST_ROWS = 500
MAX_ROWS = 100_000


def _kind(value: object) -> str:
    """'spans', 'empty' (an empty list) or the JSON type of an attribute value."""
    if isinstance(value, list):
        if not value:
            return "empty"
        first = value[0]
        if isinstance(first, list) and len(first) == 3 and all(isinstance(x, (int, float)) for x in first):
            return "spans"
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    return "null"


_RANK = {"spans": 3, "empty": 2}


class _SmallReads:
    """A raw stream read 64 KB at a time: the first rows of a file are found without inflating a
    whole 1 MB chunk (4-5 MB of JSON lines) of each file first."""

    def __init__(self, raw: IO[bytes]):
        self.raw = raw

    def read(self, n: int = -1) -> bytes:
        return self.raw.read(1 << 16 if n < 0 else min(n, 1 << 16))


def _lines(path: str) -> Iterator[bytes]:
    """The lines of a JSON-lines file, decompressed as they are asked for (a byte-order mark dropped)."""
    with storage.open_read(path) as raw:
        pending = b""
        for chunk in decompressed(_SmallReads(raw), path, lines_codec(path)):  # type: ignore[arg-type]
            lines = chunk.split(b"\n")
            lines[0] = pending + lines[0]
            pending = lines.pop()
            yield from lines
        if pending:
            yield pending


def _attribute_dicts(path: str) -> Iterator[dict]:
    """The ``attributes`` objects of a file's rows, in order."""
    for n, line in enumerate(_lines(path)):
        if n == 0 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if line.strip():
            row = orjson.loads(line)
            if isinstance(row, dict) and isinstance(row.get("attributes"), dict):
                yield row["attributes"]


class AttributeKeys:
    """Attribute keys of one stream, read lazily: :meth:`keys` grows the sample on request."""

    def __init__(self, document_files: list[str], attribute_sets: list[str]):
        self.sources: list[Iterator[dict]] = [self._rows(document_files, name) for name in attribute_sets]
        self.sources.append(self._inline(document_files))
        self.found: dict[str, str] = {name: "spans" for name in self._declared(document_files, attribute_sets)}
        self.rows = 0
        self.exhausted = False
        self.where = (
            f"the attribute sets {attribute_sets} (first rows of their files)"
            if attribute_sets
            else "the documents' own attributes (the stream has no attribute sets)"
        )

    @staticmethod
    def _declared(document_files: list[str], attribute_sets: list[str]) -> set[str]:
        """Names declared by the complete runs that made the attribute sets (one manifest per set root)."""
        roots = set()
        for name in attribute_sets:
            for doc in document_files:
                try:
                    roots.add(paths.attributes_root(doc, name))
                except paths.PathError:
                    continue
        names: set[str] = set()
        for root in sorted(roots):
            try:
                manifest = read_manifest(root)
            except ManifestError:
                continue
            declared = manifest.results.get("attribute_names")
            if manifest.status == "complete" and isinstance(declared, list):
                names.update(n for n in declared if isinstance(n, str))
        return names

    @staticmethod
    def _rows(document_files: list[str], name: str) -> Iterator[dict]:
        for doc in document_files:
            try:
                yield from _attribute_dicts(paths.attribute_path(doc, name))
            except (DocumentError, OSError, orjson.JSONDecodeError, paths.PathError, storage.StorageError):
                continue  # the stage reports unreadable files with their names when it runs

    @staticmethod
    def _inline(document_files: list[str]) -> Iterator[dict]:
        for doc in document_files[:1]:
            try:
                yield from _attribute_dicts(doc)
            except (DocumentError, OSError, orjson.JSONDecodeError, storage.StorageError):
                return

    def _read(self, rows_per_source: int) -> None:
        for source in self.sources:
            for _ in range(rows_per_source):
                attrs = next(source, None)
                if attrs is None:
                    break
                self.rows += 1
                for key, value in attrs.items():
                    old = self.found.get(key)
                    if old == "spans":  # the highest rank: nothing to learn from this value
                        continue
                    kind = _kind(value)
                    if old is None or _RANK.get(kind, 0) > _RANK.get(old, 0):
                        self.found[key] = kind

    def keys(self) -> dict[str, str]:
        """Keys found so far (reading the first rows on the first call)."""
        if not self.rows and not self.exhausted:
            self._read(FIRST_ROWS)
        return self.found

    def read_more(self) -> bool:
        """Read up to :data:`MAX_ROWS` rows per set; False when nothing more was read."""
        if self.exhausted:
            return False
        before = self.rows
        self._read(MAX_ROWS)
        self.exhausted = True
        return self.rows > before
