"""PII by regular expressions: e-mail addresses, phone numbers and IP addresses.

Owns the taggers ``pii_regex`` (mirrors Dolma's ``pii_regex_v1``/``v2``) and
``pii_regex_with_counts`` (mirrors ``pii_regex_with_counts_fast_v2``).  Both
emit one span per match typed as Dolma types them (``EMAIL_ADDRESS``,
``PHONE_NUMBER``, ``IP_ADDRESS``, score 1.0) whose offsets cover exactly the
address or number: no delimiter, bracket or surrounding space, also in
non-ASCII text and when glued to CJK punctuation (``联系：alice@example.com。``).

Document-level spans (over the whole text):

* ``pii_regex``: ``doc`` = matches / whitespace words (-1.0 for an empty text), as Dolma's v2.
* ``pii_regex_with_counts``: ``doc_count`` (all matches), ``doc_frac`` (PII characters /
  text characters, -1.0 for an empty text) and, unlike Dolma, one count per type:
  ``EMAIL_ADDRESS_count``, ``PHONE_NUMBER_count``, ``IP_ADDRESS_count`` (always written,
  0.0 when nothing matched, so filters need no existence test).

Where we differ from Dolma on purpose (its patterns swallow the delimiters around
a match, miss every non-US phone format and take section numbers for IPs):

* E-mail: local part and domain labels of ASCII letters, digits and ``_%+-`` plus the
  letters of space-separated alphabets (accented Latin, Greek, Cyrillic: ``müller@…``,
  ``иван@пример.рф``), alphabetic or punycode TLD.  CJK, kana and hangul are boundaries,
  which is what keeps an address glued to CJK text or punctuation exact
  (``请联系alice@example.com。``); addresses written in those scripts are not detected.
* Usenet Message-IDs (``<7886@jpl-devvax.JPL.NASA.GOV>``, ``<1992Jul2.222039.26476@netlabs.com>``
  in fortunes) have the shape of an address.  We drop a match that sits in ``<...>`` and
  whose local part is machine-made (a run of 4+ digits, digits at least half of it): it
  names a message, not a person.  Old mailboxes (``mack@inco.UUCP``) and digits-only
  addresses outside brackets (``123456789@qq.com``) stay e-mails.  Option
  ``keep_message_ids=True`` keeps the Message-IDs too.
* Phones: international (``+CC`` or ``00CC`` then groups separated by one space, dot or hyphen,
  optional ``(0)``/``(area)``; 8–15 digits, E.164's limit, and the national length for a few
  country codes with fixed-length numbers: +1 and +7 ten digits, +33 nine, ...), North American
  (``(555) 123-4567``, ``555-123-4567``, ``555.867.5309``, ``555 123 4567``, optional ``1-``
  prefix; same separator twice) and national trunk-prefixed numbers (``030 12345678``,
  ``030/1234567``, ``(030) 1234567``, ``03-1234-5678``, ``020 7946 0958``, French
  ``01 23 45 67 89``; 8–12 digits).  A candidate that fails (too many digits, a country's
  length, or a last group after a blank shorter than a long group before it) is cut back group
  by group at blanks rather than dropped: ``+1 555 123 4567 24 hours`` gives
  ``+1 555 123 4567``, ``030 12345678 4 times`` gives ``030 12345678``; an extension
  (``+1-555-123-4567-1234``) is left out.  Not phones: plain digit runs (tables), ISO and
  dotted dates, hex dumps (a candidate next to another digit group before it, or after it a
  group mixing hex letters and digits or two more number groups, on the same line, e.g.
  ``00000010  48 65 6c 6c`` or ``0123 4567 89ab``, is dropped).
* IPv4: exactly four octets 0–255 without leading zeros and not part of a longer
  dotted run (``12.3.2.3.1`` and ``1.2.3.4.5`` give nothing; ``v1.2.3.4`` neither).  Section
  and version numbers with four parts are dropped by context only: after "Section",
  "Version", "Linux", "chapter", "as of", "v.", "§", "第", a letter+"/"; before "-exp", ".tar",
  "节"; a heading at the start of a line, ``5.2.1.1. Title`` (or ``5.2.1.1 Title`` when the
  parts are section-like: all 1–31, not all equal).  A bare dotted quad is an address whatever
  its parts (``10.1.1.1``, ``8.8.4.4``, ``1.2.3.4``, ``192.168.1.1 is my router`` at a line
  start, a log line ``203.0.113.5 - - [...]``); so is a version number written without
  context ("util-linux-ng 2.13.1.1"), the price of not dropping real addresses.
  IPv6: full eight-group or ``::``-compressed forms validated by :mod:`ipaddress`,
  with at least two groups (or the loopback ``::1``) and a digit, so ``std::vector``,
  ``12:34:56`` and MAC addresses are not IPs.
* E-mail boundaries: an address ends before ``--`` or a final ``-`` (``alice@example.com--or``)
  and starts after ``...`` (``us...alice@example.com``: no local part holds two dots in a row).

Speed: each pattern is compiled once at import.  No pattern crosses a newline,
so each runs only over the lines that hold what every one of its matches needs
(an '@' for e-mails, 8 decimal digits for phones, a digit-dot-digit for IPv4,
'::' or 7 colons for IPv6), found for a whole batch of documents in one Rust
call (``pii_windows_batch``, ``rust_bloom/src/text_stats/pii.rs``):
``pattern.finditer(text, start, end)`` over those windows finds exactly the
matches of a run over the whole text (look-behinds still see the text before
``start``), without CPython's regex engine trying every position of the prose.
The per-match checks in Python run on the few candidates only.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from pydantic import Field, field_validator

from dolma_pipe._rust import pii_windows_batch
from taggers.base import Document, Span, Tagger, TaggerOptions
from taggers.registry import register

# Candidate windows (start, end) of one pattern, and of all four: e-mail, phone, IPv4, IPv6.
Windows = list[tuple[int, int]]
AllWindows = tuple[Windows, Windows, Windows, Windows]

EMAIL = "EMAIL_ADDRESS"
PHONE = "PHONE_NUMBER"
IP = "IP_ADDRESS"
TYPES = (EMAIL, PHONE, IP)

# ---------------------------------------------------------------- e-mail
# Local part: the characters real addresses use (RFC 5322's rarer ones like '/', '=', '{'
# mostly come from URLs and code), plus letters of alphabetic scripts written with spaces
# (accented Latin, Greek, Cyrillic) so that "müller@…" is not cut to "ller@…".  CJK, kana
# and hangul are left out on purpose: those scripts glue words to the address
# ("请联系alice@example.com"), so they act as a boundary.
_LETTERS = "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0370-\u03ff\u0400-\u04ff"
_LOCAL_CHARS = _LETTERS + r"0-9_%+\-"
_LABEL = rf"[{_LETTERS}0-9](?:[{_LETTERS}0-9\-]{{0,61}}[{_LETTERS}0-9])?"
_EMAIL_RE = re.compile(
    # Start at a local-part boundary: not after a local-part character, nor after a single
    # '.' that follows one ("us.alice" is one local part; "us...alice" cannot be, so "alice" starts one).
    rf"(?<![{_LOCAL_CHARS}])(?<![{_LOCAL_CHARS}]\.)"
    rf"(?P<local>[{_LOCAL_CHARS}]+(?:\.[{_LOCAL_CHARS}]+)*)"
    r"@"
    rf"(?P<domain>(?:{_LABEL}\.)+(?:[{_LETTERS}]{{2,63}}|xn--[A-Za-z0-9\-]{{1,59}}))"
    # The domain does not go on: a trailing '.' ends a sentence, and a '-' is punctuation unless
    # a label character follows it ("alice@example.com--or" and "alice@example.com-" end at "com").
    rf"(?![{_LETTERS}0-9]|-[{_LETTERS}0-9]|\.[{_LETTERS}0-9])"
)
_DIGIT_RUN = re.compile(r"\d{4,}")

# ---------------------------------------------------------------- phones
# Separators are a single space/tab, '.', '-' ('/' after a trunk prefix): never a newline,
# so a number never spans two lines of a table.
_NB = r"(?<![A-Za-z0-9_+\-./])"  # left boundary: not inside a word, number or dotted/hyphenated run
_NE = r"(?![A-Za-z0-9_]|[.\-/]\d)"  # right boundary: the number does not continue
# The leading lookahead lets the engine skip every position that cannot start a number
# without trying the five alternatives (7x faster on prose).
_PHONE_RE = re.compile(
    r"(?=[+(0-9])(?:"
    + "|".join(
        [
            # international: +CC (or the 00 prefix then CC and a separator), optional (0)/(area), then groups
            _NB + r"(?:\+[1-9]\d{0,3}|00[1-9]\d{0,2}(?=[ \-]\d))(?:[ .\-]?\(\d{1,4}\))?(?:[ .\-]?\d{1,8}){1,6}" + _NE,
            # North America: (555) 123-4567, 555-123-4567, 555.867.5309, 1-555-123-4567, 555 123 4567
            _NB + r"(?:1[ .\-])?\(\d{3}\)[ ]?\d{3}[ .\-]\d{4}" + _NE,
            _NB + r"(?:1(?P<s0>[.\-]))?\d{3}(?P<s1>[.\-])\d{3}(?P=s1)\d{4}" + _NE,
            _NB + r"[2-9]\d{2} \d{3} \d{4}" + _NE,
            # French 01 23 45 67 89 (five pairs, one separator kind)
            _NB + r"0[1-9](?P<s2>[ .\-])\d\d(?:(?P=s2)\d\d){3}" + _NE,
            # national with a trunk 0: 030 12345678, 030/1234567, (030) 1234567, 03-1234-5678
            _NB + r"(?:0[1-9]\d{0,4}[ /\-]|\(0[1-9]\d{0,4}\)[ ]?)[1-9]\d{2,7}(?:[ \-]\d{1,5}){0,3}" + _NE,
        ]
    )
    + ")"
)
_NOT_DIGIT = re.compile(r"\D")
_ZIP_PLUS_4 = re.compile(r"\d{5}-\d{4}")  # US ZIP+4 (MA 02111-1307) has a trunk-number shape
# A digit/hex group right before or after a candidate (same line, only blanks between) means
# a hex dump or a row of numbers, not a phone number.
# After a candidate, one plain decimal number followed by a word is prose ("call +49 30 12345678
# 2023 edition", "555 123 4567 24 hours"): only a group mixing hex letters and digits, or a second
# number group, makes a row.
_GROUP_BEFORE = re.compile(r"(?:^|\s)[0-9A-Fa-f]*\d[0-9A-Fa-f]*[ \t]+$")
_HEXGROUP = r"[0-9A-Fa-f]*(?:\d[0-9A-Fa-f]*[A-Fa-f]|[A-Fa-f][0-9A-Fa-f]*\d)[0-9A-Fa-f]*"
_GROUP_AFTER = re.compile(rf"[ \t]+(?:{_HEXGROUP}|[0-9A-Fa-f]*\d[0-9A-Fa-f]*[ \t]+[0-9A-Fa-f]*\d[0-9A-Fa-f]*)\b")
# Where a phone candidate may be cut back to (a group boundary): before a separator and a digit.
_CUT = re.compile(r"[ \t.\-/](?=[\d(])")
_COUNTRY = re.compile(r"(?:\+|00)(\d+)")
# Digits after the country code, for country codes whose numbers have a fixed length: the
# "plan" a candidate must fit (a following number group or extension is not part of it).
_NATIONAL_DIGITS = {
    "1": (10, 10),
    "7": (10, 10),
    "33": (9, 9),
    "34": (9, 9),
    "44": (9, 10),
    "55": (10, 11),
    "61": (9, 9),
    "81": (9, 10),
    "86": (10, 11),
    "91": (10, 10),
}
_CONTEXT = 24

# ---------------------------------------------------------------- IP addresses
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
# Boundaries are ASCII so an address glued to CJK text is found; a neighbouring '.digit'
# means a longer dotted run (section number, version string), never an address.
_IPV4_RE = re.compile(rf"(?=\d{{1,3}}\.\d)(?<![A-Za-z0-9_.])(?<!\d\.){_OCTET}(?:\.{_OCTET}){{3}}(?![A-Za-z0-9_]|\.\d)")
# Context that makes a dotted quad a section, version or file name rather than an address:
# a word naming a section or version right before ("Section\xa04.2.13.1", "§ 10.1.2.3",
# "Linux 2.6.18.3", "v. 2.6.8.1", "as of 2.6.8.1", "第 6.1.2.2 节"), a letter and '/' ("Firefox/2.0.0.11"), or '-'/'.' and a letter
# right after ("2.6.18.3-exp", "1.2.3.4.tar"), 節/节/章 (CJK "section") right after.  A bare dotted quad is an address whatever its
# parts: "10.1.1.1", "8.8.4.4" and "1.2.3.4" are real (or documentation) addresses.
_NOT_IP_BEFORE = re.compile(
    r"(?:[A-Za-z]/|[§第]\s*|(?i:\b(?:as of|v|ver|version|versione|versión|versão|release|kernel|linux|section|sec|sección|seção|sezione|abschnitt|chapter|chap|ch|kapitel|раздел|глава)\.?[\s:]*))$"
)
_NOT_IP_AFTER = re.compile(r"[.\-][A-Za-z]|\s?[節节章]")
# A heading "5.2.1.1. Title" or a bulleted table of contents line "- 4.8.3.1. Title" (a line
# starting with an address, "10.0.0.5 db.internal" or a log line, is no heading).
_HEADING_BEFORE = re.compile(r"(?:^|\n)[ \t]*(?:[-*•][ \t]+)?$")
_H = r"[0-9A-Fa-f]{1,4}"
_IPV6_RE = re.compile(
    r"(?=[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:])(?<![0-9A-Za-z_:.])"
    rf"(?:(?:{_H}:){{7}}{_H}|(?:{_H}(?::{_H})*)?::(?:{_H}(?::{_H})*)?)"
    r"(?![0-9A-Za-z_:]|\.\d)"
)


def _is_message_id(text: str, start: int, end: int, local: str) -> bool:
    """A Usenet/mail Message-ID (``<7886@jpl-devvax.JPL.NASA.GOV>``, ``<1992Jul2.222039.26476@netlabs.com>``,
    ``<199705101952.MAA00756@wall.org>``): in angle brackets, with a machine-made local part
    (a run of 4+ digits and digits for at least half of it).  It names a message, not a person.
    Digits-only addresses outside brackets (``123456789@qq.com``) stay e-mails."""
    if start == 0 or text[start - 1] != "<" or text[end : end + 1] != ">":
        return False
    digits = len(local) - len(_NOT_DIGIT.findall(local))
    return 2 * digits >= len(local) and _DIGIT_RUN.search(local) is not None


def _email_spans(text: str, keep_message_ids: bool, windows: Windows) -> list[Span]:
    out = []
    for w_start, w_end in windows:
        for m in _EMAIL_RE.finditer(text, w_start, w_end):
            start, end = m.span()
            if not keep_message_ids and _is_message_id(text, start, end, m.group("local")):
                continue
            out.append(Span(EMAIL, start, end, 1.0))
    return out


def _looks_like_table_or_hex(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - _CONTEXT) : start]
    after = text[end : end + _CONTEXT]
    return bool(_GROUP_BEFORE.search(before) or _GROUP_AFTER.match(after))


def _phone_ok(s: str) -> bool:
    """Whether candidate ``s`` (a regex match, or one cut back to a group boundary) is a phone number."""
    digits = len(s) - len(_NOT_DIGIT.findall(s))
    if s[0] == "+" or s.startswith("00"):
        if s[0] == "0":
            digits -= 2  # the international prefix is no digit of the number
        if not 8 <= digits <= 15:  # E.164: at most 15 digits; fewer than 8 is no full number
            return False
        country = _COUNTRY.match(s)
        assert country is not None  # _PHONE_RE puts digits after a leading "+" or "00"
        cc = country.group(1)
        plan = _NATIONAL_DIGITS.get(cc)
        if plan is not None:
            national = digits - len(cc) - (s.count("(0)"))
            if not plan[0] <= national <= plan[1]:
                return False
        if s[0] == "0" and len({len(g) for g in re.split(r"[ \-]", s)}) == 1:
            return False  # "0011 2233 4455": equal groups, a hex dump or an identifier
    elif not 8 <= digits <= 12 or _ZIP_PLUS_4.fullmatch(s):
        return False
    # A last group after a blank that is shorter than a long group before it is another number
    # ("030 12345678 4 times", "+44 20 7946 0958 24 hours"), not the end of this one.
    groups = re.split(r"([ \t])", s)
    if len(groups) >= 3:
        last, prev = groups[-1], re.split(r"[.\-/)]", groups[-3])[-1]
        if last.isdigit() and prev.isdigit() and len(prev) >= 4 and len(last) < len(prev):
            return False
    return True


def _phone_spans(text: str, windows: Windows) -> list[Span]:
    out = []
    for m in (m for w_start, w_end in windows for m in _PHONE_RE.finditer(text, w_start, w_end)):
        start, end = m.span()
        s = m.group()
        # Try the whole match, then cut back group by group (a following number group or an
        # extension is not part of the phone): "+1 555 123 4567 2023" -> "+1 555 123 4567".
        # Cuts are at blanks (a new token starts there); a '-'/'.' cut only when the country
        # has a plan the shorter number fits ("+1-555-123-4567-1234": the extension is left out).
        ok = _phone_ok(s)
        if not ok:
            for c in reversed([c.start() for c in _CUT.finditer(s)]):
                cand = s[:c]
                if s[c] not in " \t" and not (
                    cand[0] in "+0" and (country := _COUNTRY.match(cand)) is not None and country.group(1) in _NATIONAL_DIGITS
                ):
                    continue
                if _phone_ok(cand):
                    end = start + c
                    ok = True
                    break
        if not ok or _looks_like_table_or_hex(text, start, end):
            continue
        out.append(Span(PHONE, start, end, 1.0))
    return out


def _small_parts(octets: list[int]) -> bool:
    """Parts like a section number's: all 1..31 and not all equal (5.2.1.1, but not 1.1.1.1)."""
    return all(1 <= o < 32 for o in octets) and len(set(octets)) > 1


