"""Bad records: counted by kind, kept with their file and line, never silently dropped.

A stage gives each input file one :class:`Quarantine`; readers hand it every
record they cannot use.  When the file's task finishes, the quarantined
records are written as JSON lines to ``<output>/_errors/<relative path>.jsonl``
next to the stage's other outputs, and their counts travel in the task's
result so that the run can summarise them and enforce ``--max-errors``.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson

from dolma_pipe.errors import DolmaPipeError

RAW_LIMIT = 2048
# Kinds that describe a whole file rather than one line of it.
FILE_KINDS = frozenset({"empty_file", "unreadable", "truncated_archive", "corrupt_archive", "corrupt_parquet"})


class QuarantinedRecordError(DolmaPipeError, ValueError):
    """Raised by a strict quarantine: reading without a quarantine fails fast."""


@dataclass
class BadRecord:
    file: str
    line: int
    kind: str
    message: str
    raw: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"file": self.file, "line": self.line, "kind": self.kind, "message": self.message}
        if self.raw is not None:
            out["raw"] = self.raw
        return out


class Quarantine:
    """Bad records of one task, spooled to a temporary file past a few MB so memory stays flat."""

    SPOOL_BYTES = 8 << 20

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.counts: Counter = Counter()
        # Observations that are not errors (blank lines), reported as warnings.
        self.notes: Counter = Counter()
        # 128-bit hashes of the ids of the good documents read, for the duplicate-id check.
        self.id_hashes: list[bytes] = []
        self._spool = tempfile.SpooledTemporaryFile(max_size=self.SPOOL_BYTES)
        self._file_errors: set[str] = set()

    def add(self, file: str, line: int, kind: str, message: str, raw: bytes | str | None) -> None:
        if isinstance(raw, bytes):
            raw = raw[:RAW_LIMIT].decode("utf-8", errors="backslashreplace")
        elif isinstance(raw, str):
            raw = raw[:RAW_LIMIT]
        if self.strict:
            raise QuarantinedRecordError(f"{file}:{line}: {kind}: {message}")
        self._spool.write(orjson.dumps(BadRecord(file, line, kind, message, raw).to_json()) + b"\n")
        self.counts[kind] += 1
        if kind in FILE_KINDS:
            self._file_errors.add(file)

    def saw_document(self, doc_id: str) -> None:
        self.id_hashes.append(hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=16).digest())

    def has_file_error(self, file: str) -> bool:
        return file in self._file_errors

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def records(self) -> list[BadRecord]:
        return [BadRecord(**orjson.loads(line)) for line in self.iter_jsonl() if line]

    def iter_jsonl(self) -> Iterator[bytes]:
        self._spool.seek(0)
        for line in self._spool:
            yield line.rstrip(b"\n")
        self._spool.seek(0, 2)

    def write_to(self, fh: IO[bytes]) -> None:
        """Copy the spooled JSON lines into an open binary file."""
        self._spool.seek(0)
        shutil.copyfileobj(self._spool, fh)
        self._spool.seek(0, 2)

    def close(self) -> None:
        self._spool.close()
