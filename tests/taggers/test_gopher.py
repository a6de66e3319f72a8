"""gopher (the paper's rules): every rule on documents with known answers, and language handling;
gopher_v1 / gopher_v2 (Dolma's definitions): known answers, and the Rust kernel's Dolma modes
against their Python reference.  Values against Dolma's own output: test_dolma_parity.py."""

from __future__ import annotations

import json
import math
import os

import pytest

import taggers.builtin.gopher as gopher_module
from taggers import registry
from taggers.base import Document, TaggerError
from taggers.builtin.gopher import DolmaGopherTagger, DolmaGopherV2Tagger, GopherTagger, dolma_attributes, ngram_fractions, normalize_lang
from tests.support.documents import sample_documents
from tests.support.repo import REPO_ROOT

# Plain English prose (81 words, 11 stop words): passes every rule.
GOOD_EN = (
    "The old lighthouse keeper climbed the narrow stairs every evening before sunset.\n"
    "He carried a lamp, a notebook and a thermos of strong black coffee.\n"
    "From the top he could watch fishing boats returning to harbour with their catch.\n"
    "Storms arrived quickly in autumn, so he wrote careful notes about clouds and wind.\n"
    "Visitors sometimes asked whether the job felt lonely; he always smiled and shook his head.\n"
    "Books, music, gulls and distant ships kept him company through long winter nights."
)


def attrs(text: str, lang: str | None = "en", **options) -> dict[str, float]:
    tagger = GopherTagger(detect_language=False, **options)
    spans = tagger.tag(text, lang)
    assert all((s.start, s.end) == (0, len(text)) for s in spans)
    return {s.type: s.score for s in spans}


def test_registered_names():
    # The paper's rules under our own name; Dolma's names give Dolma's values.
    assert registry.get("gopher") is GopherTagger
    assert registry.get("gopher_v1") is DolmaGopherTagger and registry.get("gopher_v2") is DolmaGopherV2Tagger


def test_good_english_document_is_kept():
    a = attrs(GOOD_EN)
    assert a["word_count"] == 81
    assert a["required_word_count"] == 11  # the x5, The, of, to, with, and x2
    assert a["fraction_of_words_with_alpha_character"] == 1.0
    assert a["fraction_of_duplicate_lines"] == 0.0
    assert a["keep"] == 1.0


def test_word_count_and_length_rules():
    short = " ".join(["the word"] * 24)  # 48 words
    assert attrs(short)["word_count"] == 48 and attrs(short)["keep"] == 0.0
    a = attrs("aaaaaaaaaaaa " * 60 + "the of")  # mean length (60*12 + 5) / 62
    assert a["mean_word_length"] == pytest.approx((60 * 12 + 5) / 62)
    assert a["median_word_length"] == 12.0
    assert a["keep"] == 0.0


def test_symbol_ratios():
    text = "# " * 5 + "word " * 40 + "... … the of"
    a = attrs(text)
    n = 5 + 40 + 4
    assert a["word_count"] == n
    assert a["hash_to_word_ratio"] == pytest.approx(5 / n)
    assert a["ellipsis_to_word_ratio"] == pytest.approx(2 / n)
    assert a["symbol_to_word_ratio"] == pytest.approx(5 / n)


def test_alpha_fraction_bullets_and_ellipsis_lines():
    text = "123 abc 4.5 x1 _ é2"
    assert attrs(text)["fraction_of_words_with_alpha_character"] == pytest.approx(3 / 6)
    bullets = "\n".join(["- item"] * 9 + ["plain line", "", "  * star"])  # 11 non-empty lines, 10 bullets
    a = attrs(bullets)
    assert a["fraction_of_lines_starting_with_bullet_point"] == pytest.approx(10 / 11)
    ell = "one...\ntwo …\nthree\nfour"
    assert attrs(ell)["fraction_of_lines_ending_with_ellipsis"] == pytest.approx(2 / 4)


