"""C4 rules (Raffel et al. 2020, the "Colossal Clean Crawled Corpus" filter; TFDS ``c4_utils``).

Owns three taggers on one Rust kernel (``rust_bloom/src/text_stats/c4.rs``) whose mode is the
only difference:

* ``c4_v1`` and ``c4_v2``: Dolma 1.2.1's taggers of those names, value for value (its
  ``dolma/taggers/c4.py``; see :class:`DolmaC4Tagger`), with one documented exception where
  Dolma's ``c4_v2`` offsets are not character offsets of the text.
* ``c4``: the C4 paper's rules with the extensions Dolma lacks: the ellipsis, javascript and
  policy line rules, bad words on word boundaries, sentences left after the line rules, and a
  ``keep`` verdict (:class:`C4Tagger`).  A name Dolma does not use.

``c4`` in detail.  Line spans, one per line of ``text.split("\\n")`` (the newline inside the span,
so that removing the spans removes the lines), like Dolma's: ``lines_with_no_ending_punctuation``,
``lines_with_too_few_words`` (fewer than ``min_words_per_line`` words: 5 as in C4; Dolma uses 3),
``lines_ending_with_ellipsis``, ``lines_with_javascript`` and ``lines_with_policy`` (terms of use,
privacy policy, cookie policy, uses cookies, use of cookies, use cookies).  Document spans
``[0, len(text), 1.0]`` when true: ``has_naughty_word``, ``has_javascript``, ``has_lorem_ipsum``,
``has_curly_brace``, ``has_policy``; ``line_count``; ``kept_sentence_count`` (sentences left in the
lines C4 keeps) and ``keep`` (1.0 keep / 0.0 drop): a page is dropped for lorem ipsum, a curly
brace, a bad word, or fewer than 3 sentences left after C4's line removal.

``keep`` is a default type (like the two line types): a document on which the tagger failed gets
an empty ``keep`` from the tag stage, never a missing key.  An absent or empty ``keep`` means "not
evaluated": mixer filters should treat it as drop (a filter "drop when keep == 0" lets such a
document through; "keep when keep == 1" does not).

Bad words: the English "List of Dirty, Naughty, Obscene, and Otherwise Bad Words" (LDNOOBW,
https://github.com/LDNOOBW/List-of-Dirty-Naughty-Obscene-and-Otherwise-Bad-Words, CC BY 4.0),
the list C4 used, shipped as ``ldnoobw_en.txt`` next to this module (byte for byte the copy Dolma
1.2.1 ships as ``dolma/data/naughty_words_en.txt``).  In ``c4`` single words match whole
lower-cased words (punctuation around them does not hide them, as in C4's ``(?:\\W|^)word(?:\\W|$)``)
and phrases match on word boundaries; ``c4_v1``/``c4_v2`` match as Dolma does.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar, Literal

from pydantic import Field

# The Rust kernel (rust_bloom/src/text_stats/), which the Python code below mirrors as the
# reference, and the keep rule, defined once in Rust and used by both paths.
from dolma_pipe._rust import C4Kernel, c4_keep
from taggers.base import Document, Grouped, KernelOptions, Span, Tagger
from taggers.registry import register

END_MARKS = (".", "?", "!", '"')
C4_MIN_WORDS_PER_LINE = 5  # TFDS c4_utils _MIN_WORDS_PER_LINE
DOLMA_MIN_WORDS_PER_LINE = 3  # Dolma's MIN_WORDS_PER_LINE
POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
MIN_SENTENCES = 3

_BAD_WORDS_FILE = os.path.join(os.path.dirname(__file__), "ldnoobw_en.txt")


def _load_bad_words(path: str) -> tuple[frozenset[str], dict[str, list[tuple[str, re.Pattern]]]]:
    with open(path, encoding="utf-8") as fh:
        entries = [line.strip().lower() for line in fh if line.strip()]
    words = frozenset(e for e in entries if " " not in e)
    phrases: dict[str, list[tuple[str, re.Pattern]]] = {}
    for e in entries:
        if " " in e:
            # Indexed by first word: only phrases whose first word occurs are searched.
            phrases.setdefault(e.split(" ", 1)[0], []).append((e, re.compile(rf"\b{re.escape(e)}\b")))
    return words, phrases


BAD_WORDS, BAD_PHRASES = _load_bad_words(_BAD_WORDS_FILE)
with open(_BAD_WORDS_FILE, encoding="utf-8") as _fh:
    BAD_WORD_ENTRIES = [line.strip().lower() for line in _fh if line.strip()]
# Whether taggers use the Rust kernel by default (``use_rust`` overrides it per tagger; the
# tests switch it to run every case on both); the Python ``predict_python`` is the reference
# the parity tests compare it with.
USE_RUST = True
_LINE_TYPES = (
    "lines_with_no_ending_punctuation",
    "lines_with_too_few_words",
    "lines_ending_with_ellipsis",
    "lines_with_javascript",
    "lines_with_policy",
)
_FLAG_NAMES = ("has_naughty_word", "has_javascript", "has_lorem_ipsum", "has_curly_brace", "has_policy")
# Words as the bad-word list spells them: runs of letters, digits, "&" and "-" (a hyphenated
# word is also checked part by part).  For ASCII text, translating the other punctuation to
# spaces and splitting gives the same words several times faster than the regex.
_TOKEN = re.compile(r"[\w&\-]+")
_ASCII_SEPARATORS = bytes(c for c in b"!\"#$%'()*+,./:;<=>?@[\\]^`{|}~")
_ASCII_TO_SPACE = bytes.maketrans(_ASCII_SEPARATORS, b" " * len(_ASCII_SEPARATORS))
# List entries that are not such words (an emoji) are looked for as substrings.
_ODD_BAD_WORDS = tuple(w for w in BAD_WORDS if not _TOKEN.fullmatch(w))
# A sentence end: terminal punctuation, optional closing quotes/brackets, then space or line end.
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s|$)")


def has_bad_word(lower: str) -> bool:
    """Whether lower-cased text holds a word or phrase of the bad-word list."""
    if lower.isascii():
        tokens = set(lower.encode("ascii").translate(_ASCII_TO_SPACE).decode("ascii").split())
    else:
        tokens = set(_TOKEN.findall(lower))
    if not BAD_WORDS.isdisjoint(tokens):
        return True
    for t in [t for t in tokens if "-" in t]:  # "fuck-up" holds a bad word
        if not BAD_WORDS.isdisjoint(t.split("-")):
            return True
        tokens.update(t.split("-"))  # phrases may start with a hyphenated word's part
    if any(w in lower for w in _ODD_BAD_WORDS):
        return True
    for first in tokens.intersection(BAD_PHRASES):
        # A plain substring test first (fast), the word-boundary regex only to confirm.
        if any(phrase in lower and pattern.search(lower) for phrase, pattern in BAD_PHRASES[first]):
            return True
    return False


class C4Tagger(Tagger):
    """``c4``: the C4 paper's line and page rules with a keep/drop verdict (see the module doc)."""

    description = "C4 paper's rules: unpunctuated/short/ellipsis/javascript/policy lines, page flags, and a keep/drop verdict"
    granularity = "both"
    defaults = ("lines_with_no_ending_punctuation", "lines_with_too_few_words", "keep")

    class Options(KernelOptions):
        min_words_per_line: int = Field(
            C4_MIN_WORDS_PER_LINE, ge=0, description="a line with fewer words is 'too few words' (C4: 5; Dolma's c4_v1/c4_v2: 3)"
        )
        min_sentences: int = Field(MIN_SENTENCES, ge=0, description="fewest sentences left after C4's line removal for keep=1")

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        min_words_per_line, min_sentences = self.options.min_words_per_line, self.options.min_sentences
        self.min_words = min_words_per_line
        self.min_sentences = min_sentences
        self.kernel = C4Kernel(BAD_WORD_ENTRIES, min_words_per_line, "paper") if self.options.rust(USE_RUST) else None

    def predict(self, doc: Document) -> list[Span]:
        return self.predict_spans([doc])[0]

    def predict_batch(self, docs: list[Document]) -> list[list[Span]] | list[Grouped]:
        if self.kernel is None:
            return [self.predict_python(d) for d in docs]
        # Hundreds of line spans per page: the kernel builds the grouped mapping itself.
        texts = [d.text for d in docs]
        lowers = [None if t.isascii() else t.lower() for t in texts]
        return self.kernel.predict_grouped_batch(texts, lowers, self.min_sentences)

    def predict_spans(self, docs: list[Document]) -> list[list[Span]]:
        if self.kernel is None:
            return [self.predict_python(d) for d in docs]
        texts = [d.text for d in docs]
        # Python's lower-casing for non-ASCII text (never re-implemented in Rust).
        lowers = [None if t.isascii() else t.lower() for t in texts]
        out = []
        # Each result's fields are named as the attribute types (see dolma_pipe/_rust.pyi).
        for r in self.kernel.predict_batch(texts, lowers, self.min_sentences):
            n = r.length
            spans = [Span(name, s, e, 1.0) for name in _LINE_TYPES for s, e in getattr(r, name)]
            spans += [Span(name, 0, n, 1.0) for name in _FLAG_NAMES if getattr(r, name)]
            spans.append(Span("line_count", 0, n, float(r.line_count)))
            spans.append(Span("kept_sentence_count", 0, n, float(r.kept_sentence_count)))
            spans.append(Span("keep", 0, n, 1.0 if r.keep else 0.0))
            out.append(spans)
        return out

    def predict_python(self, doc: Document) -> list[Span]:
        """The reference implementation (the Rust kernel must give the same spans)."""
        text = doc.text
        n = len(text)
        # Lower-casing can change lengths ("İ"), so offsets come from the original lines and
        # the lower-cased lines are only looked at (lower() never adds or removes a newline).
        lower = text.lower()
        lines = text.split("\n")
        lower_lines = lower.split("\n") if len(lower) != n else None
        has_js = "javascript" in lower
        # Substring tests are much faster than one regex alternation (no literal prefix to skip by).
        has_policy = any(p in lower for p in POLICY_SUBSTRINGS)
        no_punct: list[Span] = []
        few_words: list[Span] = []
        ellipsis: list[Span] = []
        js_lines: list[Span] = []
        policy_lines: list[Span] = []
        sentences = 0
        min_words = self.min_words
        last = len(lines) - 1
        start = 0
        for i, line in enumerate(lines):
            end = start + len(line) + (i < last)
            s = line.strip()
            removed = False
            if not s.endswith(END_MARKS):
                no_punct.append(Span("lines_with_no_ending_punctuation", start, end, 1.0))
                removed = True
            elif s.endswith("..."):
                ellipsis.append(Span("lines_ending_with_ellipsis", start, end, 1.0))
                removed = True
            if min_words and len(s.split(None, min_words)) < min_words:
                few_words.append(Span("lines_with_too_few_words", start, end, 1.0))
                removed = True
            if has_js or has_policy:
                low = lower_lines[i] if lower_lines is not None else lower[start : start + len(line)]
                if has_js and "javascript" in low:
                    js_lines.append(Span("lines_with_javascript", start, end, 1.0))
                    removed = True
                if has_policy and any(p in low for p in POLICY_SUBSTRINGS):
                    policy_lines.append(Span("lines_with_policy", start, end, 1.0))
                    removed = True
            if not removed:
                sentences += len(_SENTENCE_END.findall(s))
            start = end

        spans = no_punct + few_words + ellipsis + js_lines + policy_lines
        doc_flags = (
            ("has_naughty_word", has_bad_word(lower)),
            ("has_javascript", has_js),
            ("has_lorem_ipsum", "lorem ipsum" in lower),
            ("has_curly_brace", "{" in text),
            ("has_policy", has_policy),
        )
        for name, flag in doc_flags:
            if flag:
                spans.append(Span(name, 0, n, 1.0))
        spans.append(Span("line_count", 0, n, float(len(lines))))
        spans.append(Span("kept_sentence_count", 0, n, float(sentences)))
        flags = dict(doc_flags)
        keep = c4_keep(
            has_naughty_word=flags["has_naughty_word"],
            has_lorem_ipsum=flags["has_lorem_ipsum"],
            has_curly_brace=flags["has_curly_brace"],
            kept_sentence_count=sentences,
            min_sentences=self.min_sentences,
        )
        spans.append(Span("keep", 0, n, 1.0 if keep else 0.0))
        return spans


