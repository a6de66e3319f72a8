"""ARC files (the Internet Archive's format before WARC; ``.arc``, ``.arc.gz``), read with warcio.

fastwarc reads WARC only; warcio reads ARC and hands each record over as a WARC record. The
records are the same :class:`~.records.Record` values the WARC reader gives, with their byte
ranges in the file as stored. ARC records have no record id (warcio would make a random one):
theirs is left empty, and the document id is made from the file's name and the record's offset
(:func:`~.provenance.document_id`), the same on every run. They have no payload digest either.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeadersParserException

from .records import GZIP_MAGIC, Damage, Record, next_marker

ARC_START = b"filedesc://"


def is_arc(path: str) -> bool:
    """Whether the file (gzip-compressed or not) starts like an ARC file."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, len(ARC_START))
        except zlib.error:
            return False
    return head.startswith(ARC_START)


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc)
    except ValueError:
        return None


# An ARC record's header line: URL, IP address, 14-digit date, content type, length (ARC v1).
_ARC_LINE = re.compile(rb"(?:https?|ftp|dns|filedesc)://\S* \S+ \d{14} \S* (\d{1,18})\n")
# The same with any last field: a record whose length is no number is a (damaged) record start too.
_ARC_HEADER = re.compile(rb"\n(?:https?|ftp|dns|filedesc)://\S* \S+ \d{14} \S* (\S{1,40})\n")
_SCAN = 1 << 20
_OVERLAP = 8192  # a header line longer than this across a window's end is not found


def _next_start(path: str, after: int, gz: bool, tries: int = 4096) -> int | None:
    """Where the first record after byte ``after`` starts (a gzip member, or an ARC header line), or None.

    In an ``.arc``, a header line whose own length ends its record cleanly (a line end, then the
    file's end or another header line) comes first: a damaged record's page that quotes an ARC
    header line (``http://... 1.2.3.4 20240101000000 text/html 123``) holds a line that looks like
    a record start, whose length ends inside the page. One before the first clean one (or with
    none after it) is taken only when its length runs to that start or the file's end (too long,
    as a damaged record's) and its block starts as a record's (an HTTP status line for an HTTP URL),
    else it is a quote inside the damaged record."""
    if gz:
        return next_marker(path, after, GZIP_MAGIC)
    size = os.path.getsize(path)
    loose: list[tuple[int, int | None, bool]] = []  # (start, where its length ends it, whether it reads as HTTP) of the rest
    clean: int | None = None
    for _, (start, end, http) in zip(range(tries), _header_lines(path, after)):
        if end is not None and _ends_cleanly(path, end, size):
            clean = start
            break
        loose.append((start, end, http))
    bound = size if clean is None else clean
    return next((start for start, end, http in loose if http and (end is None or end >= bound)), clean)


def _header_lines(path: str, after: int) -> Iterator[tuple[int, int | None, bool]]:
    """Every ARC header line after byte ``after``: where it starts, where its length ends its
    record, and whether its block starts as its URL's says (an HTTP response's status line for
    an ``http(s)://`` URL; a quoted header line in a page is followed by more of the page)."""
    with open(path, "rb") as fh:
        pos = after + 1  # (a line end at ``after`` is the one before the record there: not after it)
        while True:
            fh.seek(pos)
            data = fh.read(_SCAN + _OVERLAP)
            for match in _ARC_HEADER.finditer(data):
                if match.start() >= _SCAN:
                    break  # found again in the next window
                http = not match.group(0)[1:].startswith((b"http://", b"https://"))
                http = http or data.startswith(b"HTTP/", match.end())
                length = match.group(1)
                yield pos + match.start() + 1, pos + match.end() + int(length) if length.isdigit() else None, http
            if len(data) < _SCAN + _OVERLAP:
                return
            pos += _SCAN


def _ends_cleanly(path: str, end: int, size: int) -> bool:
    """Whether only line ends follow byte ``end``, then the file's end or an ARC header line."""
    if end > size:
        return False
    with open(path, "rb") as fh:
        fh.seek(end)
        data = fh.read(_OVERLAP)
    rest = data.lstrip(b"\r\n")
    return end + len(data) - len(rest) >= size or _ARC_LINE.match(rest) is not None