def test_duplicate_lines_and_paragraphs():
    text = "a b\na b\nc\n\nx y z\n\nx y z\n\nx y z"
    a = attrs(text)
    # lines: "a b", "a b", "c", "x y z" x3 -> 3 of 6 repeat an earlier one; chars 3+5+5 of 3+3+1+15
    assert a["fraction_of_duplicate_lines"] == pytest.approx(3 / 6)
    assert a["fraction_of_characters_in_duplicate_lines"] == pytest.approx(13 / 22)
    # paragraphs: "a b\na b\nc", "x y z" x3 -> 2 of 4; chars 10 of 9+15
    assert a["fraction_of_duplicate_paragraphs"] == pytest.approx(2 / 4)
    assert a["fraction_of_characters_in_duplicate_paragraphs"] == pytest.approx(10 / 24)


def test_ngram_fractions_exact():
    f = ngram_fractions(["aa", "b", "aa", "b", "aa", "b", "c"])  # 10 characters
    assert f["fraction_of_characters_in_most_common_2grams"] == pytest.approx(9 / 10)  # "aa b" x3
    assert f["fraction_of_characters_in_most_common_3grams"] == pytest.approx(8 / 10)  # "aa b aa" x2, first seen
    assert f["fraction_of_characters_in_most_common_4grams"] == pytest.approx(9 / 10)
    for n in range(5, 11):
        assert f[f"fraction_of_characters_in_duplicate_{n}grams"] == 0.0
    words = ["w1", "w2", "w3", "w4", "w5", "xyz", "w1", "w2", "w3", "w4", "w5"]  # 23 characters
    f = ngram_fractions(words)
    assert f["fraction_of_characters_in_duplicate_5grams"] == pytest.approx(20 / 23)
    assert f["fraction_of_characters_in_duplicate_6grams"] == 0.0
    # overlapping repeats never count a word twice
    f = ngram_fractions(["a"] * 20)
    assert f["fraction_of_characters_in_most_common_2grams"] == 1.0
    assert f["fraction_of_characters_in_duplicate_10grams"] == 1.0
    assert ngram_fractions([])["fraction_of_characters_in_duplicate_5grams"] == 0.0


def test_repetitive_document_is_dropped():
    text = GOOD_EN + "\n" + "\n".join(["Buy cheap watches online today with the best deals."] * 6)
    a = attrs(text)
    assert a["fraction_of_duplicate_lines"] == pytest.approx(5 / 12)
    assert a["keep"] == 0.0


GERMAN = "\n".join(
    [
        "Der Hund und die Katze schlafen nicht im Garten, das ist zu kalt für sie.",
        "Die Kinder spielen mit dem Ball von Peter und der Nachbar schaut zu.",
    ]
    * 4
)


def test_german_page_uses_german_stop_words_not_english():
    assert "the" not in GERMAN.lower().split()
    tagger = GopherTagger(detect_language=False)
    doc = Document("de", GERMAN, metadata={"language": "de-DE"})
    a = {s.type: s.score for s in tagger.predict(doc)}
    german = ("der", "die", "das", "und", "ist", "zu", "den", "von", "mit", "nicht")
    expected = sum(w.strip(",.").lower() in german for w in GERMAN.split())
    assert a["required_word_count"] == expected > 2
    # The same words labelled English would count zero English stop words.
    assert attrs(GERMAN, "en")["required_word_count"] == 0
    # English function words in a German page are not counted.
    mixed = GOOD_EN.replace("the", "THE")
    assert attrs(mixed, "de")["required_word_count"] == 0


CHINESE = "今天天气很好，我们去公园散步。公园里有很多人在锻炼身体，孩子们在草地上玩耍。" * 3


def test_chinese_page_skips_stop_words_and_counts_characters_as_words():
    a = attrs(CHINESE, "zh")
    assert "required_word_count" not in a
    han = sum(1 for c in CHINESE if "\u4e00" <= c <= "\u9fff")
    assert a["word_count"] == len(CHINESE)  # every character is a word (punctuation too)
    assert a["fraction_of_words_with_alpha_character"] == pytest.approx(han / len(CHINESE))
    # no stop-word rule and no word-length rule: the verdict rests on the other rules only
    assert a["mean_word_length"] == 1.0
    assert attrs(CHINESE * 2, "zh")["fraction_of_duplicate_lines"] == 0.0


