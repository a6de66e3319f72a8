"""Object storage: documents and a whole stage run against a real S3 server on loopback."""

from __future__ import annotations

import boto3
import orjson
import pytest

from dolma_pipe import storage
from dolma_pipe.documents import read_documents, write_documents
from dolma_pipe.quarantine import Quarantine
from tests.support.cli import run_cli
from tests.support.documents import make_docs


@pytest.mark.parametrize("ext", ["jsonl.gz", "jsonl.zst", "parquet", "jsonl"])
def test_s3_round_trip(s3_bucket, ext):
    docs = make_docs(200)
    path = f"s3://{s3_bucket}/x/documents/part.{ext}"
    write_documents(path, docs)
    assert [d for _, d in read_documents(path)] == docs
    assert storage.stat(path).size > 0


def test_s3_glob(s3_bucket):
    for rel in ["a/1.jsonl", "a/2.jsonl", "b/3.jsonl", "b/c/4.jsonl", "skip.txt"]:
        storage.write_bytes(f"s3://{s3_bucket}/documents/{rel}", b"{}\n")
    base = f"s3://{s3_bucket}/documents"
    assert storage.glob(f"{base}/*/*.jsonl") == [f"{base}/a/1.jsonl", f"{base}/a/2.jsonl", f"{base}/b/3.jsonl"]
    assert len(storage.glob(f"{base}/**/*.jsonl")) == 4
    assert storage.glob(f"{base}/a/1.jsonl") == [f"{base}/a/1.jsonl"]
    assert storage.glob(f"{base}/a/none.jsonl") == []


def test_failed_s3_write_leaves_no_object(s3_bucket):
    path = f"s3://{s3_bucket}/documents/never.jsonl"
    with pytest.raises(RuntimeError):
        with storage.open_write_atomic(path) as fh:
            fh.write(b"x" * 1000)
            raise RuntimeError("killed mid-write")
    assert not storage.exists(path)


def test_truncated_object_is_quarantined(s3_bucket):
    data = b"".join(orjson.dumps(d) + b"\n" for d in make_docs(500))
    import gzip

    gz = gzip.compress(data)
    boto3.client("s3").put_object(Bucket=s3_bucket, Key="documents/cut.jsonl.gz", Body=gz[: len(gz) // 2])
    q = Quarantine()
    docs = [d for _, d in read_documents(f"s3://{s3_bucket}/documents/cut.jsonl.gz", q)]
    assert 0 < len(docs) < 500 and q.counts["truncated_archive"] == 1


def test_cli_convert_s3_to_s3(s3_bucket, s3_server):
    for i in range(3):
        write_documents(f"s3://{s3_bucket}/in/documents/p{i}.jsonl.gz", make_docs(30, seed=i))
    env = {"AWS_ENDPOINT_URL": s3_server}
    dest = f"s3://{s3_bucket}/out"
    proc = run_cli(
        "convert",
        "--documents",
        f"s3://{s3_bucket}/in/documents/*.jsonl.gz",
        "--destination",
        dest,
        "--format",
        "jsonl.zst",
        "--processes",
        "2",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert [d for _, d in read_documents(f"{dest}/documents/p1.jsonl.zst")] == make_docs(30, seed=1)
    manifest = orjson.loads(storage.read_bytes(f"{dest}/_manifest.json"))
    assert manifest["status"] == "complete" and len(manifest["inputs"]) == 3
    again = run_cli(
        "convert",
        "--documents",
        f"s3://{s3_bucket}/in/documents/*.jsonl.gz",
        "--destination",
        dest,
        "--format",
        "jsonl.zst",
        "--processes",
        "2",
        env=env,
    )
    assert "3 already done" in again.stderr


def test_a_remote_filter_rewritten_in_the_same_second_is_downloaded_again(s3_bucket):
    """S3 times have whole seconds and a filter's size never changes: the local cache of a remote
    Bloom filter is keyed on the object's ETag too, or it would serve the old filter."""
    from dolma_pipe.stages.dedup.bloommode import local_copy

    path = f"s3://{s3_bucket}/f.bloom"
    for content in (b"a" * 4096, b"b" * 4096, b"c" * 4096):
        storage.write_bytes(path, content)
        with open(local_copy(path), "rb") as fh:
            assert fh.read() == content
