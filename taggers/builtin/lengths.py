"""Length taggers: characters, bytes, words, lines and per-paragraph lengths.

Owns ``char_length_with_paragraphs_v1`` (Dolma's tagger of that name, same spans and scores:
``paragraph`` spans over non-blank lines *including* their newline, scored by that span's length,
and ``document`` scored by ``len(text)``) and ``lengths_v1``, everything a mixer or a report
usually wants in one pass:

* document level: ``document`` (characters), ``bytes`` (UTF-8), ``word_count`` (whitespace
  words), ``paragraph_count`` (non-blank lines, Dolma's paragraphs), ``block_count``
  (blank-line separated blocks), ``max_paragraph_length`` (characters of the longest line);
* paragraph level: ``paragraph`` spans over each non-blank line (newline excluded, as
  :func:`taggers.text.line_spans`), scored by its length in characters.
"""

from __future__ import annotations

import re

from taggers.base import Document, Span, Tagger
from taggers.registry import register

# Dolma's ``split_paragraphs`` keeping non-blank ones: a line holding non-space text, with its newline.
_DOLMA_PARAGRAPH = re.compile(r"[^\n]*\S[^\n]*\n?")
_LINE = re.compile(r"[^\n]*\S[^\n]*")
# One or more blank lines between two blocks (what taggers.text.block_spans splits on).
_BLOCK_BREAK = re.compile(r"\n[^\S\n]*\n\s*")


@register("char_length_with_paragraphs_v1")
class CharLengthWithParagraphs(Tagger):
    description = "Dolma-compatible: characters per paragraph (non-blank line with its newline) and per document"
    granularity = "both"

    def predict(self, doc: Document) -> list[Span]:
        spans = [
            Span("paragraph", m.start(), m.end(), float(m.end() - m.start()))
            for m in _DOLMA_PARAGRAPH.finditer(doc.text)
        ]
        spans.append(Span("document", 0, len(doc.text), float(len(doc.text))))
        return spans


@register("lengths_v1")
class Lengths(Tagger):
    description = "Characters, UTF-8 bytes, words, lines, blocks and per-line lengths"
    granularity = "both"

    def predict(self, doc: Document) -> list[Span]:
        text = doc.text
        n = len(text)
        spans = [Span("paragraph", m.start(), m.end(), float(m.end() - m.start())) for m in _LINE.finditer(text)]
        lines = len(spans)
        longest = max((s.score for s in spans), default=0.0)
        # Blocks are the separators between them plus one (counting beats matching every block).
        stripped = text.strip()
        blocks = len(_BLOCK_BREAK.findall(stripped)) + 1 if stripped else 0
        spans += [
            Span("document", 0, n, float(n)),
            # ASCII text is one byte per character: skip the encode for it.
            Span("bytes", 0, n, float(n if text.isascii() else len(text.encode("utf-8", "surrogatepass")))),
            Span("word_count", 0, n, float(len(text.split()))),
            Span("paragraph_count", 0, n, float(lines)),
            Span("block_count", 0, n, float(blocks)),
            Span("max_paragraph_length", 0, n, longest),
        ]
        return spans
