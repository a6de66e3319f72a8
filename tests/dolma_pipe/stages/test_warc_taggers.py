"""The warc stage's pre and post taggers on pages these tests write: ``skip`` (Dolma's: a record no
tagger gives a span is not written), a tagger failing on one document (that record quarantined,
the others written, every attribute file row for row with the documents), across batches of
pages and several files. The taggers are a user's module (``tagger_modules``), which every worker
process loads, and take ``tagger_options``."""

from __future__ import annotations

import gzip
import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest

from dolma_pipe.stages.warc import WarcError
from tests.support.outputs import stage_outputs
from tests.support.warc import html_page, paragraphs, read_records, response, run, write_warc

MODULE = str(Path(__file__).parent / "data" / "warc_user_taggers.py")
MARK = "Zanzibarite"  # in some pages: the marker tagger's span (its default word)
OTHER = "Quokkaland"  # in other pages: the marker's span when its options name this word
BOOM = "Kaboomery"  # in some pages: the fragile tagger raises on them


@pytest.fixture(autouse=True)
def url_list_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DOLMA_PIPE_CACHE", str(tmp_path_factory.getbasetemp() / "url-list-cache"))


@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> tuple[Path, dict[str, dict[str, str]]]:
    """Two files of 90 pages (more than one batch of the extractor each); every 3rd page holds the
    marker, every 7th the word the fragile tagger fails on, every 5th the other word. Returns the root and, by URL, each page's kind."""
    root = tmp_path_factory.mktemp("tagged")
    kinds: dict[str, dict[str, str]] = {}
    for f in range(2):
        rng, records = random.Random(f), []
        for i in range(90):
            url = f"https://t{f}.example.org/page/{i}"
            paras = paragraphs(rng, 4)
            kind = {"mark": "", "boom": "", "other": ""}
            if i % 3 == 0:
                paras[1] += f" {MARK}"
                kind["mark"] = "yes"
            if i % 7 == 0:
                paras[2] += f" {BOOM}"
                kind["boom"] = "yes"
            if i % 5 == 0:
                paras[3] += f" {OTHER}"
                kind["other"] = "yes"
            kinds[url] = kind
            records.append(response(url, html_page(f"Page {f}-{i}", paras)))
        write_warc(root / "in" / f"part-{f}.warc.gz", records)
    return root, kinds


def _outputs(out: Path, names: list[str]) -> tuple[list[dict], dict[str, list[dict]]]:
    docs = [d for p in sorted((out / "documents").glob("*.jsonl.gz")) for d in read_records(p)]
    rows = {
        n: [json.loads(line) for p in sorted((out / "attributes" / n).glob("*.jsonl.gz")) for line in gzip.open(p, "rt")] for n in names
    }
    return docs, rows


def _run(root: Path, out: Path, **config):
    """The stage on the crawl's files with 2 processes and the user's module, plus ``config``."""
    return run({"documents": [str(root / "in" / "*")], "destination": str(out), "processes": 2, "tagger_modules": [MODULE], **config})


def _counts(summary) -> Counter:
    return sum((Counter(t.counts) for t in summary.manifest.phases[0].tasks.values()), Counter())


def test_a_failing_tagger_quarantines_its_record_and_the_rows_stay_aligned(crawl, tmp_path):
    root, kinds = crawl
    names = ["test_warc_fragile", "test_warc_marker"]
    out = tmp_path / "out"
    summary = _run(root, out, post={"taggers": names})
    docs, rows = _outputs(out, names)
    booms = {u for u, k in kinds.items() if k["boom"]}
    assert {d["metadata"]["warc_url"] for d in docs} == set(kinds) - booms
    counts = _counts(summary)
    assert counts["quarantined"] == len(booms) and counts["written"] == len(docs)
    for name in names:  # one row a document, in the documents' order
        assert [r["id"] for r in rows[name]] == [d["id"] for d in docs], name
    for d, fragile, marker in zip(docs, rows["test_warc_fragile"], rows["test_warc_marker"]):
        assert fragile["attributes"]["test_warc_fragile__test_warc_fragile__len"] == [[0, len(d["text"]), float(len(d["text"]))]]
        marks = marker["attributes"].get("test_warc_marker__test_warc_marker__mark", [])
        assert len(marks) == (1 if kinds[d["metadata"]["warc_url"]]["mark"] else 0)
        for start, end, _ in marks:
            assert d["text"][start:end] == MARK
    quarantined = [json.loads(line) for p in (out / "_errors").rglob("*.jsonl") for line in p.open()]
    assert len(quarantined) == len(booms)
    assert all(r["kind"] == "tagger_error" and BOOM in r["message"] and "post_taggers" in r["message"] for r in quarantined)


