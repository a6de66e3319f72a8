"""Dolma's CLD2 language taggers (taggers/builtin/cld2.py): Dolma's fallbacks, types and spans.

Dolma's values on several thousand documents are in tests/taggers/test_dolma_parity.py; these
tests pin the paths that fixture reaches only once or not at all.
"""

from __future__ import annotations

import pycld2
import pytest

from dolma_pipe import storage
from dolma_pipe.documents import read_attribute_rows, read_documents
from taggers import registry
from taggers.base import Document
from taggers.builtin import cld2
from tests.support.repo import REPO_ROOT

GERMAN = "Ein deutscher Absatz über das Wetter in den Bergen, den Regen und die Sonne im Süden des Landes."
ENGLISH = "An English paragraph about the weather in the mountains, the rain and the sun in the south of the country."
SPANISH = "Un párrafo en español sobre el tiempo en las montañas, la lluvia y el sol en el sur del país."


def grouped(name: str, text: str) -> dict:
    tagger = registry.get(name)()
    return tagger.group(tagger.predict(Document("d", text)))


def test_types_are_the_first_letters_of_cld2s_names_as_in_dolma():
    assert grouped("cld2_doc_v2", GERMAN)["ge"][0][2] > 0.9  # GERMAN, not ISO's "de"
    assert grouped("cld2_doc_v2", SPANISH)["sp"][0][2] > 0.9
    en = grouped("cld2_doc_v2", ENGLISH)
    assert en["en"] == [[0, len(ENGLISH), en["en"][0][2]]] and en["en"][0][2] > 0.9
    # CLD2's empty answer slots are named "Unknown", which Dolma's filter (UNKNOWN_LANGUAGE) lets through.
    assert {s[2] for s in en["un"]} == {0.0}


def test_unreliable_and_empty_texts():
    assert grouped("cld2_doc_v2", "") == {}
    assert grouped("cld2_en_doc_v2", "") == {"en": [[0, 0, 0.0]], "not_en": [[0, 0, 1.0]]}
    assert grouped("cld2_en_paragraph_with_doc_score_v2", "") == {"doc_en": [[0, 0, 0.0]], "doc_not_en": [[0, 0, 0.0]]}
    # Too short for CLD2 to be sure: no language at all, and English 0.0.
    assert cld2.cld2_languages("ok") == []
    assert grouped("cld2_en_doc_v2", "ok")["en"] == [[0, 2, 0.0]]


def calls(monkeypatch) -> list[str]:
    seen: list[str] = []
    detect = pycld2.detect

    def spy(text: str):
        seen.append(text)
        return detect(text)

    monkeypatch.setattr(cld2.pycld2, "detect", spy)
    return seen


def test_a_refused_text_is_transliterated_then_stripped_of_controls(monkeypatch):
    # A C1 control: CLD2 refuses the text, its ASCII transliteration is taken.
    text = SPANISH.replace(" sobre", "\x80 sobre")
    with pytest.raises(pycld2.error):
        pycld2.detect(text)
    seen = calls(monkeypatch)
    assert cld2.cld2_languages(text)[0][0] == "sp"
    assert seen == [text, seen[1]] and seen[1].isascii() and "parrafo en espanol" in seen[1]
    # BEL survives transliteration: the third try, without control characters, is taken; its
    # accents are kept (it is not the transliteration).
    text = GERMAN.replace(" über", "\x07 über")
    seen.clear()
    assert cld2.cld2_languages(text)[0][0] == "ge"
    assert len(seen) == 3 and seen[2] == GERMAN
    # Newlines are control characters too: the last try joins the lines.
    assert cld2._sanitized("a\nb\tc\x9fd") == "abcd"


def test_a_lone_surrogate_gets_the_next_answer_where_dolma_raises(monkeypatch):
    text = ENGLISH.replace(" rain", " \ud800rain")
    with pytest.raises(UnicodeEncodeError):
        pycld2.detect(text)
    seen = calls(monkeypatch)
    assert cld2.cld2_languages(text)[0][0] == "en"
    # The text could not be encoded for CLD2; its transliteration (the surrogate dropped) was answered.
    assert len(seen) == 2 and seen[0] == text and seen[1] == ENGLISH


def test_every_try_refused_gives_no_language(monkeypatch):
    def refuse(text: str):
        raise pycld2.error("input contains invalid UTF-8")

    monkeypatch.setattr(cld2.pycld2, "detect", refuse)
    assert cld2.cld2_languages(ENGLISH) == []
    assert grouped("cld2_en_doc_v2", ENGLISH)["en"] == [[0, len(ENGLISH), 0.0]]


def test_paragraph_spans_are_dolmas_paragraphs_and_the_doc_score_weighs_them():
    text = f"{ENGLISH}\n\n   \n{GERMAN}\n{ENGLISH}"
    # Each paragraph keeps its newline; the blank lines between are no paragraph.
    a, g = len(ENGLISH) + 1, text.index(GERMAN)
    b = g + len(GERMAN) + 1
    para = grouped("cld2_en_paragraph_v2", text)
    spans = [(s, e) for s, e, _ in para["en"]]
    assert spans == [(0, a), (g, b), (b, len(text))]
    assert [(s, e) for s, e, _ in para["not_en"]] == spans
    en = [score for _, _, score in para["en"]]
    assert en[0] > 0.9 and en[1] == 0.0 and en[2] > 0.9
    assert all(abs(n + e - 1) < 1e-9 for (_, _, n), e in zip(para["not_en"], en))
    both = grouped("cld2_en_paragraph_with_doc_score_v2", text)
    expected = sum((e - s) * score for s, e, score in para["en"]) / len(text)
    assert both["doc_en"][0][2] == pytest.approx(expected, abs=1e-5)
    assert both["doc_not_en"][0][2] == pytest.approx(1 - expected, abs=1e-5)
    languages = grouped("cld2_paragraph_v2", text)
    assert [s for s, _, _ in languages["ge"]] == [g]


def test_tag_cli_on_several_sources(tmp_path):
    from tests.support.cli import run_cli

    sources = ["debian-handbook", "fortunes"]
    documents = [str(REPO_ROOT / "examples" / "sample" / "documents" / s / "*") for s in sources]
    run_cli("tag", "--documents", *documents, "--taggers", "cld2_en_doc_v2", "--destination", str(tmp_path), "--processes", "2", check=True)
    key = "cld2_en_doc_v2__cld2_en_doc_v2__"
    for source in sources:
        docs = {}
        for path in storage.glob(documents[sources.index(source)]):
            docs.update({d["id"]: d["text"] for _, d in read_documents(path)})
        rows = []
        for path in sorted(storage.glob(str(tmp_path / "cld2_en_doc_v2" / source / "*.jsonl.*"))):
            rows += [r for _, r in read_attribute_rows(path)]
        assert len(rows) == len(docs) > 100
        for row in rows:
            [[s, e, en]] = row["attributes"][key + "en"]
            assert (s, e) == (0, len(docs[row["id"]])) and row["attributes"][key + "not_en"] == [[0, e, round(1 - en, 5)]]
        # The handbook's English chapters are English to CLD2.
        if source == "debian-handbook":
            assert sum(r["attributes"][key + "en"][0][2] > 0.5 for r in rows) > len(rows) / 3
