"""Bad records: counted by kind, kept with their file and line, never silently dropped.

A stage gives each input file one :class:`Quarantine`; readers hand it every
record they cannot use.  When the file's task finishes, the quarantined
records are written as JSON lines to ``<output>/_errors/<relative path>.jsonl``
next to the stage's other outputs, and their counts travel in the task's
result so that the run can summarise them and enforce ``--max-errors``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

RAW_LIMIT = 2048
# Kinds that describe a whole file rather than one line of it.
FILE_KINDS = frozenset({"empty_file", "unreadable", "truncated_archive", "corrupt_archive", "corrupt_parquet"})


class QuarantinedRecordError(ValueError):
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


@dataclass
class Quarantine:
    strict: bool = False
    records: list[BadRecord] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def add(self, file: str, line: int, kind: str, message: str, raw: bytes | str | None) -> None:
        if isinstance(raw, bytes):
            raw = raw[:RAW_LIMIT].decode("utf-8", errors="backslashreplace")
        elif isinstance(raw, str):
            raw = raw[:RAW_LIMIT]
        record = BadRecord(file, line, kind, message, raw)
        if self.strict:
            raise QuarantinedRecordError(f"{file}:{line}: {kind}: {message}")
        self.records.append(record)
        self.counts[kind] += 1

    def has_file_error(self, file: str) -> bool:
        return any(r.file == file and r.kind in FILE_KINDS for r in self.records)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_jsonl(self) -> bytes:
        return b"".join(orjson.dumps(r.to_json()) + b"\n" for r in self.records)
