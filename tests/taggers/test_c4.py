"""c4 (the C4 paper's rules with a verdict): line and page rules with exact spans; c4_v1 / c4_v2
(Dolma's definitions): known answers, the documented offset exception, and the Rust kernel's
Dolma modes against their Python reference.  Values against Dolma's own output: test_dolma_parity.py."""

from __future__ import annotations

import json

import pytest

import taggers.builtin.c4 as c4_module
from taggers import registry
from taggers.base import Document, TaggerError
from taggers.builtin.c4 import BAD_WORDS, C4Tagger, DolmaC4Tagger, DolmaC4V1Tagger, dolma_c4_python, has_bad_word
from tests.support.documents import sample_documents
from tests.support.repo import REPO_ROOT


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
    s = spans_by_type("A good line with words.\nAnother good line here.\n\n")
    assert s["lines_with_no_ending_punctuation"] == [(48, 49, 1.0), (49, 49, 1.0)]
    # C4's 5 words per line: the 4-word line is too short (Dolma's 3 would keep it).
    assert s["lines_with_too_few_words"] == [(24, 48, 1.0), (48, 49, 1.0), (49, 49, 1.0)]
    assert "lines_with_too_few_words" not in spans_by_type("Another good line here.", min_words_per_line=3)
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
    assert C4Tagger().options.min_words_per_line == 5  # C4's; Dolma's c4_v1/c4_v2 use 3
    # The paper's rules under our own name; Dolma's names give Dolma's values.
    assert registry.get("c4") is C4Tagger
    assert registry.get("c4_v2") is DolmaC4Tagger and registry.get("c4_v1") is DolmaC4V1Tagger
    with pytest.raises(TaggerError):
        C4Tagger(min_words_per_line=-1)
    assert C4Tagger().group([])["lines_with_no_ending_punctuation"] == []


def test_keep_is_a_default_type():
    # The tag stage writes the defaults (empty) for a document the tagger failed on: keep is
    # then present and empty ("not evaluated"), never absent.
    assert C4Tagger().group([]) == {"lines_with_no_ending_punctuation": [], "lines_with_too_few_words": [], "keep": []}
    tagger = C4Tagger()
    assert tagger.group(tagger.predict_batch([Document("d", TEXT)])[0])["keep"] == [[0, 235, 1.0]]


@pytest.mark.parametrize(
    "options, name",
    [
        ({"min_words_per_line": True}, "min_words_per_line"),
        ({"min_words_per_line": 3.0}, "min_words_per_line"),
        ({"min_words_per_line": "3"}, "min_words_per_line"),
        ({"min_sentences": False}, "min_sentences"),
        ({"min_sentences": "3"}, "min_sentences"),
        ({"use_rust": "no"}, "use_rust"),
        ({"use_rust": 1}, "use_rust"),
    ],
)
def test_option_types_are_checked(options, name):
    with pytest.raises(TaggerError, match=name):
        C4Tagger(**options)


# -- the Rust kernel against the Python reference ------------------------------------------------


ROOT = str(REPO_ROOT)
EDGE_TEXTS = [
    "",
    "\n",
    "one two three.\n\n",
    'What a dumb-ass idea. Truly! Really?"\nx',
    "a&blue waffle here. and more. and more.",
    "The blue waffle. Then blue waffles. x-blue waffle -blue waffle.",
    "İstanbul JAVASCRIPT enabled. Uses Cookies. Lorem Ipsum dolor.\nTerms of Use apply here now.",
    "Ends here...\nEnds here\u2026\n  spaced line .  \n\x1cA b c.\x1c\n\u00a0a\u00a0b\u00a0c.\u00a0",
    "Quote ends.\u201d Next one!) And (this one?] ok.x no. yes.\u2019",
    "{curly} braces. In the text. Are here.",
    "2g1c and 2 girls 1 cup. two girls one cup. Nothing else here.",
    "中文句子。还有 javascript 在这里。\n日本語の文章です. Ok then. Fine.",
    "F\u00dcCK this. \u0130 and \u03a3\u039f\u03a3. a\x00ass b.",
]


