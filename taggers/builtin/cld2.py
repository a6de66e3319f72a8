"""Dolma 1.2.1's CLD2 language taggers, under its names, value for value (``dolma/taggers/language.py``).

CLD2 is Chromium's Compact Language Detector 2 (``pycld2``, the binding Dolma imports): a
naive-Bayes model over character quadgrams and words, without a model file, several times
cheaper than fastText's ``lid.176`` on the same text. Dolma's ``dolma warc`` and ``dolma tag``
users often pick ``cld2_en_doc_v2`` for that reason, so a config that names it works here
unchanged.

Dolma's definitions, kept as they are:

* A text is given to ``pycld2.detect`` with its defaults. When CLD2 refuses it
  (``pycld2.error``: it calls control characters and some others invalid UTF-8), the text is
  transliterated to ASCII by ``anyascii`` and tried again, and then with every control and
  surrogate character (``\\p{Cc}``, ``\\p{Cs}``) removed. When all three are refused the text gets
  no language.
* The languages are CLD2's three answers when it calls them reliable, none otherwise. A
  language's type is the first two letters of its *name*, lower-cased, and its score CLD2's
  percent of the text over 100: ``ENGLISH`` is ``en``, but ``GERMAN`` is ``ge`` and ``SPANISH``
  ``sp`` (Dolma's choice; the ISO code would be ``de``, ``es``). Only names spelled
  ``UNKNOWN_LANGUAGE`` are dropped; pycld2 0.42 names an empty answer ``Unknown``, so a reliable
  text whose other slots are empty also gets ``un`` spans of score 0 (as in Dolma with the same
  pycld2).
* ``cld2_doc_v2``: every language of the whole document (types ``<lang>``).
  ``cld2_paragraph_v2``: the same per paragraph, Dolma's ``split_paragraphs`` (non-blank lines,
  newline included: :func:`taggers.builtin.langid.dolma_paragraphs`).
* ``cld2_en_doc_v2`` and ``cld2_en_paragraph_v2``: English's score (0.0 when English is not
  among the answers) as ``en``, and ``not_en`` = 1 - ``en``, over the document or per paragraph.
  ``cld2_en_paragraph_with_doc_score_v2``: the paragraphs' spans plus ``doc_en`` (the
  paragraphs' ``en`` scores weighted by their length in characters, over the document's length)
  and ``doc_not_en`` = 1 - ``doc_en``; 0.0 and 0.0 for an empty text.

One difference from Dolma, where Dolma stops: a text holding a lone surrogate (which a JSON
``\\udXXX`` escape can give) cannot be encoded for CLD2, and Dolma's tagger raises (a
``UnicodeEncodeError``, not the ``pycld2.error`` it catches), ending its task. Here that text
goes to the next step, as a refused one does, so the document gets the answer of its
transliteration or of its text less the surrogates.

The values are Dolma's for the same ``pycld2`` (``bench/parity.py`` runs both;
``tests/taggers/test_dolma_parity.py`` holds Dolma's values).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

import pycld2
from anyascii import anyascii

from taggers.base import Document, Granularity, Span, Tagger
from taggers.registry import register

from .langid import dolma_doc_score, dolma_en_spans, dolma_paragraphs

# Dolma's RE_BAD_CHARS, regex's [\p{Cc}\p{Cs}]+: the C0 and C1 controls and DEL, and surrogates.
_BAD_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]+")


def _sanitized(text: str) -> str:
    return _BAD_CHARS.sub("", text)


# The text as it is, transliterated to ASCII, less its control and surrogate characters: Dolma's order.
_ATTEMPTS: tuple[Callable[[str], str], ...] = (lambda text: text, anyascii, _sanitized)


def cld2_languages(text: str) -> list[tuple[str, float]]:
    """Dolma's ``Cld2LanguageTagger.predict_text``: (type, score) of each language CLD2 gives ``text``."""
    for make in _ATTEMPTS:
        try:
            reliable, _, details = pycld2.detect(make(text))
            break
        except (pycld2.error, UnicodeEncodeError):
            continue
    else:
        return []
    if not reliable:
        return []
    return [(name[:2].lower(), percent / 100.0) for name, _, percent, _ in details if name != "UNKNOWN_LANGUAGE"]


def _english(text: str) -> float:
    """Dolma's ``Cld2EnglishLanguageTagger``: English's score, 0.0 when it is not among the answers."""
    return next((score for lang, score in cld2_languages(text) if lang == "en"), 0.0)


@register("cld2_doc_v2")
class Cld2DocumentTagger(Tagger):
    description = "Dolma's cld2_doc_v2: CLD2's languages of the document (<lang>: the name's first two letters), when reliable"
    granularity: ClassVar[Granularity] = "document"

    def predict(self, doc: Document) -> list[Span]:
        return [Span(lang, 0, len(doc.text), score) for lang, score in cld2_languages(doc.text)]


@register("cld2_paragraph_v2")
class Cld2ParagraphTagger(Tagger):
    description = "Dolma's cld2_paragraph_v2: CLD2's languages of each paragraph (<lang>), when reliable"
    granularity: ClassVar[Granularity] = "paragraph"

    def predict(self, doc: Document) -> list[Span]:
        text = doc.text
        return [Span(lang, a, b, score) for a, b in dolma_paragraphs(text) for lang, score in cld2_languages(text[a:b])]


@register("cld2_en_doc_v2")
class Cld2EnglishDocumentTagger(Tagger):
    description = "Dolma's cld2_en_doc_v2: CLD2's share of English in the document (en, not_en)"
    granularity: ClassVar[Granularity] = "document"

    def predict(self, doc: Document) -> list[Span]:
        return dolma_en_spans([(0, len(doc.text))], [_english(doc.text)])


@register("cld2_en_paragraph_v2")
class Cld2EnglishParagraphTagger(Tagger):
    description = "Dolma's cld2_en_paragraph_v2: CLD2's share of English in each paragraph (en, not_en)"
    granularity: ClassVar[Granularity] = "paragraph"

    def predict(self, doc: Document) -> list[Span]:
        ranges = dolma_paragraphs(doc.text)
        return dolma_en_spans(ranges, [_english(doc.text[a:b]) for a, b in ranges])


@register("cld2_en_paragraph_with_doc_score_v2")
class Cld2EnglishParagraphWithDocScoreTagger(Cld2EnglishParagraphTagger):
    description = "Dolma's cld2_en_paragraph_with_doc_score_v2: paragraph en/not_en plus doc_en/doc_not_en"
    granularity: ClassVar[Granularity] = "both"

    def predict(self, doc: Document) -> list[Span]:
        spans = super().predict(doc)
        return [*spans, *dolma_doc_score(spans, len(doc.text))]