def test_unknown_language_skips_stop_words():
    assert "required_word_count" not in attrs(GOOD_EN, None)
    assert "required_word_count" not in attrs(GOOD_EN, "xx")


def test_language_from_metadata_row_or_model():
    tagger = GopherTagger()
    docs = [
        Document("a", GERMAN, metadata={"lang": "de"}),
        Document("b", GERMAN, row={"id": "b", "text": GERMAN, "lang": "fr"}),
        Document("c", GERMAN),
        Document("d", CHINESE),
        Document("e", ""),
    ]
    assert tagger.languages(docs) == ["de", "fr", "de", "zh", None]
    batch = tagger.predict_batch(docs)
    assert len(batch) == 5
    # predict_batch may return spans or the grouped mapping (the Rust path): read both via group().
    scores = [{k: v[0][2] for k, v in tagger.group(spans).items()} for spans in batch]
    counts = [s.get("required_word_count") for s in scores]
    assert counts[0] == counts[2] > 2 and counts[3] is None
    empty = scores[4]
    assert empty["word_count"] == 0 and empty["keep"] == 0.0
    assert normalize_lang("__label__pt") == "pt" and normalize_lang("zh_Hans") == "zh" and normalize_lang(3) is None


def test_language_names_and_codes_are_normalised():
    for value, code in [
        ("en", "en"),
        ("eng", "en"),
        ("English", "en"),
        ("en-US", "en"),
        ("en_GB", "en"),
        ("ENGLISH", "en"),
        ("deu", "de"),
        ("ger", "de"),
        ("German", "de"),
        ("Deutsch", "de"),
        ("de-DE", "de"),
        ("fra", "fr"),
        ("French", "fr"),
        ("spa", "es"),
        ("Spanish", "es"),
        ("por", "pt"),
        ("Portuguese (Brazil)", "pt"),
        ("nld", "nl"),
        ("swe", "sv"),
        ("dan", "da"),
        ("pol", "pl"),
        ("rus", "ru"),
        ("Russian", "ru"),
        ("ita", "it"),
        ("zho", "zh"),
        ("chi", "zh"),
        ("Chinese", "zh"),
        ("cmn-Hans-CN", "zh"),
        ("zh_Hans", "zh"),
        ("jpn", "ja"),
        ("Japanese", "ja"),
        ("kor", "ko"),
        ("Korean", "ko"),
        ("tha", "th"),
        ("Thai", "th"),
        ("__label__en", "en"),
        ("__label__pt", "pt"),
    ]:
        assert normalize_lang(value) == code, value
    for value in ("und", "fin", "Klingon", "", "  ", None, 3, ["en"]):
        assert normalize_lang(value) is None, value


def test_metadata_language_names_use_their_stop_words_and_unknown_ones_fall_back_to_fasttext():
    tagger = GopherTagger()
    docs = [
        Document("a", GERMAN, metadata={"language": "German"}),
        Document("b", GOOD_EN, metadata={"lang": "eng"}),
        Document("c", GERMAN, metadata={"lang": "deu"}),
        Document("d", CHINESE, metadata={"language": "Chinese"}),
        Document("e", GERMAN, metadata={"lang": "und"}),  # not recognised: fastText decides
        Document("f", GOOD_EN, metadata={"language": "Klingon"}),
    ]
    assert tagger.languages(docs) == ["de", "en", "de", "zh", "de", "en"]
    scores = [{k: v[0][2] for k, v in tagger.group(spans).items()} for spans in tagger.predict_batch(docs)]
    assert scores[0]["required_word_count"] == scores[2]["required_word_count"] == scores[4]["required_word_count"] > 2
    assert scores[1]["required_word_count"] == scores[5]["required_word_count"] == 11
    assert "required_word_count" not in scores[3]
    # A custom list under a code that is no ISO 639-1 code still applies to documents naming it.
    custom = GopherTagger(detect_language=False, stop_words={"tlh": ["he", "his"]})
    assert custom.languages([Document("g", GOOD_EN, metadata={"lang": "tlh"})]) == ["tlh"]


