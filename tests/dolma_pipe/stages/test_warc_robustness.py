"""Malformed payloads found by bench/warc_robustness.py: each one counted with its reason, never a
hung or dead task."""

from __future__ import annotations

import random

import pytest

from tests.support.warc import html_page, paragraphs, read_records, response, run, write_warc


def _task(summary, name: str):
    (phase,) = summary.manifest.phases
    assert not phase.failures
    task = phase.tasks[name]
    c = task.counts
    assert c["records"] == c["written"] + sum(v for k, v in c.items() if k.startswith("skipped_")) + c.get("quarantined", 0)
    return task


@pytest.mark.timeout(20)  # before the fix, a negative chunk size sent the reader back for ever
def test_chunk_sizes_that_are_not_sizes_end(tmp_path):
    paras = paragraphs(random.Random(4), 3)
    body = html_page("Chunks", paras).encode()
    framings = [
        b"-fff\r\n" + body + b"\r\n0\r\n\r\n",  # a negative size, past the payload's start
        b"%x\r\n%s\r\n-3\r\n%s\r\n0\r\n\r\n" % (len(body), body, b"tail" * 10),  # one after a good chunk
        b"%x\r\n%s\r\n%x" % (len(body), body, 40),  # the payload ends in a size line
    ]
    records = [response(f"https://n.example.org/{i}", f, text=paras[:1]) for i, f in enumerate(framings)]
    for r in records:
        r.headers.append(("Transfer-Encoding", "chunked"))
    write_warc(tmp_path / "in" / "chunks.warc.gz", records)
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    task = _task(summary, "chunks.warc.gz")
    assert task.counts["written"] == 3 and task.counts["payload_damaged"] == 3
    docs = read_records(tmp_path / "out" / "documents" / "chunks.jsonl.gz")
    assert all(paras[0] in d["text"] for d in docs)