def _ipv4_ok(text: str, m: re.Match) -> bool:
    start, end = m.span()
    before = text[max(0, start - 12) : start]
    if _NOT_IP_BEFORE.search(before) or _NOT_IP_AFTER.match(text, end):
        return False
    if _HEADING_BEFORE.search(before):
        # At the start of a line: "5.2.1.1. Title" is a heading; "5.2.1.1 Title" too when the
        # parts look like a section number ("192.168.1.1 is my router" is an address).
        follow = text[end : end + 1]
        if follow == "." or (follow in (" ", "\xa0", "\t") and _small_parts([int(o) for o in m.group().split(".")])):
            return False
    return True


def _ip_spans(text: str, v4_windows: Windows, v6_windows: Windows) -> list[Span]:
    out: list[Span] = []
    for w_start, w_end in v4_windows:
        out.extend(Span(IP, m.start(), m.end(), 1.0) for m in _IPV4_RE.finditer(text, w_start, w_end) if _ipv4_ok(text, m))
    for w_start, w_end in v6_windows:
        for m in _IPV6_RE.finditer(text, w_start, w_end):
            s = m.group()
            groups = [g for g in s.split(":") if g]
            # Two groups and a digit at least: keeps "fe80::1" and "2001:db8::1", drops "a::b", "::";
            # the loopback "::1" is the one single-group form kept.
            if (len(groups) < 2 and s != "::1") or not any(c.isdigit() for c in s):
                continue
            try:
                ipaddress.IPv6Address(s)
            except ValueError:
                continue
            out.append(Span(IP, m.start(), m.end(), 1.0))
    return out


