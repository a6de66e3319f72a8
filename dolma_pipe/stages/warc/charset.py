"""A payload's bytes into text, by one fixed order, recording what decided.

1. ``bom``: a byte-order mark (UTF-8, UTF-16) wins.
   A page in UTF-16 with no mark (NULs beside its markup) is told by its bytes next, as by a mark
   (``detector``; ``http`` where the header named that byte order).
2. ``http``: the HTTP header's charset, if the bytes decode with it.
3. ``meta``: the page's own ``<meta charset>`` / ``http-equiv`` tag (first 4 KiB), if they decode.
4. ``utf8``: bytes that are valid UTF-8.
5. ``detector``: uchardet (resiliparse's ``detect_encoding``), decoding with replacement: no page
   is lost for its encoding.

Labels mean what the WHATWG encoding standard says browsers do (``iso-8859-1`` is windows-1252,
``gb2312`` is GBK...), each decoded by Python's codec for the superset browsers use (GB18030,
cp932 for Shift_JIS, cp949 for EUC-KR, Big5-HKSCS). A header or tag naming a legacy charset
over non-ASCII bytes that are valid UTF-8 is not believed (``utf8`` decides): a legacy text is
valid UTF-8 by chance almost never, while servers that send ``iso-8859-1`` for UTF-8 pages are
common. So are servers that send ``iso-8859-1`` whatever the page is: that label (windows-1252)
gives way to the page's meta tag, or to the detector when it reads the bytes as another charset.
ISO-2022-JP is 7-bit: bytes holding its escape sequences are not taken for ASCII.
"""

from __future__ import annotations

import codecs
import functools
import re
from dataclasses import dataclass

from resiliparse.parse.encoding import detect_encoding, map_encoding_to_html5

META_WINDOW = 4096
_META = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)
# Browsers decode these labels with a superset of the standard codec.
_SUPERSET = {
    "gbk": "gb18030",
    "gb2312": "gb18030",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
    "iso8859-11": "cp874",
    "utf-16-le": "utf-16-le",
}
WEAK = "cp1252"
_CONTROLS = re.compile("[\x00-\x08\x0b\x0e-\x1f]")
# An ISO-2022 escape into a double-byte set (ESC $ @, ESC $ B, ESC $ ( D, ESC $ ) C, ESC $ A...).
_ISO2022 = re.compile(rb"\x1b\$[@AB]|\x1b\$[()][A-Z]")
# What a detector says of Latin text: no reason to doubt a windows-1252 header.
LATIN = frozenset({"cp1252", "iso8859-15", "latin-1", "iso8859-1"})
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


@dataclass(frozen=True)
class Decoded:
    text: str
    charset: str  # the Python codec that decoded it
    decided_by: str  # bom, http, meta, utf8 or detector
    utf8_body: bool = False  # the body was valid UTF-8 read as such: it is ``text``'s UTF-8 encoding


def codec_for(label: str | None) -> str | None:
    """The Python codec a browser-compatible decoder uses for ``label``; None for an unknown label."""
    if not label:
        return None
    return _codec_for(label)


@functools.lru_cache(maxsize=1024)
def _codec_for(label: str) -> str | None:
    label = label.strip().strip("\"'").lower()
    if not label.isprintable():
        return None  # no charset's name (codecs.lookup raises ValueError on a NUL)
    try:
        own: str | None = codecs.lookup(label).name
    except LookupError:
        own = None
    # WHATWG's name for the label; resiliparse answers utf-8 for labels it does not know.
    name = map_encoding_to_html5(label) or None
    if name == "utf-8" and own != "utf-8" and label.replace("-", "").replace("_", "") not in ("utf8", "unicode11utf8", "xunicode20utf8"):
        name = own  # a label WHATWG does not know (cp949...) is Python's, or unknown
    if name is None:
        return None
    name = _SUPERSET.get(name, name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return own


def meta_charset(body: bytes) -> str | None:
    """The charset label of the page's first meta tag that names one (in the first 4 KiB)."""
    found = _META.search(body, 0, META_WINDOW)
    return found.group(1).decode("ascii", "replace") if found else None


def _strict(body: bytes, codec: str) -> str | None:
    try:
        return body.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def _utf16(body: bytes) -> str | None:
    """The UTF-16 byte order of a page with no byte-order mark (uchardet answers windows-1252 for
    it, and its ASCII markup is ASCII bytes): its markup's ``<`` beside a NUL, and the whole of it
    decodes with no control character. It goes before a header that names another charset (which
    decodes it, NULs and all) as a byte-order mark does."""
    for codec, lt in (("utf-16-le", b"<\x00"), ("utf-16-be", b"\x00<")):
        at = body.find(lt)
        while at >= 0 and at % 2:
            at = body.find(lt, at + 1)
        if at < 0:
            continue
        text = _strict(body[: len(body) & ~1], codec)
        if text is not None and text.count("<") >= 4 and not _CONTROLS.search(text):
            return codec  # (markup: not a stray NUL in a UTF-8 page that reads as UTF-16 by chance)
    return None


def _detected(body: bytes) -> str:
    return codec_for(detect_encoding(body, html5_compatible=False, from_html_meta=False)) or "cp1252"


def decode(body: bytes, header_charset: str | None) -> Decoded:
    """``body`` as text by the order above (never fails: the detector's codec decodes with replacement)."""
    for bom, bom_codec in _BOMS:
        if body.startswith(bom):
            return Decoded(body[len(bom) :].decode(bom_codec, "replace"), bom_codec, "bom")
    utf16 = _utf16(body) if b"\x00" in body else None  # no text in an 8-bit charset holds a NUL
    if utf16 is not None:
        return Decoded(body[: len(body) & ~1].decode(utf16), utf16, "http" if codec_for(header_charset) == utf16 else "detector")
    ascii_only = body.isascii()
    utf8 = body.decode("ascii") if ascii_only else _strict(body, "utf-8")
    if ascii_only and b"\x1b" in body and _ISO2022.search(body):
        # ISO-2022-JP (e-mail's and old Japanese pages' charset) is 7-bit: its escape sequences make
        # it ASCII bytes, but not ASCII text. Decided as a legacy charset is (header, tag, detector).
        ascii_only, utf8 = False, None
    meta = meta_charset(body)
    for source, label in (("http", header_charset), ("meta", meta)):
        codec = codec_for(label)
        if codec is None:
            continue
        if codec == "utf-8":
            if utf8 is not None:
                return Decoded(utf8, codec, source, utf8_body=True)
            continue  # bytes that are not UTF-8 (already tried once)
        if source == "http" and codec == WEAK and not ascii_only:
            # windows-1252 (iso-8859-1, us-ascii) is many servers' default, sent whatever the page
            # is: the page's own tag, else a detector that reads the bytes as another charset, wins.
            if codec_for(meta) is not None:
                continue
            detected = _detected(body)
            if detected not in LATIN and utf8 is None and _strict(body, detected) is not None:
                return Decoded(body.decode(detected), detected, "detector")
        if codec != "utf-8" and not ascii_only and utf8 is not None and not codec.startswith("utf-16"):
            return Decoded(utf8, "utf-8", "utf8", utf8_body=True)  # a legacy label over valid UTF-8: not believed
        text = _strict(body, codec)
        if text is not None:
            return Decoded(text, codec, source)
    if utf8 is not None:
        return Decoded(utf8, "utf-8", "utf8", utf8_body=True)
    guess = _detected(body)
    return Decoded(body.decode(guess, "replace"), guess, "detector")
