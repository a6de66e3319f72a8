"""Language identification with fastText's ``lid.176`` model (176 languages).

Owns the language-id taggers:

* ``ft_lang_id`` — ours: the ``top_k`` most likely languages of the
  whole document (types ``doc_<lang>``, e.g. ``doc_de``) and/or of every
  paragraph (types ``<lang>``, e.g. ``en``).  Options: ``granularity``
  ("document" / "paragraph" / "both", default "both"), ``top_k`` (3),
  ``min_score`` (0.0), ``max_chars`` (the document-level text budget, see
  below), ``lowercase`` (true: fastText reads the text lower-cased, see
  below), ``model_path`` (default: the ``lid.176.ftz`` this package
  ships, :func:`taggers.fasttext_models.bundled_lid_path`; a path to
  ``lid.176.bin`` or any fastText language model works the same).
  Paragraphs are non-empty lines (:func:`taggers.text.line_spans`), newline
  excluded.
* Dolma 1.2.1's taggers, under its names, with its span types and values
  (:class:`_DolmaLidTagger`): ``ft_lang_id_en_doc_v2`` (``en`` and ``not_en``
  over the document), ``ft_lang_id_en_paragraph_v2`` (``en`` and ``not_en``
  per paragraph), ``ft_lang_id_en_paragraph_with_doc_score_v2`` (the paragraph
  spans plus ``doc_en``/``doc_not_en``: the character-weighted mean of the
  paragraph ``en`` scores) and ``ft_lang_id_1e2`` (every language scoring
  above 0.01 on the document, rounded to 2 decimals, types ``<lang>``).  They
  take ``model_path`` only.  Dolma downloads ``lid.176.bin``; nothing is
  downloaded here, so the default is the bundled ``lid.176.ftz`` (the same
  model, quantised: probabilities differ slightly): give ``model_path`` a
  ``lid.176.bin`` for Dolma's exact numbers.  With the same model file the
  values are Dolma's (``bench/parity.py`` runs both on ``lid.176.ftz``).

``ft_lang_id``: fastText reads one line per example, so newlines become spaces.
A document's fastText score is the softmax of the *mean* of its token vectors,
so its cost is linear in the length while the answer stops changing after a few
thousand words.  Documents longer than ``max_chars`` (default 10,000
characters, ~1,500 English words) are therefore predicted on ``_WINDOWS``
evenly spaced windows of ``max_chars / _WINDOWS`` characters each, cut at
whitespace: unlike a prefix, this sees the middle and the end of a page whose
language changes part-way, and it bounds the time spent on a 10 MB document.
``max_chars: 0`` predicts on the whole text.

``ft_lang_id`` lower-cases what fastText reads (``lowercase: true``, the default), as Dolma's
taggers do; the spans are offsets into the text as written either way.  ``lid.176`` mistakes
capitalised text for other languages: an ALL CAPS English sentence is 0.23 English as written
and 0.99 lower-cased.  Measured by ``bench/langid.py`` on the Debian handbook's translations
(24 languages in 25 locales; 6,472 paragraphs of a median 255 characters and 819 pieces of
~3,000 characters, each also in ALL CAPS and in Title Case), top-1 accuracy lower-cased / as
written:

* original text: paragraphs 99.35 % / 99.27 %, documents 100 % / 100 %, the mean probability of
  the right language 0.948 either way (per locale, lower-casing loses one Romanian paragraph of
  23 and wins Norwegian, Catalan and Indonesian ones);
* ALL CAPS: paragraphs 99.35 % / 61.4 %, documents 100 % / 77.7 % (Swedish, Norwegian,
  Indonesian and Croatian paragraphs: under 10 % right as written);
* Title Case: paragraphs 99.35 % / 97.0 %, documents 100 % / 98.2 % (Norwegian 97 % / 55 %).

Lower-casing only a text whose words are mostly upper-case fixes ALL CAPS but not Title Case
(the bench's ``upper`` rows), so every text is lower-cased.
``lowercase: false`` reads the text as written (``ft_lang_id``'s values before this option).
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from taggers import fasttext_models
from taggers.base import Document, Granularity, PathOption, Span, Tagger, TaggerOptions
from taggers.registry import register
from taggers.text import line_spans

_WINDOWS = 4
_DEFAULT_MAX_CHARS = 10_000
# Labels below this are never needed by the English taggers (scores < 0.01 are written as 0.0).


def bounded_text(text: str, max_chars: int) -> str:
    """The text fastText sees for a whole document: all of it, or evenly spaced windows."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    width = max_chars // _WINDOWS
    step = (len(text) - width) / (_WINDOWS - 1)
    parts = []
    for i in range(_WINDOWS):
        start = int(i * step)
        end = start + width
        # Cut at whitespace so no window starts or ends inside a word (a broken word is a noisy token).
        if start:
            space = text.find(" ", start, start + 64)
            start = space + 1 if space >= 0 else start
        space = text.rfind(" ", end - 64, end)
        end = space if space > start else end
        parts.append(text[start:end])
    return " ".join(parts)