def test_skip_leaves_out_the_records_no_tagger_gives_a_span(crawl, tmp_path):
    root, kinds = crawl
    out = tmp_path / "out"
    summary = _run(root, out, post={"taggers": ["test_warc_marker"], "skip": True})
    docs, rows = _outputs(out, ["test_warc_marker"])
    marked = {u for u, k in kinds.items() if k["mark"]}
    assert {d["metadata"]["warc_url"] for d in docs} == marked
    assert [r["id"] for r in rows["test_warc_marker"]] == [d["id"] for d in docs]
    counts = _counts(summary)
    assert counts["skipped_post_taggers"] == len(kinds) - len(marked) and counts["written"] == len(marked)


def test_tagger_options_reach_the_workers_and_a_pre_tagger_sees_the_html(crawl, tmp_path):
    """A pre-tagger sees the record before extraction (Dolma's pre: the text empty, so the fragile
    tagger gives a length of 0 and never fails); the post-tagger marks the word ``tagger_options``
    names; two worker processes."""
    root, kinds = crawl
    out = tmp_path / "out"
    summary = _run(
        root,
        out,
        tagger_options={"test_warc_marker": {"word": OTHER}},
        pre={"taggers": ["test_warc_fragile"]},
        post={"taggers": ["test_warc_marker"]},
    )
    docs, rows = _outputs(out, ["test_warc_fragile", "test_warc_marker"])
    assert _counts(summary)["written"] == len(docs) == len(kinds)  # the pre-tagger sees no text: nothing fails
    for d, pre, marker in zip(docs, rows["test_warc_fragile"], rows["test_warc_marker"]):
        assert pre["id"] == marker["id"] == d["id"]
        assert pre["attributes"]["test_warc_fragile__test_warc_fragile__len"] == [[0, 0, 0.0]]
        marks = marker["attributes"].get("test_warc_marker__test_warc_marker__mark", [])
        assert len(marks) == (1 if kinds[d["metadata"]["warc_url"]]["other"] else 0)
        assert all(d["text"][start:end] == OTHER for start, end, _ in marks)


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"tagger_modules": ["no/such/taggers.py"]}, "tagger_modules: tagger module {cwd}/no/such/taggers.py does not exist"),
        ({"tagger_modules": [MODULE], "tagger_options": {"test_warc_marker": {"word": ""}}}, "tagger_options.test_warc_marker.word"),
        ({"tagger_modules": [MODULE], "tagger_options": {"test_warc_fragile": {}}}, "'tagger_options' names taggers that do not run"),
        ({"tagger_modules": [MODULE], "post": {"taggers": ["test_warc_nonesuch"]}}, "pre.taggers / post.taggers: "),
    ],
)
def test_a_bad_tagger_module_or_option_fails_before_any_file_is_read(crawl, tmp_path, overrides, says):
    root, _ = crawl
    config = {"documents": [str(root / "in" / "*")], "destination": str(tmp_path / "out"), "post": {"taggers": ["test_warc_marker"]}}
    with pytest.raises(WarcError) as failed:
        run({**config, **overrides})
    assert says.format(cwd=os.getcwd()) in str(failed.value)  # a relative module path: made absolute, as workers elsewhere need
    assert not (tmp_path / "out").exists()


class TestOnRay:
    """Ray's workers are not forks of this process: each loads the user's module itself (a class
    of its own: see tests/conftest.py's scheduling)."""

    @pytest.mark.ray
    def test_a_user_module_and_its_options_on_ray(self, crawl, tmp_path, ray_address):
        from dolma_pipe.executors import RayExecutor

        root, kinds = crawl
        config = {
            "documents": [str(root / "in" / "*")],
            "processes": 2,
            "added": "2026-01-02T03:04:05Z",
            "tagger_modules": [MODULE],
            "tagger_options": {"test_warc_marker": {"word": OTHER}},
            "post": {"taggers": ["test_warc_fragile", "test_warc_marker"]},
        }
        run({**config, "destination": str(tmp_path / "local")})
        with RayExecutor(2, ray_address) as ex:
            run({**config, "destination": str(tmp_path / "ray"), "ray_address": ray_address}, executor=ex)
        assert stage_outputs(tmp_path / "ray") == stage_outputs(tmp_path / "local")
        docs, rows = _outputs(tmp_path / "ray", ["test_warc_marker"])
        marked = [bool(r["attributes"]) for r in rows["test_warc_marker"]]
        assert marked == [bool(kinds[d["metadata"]["warc_url"]]["other"]) for d in docs] and any(marked)
