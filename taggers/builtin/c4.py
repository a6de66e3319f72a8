"""C4 rules (Raffel et al. 2020, the "Colossal Clean Crawled Corpus" filter; TFDS ``c4_utils``).

Owns the ``c4_v1`` and ``c4_v2`` taggers (the same rules; both names exist because Dolma has
both and mixer configs name either).  Types Dolma emits keep Dolma's names and offsets:

* ``lines_with_no_ending_punctuation``, ``lines_with_too_few_words``: one span per line of
  ``text.split("\\n")`` (empty lines included, the newline inside the span so that removing the
  spans removes the lines), exactly as Dolma's ``c4_v2``;
* ``has_naughty_word``, ``has_javascript``, ``has_lorem_ipsum``, ``has_curly_brace``:
  ``[0, len(text), 1.0]`` when true, absent otherwise; ``line_count``: number of lines.

Added, to apply every C4 rule: line spans ``lines_ending_with_ellipsis``,
``lines_with_javascript`` and ``lines_with_policy`` (terms of use, privacy policy, cookie
policy, uses cookies, use of cookies, use cookies), ``has_policy``, ``kept_sentence_count``
(sentences left in the lines C4 keeps) and ``keep`` (1.0 keep / 0.0 drop): a page is dropped
for lorem ipsum, a curly brace, a bad word, or fewer than 3 sentences left after C4's line
removal (lines without terminal punctuation, ending in an ellipsis, with too few words, naming
javascript, or policy boilerplate).

``min_words_per_line`` defaults to 3 like Dolma; the original C4 used 5 (set the option).

``keep`` is a default type (like the two line types Dolma writes for every document): a
document on which the tagger failed gets an empty ``keep`` from the tag stage, never a missing
key.  An absent or empty ``keep`` means "not evaluated": mixer filters should treat it as drop
(a filter "drop when keep == 0" lets such a document through; "keep when keep == 1" does not).

Bad words: the English "List of Dirty, Naughty, Obscene, and Otherwise Bad Words" (LDNOOBW,
https://github.com/LDNOOBW/List-of-Dirty-Naughty-Obscene-and-Otherwise-Bad-Words, CC BY 4.0),
the list C4 used, shipped as ``ldnoobw_en.txt`` next to this module (the copy Dolma 1.2.1
ships as ``dolma/data/naughty_words_en.txt``).  Single words match whole lower-cased words
(punctuation around them does not hide them, unlike Dolma's whitespace split); phrases match on
word boundaries.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import Field

# The Rust kernel (rust_bloom/src/text_stats/), which the Python code below mirrors as the
# reference, and the keep rule, defined once in Rust and used by both paths.
from dolma_pipe._rust import C4Kernel, c4_keep
from taggers.base import Document, Grouped, Span, Tagger, TaggerOptions
from taggers.registry import register

END_MARKS = (".", "?", "!", '"')
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
    description = "C4 rules: unpunctuated/short/javascript/policy lines, lorem ipsum, braces, bad words, and a verdict"
    granularity = "both"
    defaults = ("lines_with_no_ending_punctuation", "lines_with_too_few_words", "keep")

    class Options(TaggerOptions):
        min_words_per_line: int = Field(3, ge=0, description="a line with fewer words is 'too few words' (Dolma: 3; the original C4: 5)")
        min_sentences: int = Field(MIN_SENTENCES, ge=0, description="fewest sentences left after C4's line removal for keep=1")
        use_rust: bool | None = Field(None, description="use the Rust kernel (null: the default, the kernel; false: the Python reference)")

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        min_words_per_line, min_sentences, use_rust = self.options.min_words_per_line, self.options.min_sentences, self.options.use_rust
        self.min_words = min_words_per_line
        self.min_sentences = min_sentences
        if use_rust is None:
            use_rust = USE_RUST
        self.kernel = C4Kernel(BAD_WORD_ENTRIES, min_words_per_line) if use_rust else None

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


register("c4_v2")(C4Tagger)


@register("c4_v1")
class C4TaggerV1(C4Tagger):
    description = "Same rules as c4_v2 (Dolma has both names; its v2 was only a faster v1)"
