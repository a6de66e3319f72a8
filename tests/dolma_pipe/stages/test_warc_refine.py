"""The ``resiliparse_refined`` extractor (``dolma_pipe.stages.warc.refine``): resiliparse's text of
the whole page, each line kept or dropped by the line model fitted on WCXB dev."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

import numpy as np
import pytest

from dolma_pipe._rust import LineFilter, line_features
from dolma_pipe.stages.warc.extract import Extractor, Resiliparse
from dolma_pipe.stages.warc.refine import FEATURES, LineModel, ResiliparseRefined, page_lines

ARTICLE = [
    "The river authority said on Tuesday that the new flood barrier, built over three winters at a cost of "
    "forty million pounds, had held back the highest tide recorded in the estuary since records began.",
    "Engineers had warned for a decade that the old embankment, raised after the storms of 1953, would not "
    "survive another surge of that size, and the council had twice delayed the work for lack of money.",
    "Residents of the low streets near the harbour, who were moved to the school hall as a precaution, were "
    "allowed to return home by the evening once the water had fallen below the level of the quay.",
    "The authority will publish a full report on the barrier's performance in the spring, and it expects to "
    "extend the same design along the northern shore, where the gardens flooded last year.",
]

PAGE = (
    "<html><head><title>Flood barrier holds back record tide | The Estuary News</title></head><body>"
    "<div id='cookie-banner'><p>We use cookies to improve your experience. By continuing to browse you accept "
    "our use of cookies.</p><button>Accept all cookies</button><button>Manage settings</button></div>"
    "<header><nav class='menu'><ul>"
    + "".join(f"<li><a href='/{s.lower()}'>{s}</a></li>" for s in ("Home", "News", "Sport", "Weather", "Business", "Contact"))
    + "</ul></nav></header>"
    "<main><article><h1>Flood barrier holds back record tide</h1>"
    + "".join(f"<p>{p}</p>" for p in ARTICLE)
    + "<div class='share-buttons'><ul>"
    + "".join(f"<li><a href='https://{s.lower()}.com/share'>Share on {s}</a></li>" for s in ("Facebook", "Twitter", "LinkedIn", "Email"))
    + "</ul></div></article></main>"
    "<aside class='related'><h3>Related stories</h3><ul>"
    + "".join(f"<li><a href='/news/{i}'>Harbour wall repairs delayed again, part {i}</a></li>" for i in range(5))
    + "</ul></aside>"
    "<footer><ul><li><a href='/privacy'>Privacy policy</a></li><li><a href='/terms'>Terms of use</a></li>"
    "<li><a href='/about'>About us</a></li></ul><p>Copyright 2024 The Estuary News. All rights reserved.</p></footer>"
    "</body></html>"
)

BOILERPLATE = ["cookies", "Sport", "Weather", "Share on", "Related stories", "Harbour wall", "Privacy policy", "Copyright"]


@pytest.fixture(scope="module")
def refined() -> ResiliparseRefined:
    return ResiliparseRefined()


def test_keeps_the_article_and_drops_the_boilerplate(refined):
    text = refined.extract(PAGE)
    assert all(p in text for p in ARTICLE)
    assert [b for b in BOILERPLATE if b in text] == []
    # the lines the model judges are the whole page's: it is the model that drops the boilerplate
    assert all(b in refined.extract(PAGE, deep=True) for b in BOILERPLATE)
    assert refined.extract(PAGE) == text  # deterministic


def test_paragraphs_stay_apart_and_empty_pages_give_nothing(refined):
    text = refined.extract(PAGE)
    assert "\n\n".join(ARTICLE) in text
    assert refined.extract("") == "" and refined.extract("<html><body></body></html>") == ""
    assert isinstance(refined, Extractor) and refined.name == "resiliparse_refined" and refined.depth_quadratic


def test_deep_pages_get_the_whole_text_unfiltered(refined):
    text = refined.extract(PAGE, deep=True)
    assert all(p in text for p in ARTICLE) and "Privacy policy" in text


def test_features_line_up_with_the_lines():
    lines, raws, blanks, x, main = page_lines(PAGE)
    assert x.shape == (len(lines), len(FEATURES)) and len(raws) == len(blanks) == len(lines)
    col = FEATURES.index("in_main")
    assert x[lines.index(ARTICLE[0]), col] == 1.0
    assert x[[i for i, line in enumerate(lines) if "Privacy policy" in line][0], FEATURES.index("outside_boilerplate")] == 0.0
    assert np.isfinite(x).all() and ARTICLE[0] in main


def test_the_boilerplate_selector_list_skips_what_each_selector_does():
    """The boilerplate-less text is linearized with one selector list (faster); each tag and each
    class word must drop what its own selector drops, and nothing else."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    from dolma_pipe.stages.warc import refine

    kinds = [f"<{tag}>in {tag}</{tag}>" for tag in refine._BOILERPLATE_TAGS]
    kinds += [f"<div class='x-{word}s y'>class {word}</div>" for word in refine._BOILERPLATE_CLASSES]
    kinds += ["<div class='Comment'>capital class</div>", "<section id='menu'>an id, not a class</section>"]
    page = "<html><body>" + "".join(f"<p>kept {i}</p>{k}" for i, k in enumerate(kinds)) + "</body></html>"
    tree = HTMLTree.parse(page)
    one_by_one = refine._BOILERPLATE_TAGS + [f'[class*="{word}"]' for word in refine._BOILERPLATE_CLASSES]
    expected = extract_plain_text(tree, main_content=False, skip_elements=one_by_one, **refine._SETTINGS)
    outside = refine._texts(page, tree).outside
    assert outside == expected
    assert all(f"kept {i}" in outside for i in range(len(kinds)))
    assert "in nav" not in outside and "class cookie" not in outside and "capital class" in outside
    assert "an id, not a class" in outside


