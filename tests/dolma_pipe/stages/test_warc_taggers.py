"""The warc stage's pre and post taggers on pages these tests write: ``skip`` (Dolma's: a record no
tagger gives a span is not written), a tagger failing on one document (that record quarantined,
the others written, every attribute file row for row with the documents), across batches of
pages and several files. One process: the taggers here are registered in this process only."""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from taggers import registry
from taggers.base import Document, Span, Tagger
from tests.support.warc import html_page, paragraphs, read_records, response, run, write_warc

MARK = "Zanzibarite"  # in some pages: the marker tagger's span
BOOM = "Kaboomery"  # in some pages: the fragile tagger raises on them


@registry.register("test_warc_marker")
class MarkerTagger(Tagger):
    """A span over each occurrence of :data:`MARK`; none elsewhere."""

    description = "test: spans over a marker word"

    def predict(self, doc: Document) -> list[Span]:
        spans, at = [], doc.text.find(MARK)
        while at >= 0:
            spans.append(Span("mark", at, at + len(MARK), 1.0))
            at = doc.text.find(MARK, at + 1)
        return spans


@registry.register("test_warc_fragile")
class FragileTagger(Tagger):
    """The document's length, or a ``ValueError`` on a document holding :data:`BOOM`."""

    description = "test: raises on one word"

    def predict(self, doc: Document) -> list[Span]:
        if BOOM in doc.text:
            raise ValueError(f"cannot tag a document with {BOOM}")
        return [Span("len", 0, len(doc.text), float(len(doc.text)))]


@pytest.fixture(autouse=True)
def url_list_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DOLMA_PIPE_CACHE", str(tmp_path_factory.getbasetemp() / "url-list-cache"))


@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> tuple[Path, dict[str, dict[str, str]]]:
    """Two files of 90 pages (more than one batch of the extractor each); every 3rd page holds the
    marker, every 7th the word the fragile tagger fails on. Returns the root and, by URL, each page's kind."""
    root = tmp_path_factory.mktemp("tagged")
    kinds: dict[str, dict[str, str]] = {}
    for f in range(2):
        rng, records = random.Random(f), []
        for i in range(90):
            url = f"https://t{f}.example.org/page/{i}"
            paras = paragraphs(rng, 4)
            kind = {"mark": "", "boom": ""}
            if i % 3 == 0:
                paras[1] += f" {MARK}"
                kind["mark"] = "yes"
            if i % 7 == 0:
                paras[2] += f" {BOOM}"
                kind["boom"] = "yes"
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


def _counts(summary) -> Counter:
    return sum((Counter(t.counts) for t in summary.manifest.phases[0].tasks.values()), Counter())


def test_a_failing_tagger_quarantines_its_record_and_the_rows_stay_aligned(crawl, tmp_path):
    root, kinds = crawl
    names = ["test_warc_fragile", "test_warc_marker"]
    out = tmp_path / "out"
    summary = run({"documents": [str(root / "in" / "*")], "destination": str(out), "processes": 1, "post": {"taggers": names}})
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
    summary = run(
        {
            "documents": [str(root / "in" / "*")],
            "destination": str(out),
            "processes": 1,
            "post": {"taggers": ["test_warc_marker"], "skip": True},
        }
    )
    docs, rows = _outputs(out, ["test_warc_marker"])
    marked = {u for u, k in kinds.items() if k["mark"]}
    assert {d["metadata"]["warc_url"] for d in docs} == marked
    assert [r["id"] for r in rows["test_warc_marker"]] == [d["id"] for d in docs]
    counts = _counts(summary)
    assert counts["skipped_post_taggers"] == len(kinds) - len(marked) and counts["written"] == len(marked)
