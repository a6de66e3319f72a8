"""Length taggers: characters, bytes, words, lines and per-paragraph lengths.

Owns ``char_length_with_paragraphs_v1`` (Dolma 1.2.1's tagger of that name, same spans and
scores: ``paragraph`` spans over non-blank lines *including* their newline, scored by that span's
length, absent for a text without one, and ``document`` scored by ``len(text)``) and ``lengths_v1``, everything a mixer or a report
usually wants in one pass:

* document level: ``document`` (characters), ``bytes`` (UTF-8), ``word_count`` (whitespace
  words), ``paragraph_count`` (non-blank lines, Dolma's paragraphs), ``block_count``
  (blank-line separated blocks), ``max_paragraph_length`` (characters of the longest line);
* paragraph level: ``paragraph`` spans over each non-blank line (newline excluded, as
  :func:`taggers.text.line_spans`), scored by its length in characters.
"""

from __future__ import annotations

import re
from operator import methodcaller

from dolma_pipe._rust import char_length_grouped_batch
from taggers.base import Document, Grouped, Tagger
from taggers.registry import register
from taggers.text import NON_EMPTY_LINE

# Dolma's ``split_paragraphs`` keeping non-blank ones: a line holding non-space text, with its newline.
_DOLMA_PARAGRAPH = re.compile(r"[^\n]*\S[^\n]*\n?")
# One or more blank lines between two blocks (what taggers.text.block_spans splits on).
_BLOCK_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
_span = methodcaller("span")


@register("char_length_with_paragraphs_v1")
class CharLengthWithParagraphs(Tagger):
    description = "Dolma 1.2.1's char_length_with_paragraphs_v1: characters per paragraph (non-blank line, newline in) and document"
    granularity = "both"

    def predict(self, doc: Document) -> Grouped:
        return self.predict_batch([doc])[0]

    def predict_batch(self, docs: list[Document]) -> list[Grouped]:
        # The grouped mapping built in Rust (rust_bloom/src/text/mod.rs dolma_paragraphs);
        # ``dolma_char_lengths`` is its Python reference.
        return char_length_grouped_batch([d.text for d in docs])


def dolma_char_lengths(text: str) -> Grouped:
    """Dolma's ``char_length_with_paragraphs_v1`` in Python (the kernel's reference): its
    ``split_paragraphs`` as one regex, each span scored by its length, then ``document``."""
    paragraphs = [[s, e, float(e - s)] for s, e in map(_span, _DOLMA_PARAGRAPH.finditer(text))]
    document = [[0, len(text), float(len(text))]]
    # As Dolma: no paragraph type at all for a text without one (not an empty list).
    return {"paragraph": paragraphs, "document": document} if paragraphs else {"document": document}


@register("lengths_v1")
class Lengths(Tagger):
    description = "Characters, UTF-8 bytes, words, lines, blocks and per-line lengths"
    granularity = "both"

    def predict(self, doc: Document) -> Grouped:
        text = doc.text
        n = len(text)
        paragraphs = [[s, e, float(e - s)] for s, e in map(_span, NON_EMPTY_LINE.finditer(text))]
        lines = len(paragraphs)
        longest = max((p[2] for p in paragraphs), default=0.0)
        # Blocks are the separators between them plus one (counting beats matching every block).
        stripped = text.strip()
        blocks = len(_BLOCK_BREAK.findall(stripped)) + 1 if stripped else 0
        return {
            "paragraph": paragraphs,
            "document": [[0, n, float(n)]],
            # ASCII text is one byte per character: skip the encode for it.
            "bytes": [[0, n, float(n if text.isascii() else len(text.encode("utf-8", "surrogatepass")))]],
            "word_count": [[0, n, float(len(text.split()))]],
            "paragraph_count": [[0, n, float(lines)]],
            "block_count": [[0, n, float(blocks)]],
            "max_paragraph_length": [[0, n, longest]],
        }