def test_keep_is_a_default_type():
    # The tag stage writes the defaults (empty) for a document the tagger failed on: keep is
    # then present and empty ("not evaluated"), never absent.
    tagger = GopherTagger(detect_language=False)
    assert tagger.group([]) == {"keep": []}
    grouped = tagger.group(tagger.predict_batch([Document("a", GOOD_EN, metadata={"lang": "en"})])[0])
    assert grouped["keep"] == [[0, len(GOOD_EN), 1.0]]


@pytest.mark.parametrize(
    "options, name",
    [
        ({"thresholds": [("word_count_min", 5)]}, "thresholds"),
        ({"thresholds": "word_count_min=5"}, "thresholds"),
        ({"thresholds": {"word_count_min": "5"}}, "word_count_min"),
        ({"thresholds": {"word_count_min": True}}, "word_count_min"),
        ({"stop_words": ["the"]}, "stop_words"),
        ({"min_stop_words": True}, "min_stop_words"),
        ({"min_stop_words": "2"}, "min_stop_words"),
        ({"min_stop_words": 2.5}, "min_stop_words"),
        ({"detect_language": "no"}, "detect_language"),
        ({"detect_language": 0}, "detect_language"),
        ({"min_language_score": "0.3"}, "min_language_score"),
        ({"min_language_score": True}, "min_language_score"),
        ({"language_chars": True}, "language_chars"),
        ({"language_chars": 100.0}, "language_chars"),
        ({"use_rust": "yes"}, "use_rust"),
        ({"model_path": 3}, "model_path"),
    ],
)
def test_option_types_are_checked(options, name):
    options.setdefault("detect_language", False)
    with pytest.raises(TaggerError, match=name):
        GopherTagger(**options)


def test_options():
    assert attrs(GOOD_EN, thresholds={"word_count_min": 500})["keep"] == 0.0
    assert attrs(GOOD_EN, min_stop_words=100)["keep"] == 0.0
    assert attrs(GOOD_EN, "xx", stop_words={"xx": ["he", "his"]})["required_word_count"] == 5
    with pytest.raises(TaggerError):
        GopherTagger(detect_language=False, thresholds={"nope": 1})
    with pytest.raises(TaggerError):
        GopherTagger(detect_language=False, stop_words={"de": "der"})
    with pytest.raises(TaggerError):
        GopherTagger(model_path="/nonexistent/lid.bin")


def test_sample_corpus_runs_through_the_tag_stage(tmp_path):
    import glob
    import gzip
    import json
    import subprocess
    import sys

    docs = sorted(glob.glob("examples/sample/documents/debian-handbook/*"))
    out = tmp_path / "out"
    subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "dolma-pipe"),
            "tag",
            "--documents",
            *docs,
            "--taggers",
            "gopher",
            "--destination",
            str(out),
            "--processes",
            "1",
        ],
        check=True,
        capture_output=True,
    )
    rows = [json.loads(line) for f in sorted(glob.glob(str(out / "gopher" / "*" / "*.jsonl.gz"))) for line in gzip.open(f, "rt")]
    assert len(rows) == 193
    keep = [r["attributes"]["gopher__gopher__keep"][0][2] for r in rows]
    assert 0 < sum(keep) < len(keep)


def test_stop_words_same_on_ascii_and_unicode_paths():
    text = 'The, the_x the2 (of) to-do THAT; have"with" be... x-and-y ' * 3
    ascii_count = attrs(text)["required_word_count"]
    assert ascii_count == 3 * 8  # The of to THAT have with be and; not the_x, the2, do
    assert attrs(text + " é")["required_word_count"] == ascii_count


# -- the Rust kernel against the Python reference ------------------------------------------------


