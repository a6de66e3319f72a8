"""lengths_v1, char_length_with_paragraphs_v1 (Dolma's) and word_repetitions_v1: exact spans."""

from __future__ import annotations

import re

import pytest

from taggers import registry
from taggers.base import Document, TaggerError
from taggers.builtin.lengths import CharLengthWithParagraphs, Lengths, dolma_char_lengths
from taggers.builtin.repetitions import WordRepetitions, periodic_runs


def spans(tagger, text: str) -> list[tuple[str, int, int, float]]:
    """(type, start, end, score) in output order, whether predict returns Spans or grouped values."""
    grouped = tagger.group(tagger.predict(Document("d", text)))
    return [(t, s, e, score) for t, values in grouped.items() for s, e, score in values]


def dolma_split_paragraphs(text: str) -> list[tuple[int, int]]:
    # dolma.core.utils.split_paragraphs(text, remove_empty=True), copied
    return [(m.start(), m.end()) for m in re.finditer(r"([^\n]*\n|[^\n]+$)", text) if m.group().strip()]


TEXTS = ["ab cd\n\n  \nefg\nü", "one\n", "", "\n\n", "  x  \n\ty\n\n", "no newline", "\u00a0\n\x1c\nä\u2028b\n\u3000", "中文\r\n\r\nx"]


@pytest.mark.parametrize("text", TEXTS)
def test_char_length_with_paragraphs_matches_dolma(text):
    got = spans(CharLengthWithParagraphs(), text)
    want = [("paragraph", s, e, float(e - s)) for s, e in dolma_split_paragraphs(text)]
    want.append(("document", 0, len(text), float(len(text))))
    assert got == want
    # The Rust kernel and the Python reference agree, and like Dolma neither writes an empty
    # paragraph list for a text without paragraphs.
    assert CharLengthWithParagraphs().predict(Document("d", text)) == dolma_char_lengths(text)
    assert ("paragraph" in dolma_char_lengths(text)) == bool(dolma_split_paragraphs(text))


def test_char_length_kernel_on_the_sample_corpus():
    from tests.support.documents import sample_rows

    docs = [Document.from_row(r) for r in sample_rows()]
    assert CharLengthWithParagraphs().predict_batch(docs) == [dolma_char_lengths(d.text) for d in docs]


def test_lengths_v1_exact():
    text = "ab cd\n\n  \nefg  hi\nü\n"
    got = spans(Lengths(), text)
    assert got == [
        ("paragraph", 0, 5, 5.0),
        ("paragraph", 10, 17, 7.0),
        ("paragraph", 18, 19, 1.0),
        ("document", 0, 20, 20.0),
        ("bytes", 0, 20, 21.0),
        ("word_count", 0, 20, 5.0),
        ("paragraph_count", 0, 20, 3.0),
        ("block_count", 0, 20, 2.0),
        ("max_paragraph_length", 0, 20, 7.0),
    ]
    empty = dict((t, s) for t, _, _, s in spans(Lengths(), ""))
    assert empty["document"] == 0 and empty["block_count"] == 0 and empty["max_paragraph_length"] == 0


def test_periodic_runs():
    import numpy as np

    words = "x a b a b a b y y y y z".split()
    h = np.array([hash(w) for w in words], dtype=np.int64)
    assert periodic_runs(h, max_period=13, min_times=3) == [(1, 7, 3), (7, 11, 4)]
    assert periodic_runs(h[:5], max_period=13, min_times=3) == []


def test_word_repetitions_exact():
    text = "Hello buy now buy now buy now there x x x x end!!!!! a b c a b c"
    got = spans(WordRepetitions(), text)
    assert got == [
        ("repetition", 6, 29, 3.0),  # "buy now" x3
        ("repetition", 36, 43, 4.0),  # "x" x4
        ("doc_max_score_repetition", 0, 64, 4.0),
        ("doc_max_length_repetition", 0, 64, 23.0),
        ("doc_frac_repetition", 0, 64, 30 / 64),
        ("max_char_run", 0, 64, 5.0),
    ]
    plain = dict((t, s) for t, _, _, s in spans(WordRepetitions(), "nothing repeats in this line"))
    assert plain["doc_max_score_repetition"] == 0 and plain["doc_frac_repetition"] == 0 and plain["max_char_run"] == 1
    # a shorter repetition inside a longer one is dropped
    got = spans(WordRepetitions(), "a a a a a a")
    assert got[0] == ("repetition", 0, 11, 6.0) and [s[0] for s in got].count("repetition") == 1
    with pytest.raises(TaggerError):
        WordRepetitions(min_times=1)


def test_doc_frac_repetition_counts_overlapping_spans_once():
    text = "a a a b a b a b"  # "a" x3 (0..5) and "a b" x3 (4..15) overlap on the third "a"
    got = spans(WordRepetitions(), text)
    assert [(t, s, e) for t, s, e, _ in got if t == "repetition"] == [("repetition", 0, 5), ("repetition", 4, 15)]
    frac = dict((t, score) for t, _, _, score in got)["doc_frac_repetition"]
    assert frac == round(15 / 15, 5) == 1.0
    for text in ("x x x x y x y x y z z z", "a b a b a b a a a a", "a a a a a a"):
        frac = dict((t, score) for t, _, _, score in spans(WordRepetitions(), text))["doc_frac_repetition"]
        assert 0.0 <= frac <= 1.0, text


def test_registered():
    for name in ("lengths_v1", "char_length_with_paragraphs_v1", "word_repetitions_v1"):
        assert registry.get(name).name == name
