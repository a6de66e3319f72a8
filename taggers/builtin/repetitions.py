"""Repetition taggers: periodic word sequences and character runs, vectorised.

Owns ``word_repetitions_v1``.  It finds sequences of 1 to ``max_period`` whitespace words that
repeat back to back at least ``min_times`` times ("buy now buy now buy now", "| | | | |"), the
measure of Dolma's ``tokenizer_repetitions_v1`` but on words instead of GPT-NeoX tokens (no
tokenizer download, and numpy over word hashes instead of a backtracking regex, which makes
Dolma's ``repetitions_v1`` slow).  Types are Dolma's:

* ``repetition``: one span per repeated sequence (character offsets from the first to the last
  repeated word), scored by how many times it repeats; a span inside a longer one is dropped;
* ``doc_max_score_repetition``: the largest repeat count (0 when none);
* ``doc_max_length_repetition``: the longest repetition span in characters;
* ``doc_frac_repetition``: characters covered by repetition spans / characters in the document
  (the union of the spans: overlapping repetitions, "a a a b a b a b", count each character
  once, so the value never exceeds 1);

plus ``max_char_run``: the longest run of one repeated non-space character ("!!!!!!!!",
"========"), 0 for an empty document.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from pydantic import Field

from taggers.base import Document, Span, Tagger, TaggerOptions
from taggers.registry import register

_WORD = re.compile(r"\S+")
_CHAR_RUN = re.compile(r"(\S)\1+")


def periodic_runs(hashes: np.ndarray, max_period: int, min_times: int) -> list[tuple[int, int, int]]:
    """(first word, end word exclusive, times) of back-to-back repeats, contained ones removed."""
    n = len(hashes)
    found: list[tuple[int, int, int]] = []
    for period in range(1, min(max_period, n // min_times) + 1):
        equal = hashes[period:] == hashes[:-period]
        if not equal.any():
            continue
        # Runs of True in `equal`: word i equals word i+period for i in [a, b).
        edges = np.diff(np.concatenate(([0], equal.view(np.int8), [0])))
        run_starts = np.flatnonzero(edges == 1)
        run_ends = np.flatnonzero(edges == -1)
        lengths = run_ends - run_starts
        keep = lengths >= (min_times - 1) * period
        for a, length in zip(run_starts[keep].tolist(), lengths[keep].tolist()):
            covered = length + period  # words a .. a+length+period-1 follow the period
            times = covered // period
            found.append((a, a + times * period, times))
    found.sort(key=lambda r: (r[0], -r[1], -r[2]))
    out: list[tuple[int, int, int]] = []
    last_end = -1
    for start, end, times in found:
        if end <= last_end:  # inside an earlier, longer repetition
            continue
        out.append((start, end, times))
        last_end = end
    return out


def _covered(spans: list[Span]) -> int:
    """Characters in the union of the spans (sorted by start, as ``periodic_runs`` returns them)."""
    covered = 0
    reach = 0
    for s in sorted(spans, key=lambda s: s.start):
        start = max(s.start, reach)
        if s.end > start:
            covered += s.end - start
            reach = s.end
    return covered


@register("word_repetitions_v1")
class WordRepetitions(Tagger):
    description = "Back-to-back repeated word sequences (Dolma's repetition types) and the longest character run"
    granularity = "both"
    defaults = ("repetition",)

    class Options(TaggerOptions):
        max_period: int = Field(13, ge=1, description="longest repeated word sequence looked for, in words")
        min_times: int = Field(3, ge=2, description="back-to-back occurrences that make a repetition span")

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.max_period = self.options.max_period
        self.min_times = self.options.min_times

    def predict(self, doc: Document) -> list[Span]:
        text = doc.text
        n = len(text)
        words = text.split()
        spans: list[Span] = []
        if len(words) >= self.min_times:
            hashes = np.fromiter(map(hash, words), dtype=np.int64, count=len(words))
            runs = periodic_runs(hashes, self.max_period, self.min_times)
            if runs:
                # Character offsets are only needed now, so only now are words located.
                matches = list(_WORD.finditer(text))
                if len(matches) == len(words):
                    for a, b, times in runs:
                        spans.append(Span("repetition", matches[a].start(), matches[b - 1].end(), float(times)))
        max_score = max((s.score for s in spans), default=0.0)
        max_len = max((s.end - s.start for s in spans), default=0)
        frac = _covered(spans) / n if n else 0.0
        run = max((m.end() - m.start() for m in _CHAR_RUN.finditer(text)), default=1 if text.strip() else 0)
        spans += [
            Span("doc_max_score_repetition", 0, n, max_score),
            Span("doc_max_length_repetition", 0, n, float(max_len)),
            Span("doc_frac_repetition", 0, n, frac),
            Span("max_char_run", 0, n, float(run)),
        ]
        return spans
