"""PDF payloads into text: the text layer, read by pdfium (pypdfium2; no OCR, no model).

A record whose payload is a PDF (declared or sniffed as ``application/pdf``) is extracted when
``content_types`` names ``application/pdf``: each page's text in reading order as pdfium gives it
(a word hyphenated at a line's end joined again), pages separated by a blank line. A PDF pdfium
cannot open is an ``extractor_error``; like HTML, it is read in the extractor's child process,
where a crash in pdfium costs that page only.

``dolma-pipe pdf`` (:mod:`dolma_pipe.stages.pdf`) reads local PDF files with the same
:class:`PdfText` in the same kind of child (:class:`PdfOnly`), and dates them by
:func:`creation_date`.
"""

from __future__ import annotations

import re
import time
import zlib
from datetime import datetime, timedelta, timezone

from .extract import TooSlow

PDF_TYPE = "application/pdf"
# pdfium writes a hyphen that breaks a word at a line's end as U+0002: the word is joined again
# (as pdftotext joins it; on Debian's manuals, 0.916 -> 0.9xx word F1, bench/pdf_quality.py)
_LINE_END_HYPHEN = re.compile("\x02\n?")


class PdfText:
    """The text layer of a PDF."""

    name = "pypdfium2"

    def extract(self, data: bytes, max_seconds: float | None = None) -> str:
        """The text; :class:`~.extract.TooSlow` once ``max_seconds`` have passed (checked between
        pages: in the worker's own process, where no child is killed for it, a PDF of thousands of
        pages stops there)."""
        import pypdfium2 as pdfium  # on the first PDF: a run of HTML only never loads pdfium

        deadline = None if max_seconds is None else time.perf_counter() + max_seconds
        doc = pdfium.PdfDocument(data)
        try:
            pages = []
            for index in range(len(doc)):
                if deadline is not None and time.perf_counter() > deadline:
                    raise TooSlow()
                page = doc[index]
                textpage = page.get_textpage()
                text = textpage.get_text_bounded().replace("\r\n", "\n").replace("\r", "\n")
                pages.append(_LINE_END_HYPHEN.sub("", text).strip())
                textpage.close()
                page.close()
            if deadline is not None and time.perf_counter() > deadline:
                raise TooSlow()
            return "\n\n".join(p for p in pages if p)
        finally:
            doc.close()


class PdfOnly:
    """The sandbox's extractor for a run of PDFs alone (``dolma-pipe pdf``): the child reads PDFs
    with :class:`PdfText` and loads no HTML extractor; an HTML page sent to it is an error."""

    name = "pdf-only"

    def extract_by(self, html: str, deep: bool = False, url: str | None = None) -> tuple[str, str]:
        raise ValueError("this extractor process reads PDFs only")


# The document information dictionary's creation date (PDF 32000-1, 7.9.4: D:YYYYMMDDHHmmSSOHH'mm',
# every part after the year optional), as a literal or a hex string, and XMP's xmp:CreateDate.
_INFO_DATE = re.compile(rb"/CreationDate\s*(?:\(\s*(D:[^)]{4,40})\)|<([0-9A-Fa-f\s]{8,200})>)")
_XMP_DATE = re.compile(rb"xmp:CreateDate(?:>|=[\"'])\s*(\d{4}(?:-\d\d(?:-\d\d(?:T[0-9:.]+(?:Z|[+-]\d\d:\d\d)?)?)?)?)")
_PDF_DATE = re.compile(r"D:(\d{4})(\d\d)?(\d\d)?(\d\d)?(\d\d)?(\d\d)?\s*(?:([Zz+-])\s*(\d\d)?'?\s*(\d\d)?'?)?")


def pdf_date(value: str) -> datetime | None:
    """A PDF date string (``D:20240501123456+02'00'``) as an aware datetime; None if it is not one."""
    m = _PDF_DATE.match(value.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second, sign, tz_h, tz_m = m.groups()
    try:
        zone = timezone.utc
        if sign in ("+", "-"):
            offset = timedelta(hours=int(tz_h or 0), minutes=int(tz_m or 0))
            zone = timezone(offset if sign == "+" else -offset)
        return datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0), int(second or 0), tzinfo=zone)
    except ValueError:
        return None


# Streams whose compressed bytes may hold the dates: object streams (PDF 1.5+ writers put the
# information dictionary in one) and XMP metadata streams, Flate-compressed (every writer's filter).
_DATE_STREAM = re.compile(rb"/Type\s*/(?:ObjStm|Metadata)\b")
_STREAM_START = re.compile(rb"(?<!end)stream(?:\r\n|\n|\r)")
_STREAM_BYTES = 16 << 20  # at most this much of one stream inflated...
_ALL_STREAM_BYTES = 64 << 20  # ...and of all of a file's (a zip bomb costs a bounded time)


def _inflated_streams(data: bytes) -> list[bytes]:
    """The Flate-compressed object and metadata streams, inflated (bounded), in file order; a
    stream that does not inflate is left out (what inflated before the damage is kept)."""
    out: list[bytes] = []
    budget = _ALL_STREAM_BYTES
    for m in _DATE_STREAM.finditer(data):
        start = _STREAM_START.search(data, m.end(), m.end() + 2048)
        if start is None:
            continue
        obj = data.rfind(b"obj", max(0, m.start() - 2048), m.start())
        if b"/FlateDecode" not in data[obj if obj >= 0 else m.start() : start.start()]:
            continue
        # the stream's own bytes, up to its endstream, as a view: handing zlib the rest of the
        # file copied it once per stream (and again into unused_data), quadratic in a large PDF
        end = data.find(b"endstream", start.end())
        body = memoryview(data)[start.end() : end if end >= 0 else len(data)]
        inflater = zlib.decompressobj()
        try:
            chunk = inflater.decompress(body, min(_STREAM_BYTES, budget))
        except zlib.error:
            continue
        out.append(chunk)
        budget -= len(chunk)
        if budget <= 0:
            break
    return out


def _info_date(blob: bytes) -> datetime | None:
    for m in reversed(list(_INFO_DATE.finditer(blob))):
        literal, hexed = m.groups()
        if literal is not None:
            value = literal.decode("latin-1")
        else:
            raw = bytes.fromhex(re.sub(rb"\s", b"", hexed).decode("ascii")) if len(re.sub(rb"\s", b"", hexed)) % 2 == 0 else b""
            value = raw.decode("utf-16-be", "replace") if raw.startswith(b"\xfe\xff") else raw.decode("latin-1")
            value = value.lstrip("\ufeff")
        when = pdf_date(value)
        if when is not None:
            return when
    return None


def _xmp_date(blob: bytes) -> datetime | None:
    for m in _XMP_DATE.finditer(blob):
        text = m.group(1).decode("ascii")
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00")) if "-" in text else datetime(int(text), 1, 1)
        except ValueError:
            continue
        return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
    return None


def creation_date(data: bytes) -> datetime | None:
    """When the PDF says it was made: its information dictionary's ``/CreationDate`` (the last
    revision's, where incremental updates wrote several), else its XMP ``xmp:CreateDate``; each
    looked for in the file's plain bytes, then in its Flate-compressed object streams (where PDF
    1.5+ writers put the information dictionary) and metadata streams, inflated here with zlib
    (bounded; pdfium, which could crash, stays in the extractor's process). None when neither is
    found."""
    streams: list[bytes] | None = None
    for find in (_info_date, _xmp_date):
        when = find(data)
        if when is not None:
            return when
        if streams is None:
            streams = _inflated_streams(data)
        for blob in reversed(streams):
            when = find(blob)
            if when is not None:
                return when
    return None