def find_pii(
    text: str, keep_message_ids: bool = False, types: frozenset[str] | None = None, windows: AllWindows | None = None
) -> list[Span]:
    """Every e-mail, phone and IP span in ``text`` (of ``types`` only, when given), sorted by start;
    overlaps resolved in favour of the earlier, then longer, match (an IP inside a phone-looking
    run, say).  Types are filtered before overlaps are resolved, so an unwanted type never hides
    a wanted one.  ``windows``: the text's ``pii_windows_batch`` entry, when the caller has it
    (a batch of documents gets them in one call)."""
    want = TYPES if types is None else types
    email_w, phone_w, v4_w, v6_w = windows if windows is not None else pii_windows_batch([text])[0]
    spans = _email_spans(text, keep_message_ids, email_w) if EMAIL in want else []
    if PHONE in want:
        spans += _phone_spans(text, phone_w)
    if IP in want:
        spans += _ip_spans(text, v4_w, v6_w)
    if len(spans) < 2:
        return spans
    spans.sort(key=lambda s: (s.start, -s.end))
    kept = [spans[0]]
    for s in spans[1:]:
        if s.start >= kept[-1].end:
            kept.append(s)
    return kept


class _PiiBase(Tagger):
    granularity = "both"

    class Options(TaggerOptions):
        keep_message_ids: bool = Field(
            False, description="also tag Usenet Message-IDs (<7886@jpl-devvax.JPL.NASA.GOV>) as e-mail addresses"
        )
        types: list[str] | None = Field(None, description=f"PII types to find, a non-empty subset of {list(TYPES)} (null: all)")

        @field_validator("types", mode="before")
        @classmethod
        def _tuple_is_a_list(cls, v: Any) -> Any:
            return list(v) if isinstance(v, tuple) else v

        @field_validator("types")
        @classmethod
        def _known_types(cls, v: list[str] | None) -> list[str] | None:
            if v is not None and (not v or any(t not in TYPES for t in v)):
                raise ValueError(f"must be a non-empty subset of {list(TYPES)}")
            return v

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        types = self.options.types
        self.keep_message_ids = self.options.keep_message_ids
        self.types = frozenset(TYPES if types is None else types)
        self._want = None if len(self.types) == len(TYPES) else self.types

    def _find(self, text: str, windows: AllWindows | None = None) -> list[Span]:
        return find_pii(text, self.keep_message_ids, self._want, windows)

    def predict(self, doc: Document) -> list[Span]:
        return self.predict_batch([doc])[0]

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        """Every document's spans, the candidate windows of the whole batch found in one Rust call."""
        return [self.spans(d.text, w) for d, w in zip(docs, pii_windows_batch([d.text for d in docs]))]

    def spans(self, text: str, windows: AllWindows) -> list[Span]:
        """One document's spans (the subclass adds its document-level spans)."""
        raise NotImplementedError