@pytest.fixture(params=[True, False], ids=["rust", "python"], autouse=True)
def c4_backend(request, monkeypatch):
    """Every test of this module runs on the Rust kernel and on the Python reference."""
    monkeypatch.setattr(c4_module, "USE_RUST", request.param)
    return request.param


@pytest.mark.slow
def test_rust_parity_on_sample_corpus_and_edge_cases(c4_backend):
    if not c4_backend:
        pytest.skip("compares both backends once")
    docs = sample_documents() + [Document(f"edge{i}", t) for i, t in enumerate(EDGE_TEXTS)]
    # Texts made of bad words in context: every list entry, plain, hyphenated, glued and in a phrase.
    entries = sorted(c4_module.BAD_WORD_ENTRIES)
    for i in range(0, len(entries), 7):
        chunk = entries[i : i + 7]
        text = f"Some {chunk[0]}. x-{chunk[-1]}-y and {chunk[1 % len(chunk)]}s. a&{chunk[-1]}\n" + " ".join(chunk).upper()
        docs.append(Document(f"bad{i}", text))
        docs.append(Document(f"glued{i}", "".join(chunk) + "."))
    assert len(docs) > 3000
    for min_words in (3, 5, 0):
        rust = C4Tagger(min_words_per_line=min_words, use_rust=True)
        ref = C4Tagger(min_words_per_line=min_words, use_rust=False)
        got = rust.predict_spans(docs)
        grouped = rust.predict_batch(docs)
        for doc, spans, grouped_ in zip(docs, got, grouped):
            expected = ref.predict_python(doc)
            assert spans == expected, (min_words, doc.id, doc.text[:200])
            # The grouped mapping built in Rust: same types in the same order, same values.
            assert json.dumps(rust.group(grouped_)) == json.dumps(ref.group(expected)), (min_words, doc.id)
    for doc in docs:
        lower = doc.text.lower()
        assert rust.kernel.has_bad_word(lower) == has_bad_word(lower), doc.text[:200]


# -- c4_v1 / c4_v2: Dolma's definitions ----------------------------------------------------------


def dolma_spans(text: str, v1: bool = False) -> dict:
    tagger = (DolmaC4V1Tagger if v1 else DolmaC4Tagger)()
    return {k: [tuple(x) for x in v] for k, v in tagger.group(tagger.predict(Document("d", text))).items()}


def test_dolma_known_answers():
    # What Dolma 1.2.1 writes (checked against its output, see test_dolma_parity.py).
    text = "Hello world.\n\n- item one two\n* x\nthe the be to \u2026\n"
    assert dolma_spans(text) == {
        "lines_with_no_ending_punctuation": [(13, 14, 1.0), (14, 29, 1.0), (29, 33, 1.0), (33, 49, 1.0), (49, 49, 1.0)],
        "lines_with_too_few_words": [(0, 13, 1.0), (13, 14, 1.0), (29, 33, 1.0), (49, 49, 1.0)],
        "line_count": [(0, 49, 6.0)],
    }
    # No type is written for every document: a clean page has only its line count; no verdict.
    assert dolma_spans("One two three.") == {"line_count": [(0, 14, 1.0)]}


def test_dolma_flags():
    # Bad words: whole split() words of the lower-cased text (punctuation attached hides them),
    # phrases anywhere (inside words too).
    assert "has_naughty_word" in dolma_spans("What the SHIT is this.")
    assert "has_naughty_word" not in dolma_spans("What the shit, really. A dumb-ass idea.")
    assert "has_naughty_word" in dolma_spans("Eat blue waffles.")
    # javascript: anywhere in v2, a whole word in v1.
    assert "has_javascript" in dolma_spans("Please enable nojavascript.")
    assert "has_javascript" not in dolma_spans("Please enable nojavascript.", v1=True)
    assert "has_javascript" in dolma_spans("Please enable JavaScript", v1=True)
    assert dolma_spans("{x} lorem ipsum.")["has_curly_brace"] == [(0, 16, 1.0)]
    assert "has_lorem_ipsum" in dolma_spans("{x} lorem ipsum.", v1=True)


