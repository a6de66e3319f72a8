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
:func:`rule_attributes` lists the attribute names it reads. (The mixer's gzip members are written
and read by :mod:`dolma_pipe.compression`.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

from dolma_pipe import _rust

RuleSyntax = Literal["jq", "jsonpath"]
RuleKind = Literal["filter", "span", "replacement"]


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


# The per-rule counts: lists with one entry per include or exclude rule.
PER_RULE = ("removed_exclude", "matched_include", "matched_exclude", "failed_include", "failed_exclude")
_TOTALS = ("docs", "kept", "removed_include", "removed_short", "spans_replaced", "bytes_in", "bytes_out", "tokens", "files")


def _sum(mine: list[int], theirs: list[int]) -> list[int]:
    n = max(len(mine), len(theirs))
    return [(mine[i] if i < len(mine) else 0) + (theirs[i] if i < len(theirs) else 0) for i in range(n)]


@dataclass
class MixCounts:
    """What the rules did to some documents: a batch, a file, a stream or source (summed with
    :meth:`add`). Removed documents count once, against the rule that decided (``removed_*``);
    ``matched_*`` are what every rule matched of every document; ``failed_*`` where a rule failed
    without deciding (counted as no match)."""

    docs: int = 0
    kept: int = 0
    removed_include: int = 0  # no include rule matched
    removed_exclude: list[int] = field(default_factory=list)  # per exclude rule: the first that matched
    matched_include: list[int] = field(default_factory=list)
    matched_exclude: list[int] = field(default_factory=list)
    failed_include: list[int] = field(default_factory=list)
    failed_exclude: list[int] = field(default_factory=list)
    removed_short: int = 0  # min_text_length
    spans_replaced: int = 0
    bytes_in: int = 0
    bytes_out: int = 0  # of kept documents' JSON lines
    tokens: int = 0  # of kept documents (a Dolmino source's count phase)
    files: int = 0
    # Files whose counts were stored before matched counts existed (their matched are unknown).
    unmatched_files: int = 0

    def add(self, other: MixCounts) -> None:
        for key in _TOTALS:
            setattr(self, key, getattr(self, key) + getattr(other, key))
        for key in PER_RULE:
            setattr(self, key, _sum(getattr(self, key), getattr(other, key)))
        self.unmatched_files += other.unmatched_files

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (*_TOTALS, *PER_RULE)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> MixCounts:
        """One file's counts as :meth:`as_dict` stored them (an earlier version stored neither
        ``files`` nor matched counts)."""
        counts = MixCounts()
        for k in _TOTALS:
            setattr(counts, k, int(d.get(k, 1 if k == "files" else 0)))
        for k in PER_RULE:
            setattr(counts, k, list(d.get(k, [])))
        counts.unmatched_files = 0 if "matched_exclude" in d else counts.files
        return counts


@dataclass
class BatchResult:
    """What one batch gave: the kept documents as JSON lines, its counts, and the bad records."""

    out: bytes
    line_lengths: list[int]
    consumed: list[int]
    counts: MixCounts
    bad: list[tuple[int, str, str]]
    ids: list[str] = field(default_factory=list)  # every good document's id
    texts: list[str] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    # Per good document: the rules it matched (include i as bit i, exclude j as bit includes + j).
    matches: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # every good document's line number (set by the reader)
    # (kind, document index, attribute set, row, message); kind "mismatch", "ended", "bad_row" or "rule"
    error: tuple[str, int, int, int, str] | None = None


class DocumentMixer:
    """One stream's rules; ``collect`` also returns the kept documents' texts and id hashes; without
    ``write`` it decides and counts only (no output lines)."""

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
        write: bool = True,
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
        if not write:  # decide and count only
            self._inner.set_write(False)

    def process(self, docs: list[bytes], linenos: list[int], attrs: list[list[bytes]], file_name: str) -> BatchResult:
        """Run the rules over ``docs`` (raw lines) and the next rows of each attribute set."""
        raw = cast(dict, self._inner.process(docs, linenos, attrs, file_name))
        counted = {k: raw.pop(k) for k in ("docs", "kept", "removed_include", "removed_short", "spans_replaced", "bytes_in", *PER_RULE)}
        return BatchResult(**raw, counts=MixCounts(**counted, bytes_out=len(raw["out"])))
