"""The texts ``dolma-pipe query --trace_file`` traces: one a line of a file, as JSON lines or plain text.

- ``jsonl`` (the default): each non-blank line is a JSON object with a string ``text``, as a
  model's generations are usually kept; its ``id`` (any JSON scalar), when it has one, is shown
  with its spans, and a line without one is traced all the same (generations often have none);
- ``lines``: each non-blank line is one text (UTF-8).

Compressed files (``.gz``, ``.zst``) and ``s3://`` paths read as every stage reads them. A file
that yields nothing to trace, or a line that is not what the format says, is an error naming the
file and line and what was expected: a trace never answers an unreadable file with silence.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import orjson

from dolma_pipe import storage
from dolma_pipe.documents import DocumentError, iter_lines

from .query import IndexQueryError

TraceFormat = Literal["jsonl", "lines"]

EXPECTED = "JSON lines with a string 'text' (or --format lines for one text a line)"


@dataclass(frozen=True)
class TraceText:
    line: int  # 1-based line of the file
    text: str
    id: str | None = None


def read_trace_texts(path: str, form: TraceFormat) -> Iterator[TraceText]:
    """The texts of ``path`` in file order; :class:`IndexQueryError` for a missing file, a bad line
    (its number, what it holds and what was expected) or a file with no text at all."""
    if not storage.exists(path):
        raise IndexQueryError(f"config key 'trace_file': {path} does not exist")
    found = 0
    try:
        for lineno, raw in iter_lines(path):
            if not raw.strip():
                continue
            text = _text_of(path, lineno, raw, form)
            found += 1
            yield text
    except DocumentError as exc:  # a broken archive, named by the reader
        raise IndexQueryError(f"config key 'trace_file': {exc}") from None
    if not found:
        what = EXPECTED if form == "jsonl" else "one text a line (--format lines)"
        raise IndexQueryError(f"config key 'trace_file': {path} holds no text to trace (expected {what})")


def _text_of(path: str, lineno: int, raw: bytes, form: TraceFormat) -> TraceText:
    if form == "lines":
        try:
            return TraceText(lineno, raw.rstrip(b"\r").decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise IndexQueryError(f"{path} line {lineno}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise IndexQueryError(f"{path} line {lineno}: not JSON ({_shown(raw)}); expected {EXPECTED}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        held = "an object without a string 'text'" if isinstance(obj, dict) else f"a JSON {type(obj).__name__}"
        raise IndexQueryError(f"{path} line {lineno}: {held} ({_shown(raw)}); expected {EXPECTED}")
    doc_id = obj.get("id")
    return TraceText(lineno, obj["text"], None if doc_id is None or isinstance(doc_id, (dict, list)) else str(doc_id))


def _shown(raw: bytes, limit: int = 60) -> str:
    text = raw.decode("utf-8", "replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")
