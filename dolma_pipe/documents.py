"""Reading and writing Dolma documents and attribute rows in every supported format.

Formats are chosen by file name: ``.jsonl``/``.json`` (plain), ``.gz`` (gzip,
multi-member allowed), ``.zst``/``.zstd`` (zstandard, multi-frame allowed) and
``.parquet``.  Reading never stops at a bad record: malformed JSON, invalid
UTF-8, a missing or mistyped ``id``/``text``, an empty file or a truncated
archive is handed to the caller's :class:`~dolma_pipe.quarantine.Quarantine`
with the file and line, and reading goes on with the next good record.  An
integer ``id`` is accepted as its string form.  Compressions (their names, members, and
decompression) are :mod:`dolma_pipe.compression`'s; which error that stops a file's reading becomes
which quarantine kind is :mod:`dolma_pipe.read_errors`'.

Writing is deterministic (gzip with ``mtime=0``, fixed zstd level) so that a
resumed run produces the same bytes as an uninterrupted one, and atomic (see
:mod:`dolma_pipe.storage`).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal

import orjson
import zstandard

from dolma_pipe import storage
from dolma_pipe.compression import Codec, GzipMemberStream, decompressed
from dolma_pipe.quarantine import Quarantine, QuarantinedRecordError
from dolma_pipe.read_errors import (
    READ_ERRORS,
    DocumentError,
    NotJsonLines,
    quarantine_corrupt_parquet,
    quarantine_if_empty,
    quarantine_read_error,
)

# Integer ids every stage reads exactly (a signed or an unsigned 64-bit integer), as ``mix`` does.
ID_INT_MIN, ID_INT_MAX = -(2**63), 2**64 - 1
# Columns kept as plain strings in Parquet; anything else is stored as JSON text.
PARQUET_STRING_COLUMNS = ("id", "text", "source", "added", "created")
PARQUET_JSON_COLUMNS_KEY = b"dolma_pipe.json_columns"
# Integers beyond 64 bits become floats in orjson (above 2**64 - 1, or below -2**63): a line with
# a run of 20 ASCII digits, or a minus sign and 19 digits (what ``re.compile(rb"\d{20}|-\d{19}")``
# finds), is parsed again by the stdlib. Found by mapping digits to "0", "-" to itself and every
# other byte to " " and looking for those runs: ~8x quicker than the regex, which tried a match at
# every byte of every line.
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else b if b == 0x2D else 0x20 for b in range(256))
_DIGIT_RUN = b"0" * 20
_NEGATIVE_RUN = b"-" + b"0" * 19


def _has_long_digits(line: bytes) -> bool:
    """Whether ``line`` holds 20 consecutive ASCII digits, or a minus sign and 19."""
    mapped = line.translate(_DIGIT_MAP)
    return _DIGIT_RUN in mapped or _NEGATIVE_RUN in mapped


def compression_of(path: str) -> Codec | Literal["parquet"]:
    """``"parquet"``, or the codec a document file's name says (a :class:`Codec` is its name: "gzip", "zstd", "none")."""
    return "parquet" if path.lower().endswith(".parquet") else Codec.of_path(path)


