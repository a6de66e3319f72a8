"""Documents and attribute files read in lockstep; mismatches refused with file and line."""

from __future__ import annotations

import pytest

from dolma_pipe.attributes import AttributeMismatchError, read_with_attributes
from dolma_pipe.documents import write_documents
from dolma_pipe.paths import attribute_path
from dolma_pipe.quarantine import Quarantine
from tests.support.documents import make_docs


def _setup(tmp_path, n=10):
    doc_path = str(tmp_path / "documents" / "part.jsonl.gz")
    docs = make_docs(n)
    write_documents(doc_path, docs)
    return doc_path, docs


def _attrs(doc_path, name, rows):
    write_documents(attribute_path(doc_path, name), rows)


def test_lockstep_merges_attributes(tmp_path):
    doc_path, docs = _setup(tmp_path)
    _attrs(doc_path, "lang", [{"id": d["id"], "attributes": {"lang__ft__en": [[0, 5, 0.9]]}} for d in docs])
    _attrs(doc_path, "len", [{"id": d["id"], "attributes": {"len__c__n": [[0, 1, float(i)]]}} for i, d in enumerate(docs)])
    rows = list(read_with_attributes(doc_path, ["lang", "len"]))
    assert [r[1]["id"] for r in rows] == [d["id"] for d in docs]
    assert rows[3][2] == {"lang__ft__en": [[0, 5, 0.9]], "len__c__n": [[0, 1, 3.0]]}


def test_mismatched_id_names_files_and_lines(tmp_path):
    doc_path, docs = _setup(tmp_path)
    rows = [{"id": d["id"], "attributes": {}} for d in docs]
    rows[4]["id"] = "someone-else"
    _attrs(doc_path, "x", rows)
    with pytest.raises(AttributeMismatchError) as err:
        list(read_with_attributes(doc_path, ["x"]))
    msg = str(err.value)
    assert "attributes/x/part.jsonl.gz:5" in msg and "documents/part.jsonl.gz:5" in msg and "someone-else" in msg


def test_short_and_long_attribute_files(tmp_path):
    doc_path, docs = _setup(tmp_path)
    _attrs(doc_path, "short", [{"id": d["id"], "attributes": {}} for d in docs[:-1]])
    with pytest.raises(AttributeMismatchError, match="ends before"):
        list(read_with_attributes(doc_path, ["short"]))
    _attrs(doc_path, "long", [{"id": d["id"], "attributes": {}} for d in docs] + [{"id": "extra", "attributes": {}}])
    with pytest.raises(AttributeMismatchError, match="more rows"):
        list(read_with_attributes(doc_path, ["long"]))


def test_bad_document_lines_are_skipped_on_both_sides(tmp_path):
    doc_path = tmp_path / "documents" / "p.jsonl"
    doc_path.parent.mkdir(parents=True)
    doc_path.write_bytes(b'{"id": "a", "text": "x"}\nnot json\n{"id": 7, "text": "y"}\n')
    _attrs(str(doc_path), "t", [{"id": "a", "attributes": {"k": 1}}, {"id": "7", "attributes": {"k": 2}}])
    q = Quarantine()
    rows = list(read_with_attributes(str(doc_path), ["t"], q))
    assert [(n, d["id"], a["k"]) for n, d, a in rows] == [(1, "a", 1), (3, "7", 2)]
    assert q.counts == {"malformed_json": 1}
