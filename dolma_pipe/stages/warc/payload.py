"""An HTTP payload as the server meant it: transfer and content encodings undone, its type sniffed.

Crawlers store the bytes as they came: some keep ``Transfer-Encoding: chunked`` framing or a
gzip/deflate/brotli ``Content-Encoding``. Both are undone here; of a payload whose framing or
compression is broken, what can be read is kept (the extractor reads it) and the problem is said.

The declared Content-Type is checked against the payload's first bytes (the sniffing browsers do,
WHATWG MIME sniffing reduced to what a crawl holds): a header saying ``text/html`` over a PDF or
an image is not believed, nor a missing or generic header (``application/octet-stream``,
``text/plain``) over bytes that start like HTML.
"""

from __future__ import annotations

import codecs
import re
import zlib
from dataclasses import dataclass

import brotli

# Binary formats by their first bytes (what a mislabelled payload most often is).
_MAGIC = (
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b\x08", "application/gzip"),
    (b"RIFF", "application/octet-stream"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
)
_HTML_START = re.compile(rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|title|meta|div|p|script|table|h1)[\s>/]", re.I | re.S)
# C0 control bytes no text uses (NUL, tab, newlines, form feed and escape left out: UTF-16 text
# holds NULs, ISO-2022 escapes); a tenth of random bytes are these, and no page's text has them.
_CONTROL = bytes(b for b in range(32) if b not in (0, 9, 10, 12, 13, 27))
_BINARY_SHARE = 0.03  # in the first KiB: more control bytes than this, and the payload is not text
GENERIC_TYPES = frozenset({"", "application/octet-stream", "text/plain", "unknown/unknown", "application/unknown", "*/*"})


@dataclass(frozen=True)
class Payload:
    body: bytes
    content_type: str  # the type the stage believes (declared, or sniffed where the header lied)
    declared_type: str
    charset: str | None  # the header's charset parameter
    problem: str | None = None  # a framing or compression that could not be undone


def parse_content_type(value: str | None) -> tuple[str, str | None]:
    """``text/html; charset=UTF-8`` -> (``text/html``, ``UTF-8``)."""
    if not value:
        return "", None
    kind, *params = value.split(";")
    charset = None
    for param in params:
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip("\"'") or None
    return kind.strip().lower(), charset


def dechunk(data: bytes) -> tuple[bytes, str | None]:
    """The body of ``Transfer-Encoding: chunked`` framing, and what was wrong with the framing.

    Broken framing keeps what it frames: a chunk cut short is kept as far as it goes; from a size
    line that is not one, the rest is kept as stored.
    """
    out = bytearray()
    pos = 0
    while pos < len(data):
        end = data.find(b"\r\n", pos)
        if end < 0:  # a size line the payload ends in
            end = len(data)
        size_text = data[pos:end].split(b";")[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            size = -1
        if size < 0:  # not a size ("-ff" parses, and would send the reader back: it never ended)
            out += data[pos:]
            return bytes(out), "a chunk size line is not one"
        if size == 0:
            return bytes(out), None
        start = min(end + 2, len(data))  # past the size line: every turn moves forward
        out += data[start : start + size]
        if start + size > len(data):
            return bytes(out), "a chunk runs past the payload"
        pos = start + size + 2
    return bytes(out), "no last chunk"


class TooLarge(Exception):
    """A payload whose content encoding inflates past the size cap (a decompression bomb)."""


_STEP = 64 << 10  # compressed bytes inflated at a time


def _decompress(data: bytes, coding: str, limit: int | None = None) -> tuple[bytes, str | None]:
    """``data`` inflated, and what was wrong with it (a stream cut short, or corrupt part way:
    what inflated before is kept). More than ``limit`` bytes out raise :class:`TooLarge`: a few
    kB of gzip can inflate to gigabytes, so the cap holds on the output, not only on the stored
    payload. Raises ValueError (an unknown coding), zlib.error or brotli.error where nothing
    inflates."""
    cap = (limit if limit is not None else 1 << 62) + 1
    if coding in ("gzip", "x-gzip"):
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif coding == "deflate":
        # zlib-wrapped as the standard says, or raw deflate as some servers send it.
        wrapped = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
        inflate = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
    elif coding == "br":
        return _unbrotli(data, cap)
    else:
        raise ValueError(f"unknown content encoding {coding!r}")
    out = bytearray()
    try:
        for at in range(0, len(data), _STEP):
            out += inflate.decompress(data[at : at + _STEP], cap - len(out))
            if len(out) >= cap:
                raise TooLarge(f"inflates past {cap - 1} bytes")
            if inflate.eof:
                break
    except zlib.error as exc:
        if not out:
            raise
        return bytes(out), f"corrupt part way ({exc})"
    return bytes(out), None if inflate.eof else "cut short"


def _unbrotli(data: bytes, cap: int) -> tuple[bytes, str | None]:
    inflate = brotli.Decompressor()
    out = bytearray()
    try:
        for at in range(0, len(data), _STEP):
            out += inflate.process(data[at : at + _STEP], output_buffer_limit=cap - len(out))
            if len(out) >= cap:
                raise TooLarge(f"inflates past {cap - 1} bytes")
            if inflate.is_finished():
                break
    except brotli.error as exc:
        if not out:
            raise
        return bytes(out), f"corrupt part way ({exc})"
    return bytes(out), None if inflate.is_finished() else "cut short"


def _utf16_markup(head: bytes) -> bool:
    """Whether ``head`` reads as UTF-16 (either byte order, no byte-order mark) holding markup: CJK
    text in UTF-16 has C0 bytes in a tenth of its low bytes, but random bytes almost never decode
    (a lone surrogate in 512 code units, all but surely)."""
    for codec in ("utf-16-le", "utf-16-be"):
        try:
            text = codecs.getincrementaldecoder(codec)().decode(head, final=False)
        except UnicodeDecodeError:
            continue
        if "<" in text and ">" in text:
            return True
    return False


def looks_binary(head: bytes, charset: str | None = None) -> bool:
    """Whether ``head`` (a payload's first bytes) holds control bytes no text has, as random or
    compressed bytes do. UTF-16 is text (a byte-order mark, a ``charset`` naming it, the NUL beside
    every ASCII character of its markup, or bytes that read as UTF-16 markup), whose other bytes may
    be anything."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or head.count(0) > len(head) // 8:
        return False
    if len(head) - len(head.translate(None, _CONTROL)) <= _BINARY_SHARE * len(head):
        return False
    label = (charset or "").strip().strip("\"'").lower().replace("_", "-")
    return not label.startswith(("utf-16", "utf16", "ucs-2", "unicode")) and not _utf16_markup(head)


def sniff(body: bytes, declared: str, charset: str | None = None) -> str:
    """The type to believe: a binary signature beats any header, and so do bytes that are not text
    (``application/octet-stream``: a compressed payload whose Content-Encoding would not undo,
    binary sent as HTML); HTML bytes beat a generic header."""
    head = body[:512]
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if looks_binary(body[:1024], charset):
        return "application/octet-stream"
    if declared in GENERIC_TYPES and _HTML_START.match(head):
        return "text/html"
    return declared


def open_payload(body: bytes, http_headers: dict[str, str], declared_header: str | None, max_bytes: int | None = None) -> Payload:
    """The payload undone and typed; ``declared_header`` is the Content-Type to start from.
    :class:`TooLarge` when its content encoding inflates past ``max_bytes``."""
    declared, charset = parse_content_type(declared_header)
    problem = None
    transfer = http_headers.get("transfer-encoding", "").lower()
    if "chunked" in transfer:
        body, broken = dechunk(body)
        if broken is not None:
            problem = f"bad chunked framing ({broken})"
    coding = http_headers.get("content-encoding", "").strip().lower()
    if coding and coding != "identity":
        # after broken framing too: a record cut short (a crawler's size limit) of a chunked,
        # compressed page keeps what inflates of what was framed
        failed = None
        try:
            body, broken = _decompress(body, coding, max_bytes)
            if broken is not None:
                failed = f"bad {coding} content encoding ({broken})"
        except (zlib.error, brotli.error, ValueError) as exc:
            failed = f"bad {coding} content encoding ({exc})"
        if failed is not None:
            problem = failed if problem is None else f"{problem}; {failed}"
    return Payload(body=body, content_type=sniff(body, declared, charset), declared_type=declared, charset=charset, problem=problem)
