"""Learned quality: a fastText classifier's probability of the positive ("high quality") class.

Owns the ``quality`` tagger, which applies a model trained by
``dolma-pipe train-classifier`` (:mod:`taggers.train_classifier`) or any binary
or multi-class fastText model, and ``dclm-oh-eli5``, DCLM's classifier under
Dolma's name and with Dolma's values (given its ``.bin`` file, which is not
shipped: nothing downloads; see :class:`DclmQualityTagger`).

Span types: ``score`` over the whole document (DCLM's type name: the
probability of the positive label) and, with ``granularity: paragraph`` or
``both``, ``paragraph_score`` per paragraph (non-empty line).  A document with no
text scores 0.0.

Options of ``quality``: ``model_path`` (required), ``positive_label`` (with or
without ``__label__``), ``granularity`` ("document", "paragraph", "both";
default "document"), and the text normalisation ``lowercase``,
``collapse_whitespace``, ``max_chars``.  The trainer writes ``<model>.json``
next to the model; when it is there, the positive label and the normalisation
default to what training used, so scoring sees text exactly as training did
(a lowercased-trained model scores mixed-case text worse).  Without it the
defaults are ``hq`` and the trainer's defaults.
"""

from __future__ import annotations

import os
from abc import abstractmethod
from typing import Any, Literal

import orjson
from pydantic import Field

from taggers import fasttext_models
from taggers.base import Document, PathOption, Span, Tagger, TaggerError, TaggerOptions
from taggers.registry import register
from taggers.text import line_spans
from taggers.train_classifier import LABEL_PREFIX, REPORT_SUFFIX, TrainClassifierConfig, normalise

_FROM_REPORT: Any = object()  # "not given": take the value from the model's report, else the trainer's default
# The default of an option that, when not given, comes from the model's report: None, never
# validated and never read (``_settings`` reads only the options given); typed Any so that the
# field keeps the type of a value given (a null given is refused, as for any bool).
_NOT_GIVEN: Any = None
_TRAINER_DEFAULTS = {name: TrainClassifierConfig.model_fields[name].default for name in ("lowercase", "collapse_whitespace", "max_chars")}


def _report(model_path: str) -> dict:
    path = model_path + REPORT_SUFFIX
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, "rb") as fh:
            report = orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TaggerError(f"{path}: unreadable classifier report ({exc})") from None
    return report if isinstance(report, dict) else {}


class _ClassifierTagger(Tagger):
    """A fastText classifier's P(positive label) per document and/or paragraph; a subclass maps its
    options to ``_setup``'s arguments (``_settings``)."""

    # Annotated: ``_setup`` sets the types the granularity asked for (unannotated, mypy would infer this one).
    defaults: tuple[str, ...] = ("score",)

    def __init__(self, **options: Any):
        super().__init__(**options)
        self._setup(**self._settings())

    @abstractmethod
    def _settings(self) -> dict[str, Any]:
        """``_setup``'s arguments from the options."""

    def _setup(
        self,
        model_path: str,
        positive_label: str | None,
        granularity: str,
        lowercase: bool,
        collapse_whitespace: bool,
        max_chars: int | None,
    ) -> None:
        if not os.path.isfile(model_path):
            raise TaggerError(f"tagger {self.name!r}: model file {model_path} does not exist")
        report = _report(model_path)
        trained = {**_TRAINER_DEFAULTS, **report.get("normalisation", {})}
        given = {"lowercase": lowercase, "collapse_whitespace": collapse_whitespace, "max_chars": max_chars}
        self.norm: dict[str, Any] = {k: trained[k] if v is _FROM_REPORT else v for k, v in given.items()}
        # The options are checked by Options; what comes from the report is checked here.
        for key in ("lowercase", "collapse_whitespace"):
            if not isinstance(self.norm[key], bool):
                raise TaggerError(f"{model_path}{REPORT_SUFFIX}: normalisation {key!r} must be true or false, got {self.norm[key]!r}")
        mc = self.norm["max_chars"]
        if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or mc < 1):
            raise TaggerError(f"{model_path}{REPORT_SUFFIX}: normalisation 'max_chars' must be an integer >= 1 or null, got {mc!r}")

        self.model = fasttext_models.load(model_path)
        label = positive_label or report.get("labels", {}).get("positive") or "hq"
        self.positive = label if label.startswith(LABEL_PREFIX) else LABEL_PREFIX + label
        labels = list(self.model.get_labels())
        if self.positive not in labels:
            raise TaggerError(f"{model_path}: positive label {self.positive!r} is not one of the model's labels {labels}")
        self.mode = granularity
        # Instance attribute: the span types always written depend on the granularity asked for.
        self.defaults = {"document": ("score",), "paragraph": ("paragraph_score",), "both": ("score", "paragraph_score")}[granularity]
        self.k = len(labels)

    def _scores(self, texts: list[str]) -> list[float]:
        """P(positive) of each text, in one batched fastText call."""
        if not texts:
            return []
        labels, probs = self.model.predict(texts, k=self.k)
        positive = self.positive
        out = []
        for ls, ps in zip(labels, probs):
            score = 0.0
            for label, p in zip(ls, ps):
                if label == positive:
                    score = min(float(p), 1.0)
                    break
            out.append(score)
        return out

    def predict(self, doc: Document) -> list[Span]:
        return self.predict_batch([doc])[0]

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        norm = self.norm
        out: list[list[Span]] = [[] for _ in docs]
        if self.mode != "paragraph":
            texts = [normalise(d.text, **norm) for d in docs]
            idx = [i for i, t in enumerate(texts) if t.strip()]
            scores = dict(zip(idx, self._scores([texts[i] for i in idx])))
            for i, d in enumerate(docs):
                out[i].append(Span("score", 0, len(d.text), scores.get(i, 0.0)))
        if self.mode != "document":
            spans = [list(line_spans(d.text)) for d in docs]
            scores_iter = iter(self._scores([normalise(d.text[a:b], **norm) for d, ss in zip(docs, spans) for a, b in ss]))
            for i, ss in enumerate(spans):
                out[i].extend(Span("paragraph_score", a, b, next(scores_iter)) for a, b in ss)
        return out


