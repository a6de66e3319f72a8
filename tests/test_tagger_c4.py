"""c4_v1 / c4_v2: C4's line and page rules with exact spans, Dolma-compatible names and offsets."""

from __future__ import annotations

import pytest

from taggers import registry
from taggers.base import Document, TaggerError
from taggers.builtin.c4 import BAD_WORDS, C4Tagger, has_bad_word


def spans_by_type(text: str, **options) -> dict[str, list[tuple[int, int, float]]]:
    out: dict[str, list[tuple[int, int, float]]] = {}
    for s in C4Tagger(**options).predict(Document("d", text)):
        out.setdefault(s.type, []).append((s.start, s.end, s.score))
    return out


TEXT = (
    "This first line is a proper sentence.\n"  # 0..38 kept
    "short line\n"  # 38..49 no punctuation, too few words
    "Please enable JavaScript in your browser.\n"  # 49..91 javascript
    "Read our privacy policy before you go.\n"  # 91..130 policy
    "It was late... and then\n"  # 130..154 no punctuation
    "We waited for the end...\n"  # 154..179 ellipsis
    "Ok.\n"  # 179..183 too few words
    "The last two sentences are here. Both of them count!"  # 183..235
)


def test_line_spans_match_dolma_offsets():
    s = spans_by_type(TEXT)
    assert len(TEXT) == 235
    assert s["lines_with_no_ending_punctuation"] == [(38, 49, 1.0), (130, 154, 1.0)]
    assert s["lines_with_too_few_words"] == [(38, 49, 1.0), (179, 183, 1.0)]
    assert s["lines_ending_with_ellipsis"] == [(154, 179, 1.0)]
    assert s["lines_with_javascript"] == [(49, 91, 1.0)]
    assert s["lines_with_policy"] == [(91, 130, 1.0)]
    assert s["has_javascript"] == [(0, 235, 1.0)] and s["has_policy"] == [(0, 235, 1.0)]
    assert s["line_count"] == [(0, 235, 8.0)]
    assert "has_naughty_word" not in s and "has_curly_brace" not in s and "has_lorem_ipsum" not in s
    # kept lines: the first (1 sentence) and the last (2 sentences)
    assert s["kept_sentence_count"] == [(0, 235, 3.0)]
    assert s["keep"] == [(0, 235, 1.0)]


def test_page_rules_drop():
    assert spans_by_type(TEXT + "\nx = {1: 2}.")["keep"][0][2] == 0.0
    assert spans_by_type(TEXT + "\nLorem ipsum dolor sit amet.")["has_lorem_ipsum"] == [(0, 263, 1.0)]
    assert spans_by_type("One sentence here. Two sentences here.")["keep"][0][2] == 0.0  # only 2 sentences
    assert spans_by_type("One sentence here. Two here.", min_sentences=2)["keep"][0][2] == 1.0


def test_empty_lines_and_trailing_newline_like_dolma():
    s = spans_by_type("A good line with words.\n\nAnother good line here.\n")
    assert s["lines_with_no_ending_punctuation"] == [(24, 25, 1.0), (49, 49, 1.0)]
    assert s["lines_with_too_few_words"] == [(24, 25, 1.0), (49, 49, 1.0)]
    assert s["line_count"] == [(0, 49, 4.0)]


def test_offsets_survive_lowercasing_that_changes_length():
    text = "İstanbul is a big city.\nİİİ\nPlease enable javascript now ok."
    assert len(text.lower()) != len(text)
    s = spans_by_type(text)
    assert s["lines_with_no_ending_punctuation"] == [(24, 28, 1.0)]
    assert s["lines_with_javascript"] == [(28, len(text), 1.0)]


def test_bad_words():
    assert "fuck" in BAD_WORDS
    assert has_bad_word("what the fuck, really")  # punctuation does not hide a word
    assert has_bad_word("a fuck-up")  # nor a hyphen
    assert has_bad_word("see the blow job scene")  # phrase
    assert not has_bad_word("a blowjobber and a scunthorpe sign")  # no partial words
    assert not has_bad_word("the blow jobs")  # phrases on word boundaries
    assert has_bad_word("ünïcödé text with fuck in it")  # the non-ASCII path
    assert has_bad_word("ok \U0001f595")  # the emoji entry
    s = spans_by_type("You are a shit person. Really you are. Third sentence here.")
    assert s["has_naughty_word"] == [(0, 59, 1.0)] and s["keep"][0][2] == 0.0


def test_min_words_option_and_names():
    s = spans_by_type("Three words here.\nFour words are here.", min_words_per_line=4)
    assert s["lines_with_too_few_words"] == [(0, 18, 1.0)]
    assert registry.get("c4_v2") is C4Tagger and issubclass(registry.get("c4_v1"), C4Tagger)
    with pytest.raises(TaggerError):
        C4Tagger(min_words_per_line=-1)
    assert C4Tagger().group([])["lines_with_no_ending_punctuation"] == []