def lines_codec(path: str) -> Codec:
    """The codec of a JSON-lines file, by its name; :class:`NotJsonLines` for a Parquet file."""
    codec = compression_of(path)
    if codec == "parquet":
        raise NotJsonLines(f"{path}: a Parquet file has no lines (read_documents reads it)")
    return codec


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw line without newline) of a JSON-lines file.

    Raises :class:`TruncatedArchive` or :class:`DocumentError` after yielding
    every line that could be recovered.  A UTF-8 byte-order mark is dropped.
    """
    codec = lines_codec(path)
    lineno = 0
    # Pieces of a line that spans chunks, joined once its end arrives (no quadratic re-copying).
    pending: list[bytes] = []
    failure: Exception | None = None
    with storage.open_read(path) as raw:
        chunks = decompressed(raw, path, codec)
        while True:
            try:
                chunk = next(chunks, None)
            except DocumentError as exc:
                failure = exc
                break
            if chunk is None:
                break
            if lineno == 0 and not pending and chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
            start = 0
            end = chunk.find(b"\n")
            if end == -1:
                pending.append(chunk)
                continue
            if pending:
                pending.append(chunk[:end])
                lineno += 1
                yield lineno, b"".join(pending)
                pending = []
                start = end + 1
            lines = chunk[start:].split(b"\n")
            tail = lines.pop()
            for line in lines:
                lineno += 1
                yield lineno, line
            if tail:
                pending.append(tail)
    if pending:
        lineno += 1
        yield lineno, b"".join(pending)
    if failure is not None:
        raise failure


@dataclass(frozen=True)
class Fields:
    """Where a document's text and id are, when not ``text`` and ``id`` (Dolma's ``fields`` of
    ``dolma tokens``): dotted names reach into objects (``doc.body``); with no id field, a
    document's id is ``<sha256 of the file's path>-<line>``, as Dolma makes it."""

    text: str = "text"
    id: str | None = "id"

    @property
    def standard(self) -> bool:
        return self.text == "text" and self.id == "id"


STANDARD_FIELDS = Fields()


def _dotted(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _by_fields(obj: dict, fields: Fields, path: str, lineno: int, quarantine: Quarantine, raw: Any) -> dict | None:
    """``{"id", "text"}`` of a document whose fields are elsewhere, checked as :func:`_normalise` checks them."""
    text = _dotted(obj, fields.text)
    if not isinstance(text, str):
        kind, what = ("missing_text", "missing") if text is None else ("bad_text", f"not a string ({type(text).__name__})")
        quarantine.add(path, lineno, kind, f"field {fields.text!r} is {what}", raw)
        return None
    if fields.id is None:
        return {"id": f"{hashlib.sha256(path.encode()).hexdigest()}-{lineno}", "text": text}
    return _normalise({"id": _dotted(obj, fields.id), "text": text}, path, lineno, quarantine, raw, id_name=fields.id)


def _normalise(doc: Any, path: str, lineno: int, quarantine: Quarantine, raw: Any, id_name: str = "id") -> dict | None:
    if not isinstance(doc, dict):
        quarantine.add(path, lineno, "not_an_object", "line is valid JSON but not an object", raw)
        return None
    doc_id = doc.get("id")
    if doc_id is None:
        quarantine.add(path, lineno, "missing_id", f"document has no '{id_name}'", raw)
        return None
    if not isinstance(doc_id, str):
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            if not ID_INT_MIN <= doc_id <= ID_INT_MAX:
                # mix (Dolma's mixer too) reads JSON numbers as 64-bit integers or doubles: an id
                # beyond that would come out of it as another number, so no stage takes it.
                quarantine.add(path, lineno, "bad_id", f"'{id_name}' is an integer beyond 64 bits ({doc_id}); give it as a string", raw)
                return None
            doc["id"] = str(doc_id)
        else:
            quarantine.add(
                path, lineno, "bad_id", f"'{id_name}' must be a string or an integer within 64 bits, got {type(doc_id).__name__}", raw
            )
            return None
    text = doc.get("text")
    if text is None:
        quarantine.add(path, lineno, "missing_text", "document has no 'text'", raw)
        return None
    if not isinstance(text, str):
        quarantine.add(path, lineno, "bad_text", f"'text' must be a string, got {type(text).__name__}", raw)
        return None
    return doc


def _parse_json_line(path: str, lineno: int, line: bytes, quarantine: Quarantine) -> tuple[bool, Any]:
    """(True, the line's JSON value), or (False, None) once the line is quarantined (malformed JSON,
    invalid UTF-8). A flag, not None, says which: ``null`` is a JSON value."""
    try:
        obj = orjson.loads(line)
        if _has_long_digits(line):
            # orjson reads integers beyond 64 bits as floats; the stdlib keeps them exact.
            obj = json.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as uexc:
            quarantine.add(path, lineno, "invalid_utf8", f"invalid UTF-8 at byte {uexc.start}", line)
            return False, None
        quarantine.add(path, lineno, "malformed_json", str(exc), line)
        return False, None
    return True, obj


def parse_document_line(path: str, lineno: int, line: bytes, quarantine: Quarantine) -> dict | None:
    """One JSONL line as ``read_documents`` reads it: the normalised document, or None once the line
    is quarantined (malformed JSON, invalid UTF-8, not a document)."""
    parsed, obj = _parse_json_line(path, lineno, line, quarantine)
    return _normalise(obj, path, lineno, quarantine, line) if parsed else None


def _read_jsonl(path: str, quarantine: Quarantine, require_text: bool, fields: Fields = STANDARD_FIELDS) -> Iterator[tuple[int, dict]]:
    lines = 0
    lineno = 0
    try:
        for lineno, line in iter_lines(path):
            if not line or line.isspace():  # blank lines carry nothing (and isspace() copies nothing)
                if require_text:
                    quarantine.notes["blank_lines"] += 1
                continue
            lines += 1
            parsed, obj = _parse_json_line(path, lineno, line, quarantine)
            if not parsed:
                continue
            if require_text and fields.standard:
                doc = _normalise(obj, path, lineno, quarantine, line)
            elif require_text:
                doc = (
                    _by_fields(obj, fields, path, lineno, quarantine, line)
                    if isinstance(obj, dict)
                    else _normalise(obj, path, lineno, quarantine, line)
                )
            else:
                doc = _normalise_attribute_row(obj, path, lineno, quarantine, line)
            if doc is not None:
                yield lineno, doc
    except READ_ERRORS as exc:
        quarantine_read_error(quarantine, path, exc, lineno + 1)
    if require_text:  # an empty attribute file is valid: its document file had no good documents
        quarantine_if_empty(quarantine, path, lines)


def _normalise_attribute_row(obj: Any, path: str, lineno: int, quarantine: Quarantine, raw: Any) -> dict | None:
    if not isinstance(obj, dict):
        quarantine.add(path, lineno, "not_an_object", "line is valid JSON but not an object", raw)
        return None
    row_id = obj.get("id")
    if isinstance(row_id, int) and not isinstance(row_id, bool):
        obj["id"] = str(row_id)
    elif not isinstance(row_id, str):
        quarantine.add(path, lineno, "missing_id", "attribute row has no string 'id'", raw)
        return None
    attrs = obj.get("attributes")
    if attrs is None:
        obj["attributes"] = {}
    elif not isinstance(attrs, dict):
        quarantine.add(path, lineno, "bad_attributes", "'attributes' must be an object", raw)
        return None
    return obj


def _json_safe(value: Any) -> Any:
    """orjson fallback for Parquet values JSON cannot hold: decimals as strings, binary as base64."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (decimal.Decimal, datetime.timedelta)):
        return str(value)
    raise TypeError(f"cannot represent {type(value).__name__} in JSON")