def test_boilerplate_words_are_whole_words_of_short_lines():
    """A line of up to 80 characters holds a boilerplate word when the word stands between spaces or
    punctuation (no hyphen: "e-mail" is one word), whatever its case; a longer word or line that
    only contains one does not."""
    found = {
        "Follow us on Mastodon": 1.0,
        "Sharply rising tides": 0.0,
        "Homework for the week": 0.0,
        "Hashtag trends in timeshare rentals": 0.0,
        "(Comments)": 1.0,
        "Send by e-mail": 1.0,
        "Read the e-mailing list": 0.0,
        "Filed under TAG:history": 1.0,
        "\u00a9\u00a0COPYRIGHT\u2014the estuary": 1.0,
        "A long sentence about the harbour that mentions share prices and runs well past eighty characters": 0.0,
    }
    items = "".join(f"<li>Contact the desk {i}</li>" for i in range(2))  # bulleted: judged without the bullet
    page = "<html><body>" + "".join(f"<p>{line}</p>" for line in found) + f"<ul>{items}</ul></body></html>"
    lines, _, _, x, _ = page_lines(page)
    col = FEATURES.index("boilerplate")
    got = {line: x[i, col] for i, line in enumerate(lines)}
    assert {line: got[line] for line in found} == found
    assert [got[f"\u2022 Contact the desk {i}"] for i in range(2)] == [1.0, 1.0]


