"""Toxicity / NSFW taggers, per document and per paragraph.

Owns two families, each registered once per granularity (as Dolma registers
``jigsaw_hatespeech_document_v2`` and ``jigsaw_hatespeech_sentence_v2``):

* ``profanity_document`` / ``profanity_paragraph``: the linear model shipped in the
  ``alt-profanity-check`` wheel (TF-IDF + calibrated linear SVM), so it works offline
  with nothing to download.  Types ``__label__toxic`` (probability the text is
  profane/offensive) and ``__label__non-toxic`` (its complement), Dolma's Jigsaw type
  names, so a mixer filter on ``..._label__toxic`` works with either tool.
* ``toxicity_fasttext_document`` / ``toxicity_fasttext_paragraph``: a fastText classifier
  file the user gives (option ``model_path``), e.g. Dolma's
  ``jigsaw_fasttext_bigrams_hatespeech_final.bin`` / ``..._nsfw_final.bin`` or one trained
  with the toolkit.  Its positive label (option ``positive_label``; by default the one
  label whose name does not start with "non"/"not"/"no", as Dolma decides) gives the
  score: type ``__label__<positive>`` = P(positive).  For a two-label model the other
  label is written too (``__label__<negative>`` = P(negative)), exactly as Dolma's Jigsaw
  taggers write both; for a model with more labels only the positive one is written.

Paragraphs are Dolma's (non-empty lines, :func:`taggers.text.line_spans`); blank
documents or lines get no span.  Both families override ``predict_batch``: all the
units of a batch of documents go to the model in one call (the profanity model is a
sparse matrix product, fastText predicts a list of lines in C++).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from pydantic import Field, field_validator

from taggers import fasttext_models
from taggers.base import Document, PathOption, Span, Tagger, TaggerError, TaggerOptions
from taggers.registry import register
from taggers.text import line_spans

TOXIC = "__label__toxic"
NON_TOXIC = "__label__non-toxic"
_NEGATIVE_PREFIXES = ("non", "not", "no")


class _UnitTagger(Tagger):
    """Scores text units (the whole document or each paragraph) in one batched model call."""

    unit: ClassVar[str] = "document"

    def _units(self, text: str) -> list[tuple[int, int]]:
        if self.unit == "document":
            return [(0, len(text))] if text.strip() else []
        return list(line_spans(text))

    def _score(self, texts: list[str]) -> list[list[tuple[str, float]]]:
        """(type, score) pairs for each text."""
        raise NotImplementedError

    def predict(self, doc: Document) -> list[Span]:
        return self.predict_batch([doc])[0]

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        units = [self._units(d.text) for d in docs]
        texts = [d.text[s:e] for d, us in zip(docs, units) for s, e in us]
        scores = iter(self._score(texts) if texts else [])
        out = []
        for us in units:
            spans: list[Span] = []
            for start, end in us:
                spans.extend(Span(t, start, end, p) for t, p in next(scores))
            out.append(spans)
        return out


# ---------------------------------------------------------------- alt-profanity-check

_PROFANITY: tuple[Any, Any] | None = None


def _profanity_model() -> tuple[Any, Any]:
    """The wheel's (vectorizer, model), loaded once per process (importing it unpickles ~2 s)."""
    global _PROFANITY
    if _PROFANITY is None:
        try:
            from profanity_check import profanity_check as pc
        except ImportError as exc:
            raise TaggerError("the profanity taggers need `pip install alt-profanity-check`") from exc
        _PROFANITY = (pc.vectorizer, pc.model)
    return _PROFANITY


class _Profanity(_UnitTagger):
    Options = TaggerOptions  # no options

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)  # no options
        self.vectorizer, self.model = _profanity_model()
        # Column of the "profane" class (classes_ is [0, 1]); looked up, not assumed.
        self.column = list(self.model.classes_).index(1)

    def _score(self, texts: list[str]) -> list[list[tuple[str, float]]]:
        # predict_proba on the whole batch at once; profanity_check.predict_prob would add a
        # per-row Python call (np.apply_along_axis).
        probs = self.model.predict_proba(self.vectorizer.transform(texts))[:, self.column]
        return [[(TOXIC, p), (NON_TOXIC, 1.0 - p)] for p in probs.tolist()]


@register("profanity_document")
class ProfanityDocument(_Profanity):
    description = "toxicity/profanity probability of the whole document (alt-profanity-check, offline)"
    granularity = "document"
    unit = "document"


@register("profanity_paragraph")
class ProfanityParagraph(_Profanity):
    description = "toxicity/profanity probability of each paragraph (alt-profanity-check, offline)"
    granularity = "paragraph"
    unit = "paragraph"


# ---------------------------------------------------------------- user fastText classifier


class _FastTextToxicity(_UnitTagger):
    class Options(TaggerOptions):
        model_path: PathOption = Field(
            ...,
            min_length=1,
            description="a fastText classifier file, e.g. Dolma's jigsaw_fasttext_bigrams_hatespeech_final.bin (~ expanded)",
        )
        positive_label: str | None = Field(
            None, description="the toxic label, with or without __label__ (null: the one label not starting with non/not/no)"
        )

        @field_validator("positive_label", mode="before")
        @classmethod
        def _number_label(cls, v: Any) -> Any:
            # YAML reads a label 1 as a number; fastText labels are strings.
            return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    options: Options

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        model_path, positive_label = self.options.model_path, self.options.positive_label
        model_path = os.path.expanduser(model_path)
        if not os.path.isfile(model_path):
            raise TaggerError(f"tagger {self.name!r}: model file {model_path} does not exist")
        self.model = fasttext_models.load(model_path)
        labels = [label.removeprefix("__label__") for label in self.model.get_labels()]
        if not labels:
            raise TaggerError(f"tagger {self.name!r}: {model_path} is not a classifier (it has no labels)")
        if positive_label is not None:
            positive_label = positive_label.removeprefix("__label__")
            if positive_label not in labels:
                raise TaggerError(f"tagger {self.name!r}: positive_label {positive_label!r} is not a label of {model_path} ({labels})")
        else:
            candidates = [lb for lb in labels if not lb.lower().startswith(_NEGATIVE_PREFIXES)]
            if len(candidates) != 1:
                raise TaggerError(
                    f"tagger {self.name!r}: cannot tell the positive label of {model_path} among {labels}; set option positive_label"
                )
            positive_label = candidates[0]
        self.positive = positive_label
        others = [lb for lb in labels if lb != positive_label]
        self.negative = others[0] if len(others) == 1 else None
        self.k = len(labels)  # every label's probability: the positive one may not be the top one

    def _score(self, texts: list[str]) -> list[list[tuple[str, float]]]:
        pos, neg = self.positive, self.negative
        pos_type = "__label__" + pos
        neg_type = "__label__" + neg if neg is not None else ""
        out = []
        for preds in fasttext_models.predict(self.model, texts, k=self.k):
            probs = dict(preds)
            if neg is None:
                out.append([(pos_type, probs.get(pos, 0.0))])
            else:
                out.append([(pos_type, probs.get(pos, 0.0)), (neg_type, probs.get(neg, 0.0))])
        return out


@register("toxicity_fasttext_document")
class FastTextToxicityDocument(_FastTextToxicity):
    description = "P(positive label) of a user fastText classifier (e.g. Dolma's Jigsaw models) for the document"
    granularity = "document"
    unit = "document"


@register("toxicity_fasttext_paragraph")
class FastTextToxicityParagraph(_FastTextToxicity):
    description = "P(positive label) of a user fastText classifier (e.g. Dolma's Jigsaw models) for each paragraph"
    granularity = "paragraph"
    unit = "paragraph"