@register("quality")
class QualityClassifierTagger(_ClassifierTagger):
    description = "fastText quality classifier (train-classifier): P(positive label) per document (score) / paragraph"
    granularity = "both"

    class Options(TaggerOptions):
        model_path: PathOption = Field(..., min_length=1, description="the fastText classifier, e.g. from `dolma-pipe train-classifier`")
        positive_label: str | None = Field(None, description="label whose probability is the score (null: the model report's, else hq)")
        granularity: Literal["document", "paragraph", "both"] = Field(
            "document", description="document: score; paragraph: paragraph_score per line; both"
        )
        # Not given: as the model was trained (its report), else the trainer's default.
        lowercase: bool = Field(
            _NOT_GIVEN,
            validate_default=False,
            json_schema_extra={"shown_default": "from the model's report"},
            description="lower-case text before scoring",
        )
        collapse_whitespace: bool = Field(
            _NOT_GIVEN,
            validate_default=False,
            json_schema_extra={"shown_default": "from the model's report"},
            description="collapse runs of whitespace to one space before scoring",
        )
        max_chars: int | None = Field(
            None,
            ge=1,
            validate_default=False,
            json_schema_extra={"shown_default": "from the model's report"},
            description="characters of the text scored (null: the whole text)",
        )

    options: Options

    def _settings(self) -> dict[str, Any]:
        """The constructor's settings from the options; normalisation not given comes from the model's report."""
        o = self.options
        given = {k: getattr(o, k) if k in o.model_fields_set else _FROM_REPORT for k in ("lowercase", "collapse_whitespace", "max_chars")}
        return {"model_path": o.model_path, "positive_label": o.positive_label, "granularity": o.granularity, **given}


@register("dclm-oh-eli5")
class DclmQualityTagger(Tagger):
    """DCLM's OpenHermes + ELI5 vs RefinedWeb bigram classifier, as Dolma 1.2.1 runs it under this
    name (``dolma/taggers/quality.py``), value for value given the same model file.

    Dolma feeds fastText the whole document, stripped, its lines (``str.splitlines``) joined by
    single spaces, case kept; takes the top label (``k=1``); writes its probability, or one minus
    it when the label is ``__label__cc``, under the label with ``__label__`` removed and ``cc`` /
    ``hq`` replaced by ``score`` (so ``score`` for DCLM's model), over ``[0, len(text)]``.  An
    empty text is predicted like any other.  The model file
    (``openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin``), which Dolma downloads, must be
    given with ``model_path``: nothing downloads here.  The attribute key is
    ``<experiment>__dclm_oh_eli5__score``, as Dolma writes it (the tag stage makes names keys as
    Dolma does).  Nothing breaks the data contract here.
    """

    description = "DCLM's fastText quality classifier as Dolma runs it (model_path to its .bin): P(hq) as score"
    granularity = "document"

    class Options(TaggerOptions):
        model_path: PathOption = Field(..., min_length=1, description="DCLM's openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin")

    options: Options

    def __init__(self, **options: Any):
        super().__init__(**options)
        if not os.path.isfile(self.options.model_path):
            raise TaggerError(f"tagger {self.name!r}: model file {self.options.model_path} does not exist")
        self.model = fasttext_models.load(self.options.model_path)

    def predict(self, doc: Document) -> list[Span]:
        return self.predict_batch([doc])[0]

    def predict_batch(self, docs: list[Document]) -> list[list[Span]]:
        if not docs:
            return []
        labels, probs = self.model.predict([" ".join(d.text.strip().splitlines()) for d in docs], k=1)
        out = []
        for doc, ls, ps in zip(docs, labels, probs):
            label, score = ls[0], ps.tolist()[0]
            if label == "__label__cc":
                score = 1 - score
            name = label.replace("__label__", "").replace("cc", "score").replace("hq", "score")
            out.append([Span(name, 0, len(doc.text), score)])
        return out