def test_lines_words_and_lengths_follow_pythons_str_methods():
    """The Rust core splits, strips and counts as Python does, on the whitespace Python knows and
    Rust's own ``trim`` does not (\\x1c-\\x1f), a line separator that is not a line break (\\u2028),
    and characters that change length when lower-cased."""
    rng = random.Random(7)
    alphabet = ["ab", "Z", " ", "\t", ".", ")", "\u2022", "\u2022 ", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000", "\r"]
    alphabet += ["\u0130", "\u03a3", "e\u0301", "\U0001f600", "\u201d", "share", "e-mail", "Home:"]
    for _ in range(200):
        full = "\n".join("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(rng.randint(0, 30)))
        lines, raws, blanks, x = line_features(full, full.lower(), full, "", [])
        rows = full.split("\n")
        kept = [i for i, row in enumerate(rows) if row.strip()]
        assert lines == [rows[i].strip() for i in kept] and raws == [rows[i].rstrip() for i in kept]
        assert blanks == [i == 0 or not rows[i - 1].strip() for i in kept]
        features = np.frombuffer(x).reshape(len(lines), len(FEATURES))
        bodies = [line[1:].lstrip() if line[0] == "\u2022" else line for line in lines]
        assert np.array_equal(features[:, FEATURES.index("log_words")], [math.log(1 + len(b.split())) for b in bodies])
        assert np.array_equal(features[:, FEATURES.index("chars_per_word")], [len(b) / max(len(b.split()), 1) for b in bodies])
        assert (features[:, FEATURES.index("in_main")] == 1.0).all()  # main is the same text


def test_a_model_with_other_features_is_refused(tmp_path):
    with open(LineModel.PATH, encoding="utf-8") as f:
        spec = json.load(f)
    with pytest.raises(ValueError, match="features"):
        LineModel({**spec, "features": FEATURES[:-1]}, "m.json")
    with pytest.raises(ValueError, match="complete trees"):
        LineModel({**spec, "leaf": [row[:-1] for row in spec["leaf"]]}, "m.json")


def test_a_page_whose_lines_are_mostly_dropped_gets_resiliparses_main_content():
    with open(LineModel.PATH, encoding="utf-8") as f:
        spec = json.load(f)
    assert 0.0 <= spec["fallback_share"] <= 1.0
    none_kept = ResiliparseRefined()
    none_kept.model = LineModel({**spec, "threshold": 1e9, "fallback_share": 0.5}, "m.json")
    assert none_kept.extract(PAGE) == Resiliparse().extract(PAGE)
    none_kept.model = LineModel({**spec, "threshold": 1e9, "fallback_share": 0.0}, "m.json")
    assert none_kept.extract(PAGE) == ""


def test_the_trees_score_as_a_walk_down_the_models_json():
    """The Rust core's trees (``LineModel.log_odds``) against a plain walk of ``refine_model.json``:
    at each split a row goes right when its feature is above the threshold, and a row's log-odds
    is the base plus its leaves."""
    with open(LineModel.PATH, encoding="utf-8") as f:
        spec = json.load(f)
    x = np.random.default_rng(0).uniform(-0.5, 4.0, size=(200, len(FEATURES)))
    splits = 2 ** spec["depth"] - 1

    def walk(row: np.ndarray) -> float:
        total = spec["base"]
        for feature, threshold, leaf in zip(spec["split_feature"], spec["split_threshold"], spec["leaf"]):
            node = 0
            for _ in range(spec["depth"]):
                node = 2 * node + 1 + int(row[feature[node]] > threshold[node])
            total += leaf[node - splits]
        return total

    assert np.allclose(LineModel.load().log_odds(x), [walk(row) for row in x], rtol=0, atol=1e-12)


def test_malformed_input_to_the_rust_filter_is_a_value_error():
    model = LineModel.load()
    with pytest.raises(ValueError, match="rows of 25"):
        model.filter.log_odds(b"\0" * 8)
    with pytest.raises(ValueError, match="full.lower"):
        model.filter.extract("a\nb", "a", "", "", [])
    with pytest.raises(ValueError, match="split feature 99"):
        LineFilter(1, 0.0, [[99]], [[0.5]], [[-1.0, 1.0]], 0.0, 0.5)


def test_a_page_of_long_lines_only(refined):
    paragraph = " ".join(ARTICLE)  # over 80 characters: no line is looked at for boilerplate words
    assert refined.extract(f"<html><body><article><p>{paragraph}</p></article></body></html>") == paragraph


def test_a_linearizer_choice_of_the_stage_through_its_sandbox(tmp_path):
    """``linearizer: resiliparse_refined`` in a run: the extraction child imports :mod:`.refine`
    before :mod:`.extract` (the class's path), the documents name it, and a page's paragraphs are
    kept; :mod:`.extract` alone does not load it (nor numpy's model) until it is chosen."""
    import random

    from tests.support.warc import html_page, paragraphs, read_records, response, run, write_warc

    pages = [paragraphs(random.Random(seed), 6) for seed in (1, 2)]
    records = [response(f"https://r.example.org/{i}", html_page(f"Page {i}", paras), text=paras) for i, paras in enumerate(pages)]
    write_warc(tmp_path / "in" / "pages.warc.gz", records)
    out = tmp_path / "out"
    run({"documents": [str(tmp_path / "in" / "*")], "destination": str(out), "processes": 1, "linearizer": "resiliparse_refined"})
    docs = {d["metadata"]["warc_url"]: d for d in read_records(out / "documents" / "pages.jsonl.gz")}
    for rec in records:
        assert docs[rec.url]["metadata"]["extractor"] == "resiliparse_refined"
        assert all(p in docs[rec.url]["text"] for p in rec.text), rec.url
    code = "import sys; import dolma_pipe.stages.warc.extract as e; assert 'dolma_pipe.stages.warc.refine' not in sys.modules; print(type(e.EXTRACTORS['resiliparse_refined']()).__name__)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "ResiliparseRefined"
    # Extracting needs no numpy (only fitting and probing do): the extractor's process never imports it.
    code = (
        "import sys; from dolma_pipe.stages.warc.extract import EXTRACTORS; x = EXTRACTORS['resiliparse_refined']();"
        f" text = x.extract({html_page('T', pages[0])!r}); assert 'numpy' not in sys.modules; print(len(text) > 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "True"
