"""A user tagger module, loaded by the tests through --tagger-modules."""

from taggers.base import Span, Tagger
from taggers.registry import register
from taggers.text import line_spans


@register("test_upper_lines")
class UpperLines(Tagger):
    description = "fraction of upper-case letters per line (a test tagger)"
    granularity = "both"
    defaults = ("doc",)

    def __init__(self, min_letters: int = 1):
        self.min_letters = min_letters

    def predict(self, doc):
        spans = []
        for start, end in line_spans(doc.text):
            letters = [c for c in doc.text[start:end] if c.isalpha()]
            if len(letters) >= self.min_letters:
                spans.append(Span("line", start, end, sum(c.isupper() for c in letters) / len(letters)))
        spans.append(Span("doc", 0, len(doc.text), float(len(spans))))
        return spans


@register("test_fragile")
class Fragile(Tagger):
    description = "fails on documents whose text contains BOOM (a test tagger)"

    def predict(self, doc):
        if "BOOM" in doc.text:
            raise RuntimeError("boom")
        return [Span("len", 0, len(doc.text), len(doc.text))]
