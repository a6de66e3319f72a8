"""Reading one WARC file: every record with its byte range, and the damage between records.

fastwarc (Rust, Dolma's own choice) parses the records. What it does not do, this module does:

- **Byte ranges.** ``offset`` is where a record starts in the file as stored (the gzip member's
  first byte for ``.warc.gz``) and ``length`` runs to the next record's start (or the file's end),
  so ``file[offset:offset + length]`` is the record alone, readable by any WARC reader: what
  Common Crawl's index gives to fetch one record again.
- **Damage.** A corrupt gzip member (or bytes no parser reads) stops fastwarc; the reader then
  looks for the next record start after the last good one (the next gzip member, or the next
  ``WARC/1.`` line of an uncompressed file) and goes on from there. Every region it steps over is
  a :class:`Damage` with its byte range, so nothing is lost silently; in a ``.warc``, so is each
  record header there whose first line is no WARC version line (:func:`_skipped_records`).
- **Integrity.** A record's payload is checked against its ``WARC-Payload-Digest`` (sha1, base32)
  when it has one: a truncated record, or one whose Content-Length is wrong, fails the check.
  Such a record (or one past the size cap, or one with no digest whose payload holds ``WARC/1.``)
  is followed by the next record start after its own only when its Content-Length does not end it
  where it ends (the file's end or a record start after it; its gzip member's end): a page about
  WARC quoting a record is one record, not two. Where two such records follow each other, the
  second counts as a record by its digest or HTTP Content-Length (:func:`_real_start`).

Payloads larger than ``max_bytes`` are not read whole (``body`` is None, ``too_large`` set).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from fastwarc import ArchiveIterator
from fastwarc import WarcRecord as FastRecord

GZIP_MAGIC = b"\x1f\x8b\x08"
WARC_LINE = b"WARC/1."
_LENGTH = re.compile(rb"\r\nContent-Length:[ \t]*(\d{1,18})[ \t]*\r\n", re.IGNORECASE)


@dataclass
class Record:
    """One WARC record as the stage needs it (HTTP header names lower case)."""

    index: int  # 1-based place in the file, damage regions counted too
    offset: int
    type: str
    record_id: str
    date: datetime | None
    target_uri: str | None
    payload_digest: str | None
    is_http: bool
    http_status: int | None
    headers: dict[str, str]  # the WARC headers
    http_headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    payload_size: int = 0
    digest_ok: bool | None = None
    length: int = 0
    # False in a .warc.gz that is one gzip stream, not a member per record: no byte range holds
    # a record alone there (offset and length are where the reader was, not the record's).
    ranged: bool = True

    @property
    def too_large(self) -> bool:
        return self.body is None and self.payload_size > 0


@dataclass(frozen=True)
class Damage:
    """Bytes of the file no record could be read from: ``offset`` to ``offset + length``."""

    index: int
    offset: int
    length: int
    problem: str


def sha1_base32(data: bytes) -> str:
    return base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def digest_ok(digest: str | None, body: bytes) -> bool | None:
    """Whether ``body`` matches a ``sha1:BASE32`` (or hex) payload digest; None when there is none to check."""
    if not digest or ":" not in digest:
        return None
    algo, _, value = digest.partition(":")
    if algo.strip().lower() != "sha1":
        return None
    value = value.strip()
    if len(value) == 40:  # hex, as some crawlers write it
        return hashlib.sha1(body).hexdigest() == value.lower()
    return sha1_base32(body) == value.upper()


def _read_payload(rec: FastRecord, max_bytes: int) -> tuple[bytes | None, int]:
    """The payload, or None past ``max_bytes`` (its size still counted, the rest consumed unread)."""
    reader = rec.reader
    data = reader.read(max_bytes + 1)
    if len(data) <= max_bytes:
        return data, len(data)
    return None, len(data) + reader.consume()


def _convert(rec: FastRecord, index: int, base: int, max_bytes: int) -> Record:
    headers = {k.lower(): v for k, v in rec.headers.items()}
    is_http = bool(rec.is_http)
    http_headers = {k.lower(): v for k, v in rec.http_headers.items()} if is_http else {}
    status = rec.http_headers.status_code if is_http else None
    body, size = _read_payload(rec, max_bytes)
    offset = rec.stream_pos if rec.stream_pos >= base else base + rec.stream_pos
    digest = headers.get("warc-payload-digest")
    return Record(
        index=index,
        offset=offset,
        type=str(rec.record_type),
        record_id=rec.record_id or "",
        date=rec.record_date if headers.get("warc-date") else None,
        target_uri=headers.get("warc-target-uri"),
        payload_digest=digest,
        is_http=is_http,
        http_status=status,
        headers=headers,
        http_headers=http_headers,
        body=body,
        payload_size=size,
        digest_ok=None if body is None else digest_ok(digest, body),
    )


def next_marker(path: str, after: int, marker: bytes) -> int | None:
    """The first place after byte ``after`` where ``marker`` (a record's first bytes) is, or None.
    ``WARC/1.`` only at a line's start: a page that names WARC/1.1 in its prose starts no record."""
    if marker == WARC_LINE:
        found = next_marker(path, after - 1, b"\n" + marker)
        return None if found is None else found + 1
    chunk = 1 << 20
    with open(path, "rb") as fh:
        pos = after + 1
        while True:
            fh.seek(pos)
            data = fh.read(chunk + len(marker))
            if not data:
                return None
            found = data.find(marker)
            if found >= 0:
                return pos + found
            if len(data) < chunk + len(marker):
                return None
            pos += chunk


def member_per_record(path: str, probe: int = 1 << 20) -> bool:
    """Whether a gzip file holds a member per record (the WARC standard's advice, Common Crawl's
    layout) rather than one stream of several records: its first member (read as far as the first
    ``probe`` compressed bytes) holds no second record, a ``WARC/1.`` line after a blank line at or
    past the end of the first record's block (its header's Content-Length; one inside the block is
    a page quoting a record)."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    head = b""  # the member's first bytes, to the first record's header end
    end: int | None = None  # where the first record's block ends
    tail = b""
    seen = 0  # bytes inflated before ``tail``'s end
    marker = b"\r\n\r\n" + WARC_LINE
    with open(path, "rb") as fh:
        read = 0
        while read < probe and not inflate.eof:
            chunk = fh.read(64 << 10)
            if not chunk:
                break
            read += len(chunk)
            try:
                data = inflate.decompress(chunk)
            except zlib.error:
                return True  # damage: the reader's business, not this probe's
            if end is None and len(head) < 1 << 20:
                head += data[: (1 << 20) - len(head)]
                header = head.find(b"\r\n\r\n")
                if header >= 0:
                    length = _LENGTH.search(head, 0, header + 2)
                    end = header + 4 + int(length.group(1)) if length is not None else 0
            scan, base = tail + data, seen - len(tail)
            at = scan.find(marker)
            while at >= 0:
                if end is None or base + at + 4 >= end:
                    return False  # a record after the first one's block (or no block to tell by)
                at = scan.find(marker, at + 1)
            seen += len(data)
            tail = scan[-(len(marker) - 1) :]
    return True


def read_records(path: str, max_bytes: int) -> Iterator[Record | Damage]:
    """Every record of the local WARC file ``path`` in file order, and the damage between them."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        marker = GZIP_MAGIC if fh.read(3) == GZIP_MAGIC else WARC_LINE
    ranged = marker == WARC_LINE or member_per_record(path)
    for item in _read(path, size, marker, max_bytes, ranged):
        if isinstance(item, Record):
            item.ranged = ranged
        yield item


def _starts_record(path: str, at: int) -> bool:
    """Whether a WARC record (fastwarc reads one) starts at byte ``at`` itself."""
    try:
        with open(path, "rb") as fh:
            fh.seek(at)
            first = next(iter(ArchiveIterator(fh, parse_http=False, strict_mode=False)), None)
    except (OSError, ValueError, RuntimeError):
        return False
    return first is not None and (first.stream_pos if first.stream_pos >= at else at + first.stream_pos) == at


def _next_record(path: str, after: int, marker: bytes, tries: int = 4096) -> int | None:
    """The first place after byte ``after`` (the start of a record whose Content-Length is wrong)
    where a record starts (a marker that begins one), or None: the record runs to the file's end.

    In a ``.warc``, a record whose own Content-Length ends it cleanly (:func:`_plain_ends_at`)
    comes first: a damaged record's page that quotes a WARC record (a page about WARC) holds a
    start fastwarc reads, whose length ends inside the page, not at a record. A start before the
    first clean one (or with none after it) is a record of its own too, damaged as well, when
    something says so (:func:`_real_start`): else it is a quote, and the damaged record runs over it."""
    size = os.path.getsize(path)
    origin, starts = after, []  # the starts fastwarc reads that do not end cleanly, in file order
    clean: int | None = None
    for _ in range(tries):
        found = next_marker(path, after, marker)
        if found is None:
            break
        if _starts_record(path, found):
            if marker != WARC_LINE or _plain_ends_at(path, found, None, size):
                clean = found
                break
            starts.append(found)
        after = found
    if marker != WARC_LINE:
        return clean
    bound = size if clean is None else clean
    for i, start in enumerate(starts):
        if _real_start(path, origin, start, starts[i + 1] if i + 1 < len(starts) else bound, bound):
            return start
    return clean


def _real_start(path: str, prev: int, start: int, nxt: int, bound: int) -> bool:
    """Whether the record start at byte ``start`` (after the damaged record at ``prev``, before
    the next start ``nxt`` and the first clean start or the file's end ``bound``) is a real record,
    not a quote inside the damaged record's page: the damaged record's payload ending there matches
    its digest, or its own payload ending at ``nxt`` matches its own, or, with no clean start after
    it, its own Content-Length runs past the file's end (too long, as the damaged record's, or cut
    short) and an ``application/http`` block of its starts with a status line. A quote's length
    may run past the next record as well (a page shows a header, not the payload it names): with
    no digest to tell, two damaged records before a clean one stay one count."""
    if _digest_fits(path, prev, start) or _digest_fits(path, start, nxt):
        return True
    size = os.path.getsize(path)
    if bound < size:
        return False
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(min(size - start, 1 << 20))
    head = data.find(b"\r\n\r\n")
    length = _LENGTH.search(data, 0, head + 2) if head >= 0 else None
    if length is None or start + head + 4 + int(length.group(1)) <= size:
        return False
    return not _HTTP_BLOCK.search(data, 0, head + 2) or data.startswith(b"HTTP/", head + 4)


_DIGEST = re.compile(rb"\r\nWARC-Payload-Digest:[ \t]*([^\r\n]*?)[ \t]*\r\n", re.IGNORECASE)
_HTTP_BLOCK = re.compile(rb"\r\nContent-Type:[ \t]*application/http", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\nTransfer-Encoding:[^\r\n]*chunked", re.IGNORECASE)


def _digest_fits(path: str, start: int, end: int, cap: int = 16 << 20) -> bool:
    """Whether the record at byte ``start``, taken to end at byte ``end`` (where the next record
    starts: its block, then the blank line that ends a record), has a payload that says so: its
    payload digest matches it, or (an ``application/http`` block, its payload not chunked) its HTTP
    header's Content-Length is its size."""
    if end - start > cap:
        return False
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    head = data.find(b"\r\n\r\n")
    if head < 0:
        return False
    block = data[head + 4 : len(data) - 4 if data.endswith(b"\r\n\r\n") else len(data)]
    if _HTTP_BLOCK.search(data, 0, head + 2):
        http = block.find(b"\r\n\r\n")
        if http < 0:
            return False
        header = b"\r\n" + block[: http + 2]
        block = block[http + 4 :]
        length = _LENGTH.search(header)
        if length is not None and not _CHUNKED.search(header) and int(length.group(1)) == len(block):
            return True
    digest = _DIGEST.search(data, 0, head + 2)
    return digest is not None and digest_ok(digest.group(1).decode("latin-1"), block) is True


def _plain_ends_at(path: str, offset: int, length: int | None, size: int) -> bool:
    """Whether the record at ``offset`` of a ``.warc`` ends where its Content-Length (``length``,
    else its header's) says: only line ends after its block, then the file's end or a record."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(min(size - offset, 1 << 20))
        block = _block_end(data, 0)
        if block is None:
            return False
        if length is None:
            found = _LENGTH.search(data, 0, block)
            if found is None:
                return False
            length = int(found.group(1))
        at = offset + block + length
        fh.seek(at)
        tail = fh.read(8)
    after = at + len(tail) - len(tail.lstrip(b"\r\n"))
    return at <= size and (after >= size or _starts_record(path, after))


def _holds_a_record(rec: Record) -> bool:
    """Whether a payload with no digest to check holds the start of a WARC record, as when its
    Content-Length is too long and it ran over the next one (or a page quotes a whole record: told
    apart by :func:`_ends_where_declared`)."""
    return rec.digest_ok is None and rec.body is not None and b"\r\n\r\nWARC/1." in rec.body


def _block_end(data: bytes, length: int) -> int | None:
    """Where a record's block ends in ``data`` (the record's bytes from its first), by its header's
    Content-Length ``length``; None when ``data`` holds no end of the header."""
    head = data.find(b"\r\n\r\n")
    return None if head < 0 else head + 4 + length


def _ends_where_declared(path: str, rec: Record, gz: bool, size: int) -> bool:
    """Whether ``rec``'s Content-Length ends its block where the record itself ends: only line ends
    after it, then the file's end or another record (``.warc``), or the end of its own gzip member
    (``.warc.gz``, a member per record). Then the length is right, and a payload that fails its digest
    or holds ``WARC/1.`` (a page about WARC quoting a record) is the record's own: reading goes on after
    it. A length too long runs past that end, into the records after it."""
    try:
        length = int(rec.headers.get("content-length", "").strip())
    except ValueError:
        return False
    if length < 0 or (gz and rec.too_large):
        # (past the size cap in a .warc.gz: the next gzip member that starts a record is where
        # this one's member ends, found without inflating it all again)
        return False
    if not gz:
        return _plain_ends_at(path, rec.offset, length, size)
    with open(path, "rb") as fh:
        fh.seek(rec.offset)
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        head, end = b"", None  # the member's first bytes (to its header's end); where the block ends
        seen, last = 0, b""  # the member's size so far (once ``end`` is known) and its last bytes
        while not inflate.eof:
            chunk = fh.read(64 << 10)
            if not chunk:
                return False  # the member is cut short
            try:
                data = inflate.decompress(chunk)
            except zlib.error:
                return False
            if end is None:
                head += data
                end = _block_end(head, length)
                if end is None:
                    if len(head) > 1 << 20:
                        return False
                    continue
                data = head
            seen += len(data)
            if seen > end + 8:
                return False  # the member holds more than the record: its length is too short
            last = (last + data)[-8:]
        if end is None or seen < end:
            return False  # the block runs past its member: its length is too long
        return not last[len(last) - (seen - end) :].strip(b"\r\n")


def _payload_end(path: str, rec: Record, jump: int, marker: bytes, size: int) -> int:
    """Where the payload of ``rec``, a record that ran over the next one (at byte ``jump``) ends in
    its ``body``: in a ``.warc``, at the blank line before ``jump`` (the payload's place in the
    file is its block's end less its length), so a quote of a record in the page is kept; else at
    the first blank line and ``WARC/1.`` in it."""
    assert rec.body is not None
    first = rec.body.find(b"\r\n\r\nWARC/1.")
    if marker != WARC_LINE:
        return first
    with open(path, "rb") as fh:
        fh.seek(rec.offset)
        header = _block_end(fh.read(min(size - rec.offset, 1 << 20)), 0)
    try:
        length = int(rec.headers.get("content-length", "").strip())
    except ValueError:
        return first
    if header is None:
        return first
    block = rec.offset + header
    start = block + min(length, size - block) - len(rec.body)  # the payload's first byte in the file
    cut = jump - start
    if cut < 4 or cut > len(rec.body) or rec.body[cut - 4 : cut] != b"\r\n\r\n":
        return first
    return cut - 4


_SKIPPED = "a record header whose first line is no WARC version line (skipped by fastwarc)"
_HEADER_NAME = re.compile(rb"\r\n(?:WARC-Type|WARC-Record-ID):", re.IGNORECASE)


def _declared_end(path: str, rec: Record) -> int | None:
    """Where the record ``rec`` of a ``.warc`` ends by its Content-Length (its block's end), or None."""
    try:
        length = int(rec.headers.get("content-length", "").strip())
    except ValueError:
        return None
    with open(path, "rb") as fh:
        fh.seek(rec.offset)
        head = _block_end(fh.read(8 << 10), length)
        if head is None:
            fh.seek(rec.offset)
            head = _block_end(fh.read(1 << 20), length)
    return None if head is None or length < 0 else rec.offset + head


def _skipped_records(path: str, start: int, end: int) -> list[int]:
    """Where records start between bytes ``start`` and ``end`` of a ``.warc``, where fastwarc read
    none: a header (WARC-Type or WARC-Record-ID among its lines) whose first line is no WARC
    version line, as fastwarc skips over without a word. Bytes that hold no header (the rest of a
    record whose Content-Length is too short) are none."""
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(min(end - start, 1 << 20))
    found: list[int] = []
    at = 0
    while at < len(data):
        at = len(data) - len(data[at:].lstrip(b"\r\n"))
        head = data.find(b"\r\n\r\n", at)
        if head < 0 or not _HEADER_NAME.search(data, at, head + 2):
            break
        found.append(start + at)
        length = _LENGTH.search(data, at, head + 2)
        if length is None:
            break
        at = head + 4 + int(length.group(1))
    return found


def _read(path: str, size: int, marker: bytes, max_bytes: int, ranged: bool = True) -> Iterator[Record | Damage]:
    index = 0
    pending: Record | None = None  # the last record read, waiting for the next start (its length)
    pos = 0
    plain = marker == WARC_LINE
    expect: int | None = None  # in a .warc, where the next record should start (fastwarc skips what it cannot read)
    while pos < size:
        last_start: int | None = None
        problem = ""
        jump: int | None = None
        jumped = False
        if plain and pending is None:
            expect = pos
        try:
            with open(path, "rb") as fh:
                fh.seek(pos)
                for fast in ArchiveIterator(fh, parse_http=True, strict_mode=False):
                    at = fast.stream_pos if fast.stream_pos >= pos else pos + fast.stream_pos
                    # (a record's block, then 4 bytes of line ends, then the next record: no gap to look at)
                    skipped = _skipped_records(path, expect, at) if expect is not None and at - expect > 4 else []
                    if skipped:
                        if pending is not None:
                            pending.length = skipped[0] - pending.offset
                            yield pending
                            pending = None
                        for i, start in enumerate(skipped):
                            index += 1
                            end = skipped[i + 1] if i + 1 < len(skipped) else at
                            yield Damage(index=index, offset=start, length=end - start, problem=_SKIPPED)
                    index += 1
                    rec = _convert(fast, index, pos, max_bytes)
                    if pending is not None:
                        pending.length = rec.offset - pending.offset
                        yield pending
                    pending, last_start = rec, rec.offset
                    expect = _declared_end(path, rec) if plain else None
                    overran = _holds_a_record(rec)
                    if (
                        ranged
                        and (rec.digest_ok is False or rec.too_large or overran)
                        and not _ends_where_declared(path, rec, marker == GZIP_MAGIC, size)
                    ):
                        # A wrong Content-Length too long runs over the records after it (one of
                        # 999999999 would swallow the rest of the file): go on from the first record
                        # start after this one's, not from where its length says it ends.
                        jump, jumped = _next_record(path, rec.offset, marker), True
                        expect = None  # (the jump's target is a start fastwarc reads)
                        if overran and jump is not None and rec.body is not None:
                            # With no digest to fail, its payload ends where the next record begins.
                            rec.body = rec.body[: _payload_end(path, rec, jump, marker, size)]
                            rec.payload_size = len(rec.body)
                        break
            if not jumped:
                break
        except (OSError, ValueError, RuntimeError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if jumped:
            pos = size if jump is None else jump
            continue
        # fastwarc stopped on bytes it cannot read: go on from the next record start after the last good one.
        if last_start is None:
            # Nothing readable from pos: pos starts a damaged region, up to the next start.
            nxt = next_marker(path, pos, marker)
            end = size if nxt is None else nxt
            if pending is not None:
                pending.length = pos - pending.offset
                yield pending
                pending = None
            index += 1
            yield Damage(index=index, offset=pos, length=end - pos, problem=problem)
            expect = None  # (counted: the next pass starts from its end)
            if nxt is None:
                return
            pos = nxt
        else:
            nxt = next_marker(path, last_start, marker)
            if nxt is None:
                break
            pos = nxt
    skipped = _skipped_records(path, expect, size) if expect is not None and pending is not None and size - expect > 4 else []
    if pending is not None:
        pending.length = (skipped[0] if skipped else size) - pending.offset
        yield pending
    for i, start in enumerate(skipped):
        index += 1
        end = skipped[i + 1] if i + 1 < len(skipped) else size
        yield Damage(index=index, offset=start, length=end - start, problem=_SKIPPED)
