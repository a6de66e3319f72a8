"""``dolma-pipe pdf``: local PDF files into Dolma documents, one task per file, every file
accounted for (written, skipped with its reason, or quarantined with the file named), ids from the
path and the content, ``created`` from the PDF's own date, the same bytes in the extractor's child
process and in the worker, and on a rerun."""

from __future__ import annotations

import json

import pytest

from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.pdf import PdfConfig, PdfStage, document_id
from tests.support.warc import make_pdf, read_records

PAGES = [["Report on rivers and bridges.", "First page, a pro-", "cess hyphenated."], ["The second page of the report."]]


def _run(overrides: dict):
    config = load_config(PdfConfig, None, {"source_name": "papers", "progress": False, "processes": 1, **overrides})
    return run_stage(PdfStage(config))


@pytest.fixture
def pdfs(tmp_path):
    root = tmp_path / "in"
    (root / "reports").mkdir(parents=True)
    dated = make_pdf(PAGES).replace(b"/Root 1 0 R >>", b"/Root 1 0 R /Info << /CreationDate (D:20240501123456+02'00') >> >>")
    (root / "reports" / "rivers.pdf").write_bytes(dated)
    (root / "plain.PDF").write_bytes(make_pdf([["A short note without a date."]]))
    (root / "scanned.pdf").write_bytes(make_pdf([[]]))  # pages, no text layer
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 50)
    (root / "page.pdf").write_bytes(b"<html><body>not a PDF</body></html>")
    return root


def test_pdf_files_become_documents_every_file_counted(pdfs, tmp_path):
    out = tmp_path / "out"
    summary = _run({"documents": [str(pdfs / "**" / "*.[pP][dD][fF]")], "destination": str(out), "added": "2026-01-02T03:04:05Z"})
    tasks = summary.manifest.phases[0].tasks
    assert {rel: t.counts.get("written", 0) for rel, t in tasks.items()} == {
        "reports/rivers.pdf": 1,
        "plain.PDF": 1,
        "scanned.pdf": 0,
        "broken.pdf": 0,
        "page.pdf": 0,
    }
    assert tasks["scanned.pdf"].counts["skipped_empty_text"] == 1
    assert tasks["broken.pdf"].errors == {"extractor_error": 1} and tasks["page.pdf"].errors == {"not_pdf": 1}
    errors = [json.loads(line) for p in (out / "_errors").rglob("*") if p.is_file() for line in p.read_text().splitlines()]
    assert {e["kind"]: e["message"].split(":")[0] for e in errors} == {
        "extractor_error": str(pdfs / "broken.pdf"),
        "not_pdf": str(pdfs / "page.pdf"),
    }
    (doc,) = read_records(out / "documents" / "reports" / "rivers.jsonl.gz")
    data = (pdfs / "reports" / "rivers.pdf").read_bytes()
    assert doc["text"].index("First page") < doc["text"].index("The second page") and "\n\n" in doc["text"]
    assert "a process hyphenated." in doc["text"]  # pdfium's line-end hyphen (U+0002) joins the word again
    assert doc["created"] == "2024-05-01T10:34:56.000Z" and doc["added"] == "2026-01-02T03:04:05.000Z"
    assert doc["id"] == document_id("reports/rivers.pdf", doc["metadata"]["sha256"])
    assert doc["metadata"] == {
        "path": str(pdfs / "reports" / "rivers.pdf"),
        "bytes": len(data),
        "sha256": doc["metadata"]["sha256"],
        "content_type": "application/pdf",
        "extractor": "pypdfium2",
    }
    (note,) = read_records(out / "documents" / "plain.jsonl.gz")
    assert "created" not in note and note["source"] == "papers"
    assert not (out / "documents" / "scanned.jsonl.gz").exists()
    # A rerun does nothing; the worker's own pdfium (no child) writes the same bytes.
    again = _run({"documents": [str(pdfs / "**" / "*.[pP][dD][fF]")], "destination": str(out), "added": "2026-01-02T03:04:05Z"})
    assert all(not t.counts or t.counts == tasks[rel].counts for rel, t in again.manifest.phases[0].tasks.items())
    inline = tmp_path / "inline"
    _run(
        {"documents": [str(pdfs / "**" / "*.[pP][dD][fF]")], "destination": str(inline), "added": "2026-01-02T03:04:05Z", "isolate": False}
    )
    # Two forked workers, each with a child of its own (not the one this process started above).
    forked = tmp_path / "forked"
    _run({"documents": [str(pdfs / "**" / "*.[pP][dD][fF]")], "destination": str(forked), "added": "2026-01-02T03:04:05Z", "processes": 2})
    for name in ("reports/rivers.jsonl.gz", "plain.jsonl.gz"):
        assert (inline / "documents" / name).read_bytes() == (out / "documents" / name).read_bytes()
        assert (forked / "documents" / name).read_bytes() == (out / "documents" / name).read_bytes()


def test_a_pdf_past_max_seconds_is_too_slow_in_the_worker_too(tmp_path):
    # Without a child process (isolate: false) nothing stopped pdfium: a PDF of many pages ran on
    # past max_seconds and was written. The time is checked between pages.
    root = tmp_path / "in"
    root.mkdir()
    (root / "long.pdf").write_bytes(make_pdf([[f"Page {i} of a long report."] for i in range(300)]))
    (root / "short.pdf").write_bytes(make_pdf([["One page."]]))
    run = {"documents": [str(root / "*.pdf")], "isolate": False, "added": "2026-01-02T03:04:05Z"}
    tasks = _run({**run, "destination": str(tmp_path / "fast"), "max_seconds": 1e-4}).manifest.phases[0].tasks
    assert tasks["long.pdf"].counts.get("skipped_too_slow") == 1 and not (tmp_path / "fast" / "documents" / "long.jsonl.gz").exists()
    tasks = _run({**run, "destination": str(tmp_path / "slow")}).manifest.phases[0].tasks
    assert tasks["long.pdf"].counts["written"] == 1 and tasks["short.pdf"].counts["written"] == 1