def _parquet_row(obj: dict, json_cols: set[str], path: str, row: int, quarantine: Quarantine, fields: Fields) -> dict | None:
    for col in json_cols:
        if isinstance(obj.get(col), str):
            try:
                obj[col] = orjson.loads(obj[col])
            except orjson.JSONDecodeError as exc:
                quarantine.add(path, row, "malformed_json", f"column {col!r}: {exc}", obj[col])
                return None
    for key in [k for k, v in obj.items() if v is None and k not in ("text", "id")]:
        del obj[key]
    if not fields.standard:
        return _by_fields(obj, fields, path, row, quarantine, None)
    return _normalise(obj, path, row, quarantine, None)


def _read_parquet(path: str, quarantine: Quarantine, fields: Fields = STANDARD_FIELDS) -> Iterator[tuple[int, dict]]:
    import pyarrow.parquet as pq

    rows = 0
    try:
        with storage.open_read(path) as raw:
            pf = pq.ParquetFile(raw)
            meta = pf.schema_arrow.metadata or {}
            json_cols = set(meta.get(PARQUET_JSON_COLUMNS_KEY, b"").decode().split(",")) - {""}
            for batch in pf.iter_batches(batch_size=4096):
                for obj in batch.to_pylist():
                    rows += 1
                    doc = _parquet_row(obj, json_cols, path, rows, quarantine, fields)
                    if doc is not None:
                        yield rows, doc
    except storage.StorageError as exc:
        quarantine_read_error(quarantine, path, exc, rows + 1)
        return
    except QuarantinedRecordError:
        raise
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for broken files
        quarantine_corrupt_parquet(quarantine, path, rows, exc)
        return
    quarantine_if_empty(quarantine, path, rows)


def read_documents(path: str, quarantine: Quarantine | None = None, fields: Fields = STANDARD_FIELDS) -> Iterator[tuple[int, dict]]:
    """Good documents of ``path`` as (line or row number, document dict).

    Bad records go to ``quarantine``; without one the first bad record raises
    :class:`~dolma_pipe.quarantine.QuarantinedRecordError` naming the file and line. With other
    ``fields`` than ``text`` and ``id``, each document is ``{"id": ..., "text": ...}`` taken from them.
    """
    q = quarantine if quarantine is not None else Quarantine(strict=True)
    if compression_of(path) == "parquet":
        docs = _read_parquet(path, q, fields)
    else:
        docs = _read_jsonl(path, q, require_text=True, fields=fields)
    return _noting_ids(docs, q) if quarantine is not None else docs


