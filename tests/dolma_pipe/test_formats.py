"""Round trips of every document format, deterministic bytes, and format detection."""

from __future__ import annotations

import gzip

import orjson
import pytest
import zstandard

from dolma_pipe.documents import compression_of, read_documents, write_documents
from dolma_pipe.quarantine import Quarantine
from tests.support.documents import make_docs

FORMATS = ["jsonl", "json", "jsonl.gz", "json.gz", "jsonl.zst", "parquet"]


@pytest.mark.parametrize("ext", FORMATS)
def test_round_trip(tmp_path, ext):
    docs = make_docs(300, seed=3)
    docs[5]["text"] = "emoji 🙂 and CJK 中文，漢字。 and newline\nhere"
    docs[6]["metadata"] = {"nested": {"deep": [1, 2.5, None, "x"]}}
    docs[7]["created"] = "2020-02-02"
    path = str(tmp_path / f"docs.{ext}")
    assert write_documents(path, docs) == len(docs)
    q = Quarantine()
    back = [d for _, d in read_documents(path, q)]
    assert q.total == 0
    assert back == docs


@pytest.mark.parametrize("ext", ["jsonl.gz", "jsonl.zst", "parquet", "jsonl"])
def test_writes_are_deterministic(tmp_path, ext):
    docs = make_docs(100)
    a, b = str(tmp_path / f"a.{ext}"), str(tmp_path / f"b.{ext}")
    write_documents(a, docs)
    write_documents(b, docs)
    assert open(a, "rb").read() == open(b, "rb").read()


def test_integer_ids_become_strings(tmp_path):
    path = tmp_path / "ints.jsonl"
    path.write_bytes(b'{"id": 17, "text": "a"}\n{"id": "18", "text": "b"}\n')
    assert [d["id"] for _, d in read_documents(str(path))] == ["17", "18"]


def test_integer_ids_in_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / "ints.parquet")
    pq.write_table(pa.table({"id": [1, 2], "text": ["x", "y"], "source": ["s", "s"]}), path)
    docs = [d for _, d in read_documents(path)]
    assert [d["id"] for d in docs] == ["1", "2"]
    assert docs[0] == {"id": "1", "text": "x", "source": "s"}


def test_multi_member_gzip_and_multi_frame_zstd(tmp_path):
    a = b'{"id": "1", "text": "one"}\n'
    b = b'{"id": "2", "text": "two"}\n'
    gz = tmp_path / "multi.jsonl.gz"
    gz.write_bytes(gzip.compress(a) + gzip.compress(b))
    zst = tmp_path / "multi.jsonl.zst"
    c = zstandard.ZstdCompressor()
    zst.write_bytes(c.compress(a) + c.compress(b))
    for path in (gz, zst):
        assert [d["id"] for _, d in read_documents(str(path))] == ["1", "2"]


def test_reads_foreign_gzip_written_by_stdlib(tmp_path):
    docs = make_docs(20)
    path = tmp_path / "foreign.json.gz"
    with gzip.open(path, "wb") as fh:
        for d in docs:
            fh.write(orjson.dumps(d) + b"\n")
    assert [d for _, d in read_documents(str(path))] == docs


def test_missing_final_newline_and_blank_lines(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"id": "1", "text": "a"}\n\n   \n{"id": "2", "text": "b"}')
    assert [(n, d["id"]) for n, d in read_documents(str(path))] == [(1, "1"), (4, "2")]


@pytest.mark.parametrize(
    "name,kind",
    [("a.jsonl", "none"), ("a.json.gz", "gzip"), ("a.jsonl.zst", "zstd"), ("a.jsonl.zstd", "zstd"), ("a.parquet", "parquet")],
)
def test_compression_detection(name, kind):
    assert compression_of(name) == kind


def test_documents_read_by_other_fields_through_the_one_reader(tmp_path):
    """Dolma's ``fields`` (tokenize): dotted names reach into objects; ids from an integer field
    become strings, and without an id field a document's id is ``<sha256 of the path>-<line>``;
    bad records are quarantined with the field's name, in JSON lines and Parquet alike."""
    import hashlib

    from dolma_pipe.documents import Fields, read_documents, write_documents
    from dolma_pipe.quarantine import Quarantine

    rows = [{"id": "a", "doc": {"body": "one", "key": 7}}, {"doc": {"key": 8}}, {"doc": {"body": 5, "key": 9}}, {"doc": {"body": "four"}}]
    for name in ("f.jsonl.gz", "f.parquet"):
        path = str(tmp_path / name)
        # (Parquet's writer wants a text column; the reader is asked for doc.body.)
        write_documents(path, [{"text": "x", **r} for r in rows] if name.endswith(".parquet") else rows)
        q = Quarantine()
        got = list(read_documents(path, q, Fields(text="doc.body", id="doc.key")))
        assert got == [(1, {"id": "7", "text": "one"})]
        assert dict(q.counts) == {"missing_text": 1, "bad_text": 1, "missing_id": 1}, name
        q = Quarantine()
        digest = hashlib.sha256(path.encode()).hexdigest()
        assert [d["id"] for _, d in read_documents(path, q, Fields(text="doc.body", id=None))] == [f"{digest}-1", f"{digest}-4"]