register("c4")(C4Tagger)


# -- Dolma's c4_v1 / c4_v2 ---------------------------------------------------------------------

# Dolma's list as Dolma reads it: the file's lines, neither stripped nor lower-cased; an entry
# with a space is a phrase (found anywhere in the lower-cased text), any other a word (equal to
# a word of its split()).
with open(_BAD_WORDS_FILE, encoding="utf-8") as _fh:
    DOLMA_BAD_LINES = _fh.read().splitlines()
DOLMA_BAD_WORDS = frozenset(w for w in DOLMA_BAD_LINES if " " not in w)
DOLMA_BAD_PHRASES = tuple(w for w in DOLMA_BAD_LINES if " " in w)


def dolma_c4_python(text: str, version: int) -> Grouped:
    """Dolma 1.2.1's ``c4_v1`` (``version=1``) or ``c4_v2`` (2) as the grouped mapping, in Python:
    the reference of the kernel's Dolma modes, Dolma's code statement for statement except for
    the offsets, which are the text's (see :class:`DolmaC4Tagger`)."""
    n = len(text)
    lower = text.lower()
    no_punct: list[list[float]] = []
    few_words: list[list[float]] = []
    naughty = javascript = lorem = curly = False
    lines = text.split("\n")
    # Lower-casing never adds or removes a newline, and a line lower-cased alone is that line
    # of the lower-cased text (final-sigma context stops at a newline).
    lower_lines = lower.split("\n")
    start = 0
    for i, line in enumerate(lines):
        end = start + len(line) + (i < len(lines) - 1)
        low = lower_lines[i].strip()
        if not low.endswith(END_MARKS):
            no_punct.append([start, end, 1.0])
        words = low.split()
        if len(words) < DOLMA_MIN_WORDS_PER_LINE:
            few_words.append([start, end, 1.0])
        if version == 1:
            if any(w in DOLMA_BAD_WORDS for w in words) or any(p in low for p in DOLMA_BAD_PHRASES):
                naughty = True
            javascript = javascript or any(w == "javascript" for w in words)
            lorem = lorem or "lorem ipsum" in low
            curly = curly or "{" in low
        start = end
    if version == 2:
        curly = "{" in lower
        lorem = "lorem ipsum" in lower
        javascript = "javascript" in lower
        naughty = any(w in DOLMA_BAD_WORDS for w in lower.split()) or any(p in lower for p in DOLMA_BAD_PHRASES)
    out: Grouped = {}
    if no_punct:
        out["lines_with_no_ending_punctuation"] = no_punct
    if few_words:
        out["lines_with_too_few_words"] = few_words
    for name, flag in (
        ("has_naughty_word", naughty),
        ("has_javascript", javascript),
        ("has_lorem_ipsum", lorem),
        ("has_curly_brace", curly),
    ):
        if flag:
            out[name] = [[0, n, 1.0]]
    out["line_count"] = [[0, n, float(len(lines))]]
    return out