ROOT = str(REPO_ROOT)
EDGE_TEXTS = [
    "",
    "   \n\n  ",
    "one",
    "The the THE tHe, the_ the-the théthe the\x00the a\x1cthe",
    "İstanbul ΣΊΣΥΦΟΣ Σ the the ß STRASSE and AND",
    "中文字符测试 and the 日本語のテキスト, ไทย ภาษา ok\n\n中文字符测试 and the",
    "- a\n\u2022 b\n  * c\n\u2192 d\n\u00b7 e...\nf\u2026  \ng ...\x1c\n",
    "a\r\nb\r\n\r\n\x0b\nc\u2028d\u2029\n \u00a0\n e\n\n\n e\n",
    "x y z w v x y z w v q x y z w v x y z w v q r s t u v w x y z",
    "## ### #... ...... \u2026\u2026 word",
    "2\u00b2 \u00bd \u0663\u0664 _ __ a1 1a \u2167",
    "à la maison de la mère, de l'école, c'est la vie; de DE De",
]


def _same(a: dict, b: dict) -> bool:
    if list(a) != list(b):
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, int) and isinstance(y, int):
            if x != y:
                return False
        elif not (x == y or math.isclose(x, y, rel_tol=0, abs_tol=1e-9)):
            return False
    return True


@pytest.fixture(params=[True, False], ids=["rust", "python"], autouse=True)
def gopher_backend(request, monkeypatch):
    """Every test of this module runs on the Rust kernel and on the Python reference."""
    monkeypatch.setattr(gopher_module, "USE_RUST", request.param)
    return request.param


def test_rust_kernel_is_the_default():
    assert GopherTagger(detect_language=False).kernel is not None or not gopher_module.USE_RUST
    assert GopherTagger(detect_language=False, use_rust=False).kernel is None


@pytest.mark.slow
def test_rust_parity_on_sample_corpus_and_edge_cases(gopher_backend):
    if not gopher_backend:
        pytest.skip("compares both backends once")
    docs = sample_documents()
    assert len(docs) > 3000
    texts = [d.text for d in docs] + EDGE_TEXTS
    rust = GopherTagger(detect_language=False, use_rust=True, stop_words={"xx": ["a b", "Ab", "the-the"]})
    ref = GopherTagger(detect_language=False, use_rust=False, stop_words={"xx": ["a b", "Ab", "the-the"]})
    choices = [None, "zz", "xx", *sorted(ref.stop_sets)]
    compared = 0
    for shift in range(3):
        langs = [choices[(i + shift * 5) % len(choices)] for i in range(len(texts))]
        if shift == 0:  # every edge text in every language
            texts_, langs = [t for t in EDGE_TEXTS for _ in choices], [c for _ in EDGE_TEXTS for c in choices]
        else:
            texts_ = texts
        got = rust.attributes_batch(texts_, langs)
        for text, lang, a in zip(texts_, langs, got):
            b = ref.attributes(text, lang)
            assert _same(a, b), (lang, text[:200], {k: (a.get(k), b.get(k)) for k in {*a, *b} if a.get(k) != b.get(k)})
            compared += 1
    assert compared > 6000
    # And the spans (values and verdict) through predict_batch.
    lang_docs = docs[:300]
    for got, expected in zip(rust.predict_batch(lang_docs), ref.predict_batch(lang_docs)):
        assert json.dumps(rust.group(got)) == json.dumps(ref.group(expected))
    assert [rust.predict(d) for d in lang_docs[:20]] == [ref.predict(d) for d in lang_docs[:20]]


# -- gopher_v1 / gopher_v2: Dolma's definitions --------------------------------------------------


def dolma(text: str, v2: bool = False) -> dict[str, float]:
    tagger = (DolmaGopherV2Tagger if v2 else DolmaGopherTagger)()
    grouped = tagger.group(tagger.predict(Document("d", text)))
    assert all(v == [[0, len(text), v[0][2]]] for v in grouped.values())
    return {k: v[0][2] for k, v in grouped.items()}