def _predict(model: Any, texts: Sequence[str], k: int, threshold: float = 0.0) -> list[list[tuple[str, float]]]:
    """Batched fastText prediction with a probability threshold.

    :func:`taggers.fasttext_models.predict` has no ``threshold``; it prunes the
    hierarchical softmax search, which is what makes asking for "every label
    above 0.01" cheap.
    """
    if not texts:
        return []
    labels, probs = model.predict([t.replace("\n", " ") for t in texts], k=k, threshold=threshold)
    # label[9:] strips "__label__"; probabilities are capped at 1
    # (fastText's log(p + 1e-5) lets p reach 1.00001; tolist() then plain floats is ~2x faster than numpy scalars.)
    return [[(label[9:], p if p < 1.0 else 1.0) for label, p in zip(ls, ps.tolist())] for ls, ps in zip(labels, probs)]


class _LidTagger(Tagger):
    """Loads the model once per process (shared by every language tagger using the same file)."""

    class Options(TaggerOptions):
        model_path: PathOption | None = Field(
            None, description="fastText language-id model (null: the lid.176.ftz this package ships; Dolma's taggers use lid.176.bin)"
        )

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.model_path = fasttext_models.lid_model_path(self.options.model_path)
        self.model = fasttext_models.load(self.model_path)

    def predict(self, doc: Document) -> list[Span]:
        return self.predict_batch([doc])[0]

    @abstractmethod
    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        """Spans of many documents in one batched fastText call (``predict`` is a batch of one)."""


@register("ft_lang_id")
class FastTextLanguageTagger(_LidTagger):
    description = "fastText lid.176: top-k languages per document (doc_<lang>) and per paragraph (<lang>)"
    granularity = "both"

    class Options(_LidTagger.Options):
        max_chars: int = Field(
            _DEFAULT_MAX_CHARS,
            ge=0,
            description=f"characters of a document fastText reads, in {_WINDOWS} evenly spaced windows (0: the whole text)",
        )
        granularity: Literal["document", "paragraph", "both"] = Field(
            "both", description="document: doc_<lang> spans; paragraph: <lang> spans per line; both"
        )
        top_k: int = Field(3, ge=1, description="most probable languages kept per document or paragraph")
        min_score: float = Field(0.0, ge=0.0, lt=1.0, description="languages below this probability are not written")
        lowercase: bool = Field(
            True,
            description="fastText reads the text lower-cased, as Dolma's taggers do; spans are offsets into the text as written "
            "either way (false: fastText reads it as written, and ALL CAPS or Title Case text is often misidentified: "
            "61 % of ALL CAPS paragraphs right instead of 99 %, bench/langid.py)",
        )

        @field_validator("max_chars")
        @classmethod
        def _windows_fit(cls, v: int) -> int:
            if 0 < v < _WINDOWS * 64:
                raise ValueError(f"must be 0 (whole text) or at least {_WINDOWS * 64}")
            return v

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.max_chars = self.options.max_chars
        self.mode = self.options.granularity
        self.top_k = self.options.top_k
        self.min_score = float(self.options.min_score)
        self.lowercase = self.options.lowercase

    def _case(self, texts: list[str]) -> list[str]:
        """What fastText reads (only predictions use it: spans are offsets into the text as written,
        so a character that lower-cases to two, ``İ``, moves nothing)."""
        return [t.lower() for t in texts] if self.lowercase else texts

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        out: list[list[Span]] = [[] for _ in docs]
        if self.mode != "paragraph":
            idx, texts = self._documents(docs)
            for i, preds in zip(idx, _predict(self.model, self._case(texts), self.top_k, self.min_score)):
                end = len(docs[i].text)
                out[i].extend(Span("doc_" + lang, 0, end, p) for lang, p in preds)
        if self.mode != "document":
            spans, texts = self._paragraphs(docs)
            paragraph_preds = iter(_predict(self.model, self._case(texts), self.top_k, self.min_score))
            for i, ss in enumerate(spans):
                for a, b in ss:
                    out[i].extend(Span(lang, a, b, p) for lang, p in next(paragraph_preds))
        return out

    def _paragraphs(self, docs: list[Document]) -> tuple[list[list[tuple[int, int]]], list[str]]:
        spans = [list(line_spans(d.text)) for d in docs]
        texts = [d.text[a:b] for d, ss in zip(docs, spans) for a, b in ss]
        return spans, texts

    def _documents(self, docs: list[Document]) -> tuple[list[int], list[str]]:
        """Indexes of documents with text to predict on, and those texts (bounded)."""
        idx = [i for i, d in enumerate(docs) if d.text and not d.text.isspace()]
        return idx, [bounded_text(docs[i].text, self.max_chars) for i in idx]


# -- Dolma's fastText language taggers ----------------------------------------------------------

# Dolma's split_paragraphs: every line with its newline, and a last line without one; blank ones
# (``str.strip()`` empty) are dropped.
_DOLMA_PARAGRAPH = re.compile(r"([^\n]*\n|[^\n]+$)")


