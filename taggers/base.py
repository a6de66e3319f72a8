"""The tagger interface: one document in, typed scored spans out.

A tagger is a small class registered under a name (see :mod:`taggers.registry`).
It receives a :class:`Document` and returns :class:`Span` objects
``(type, start, end, score)`` with character (code point) offsets into the text,
end exclusive, as Dolma's attribute files hold them.  Taggers that are faster
on many documents at once (model inference) override :meth:`Tagger.predict_batch`.
A tagger is built once per worker process and reused for every document.

Options (``tagger_options.<name>.<option>`` in a tag config) are declared as a
pydantic model, the tagger's nested ``Options(TaggerOptions)`` class: types,
defaults and a ``description=`` per field.  ``Tagger.__init__(**options)``
validates them into ``self.options``; an unknown name, a wrong type or a bad
value is one :class:`TaggerError` naming the config key.
"""

from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from dolma_pipe.config import absolute_path, validation_error_lines
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
    def from_row(cls, row: dict) -> Document:
        return cls(row["id"], row["text"], str(row.get("source") or ""), row.get("metadata") or {}, row)

    def __repr__(self) -> str:
        return f"Document(id={self.id!r}, source={self.source!r}, text={self.text[:40]!r}...)"


class TaggerError(DolmaPipeError, ValueError):
    """A tagger cannot be built or used as asked (unknown name, bad option, missing model file)."""


class TaggerOptions(BaseModel):
    """Base of every tagger's options model; with no fields it is "takes no options".

    Strict: a YAML ``"3"`` is not an integer and ``1`` is not ``true`` (integers are
    accepted where a number is asked); an unknown option is refused.  Subclass it
    with one field per option, each with a default (or none: required) and a
    ``description=`` that ``dolma-pipe list --tagger NAME`` shows.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, validate_default=True)


class KernelOptions(TaggerOptions):
    """Options of a tagger with a Rust kernel and a Python reference of it (the parity tests
    compare the two): ``use_rust`` picks one, declared here once for every such tagger."""

    use_rust: bool | None = Field(None, description="use the Rust kernel (null: the default, the kernel; false: the Python reference)")

    def rust(self, default: bool) -> bool:
        """Whether to use the kernel: ``use_rust`` when given, else the module's ``default``."""
        return default if self.use_rust is None else self.use_rust


# A file path option: a string (a ``pathlib.Path`` given from Python is taken as its string).
# A model file: a local path (made absolute where the config loads, so Ray workers elsewhere find it) or a URL.
PathOption = Annotated[str, BeforeValidator(lambda v: os.fspath(v) if isinstance(v, os.PathLike) else v), AfterValidator(absolute_path)]


def options_error(name: str, model: type[BaseModel], exc: ValidationError) -> TaggerError:
    """The one-line error for options that do not validate, naming each config key."""
    lines = validation_error_lines(model, exc, ("tagger_options", name))
    takes = "" if model.model_fields else " (it takes no options)"
    return TaggerError(f"invalid options for tagger {name!r}{takes}: " + "; ".join(lines))


class Tagger(ABC):
    """Base class of all taggers; subclasses set ``name`` and ``description`` and implement ``predict``."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    granularity: ClassVar[Granularity] = "document"
    # Span types written for every document, even with no span (Dolma's "defaults").  Not a
    # ClassVar: a tagger whose options select the types it writes narrows it in ``__init__``.
    defaults: tuple[str, ...] = ()
    # The options model (see TaggerOptions); the base one has no fields: no options.
    Options: ClassVar[type[TaggerOptions]] = TaggerOptions
    options: TaggerOptions

    def __init__(self, **options: Any):
        self.options = self.validate_options(options)

    @classmethod
    def options_model(cls) -> type[TaggerOptions] | None:
        """The model this tagger's options are checked against, None when it has none.

        A tagger declares ``Options`` (a subclass, or ``TaggerOptions`` itself for "no
        options") or has no ``__init__`` of its own.  None is for a tagger written
        before options models: its own ``__init__`` takes the options, and checks them.
        """
        if cls.__init__ is Tagger.__init__ or any("Options" in vars(k) for k in cls.__mro__ if k is not Tagger):
            return cls.Options
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        return TaggerOptions if not params else None  # __init__(self): no options

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> TaggerOptions:
        """``options`` validated into ``cls.Options``, or a :class:`TaggerError` naming the keys.

        Cheap (no model is loaded): the tag stage calls it for every tagger when the
        config loads, before any file is read.
        """
        model = cls.Options
        try:
            return model.model_validate(dict(options))
        except ValidationError as exc:
            raise options_error(cls.name or cls.__qualname__, model, exc) from None

    @abstractmethod
    def predict(self, doc: Document) -> list[Span] | Grouped:
        """Spans of one document (or the already grouped mapping, see :meth:`group`)."""

    def predict_batch(self, docs: list[Document]) -> Sequence[list[Span] | Grouped]:
        """Spans of many documents, one result per document in order; override when a model is
        faster on batches (an override may return a narrower type, e.g. ``list[list[Span]]``)."""
        return [self.predict(doc) for doc in docs]

    def group(self, spans: list[Span] | Grouped) -> Grouped:
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