def _noting_ids(docs: Iterator[tuple[int, dict]], quarantine: Quarantine) -> Iterator[tuple[int, dict]]:
    """Pass documents through, noting each id (the runner counts duplicate ids from these)."""
    saw = quarantine.saw_document
    for lineno, doc in docs:
        saw(doc["id"])
        yield lineno, doc


def read_attribute_rows(path: str, quarantine: Quarantine | None = None) -> Iterator[tuple[int, dict]]:
    """Rows ``{"id": ..., "attributes": {...}}`` of an attribute file.

    An empty attribute file is valid: its document file had no good documents.
    """
    q = quarantine if quarantine is not None else Quarantine(strict=True)
    return _read_jsonl(path, q, require_text=False)


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes; integers beyond 64 bits (which orjson refuses) go through the stdlib."""
    try:
        return orjson.dumps(obj, default=_json_safe)
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_json_safe).encode("utf-8")


class JsonlWriter:
    """Writes JSON objects one per line, compressed by file name, atomically.

    ``level`` sets the gzip/zstd level (default: the module's); fast levels suit
    machine-written intermediates such as attribute files.
    """

    def __init__(self, path: str, level: int | None = None):
        self.path = path
        self._level = level
        self.count = 0
        self._ctx = storage.open_write_atomic(path)
        self._raw: IO[bytes] | None = None
        self._stream: Any = None
        self._kind = compression_of(path)
        if self._kind == "parquet":
            raise DocumentError(f"{path}: use ParquetWriter for .parquet outputs")

    def __enter__(self) -> JsonlWriter:
        self._raw = self._ctx.__enter__()
        if self._kind is Codec.GZIP:
            self._stream = GzipMemberStream(self._raw, self._level or Codec.GZIP.level)
        elif self._kind is Codec.ZSTD:
            self._stream = zstandard.ZstdCompressor(level=self._level or Codec.ZSTD.level).stream_writer(self._raw, closefd=False)
        else:
            self._stream = self._raw
        return self

    def write(self, obj: dict) -> None:
        self._stream.write(dumps(obj) + b"\n")
        self.count += 1

    def write_many(self, objs: list[dict]) -> None:
        if objs:
            self._stream.write(b"\n".join(dumps(o) for o in objs) + b"\n")
            self.count += len(objs)

    def __exit__(self, exc_type, exc, tb) -> bool | None:
        if exc_type is None and self._stream is not self._raw:
            self._stream.close() if self._kind is Codec.GZIP else self._stream.flush(zstandard.FLUSH_FRAME)
        return self._ctx.__exit__(exc_type, exc, tb)


class ParquetWriter:
    """Buffers documents and writes one Parquet file on close (strings plus JSON columns)."""

    def __init__(self, path: str):
        self.path = path
        self.count = 0
        self._rows: list[dict] = []

    def __enter__(self) -> ParquetWriter:
        return self

    def write(self, obj: dict) -> None:
        self._rows.append(obj)
        self.count += 1

    def write_many(self, objs: list[dict]) -> None:
        for obj in objs:
            self.write(obj)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return None
        import pyarrow as pa
        import pyarrow.parquet as pq

        keys: list[str] = []
        for row in self._rows:
            for key in row:
                if key not in keys:
                    keys.append(key)
        json_cols = [
            k for k in keys if k not in PARQUET_STRING_COLUMNS or any(not isinstance(r.get(k), (str, type(None))) for r in self._rows)
        ]
        columns = {}
        for key in keys:
            if key in json_cols:
                columns[key] = pa.array(
                    [dumps(r[key]).decode() if key in r else None for r in self._rows],
                    pa.string(),
                )
            else:
                columns[key] = pa.array([r.get(key) for r in self._rows], pa.string())
        table = pa.table(columns).replace_schema_metadata({PARQUET_JSON_COLUMNS_KEY: ",".join(json_cols).encode()})
        with storage.open_write_atomic(self.path) as raw:
            pq.write_table(table, raw, compression="zstd")
        return None


def open_writer(path: str) -> JsonlWriter | ParquetWriter:
    return ParquetWriter(path) if compression_of(path) == "parquet" else JsonlWriter(path)


def write_documents(path: str, docs: list[dict]) -> int:
    with open_writer(path) as writer:
        writer.write_many(docs)
    return writer.count