@register("pii_regex")
class PiiRegex(_PiiBase):
    description = "e-mails, phone numbers (international formats), IPv4/IPv6 by regex; doc = matches per word"
    defaults = ("doc",)

    def spans(self, text: str, windows: AllWindows) -> list[Span]:
        spans = self._find(text, windows)
        words = len(text.split())
        spans.append(Span("doc", 0, len(text), len(spans) / words if words else -1.0))
        return spans


@register("pii_regex_with_counts")
class PiiRegexWithCounts(_PiiBase):
    description = "PII spans as pii_regex plus doc_count, doc_frac and a count per type"
    defaults = ("doc_count", "doc_frac") + tuple(f"{t}_count" for t in TYPES)

    def __init__(self, **options: Any):
        super().__init__(**options)
        # Only the selected types' counts are written (Tagger.group writes every default).
        self.defaults = ("doc_count", "doc_frac") + tuple(f"{t}_count" for t in TYPES if t in self.types)

    def spans(self, text: str, windows: AllWindows) -> list[Span]:
        n = len(text)
        spans = self._find(text, windows)
        counts = dict.fromkeys(TYPES, 0)
        covered = 0
        for s in spans:
            counts[s.type] += 1
            covered += s.end - s.start
        spans.append(Span("doc_count", 0, n, float(len(spans))))
        spans.append(Span("doc_frac", 0, n, covered / n if n else -1.0))
        spans.extend(Span(f"{t}_count", 0, n, float(c)) for t, c in counts.items() if t in self.types)
        return spans
