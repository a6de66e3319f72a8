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

from .records import GZIP_MAGIC, Damage, Record

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
_ARC_HEADER = re.compile(rb"\n(?:https?|ftp|dns|filedesc)://\S* \S+ \d{14} \S* \d+\n")
_SCAN = 1 << 20


def _next_start(path: str, after: int, gz: bool) -> int | None:
    """Where the first record after byte ``after`` starts (a gzip member, or an ARC header line), or None."""
    with open(path, "rb") as fh:
        pos = after + 1
        while True:
            fh.seek(pos)
            data = fh.read(_SCAN + 256)
            if gz:
                found = data.find(GZIP_MAGIC)
            else:
                match = _ARC_HEADER.search(data)
                found = -1 if match is None else match.start() + 1
            if found >= 0:
                return pos + found
            if len(data) < _SCAN + 256:
                return None
            pos += _SCAN


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
        try:
            for record in _records(path, pos, max_bytes):
                index += 1
                record.index = index
                good_end = record.offset + record.length
                yield record
            return
        except (ArchiveLoadFailed, StatusAndHeadersParserException, OSError, EOFError, ValueError, zlib.error) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        nxt = _next_start(path, good_end, gz)
        end = size if nxt is None else nxt
        index += 1
        yield Damage(index=index, offset=good_end, length=end - good_end, problem=problem)
        if nxt is None:
            return
        pos = nxt


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