def test_dolma_offsets_exception_lowercasing_that_changes_length():
    # Documented exception: Dolma's c4_v2 counts offsets in text.lower() ("İ" -> "i̇", two code
    # points), so it writes [[0, 9], [29, 32]] for this 30-character text; the text's own line
    # offsets are [[0, 7], [27, 30]], which Dolma's c4_v1 writes too.
    text = "İİ abc\nJavaScript here ok.\nfoo"
    assert len(text) == 30 and len(text.lower()) == 32
    for v1 in (False, True):
        s = dolma_spans(text, v1=v1)
        assert s["lines_with_no_ending_punctuation"] == [(0, 7, 1.0), (27, 30, 1.0)]
        assert s["lines_with_too_few_words"] == [(0, 7, 1.0), (27, 30, 1.0)]


def test_dolma_modes_lowercasing_in_rust_is_exact(c4_backend):
    # c4_v1/c4_v2 lower-case in Rust: the lower-cased text is only searched for the list's ASCII
    # words and phrases and one emoji, so only characters whose lower-case holds an ASCII
    # character or a space matter. CPython has exactly two beyond ASCII; the kernel's unit test
    # checks Rust's lower-casing of both (rust_bloom/src/text_stats/c4.rs).
    if not c4_backend:
        pytest.skip("the Rust kernel's lower-casing; checked once")
    assert all(e.isascii() or e == "\U0001f595" for e in c4_module.DOLMA_BAD_LINES)
    lowers_to_ascii, lowers_to_space = [], []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        low = chr(cp).lower()
        if any(ord(c) < 0x80 for c in low):
            lowers_to_ascii.append((hex(cp), low))
        if not chr(cp).isspace() and any(c.isspace() for c in low):
            lowers_to_space.append(hex(cp))
    assert lowers_to_ascii == [("0x130", "i\u0307"), ("0x212a", "k")] and lowers_to_space == []
    tagger = DolmaC4Tagger()
    assert "has_naughty_word" in tagger.predict(Document("k", "A \u212aINKY thing."))  # "kinky"
    assert "has_naughty_word" not in tagger.predict(Document("k", "A \u212aINKY, thing."))  # "kinky," is no word of the list
    assert "has_javascript" not in tagger.predict(Document("i", "JAVASCR\u0130PT"))  # "javascri̇pt"


@pytest.mark.slow
def test_dolma_modes_rust_parity_on_sample_corpus_and_edge_cases(c4_backend):
    if not c4_backend:
        pytest.skip("compares both backends once")
    docs = sample_documents() + [Document(f"edge{i}", t) for i, t in enumerate(EDGE_TEXTS)]
    # Every entry of the list in context: alone, with punctuation, glued, upper-cased, in a phrase.
    entries = c4_module.DOLMA_BAD_LINES
    for i in range(0, len(entries), 7):
        chunk = entries[i : i + 7]
        text = f"Some {chunk[0]}. x-{chunk[-1]}-y and {chunk[1 % len(chunk)]}s a&{chunk[-1]}\n" + " ".join(chunk).upper() + f"\n{chunk[0]}"
        docs.append(Document(f"bad{i}", text))
    for version, cls in ((1, DolmaC4V1Tagger), (2, DolmaC4Tagger)):
        rust = cls(use_rust=True)
        assert rust.kernel is not None and rust.kernel.mode == f"dolma_v{version}"
        for doc, grouped in zip(docs, rust.predict_batch(docs)):
            assert json.dumps(grouped) == json.dumps(dolma_c4_python(doc.text, version)), (version, doc.id, doc.text[:200])
        for doc in docs:
            lower = doc.text.lower()
            expected = any(w in c4_module.DOLMA_BAD_WORDS for w in lower.split()) or any(p in lower for p in c4_module.DOLMA_BAD_PHRASES)
            assert rust.kernel.has_bad_word(lower) == expected, doc.text[:200]
