"""ARC files (the Internet Archive's format before WARC; ``.arc``, ``.arc.gz``), read with warcio.

fastwarc reads WARC only; warcio reads ARC and hands each record over as a WARC record. The
records are the same :class:`~.records.Record` values the WARC reader gives, with their byte
ranges in the file as stored. ARC records have no record id (warcio would make a random one):
theirs is left empty, and the document id is made from the file's name and the record's offset
(:func:`~.provenance.document_id`), the same on every run. They have no payload digest either.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from .records import Damage, Record

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


def read_arc(path: str, max_bytes: int) -> Iterator[Record | Damage]:
    """Every record of the local ARC file ``path``; what cannot be read past is one :class:`Damage`."""
    index = 0
    offset = 0
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh, arc2warc=True)
        try:
            for rec in it:
                index += 1
                data = rec.raw_stream.read(max_bytes + 1)
                size = len(data)
                while chunk := rec.raw_stream.read(1 << 20):
                    size += len(chunk)
                offset = it.get_record_offset()
                http = rec.http_headers
                yield Record(
                    index=index,
                    offset=offset,
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
                offset = offset + it.get_record_length()
        except (ArchiveLoadFailed, OSError, EOFError, ValueError, gzip.BadGzipFile) as exc:
            index += 1
            yield Damage(index=index, offset=offset, length=os.path.getsize(path) - offset, problem=f"{type(exc).__name__}: {exc}")