class DolmaC4Tagger(Tagger):
    """``c4_v2``: Dolma 1.2.1's tagger of that name, the same attribute names, spans and scores.

    Dolma's definitions (``c4`` has the paper's):

    * ``lines_with_no_ending_punctuation`` / ``lines_with_too_few_words``: one span per line of
      ``text.split("\\n")`` whose stripped text does not end with ``.``, ``?``, ``!`` or ``"`` /
      has fewer than 3 ``split()`` words; the span holds the line's newline (the last line has
      none; a final newline makes an empty last line ``[len, len]``);
    * ``has_curly_brace``, ``has_lorem_ipsum``, ``has_javascript``: ``{``, ``lorem ipsum``,
      ``javascript`` anywhere in ``text.lower()`` ("javascripts" and "nojavascript" count);
    * ``has_naughty_word``: a word of ``text.lower().split()`` equal to a single-word entry of
      the bad-word list (punctuation attached hides it: "shit," does not count), or a phrase
      entry anywhere in the lower-cased text (also inside words: "blue waffles");
    * ``line_count``: lines of ``text.split("\\n")``.  Flags are ``[0, len(text), 1.0]`` when
      true and absent otherwise; no verdict; no type is written for every document.

    Where following Dolma would break the data contract (character offsets into ``text``):
    Dolma computes the line spans on ``text.lower()``, which is longer than the text when a
    character lower-cases to two (U+0130 "İ" to "i̇"), so from that line on its offsets are not
    the text's and its last span ends past the text.  Here the spans are the text's lines.  The
    document ``"İİ abc\\nJavaScript here ok.\\nfoo"`` (30 characters) gets
    ``lines_with_no_ending_punctuation`` ``[[0, 7], [27, 30]]`` here and ``[[0, 9], [29, 32]]``
    from Dolma (its ``c4_v1`` agrees with us).  Only documents whose ``len(text.lower())``
    differs from ``len(text)`` are affected; ``bench/parity.py`` counts them apart.
    """

    description = "Dolma 1.2.1's c4_v2: C4 line rules and page flags, Dolma's definitions (no verdict)"
    granularity = "both"
    _VERSION: ClassVar[int] = 2

    class Options(KernelOptions):
        pass

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        mode: Literal["dolma_v1", "dolma_v2"] = "dolma_v1" if self._VERSION == 1 else "dolma_v2"
        self.kernel = C4Kernel(DOLMA_BAD_LINES, DOLMA_MIN_WORDS_PER_LINE, mode) if self.options.rust(USE_RUST) else None

    def predict(self, doc: Document) -> Grouped:
        return self.predict_batch([doc])[0]

    def predict_batch(self, docs: list[Document]) -> list[Grouped]:
        if self.kernel is None:
            return [dolma_c4_python(d.text, self._VERSION) for d in docs]
        # The kernel lower-cases: in Dolma's rules the lower-cased text is only searched for ASCII
        # words and phrases and an emoji, where Rust's lower-casing is Python's on every character
        # (see rust_bloom/src/text_stats/c4.rs C4::predict; test_c4.py checks every code point).
        return self.kernel.predict_grouped_batch([d.text for d in docs], [None] * len(docs))


@register("c4_v1")
class DolmaC4V1Tagger(DolmaC4Tagger):
    """``c4_v1``: Dolma 1.2.1's tagger of that name: ``c4_v2``'s line rules, with the flags taken
    per lower-cased stripped line: ``has_javascript`` only for "javascript" as a whole ``split()``
    word, the others as in ``c4_v2``.  Its offsets are the text's in Dolma too: no exception."""

    description = "Dolma 1.2.1's c4_v1: c4_v2 with javascript as a whole word"
    _VERSION = 1


register("c4_v2")(DolmaC4Tagger)