def read_arc(path: str, max_bytes: int) -> Iterator[Record | Damage]:
    """Every record of the local ARC file ``path``, and the damage between them: bytes warcio
    cannot read past (a corrupt gzip member, a header line it cannot parse) are one
    :class:`Damage` up to the next record start (the next gzip member, or the next ARC header
    line), and reading goes on from there, as the WARC reader does."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        gz = fh.read(3) == GZIP_MAGIC
    index = 0
    pos = 0
    while pos < size:
        good_end = pos  # where the last record read whole ends (warcio's offsets are the file's)
        jump: int | None = None
        try:
            for record in _records(path, pos, max_bytes):
                index += 1
                record.index = index
                good_end = record.offset + record.length
                jump = None if gz else _overrun(path, record, size, max_bytes)
                yield record
                if jump is not None:
                    break
            else:
                return
        except (ArchiveLoadFailed, StatusAndHeadersParserException, OSError, EOFError, ValueError, zlib.error) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if jump is not None:
            pos = jump
            continue
        nxt = _next_start(path, good_end, gz)
        end = size if nxt is None else nxt
        index += 1
        yield Damage(index=index, offset=good_end, length=end - good_end, problem=problem)
        if nxt is None:
            return
        pos = nxt


def _overrun(path: str, record: Record, size: int, max_bytes: int) -> int | None:
    """Where the next record starts when ``record``'s length (in an ``.arc``) runs over it, or None.

    warcio reads a record by its header line's length: one too long swallows the records after it
    (and warcio, finding no line end there, skips on to the next line it can read: those records
    lost, uncounted). Such a record is cut where the next record start after it is (:func:`_next_start`),
    its payload with it, and reading goes on there."""
    with open(path, "rb") as fh:
        fh.seek(record.offset)
        match = _ARC_LINE.match(fh.read(_OVERLAP))
    if match is None:
        return None
    end = record.offset + match.end() + int(match.group(1))
    if _ends_cleanly(path, end, size):
        return None
    nxt = _next_start(path, record.offset, False)
    if nxt is None or nxt >= end:
        return None
    start = min(end, size) - record.payload_size  # the payload's first byte in the file
    keep = max(0, nxt - 1 - start)  # up to the line end before the next record
    record.length, record.payload_size = nxt - record.offset, keep
    if keep > max_bytes:
        record.body = None
    else:
        with open(path, "rb") as fh:
            fh.seek(start)
            record.body = fh.read(keep)
    return nxt


def _records(path: str, pos: int, max_bytes: int) -> Iterator[Record]:
    """The records from byte ``pos`` on (``index`` left 0 for the caller to number)."""
    with open(path, "rb") as fh:
        fh.seek(pos)
        it = ArchiveIterator(fh, arc2warc=True)
        for rec in it:
            length = rec.rec_headers.get_header("Content-Length") or ""
            if not length.strip().isdigit():
                # warcio reads such a header as an empty record and stops at its block: the two
                # are one damaged record (read_arc's Damage up to the next record start).
                raise ValueError(
                    f"the ARC header of {rec.rec_headers.get_header('WARC-Target-URI')!r} gives length {length!r}, not a number"
                )
            data = rec.raw_stream.read(max_bytes + 1)
            size = len(data)
            while chunk := rec.raw_stream.read(1 << 20):
                size += len(chunk)
            http = rec.http_headers
            yield Record(
                index=0,
                offset=it.get_record_offset(),
                type=rec.rec_type,
                record_id="",
                date=_date(rec.rec_headers.get_header("WARC-Date")),
                target_uri=rec.rec_headers.get_header("WARC-Target-URI"),
                payload_digest=None,
                is_http=http is not None,
                http_status=int(http.get_statuscode()) if http is not None and http.get_statuscode().isdigit() else None,
                headers={k.lower(): v for k, v in rec.rec_headers.headers},
                http_headers={k.lower(): v for k, v in http.headers} if http is not None else {},
                body=data if size <= max_bytes else None,
                payload_size=size,
                length=it.get_record_length(),
            )
