"""The tagger interface: one document in, typed scored spans out.

A tagger is a small class registered under a name (see :mod:`taggers.registry`).
It receives a :class:`Document` and returns :class:`Span` objects
``(type, start, end, score)`` with character (code point) offsets into the text,
end exclusive, as Dolma's attribute files hold them.  Taggers that are faster
on many documents at once (model inference) override :meth:`Tagger.predict_batch`.
A tagger is built once per worker process and reused for every document.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal, NamedTuple
from dolma_pipe.errors import DolmaPipeError

# Dolma rounds scores to 5 decimals; matching it keeps attribute files comparable.
SCORE_PRECISION = 5

Granularity = Literal["document", "paragraph", "both"]
Grouped = dict[str, list[list[float]]]


class Span(NamedTuple):
    type: str
    start: int
    end: int
    score: float = 1.0


class Document:
    """One document as a tagger sees it (the parsed JSON row is kept in ``row``)."""

    __slots__ = ("id", "text", "source", "metadata", "row")

    def __init__(self, id: str, text: str, source: str = "", metadata: dict | None = None, row: dict | None = None):
        self.id = id
        self.text = text
        self.source = source
        self.metadata = metadata or {}
        self.row = row if row is not None else {"id": id, "text": text, "source": source}

    @classmethod
    def from_row(cls, row: dict) -> "Document":
        return cls(row["id"], row["text"], str(row.get("source") or ""), row.get("metadata") or {}, row)

    def __repr__(self) -> str:
        return f"Document(id={self.id!r}, source={self.source!r}, text={self.text[:40]!r}...)"


class TaggerError(DolmaPipeError, ValueError):
    """A tagger cannot be built or used as asked (unknown name, bad option, missing model file)."""


class Tagger(ABC):
    """Base class of all taggers; subclasses set ``name`` and ``description`` and implement ``predict``."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    granularity: ClassVar[Granularity] = "document"
    # Span types written for every document, even with no span (Dolma's "defaults").
    defaults: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **options: Any):
        if options:
            raise TaggerError(f"tagger {self.name!r} takes no options, got {sorted(options)}")

    @abstractmethod
    def predict(self, doc: Document) -> "list[Span] | Grouped":
        """Spans of one document (or the already grouped mapping, see :meth:`group`)."""

    def predict_batch(self, docs: list[Document]) -> "list[list[Span] | Grouped]":
        """Spans of many documents; override when a model is faster on batches."""
        return [self.predict(doc) for doc in docs]

    def group(self, spans: "list[Span] | Grouped") -> Grouped:
        """Spans as Dolma's ``{type: [[start, end, score], ...]}`` (types not yet prefixed).

        ``predict`` may also return that mapping itself (scores as floats, already
        rounded): taggers emitting hundreds of spans per document skip building
        a :class:`Span` for each, which is most of their cost.
        """
        if isinstance(spans, dict):
            if not self.defaults:
                return spans
            return {**{t: [] for t in self.defaults}, **spans}
        out: Grouped = {t: [] for t in self.defaults}
        get = out.get
        for span_type, start, end, score in spans:
            values = get(span_type)
            if values is None:
                values = out[span_type] = []
            values.append([start, end, round(float(score), SCORE_PRECISION)])
        return out
