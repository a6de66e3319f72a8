"""A user's tagger module for the warc stage's tests, loaded through ``tagger_modules`` (never
imported as a test module: its names would be registered twice)."""

from pydantic import Field

from taggers.base import Document, Span, Tagger, TaggerOptions
from taggers.registry import register


@register("test_warc_marker")
class MarkerTagger(Tagger):
    """A span over each occurrence of a word (option ``word``); none elsewhere."""

    description = "test: spans over a marker word"

    class Options(TaggerOptions):
        word: str = Field("Zanzibarite", min_length=1, description="the word marked")

    def predict(self, doc: Document) -> list[Span]:
        word = self.options.word
        spans, at = [], doc.text.find(word)
        while at >= 0:
            spans.append(Span("mark", at, at + len(word), 1.0))
            at = doc.text.find(word, at + 1)
        return spans


@register("test_warc_fragile")
class FragileTagger(Tagger):
    """The document's length, or a ``ValueError`` on a document holding ``Kaboomery``."""

    description = "test: raises on one word"

    def predict(self, doc: Document) -> list[Span]:
        if "Kaboomery" in doc.text:
            raise ValueError("cannot tag a document with Kaboomery")
        return [Span("len", 0, len(doc.text), float(len(doc.text)))]
