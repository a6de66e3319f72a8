"""Document rules with Dolma's mixer semantics: the typed Python face of `rust_bloom/src/filters/`.

A :class:`DocumentMixer` holds one stream's rules, compiled once per process, and runs them over
batches of raw JSON lines (a document file's lines and the matching rows of its attribute files):

* each attribute row's ``attributes`` are merged into the document's ``attributes`` (ids checked);
* **filter**: kept when any ``include`` rule matches (or there is none) and no ``exclude`` rule
  does. jq rules run on jaq 1.2 (the engine Dolma compiles in); a jq rule matches when it has
  outputs and every one is true by Dolma's reading (false, null, 0, a computed 0.0, "", [] and
  {} are false). JSONPath rules run on jsonpath-rust 0.3.5 and match when the path finds
  anything, except that numbers compare by value (``1 >= 1.0`` holds; in Dolma it does not).
  The rules Dolma evaluates decide, in its order, and a failure in one fails the batch; a
  removed document is counted against the rule that removed it (no include matched, or the
  first exclude that matched: ``removed_include``, ``removed_exclude``). Every other rule is then
  evaluated too, for ``matched_include`` and ``matched_exclude`` (per rule, of every document);
  a failure there only counts (``failed_include``, ``failed_exclude``);
* **span replacement**: spans ``[start, end, score]`` (character offsets) selected by jq or
  JSONPath with ``min_score <= score < max_score`` are replaced, ``{}`` standing for the span's
  text (a replacement starting with ``$`` is a jq program giving the text);
* ``discard_fields``, ``min_text_length`` (bytes of the trimmed text), then
  ``metadata.provenance = "<file name>:<line>"``; documents are written with sorted keys, as
  Dolma writes them.

:func:`check_rule` compiles one expression so a config can be checked when it loads, and
:func:`rule_attributes` lists the attribute names it reads;
:func:`gzip_member` compresses the mixer's output members and :class:`GzipInflater` reads its
gzip inputs (zlib-rs, about twice CPython's zlib speed each way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, cast

from dolma_pipe import _rust

GzipInflater = _rust.GzipInflater

RuleSyntax = Literal["jq", "jsonpath"]
RuleKind = Literal["filter", "span", "replacement"]


def gzip_member(data: bytes, level: int = 6) -> bytes:
    """``data`` as one complete gzip member (mtime 0: equal input, equal bytes); members
    concatenate into one valid gzip stream. zlib-rs compresses several times faster than CPython's zlib."""
    return _rust.gzip_member(data, level)


def check_rule(kind: RuleKind, syntax: RuleSyntax, expr: str) -> tuple[int | None, str] | None:
    """None when ``expr`` compiles as a ``kind`` rule, else (1-based column or None, message)."""
    return _rust.check_rule(kind, syntax, expr)


def rule_attributes(syntax: RuleSyntax, expr: str) -> list[str]:
    """The names a jq or JSONPath rule (or span selector) certainly reads as fixed keys of the
    document's ``attributes`` (``.attributes.foo``, ``$.attributes[?(@.foo ...)]``, ...), in
    order; a computed key, ``..`` or a name read inside ``map`` is left out. ValueError when
    ``expr`` does not parse."""
    return _rust.rule_attributes(syntax, expr)


@dataclass(frozen=True)
class SpanRule:
    span: str
    syntax: RuleSyntax = "jsonpath"
    min_score: float | None = None
    max_score: float | None = None
    replacement: str = ""


@dataclass
class BatchResult:
    """What one batch gave: the kept documents as JSON lines and what happened to the others."""

    out: bytes
    line_lengths: list[int]
    consumed: list[int]
    docs: int
    kept: int
    removed_include: int  # no include rule matched
    removed_exclude: list[int]  # per exclude rule: removed by it (the first exclude that matched)
    removed_short: int
    spans_replaced: int
    bytes_in: int
    bad: list[tuple[int, str, str]]
    # Per rule: documents it matched (every rule is evaluated on every document) ...
    matched_include: list[int] = field(default_factory=list)
    matched_exclude: list[int] = field(default_factory=list)
    # ... and documents it failed on where it did not decide (counted as no match).
    failed_include: list[int] = field(default_factory=list)
    failed_exclude: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # every good document's id
    texts: list[str] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    # (kind, document index, attribute set, row, message); kind "mismatch", "ended", "bad_row" or "rule"
    error: tuple[str, int, int, int, str] | None = None


class DocumentMixer:
    """One stream's rules; ``collect`` also returns the kept documents' texts and id hashes."""

    def __init__(
        self,
        *,
        filter_syntax: RuleSyntax | None = None,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        spans: list[SpanRule] | None = None,
        discard_fields: list[str] | None = None,
        min_text_length: int = 0,
        attribute_sets: int = 0,
        provenance: bool = True,
        collect: bool = False,
    ):
        self.attribute_sets = attribute_sets
        self._inner = _rust.DocumentMixer(
            filter_syntax,
            list(include or []),
            list(exclude or []),
            [(s.span, s.syntax, s.min_score, s.max_score, s.replacement) for s in spans or []],
            list(discard_fields or []),
            min_text_length,
            attribute_sets,
            provenance,
            collect,
        )

    def process(self, docs: list[bytes], linenos: list[int], attrs: list[list[bytes]], file_name: str) -> BatchResult:
        """Run the rules over ``docs`` (raw lines) and the next rows of each attribute set."""
        raw = self._inner.process(docs, linenos, attrs, file_name)
        return BatchResult(**cast(dict, raw))