def dolma_paragraphs(text: str) -> list[tuple[int, int]]:
    """(start, end) of Dolma's ``split_paragraphs(text)``: non-blank lines, newline included."""
    return [m.span() for m in _DOLMA_PARAGRAPH.finditer(text) if m.group().strip()]


def dolma_en_spans(ranges: list[tuple[int, int]], scores: list[float]) -> list[Span]:
    """Dolma's English language taggers' spans (its ``INCLUDE_NEGATIVE``): ``en`` with its score
    over each range, then ``not_en`` with 1 - that score over each (fastText's and CLD2's alike)."""
    return [Span("en", a, b, s) for (a, b), s in zip(ranges, scores)] + [Span("not_en", a, b, 1.0 - s) for (a, b), s in zip(ranges, scores)]


def dolma_doc_score(spans: list[Span], n: int) -> tuple[Span, Span]:
    """Dolma's ``add_global_language_score_from_slice_score``: ``doc_en``, the characters of each
    ``en`` span times its score over the document's length ``n``, and ``doc_not_en`` = 1 - that;
    0.0 and 0.0 for an empty text (its ZeroDivisionError fallback)."""
    en = sum((s.end - s.start) * s.score for s in spans if s.type == "en") / n if n else 0.0
    return Span("doc_en", 0, n, en), Span("doc_not_en", 0, n, 1 - en if n else 0.0)


class _DolmaLidTagger(_LidTagger):
    """Dolma 1.2.1's fastText language taggers (``dolma/taggers/language.py``), value for value.

    Dolma's definitions: fastText reads ``text.lower().replace("\\n", " ").strip()`` (lower-cased,
    like ``ft_lang_id`` by default), the whole text of the document or paragraph, and returns every
    label it does not prune (``k=-1``, threshold 0); a score is fastText's probability as it comes,
    which can exceed 1 by about 1e-5 (then ``not_en`` is slightly negative, as in Dolma).
    Paragraphs are Dolma's ``split_paragraphs``: non-blank lines with their newline.  An empty
    text is predicted like any other (fastText's answer for "").  Nothing breaks the data
    contract here: every offset is a character offset of the text.
    """

    def _predict_all(self, texts: list[str]) -> list[dict[str, float]]:
        """Every label's probability (as Dolma asks fastText: k=-1, threshold 0), per text."""
        if not texts:
            return []
        clean = [t.lower().replace("\n", " ").strip() for t in texts]
        labels, probs = self.model.predict(clean, k=-1, threshold=0.0)
        return [{label[9:]: p for label, p in zip(ls, ps.tolist())} for ls, ps in zip(labels, probs)]

    def _paragraph_en(self, docs: list[Document]) -> tuple[list[list[tuple[int, int]]], list[list[float]]]:
        spans = [dolma_paragraphs(d.text) for d in docs]
        preds = iter(self._predict_all([d.text[a:b] for d, ss in zip(docs, spans) for a, b in ss]))
        return spans, [[next(preds).get("en", 0.0) for _ in ss] for ss in spans]


@register("ft_lang_id_en_doc_v2")
class FastTextEnglishDocumentTagger(_DolmaLidTagger):
    description = "Dolma's ft_lang_id_en_doc_v2: fastText's probability that the document is English (en, not_en)"
    granularity = "document"

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        scores = [p.get("en", 0.0) for p in self._predict_all([d.text for d in docs])]
        return [dolma_en_spans([(0, len(d.text))], [s]) for d, s in zip(docs, scores)]


@register("ft_lang_id_en_paragraph_v2")
class FastTextEnglishParagraphTagger(_DolmaLidTagger):
    description = "Dolma's ft_lang_id_en_paragraph_v2: probability that each paragraph is English (en, not_en)"
    # Annotated: the subclass below sets another value (unannotated, mypy would infer this literal).
    granularity: ClassVar[Granularity] = "paragraph"

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        spans, scores = self._paragraph_en(docs)
        return [dolma_en_spans(ss, sc) for ss, sc in zip(spans, scores)]


@register("ft_lang_id_en_paragraph_with_doc_score_v2")
class FastTextEnglishParagraphWithDocScoreTagger(FastTextEnglishParagraphTagger):
    description = "Dolma's ft_lang_id_en_paragraph_with_doc_score_v2: paragraph en/not_en plus doc_en/doc_not_en"
    granularity = "both"

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        out = super().predict_batch(docs)
        for doc, spans in zip(docs, out):
            spans.extend(dolma_doc_score(spans, len(doc.text)))
        return out


@register("ft_lang_id_1e2")
class FastTextLanguagesMinScoreTagger(_DolmaLidTagger):
    description = "Dolma's ft_lang_id_1e2: every language above 0.01 on the document (<lang>), 2 decimals"
    granularity = "document"

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        return [
            [Span(lang, 0, len(d.text), round(p, 2)) for lang, p in preds.items() if p > 0.01]
            for d, preds in zip(docs, self._predict_all([d.text for d in docs]))
        ]