def test_dolma_definitions_known_answers():
    # Dolma 1.2.1 writes these for this text (checked against its output, see test_dolma_parity.py).
    text = "Hello world.\n\n- item one two\n* x\nthe the be to \u2026\n"
    a = dolma(text)
    assert a == {
        "fraction_of_characters_in_most_common_2grams": 0.31429,
        "fraction_of_characters_in_most_common_3grams": 0.34286,
        "fraction_of_characters_in_most_common_4grams": 0.45714,
        **{f"fraction_of_characters_in_duplicate_{n}grams": 0.0 for n in range(5, 11)},
        "character_count": 49.0,
        "word_count": 13.0,
        "median_word_length": 3.0,
        "symbol_to_word_ratio": 0.07692,  # the one word holding "\u2026"
        "fraction_of_words_with_alpha_character": 0.76923,  # not "-", "*", "\u2026"
        "required_word_count": 4.0,  # the the be to
        "fraction_of_lines_starting_with_bullet_point": 0.33333,  # 2 of 6 split("\\n") lines
        "fraction_of_lines_ending_with_ellipsis": 0.16667,
        "fraction_of_duplicate_lines": 0.33333,  # the two empty lines
        "fraction_of_characters_in_duplicate_lines": 0.0,
    }
    # gopher_v2: lines are re.split(r"\\n+"): 5 lines, one empty (the last) and none repeated.
    b = dolma(text, v2=True)
    assert b["fraction_of_duplicate_lines"] == 0.0 and b["fraction_of_lines_starting_with_bullet_point"] == 0.4
    assert {k: v for k, v in a.items() if "lines" not in k} == {k: v for k, v in b.items() if "lines" not in k}


def test_dolma_definitions_differ_from_the_papers():
    # Case-sensitive stop words with punctuation attached, in any language; no verdict.
    a = dolma("The the, THE the to")
    assert a["required_word_count"] == 2.0 and "keep" not in a and "mean_word_length" not in a
    # Overlapping repeats count again (above 1), where the paper counts each word once.
    assert dolma("a a a a")["fraction_of_characters_in_most_common_2grams"] == 1.5
    assert attrs("a a a a")["fraction_of_characters_in_most_common_2grams"] == 1.0
    # No n-gram type for more words than the text has; an empty text gets the other types, all 0.
    assert "fraction_of_characters_in_duplicate_6grams" not in dolma("a b c d e")
    empty = dolma("")
    assert empty["character_count"] == 0.0 and not any(k.startswith("fraction_of_characters_in_") and "grams" in k for k in empty)
    # Words are split() words: a Chinese sentence is one word; "..." is no symbol, "\u2026" is.
    assert dolma(CHINESE[:30])["word_count"] == 1.0
    assert dolma("a... b\u2026 #c d")["symbol_to_word_ratio"] == 0.5


@pytest.mark.slow
def test_dolma_modes_rust_parity_on_sample_corpus_and_edge_cases(gopher_backend):
    if not gopher_backend:
        pytest.skip("compares both backends once")
    texts = (
        [d.text for d in sample_documents()]
        + EDGE_TEXTS
        + [
            "a a a a a a a a a a a a",
            "x y z w v x y z w v q x y z w v x y z w v q r",
            "\n\nline\n\n\nline\n",
            "\u00b2 \u00bd \u01c5 \u0663 word",
        ]
    )
    # gopher_v2 differs in its lines only: the edge cases and a share of the corpus suffice.
    for ignore_empty_lines, cls, some in ((False, DolmaGopherTagger, texts), (True, DolmaGopherV2Tagger, texts[::5] + texts[-20:])):
        rust = cls(use_rust=True)
        assert rust.kernel is not None and rust.kernel.mode == ("dolma_v2" if ignore_empty_lines else "dolma_v1")
        got = rust.predict_batch([Document(str(i), t) for i, t in enumerate(some)])
        for text, grouped in zip(some, got):
            expected = dolma_attributes(text, ignore_empty_lines)
            assert json.dumps(grouped) == json.dumps(expected), (ignore_empty_lines, text[:200])
