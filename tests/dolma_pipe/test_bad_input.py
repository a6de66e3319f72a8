"""Bad input is counted, quarantined with file and line, summarised, and can fail a run."""

from __future__ import annotations

import gzip

import orjson
import pytest
import zstandard

from dolma_pipe.documents import read_documents, write_documents
from dolma_pipe.quarantine import Quarantine
from tests.support.cli import run_cli
from tests.support.documents import make_docs

GOOD = b'{"id": "g1", "text": "good one"}'


def _read(path):
    q = Quarantine()
    docs = [d for _, d in read_documents(str(path), q)]
    return docs, q


@pytest.mark.parametrize(
    "line,kind",
    [
        (b'{"id": "x", "text": "unterminated', "malformed_json"),
        (b'{"text": "no id"}', "missing_id"),
        (b'{"id": "no-text"}', "missing_text"),
        (b'{"id": "t", "text": 5}', "bad_text"),
        (b'{"id": 1.5, "text": "float id"}', "bad_id"),
        (b'{"id": true, "text": "bool id"}', "bad_id"),
        (b'{"id": 18446744073709551616, "text": "2**64"}', "bad_id"),
        (b'{"id": -9223372036854775809, "text": "-2**63 - 1"}', "bad_id"),
        (b'["not", "an", "object"]', "not_an_object"),
        (b'{"id": "u", "text": "caf\xe9 latin-1"}', "invalid_utf8"),
    ],
)
def test_each_bad_line_is_quarantined_with_line_number(tmp_path, line, kind):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(GOOD + b"\n" + line + b"\n" + GOOD.replace(b"g1", b"g2") + b"\n")
    docs, q = _read(path)
    assert [d["id"] for d in docs] == ["g1", "g2"]
    assert q.counts == {kind: 1}
    (rec,) = q.records
    assert (rec.file, rec.line, rec.kind) == (str(path), 2, kind)
    assert rec.raw is not None


def test_empty_file(tmp_path):
    for name in ("empty.jsonl", "empty.jsonl.gz", "empty.jsonl.zst"):
        path = tmp_path / name
        path.write_bytes(b"")
        docs, q = _read(path)
        assert docs == [] and q.counts == {"empty_file": 1}


@pytest.mark.parametrize("ext", ["jsonl.gz", "jsonl.zst"])
def test_truncated_archive_keeps_what_came_before(tmp_path, ext):
    docs = make_docs(2000, words=30)
    full = tmp_path / f"full.{ext}"
    write_documents(str(full), docs)
    data = full.read_bytes()
    cut = tmp_path / f"cut.{ext}"
    cut.write_bytes(data[: len(data) // 2])
    got, q = _read(cut)
    assert 0 < len(got) < len(docs)
    assert got == docs[: len(got)]
    assert q.counts["truncated_archive"] == 1
    assert any("truncated" in r.message and r.file == str(cut) for r in q.records)


def test_corrupt_archive(tmp_path):
    path = tmp_path / "garbage.jsonl.gz"
    path.write_bytes(gzip.compress(GOOD + b"\n")[:10] + b"\x00garbage-bytes" * 20)
    docs, q = _read(path)
    assert docs == [] and set(q.counts) <= {"corrupt_archive", "truncated_archive"} and q.total >= 1


def test_truncated_zstd_frame_header(tmp_path):
    path = tmp_path / "hdr.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(GOOD * 100)[:6])
    docs, q = _read(path)
    assert docs == [] and q.total >= 1


def test_corrupt_parquet(tmp_path):
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    docs, q = _read(path)
    assert docs == [] and q.counts == {"corrupt_parquet": 1}


def test_strict_reading_raises_with_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(GOOD + b"\n{oops\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: malformed_json"):
        list(read_documents(str(path)))


def _bad_corpus(tmp_path):
    docs_dir = tmp_path / "in" / "documents"
    docs_dir.mkdir(parents=True)
    (docs_dir / "a.jsonl").write_bytes(GOOD + b"\n{broken\n" + b'{"id": 3}\n' + b'{"id": 4, "text": "ok"}\n')
    (docs_dir / "b.jsonl").write_bytes(b"")
    data = gzip.compress(b"".join(orjson.dumps(d) + b"\n" for d in make_docs(500)))
    (docs_dir / "c.jsonl.gz").write_bytes(data[: len(data) // 2])
    return docs_dir


def test_cli_quarantines_and_summarises(tmp_path):
    docs_dir = _bad_corpus(tmp_path)
    out = tmp_path / "out"
    proc = run_cli("convert", "--documents", f"{docs_dir}/*", "--destination", str(out), "--processes", "1")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "bad records" in proc.stderr and "malformed_json" in proc.stderr and "empty_file 1" in proc.stderr
    errors = [orjson.loads(line) for line in (out / "_errors" / "a.jsonl.jsonl").read_bytes().splitlines()]
    assert [(e["line"], e["kind"]) for e in errors] == [(2, "malformed_json"), (3, "missing_text")]
    assert all(e["file"] == str(docs_dir / "a.jsonl") for e in errors)
    kinds = {orjson.loads(line)["kind"] for line in (out / "_errors" / "c.jsonl.gz.jsonl").read_bytes().splitlines()}
    assert "truncated_archive" in kinds
    manifest = orjson.loads((out / "_manifest.json").read_bytes())
    assert manifest["status"] == "complete"
    assert manifest["errors"]["empty_file"] == 1
    record = manifest["phases"][0]["tasks"]["a.jsonl"]
    assert record["docs_in"] == 2 and record["counts"] == {"docs_out": 2}
    assert [d["id"] for _, d in read_documents(str(out / "documents" / "a.jsonl.gz"))] == ["g1", "4"]
    assert not (out / "documents" / "b.jsonl.gz").exists()


def test_cli_max_errors_fails_the_run(tmp_path):
    docs_dir = _bad_corpus(tmp_path)
    out = tmp_path / "out"
    proc = run_cli("convert", "--documents", f"{docs_dir}/*", "--destination", str(out), "--max-errors", "2", "--processes", "1")
    assert proc.returncode == 1
    assert "exceed --max-errors 2" in proc.stderr and "Traceback" not in proc.stderr
    assert orjson.loads((out / "_manifest.json").read_bytes())["status"] == "failed"
    ok = run_cli("convert", "--documents", f"{docs_dir}/*", "--destination", str(out), "--max_errors", "100", "--processes", "1")
    assert ok.returncode == 0, ok.stderr


def _ids_corpus(tmp_path):
    d = tmp_path / "in" / "documents"
    d.mkdir(parents=True)
    (d / "a.jsonl").write_bytes(b'{"id": "1", "text": "x"}\n\n{"id": "2", "text": "y"}\n   \n{"id": "1", "text": "again"}\n')
    (d / "b.jsonl").write_bytes(b'{"id": "2", "text": "other file"}\n{"id": "3", "text": "z"}\n')
    return d


def test_duplicate_ids_and_blank_lines_are_reported_not_errors(tmp_path):
    d = _ids_corpus(tmp_path)
    out = tmp_path / "out"
    proc = run_cli("convert", "--documents", f"{d}/*", "--destination", str(out), "--processes", "2")
    assert proc.returncode == 0, proc.stderr
    assert "warnings     blank lines 2, duplicate ids 2" in proc.stderr
    manifest = orjson.loads((out / "_manifest.json").read_bytes())
    assert manifest["warnings"] == {"blank_lines": 2, "duplicate_ids": 2}
    assert manifest["errors"] == {} and manifest["totals"]["docs_out"] == 5
    phase = manifest["phases"][0]
    assert phase["tasks"]["a.jsonl"]["warnings"] == {"blank_lines": 2, "duplicate_ids": 1}
    assert phase["duplicate_ids_across_tasks"] == 1


def test_duplicate_ids_can_fail_the_run_or_go_unchecked(tmp_path):
    d = _ids_corpus(tmp_path)
    proc = run_cli("convert", "--documents", f"{d}/*", "--destination", str(tmp_path / "o1"), "--duplicate_ids", "fail")
    assert proc.returncode == 1 and "2 document(s) repeat an earlier document's id" in proc.stderr
    assert orjson.loads((tmp_path / "o1" / "_manifest.json").read_bytes())["status"] == "failed"
    proc = run_cli("convert", "--documents", f"{d}/*", "--destination", str(tmp_path / "o2"), "--duplicate_ids", "ignore")
    assert proc.returncode == 0 and "duplicate ids" not in proc.stderr
    assert not (tmp_path / "o2" / "_ids").exists()


def test_id_hash_files_are_the_same_sorted_unique_records_at_any_size(tmp_path, monkeypatch):
    """Small tasks sort their id hashes in Python, large ones with numpy: one file format."""
    import hashlib
    import random

    import numpy as np

    from dolma_pipe import duplicate_ids, runner, workdir
    from dolma_pipe.manifest import TaskRecord

    rng = random.Random(7)
    hashes = [hashlib.blake2b(str(rng.randrange(3000)).encode(), digest_size=16).digest() for _ in range(5000)]
    hashes += [b"\x00" * 16, b"\xff" * 16, b"\x80" + b"\x00" * 15, b"\x7f" + b"\xff" * 15]
    expected = np.unique(np.frombuffer(b"".join(hashes), dtype="V16")).tobytes()
    repeated = len(hashes) - len(expected) // 16
    assert runner._write_unique_ids(str(tmp_path / "python.ids"), hashes) == repeated
    monkeypatch.setattr(duplicate_ids, "_NUMPY_IDS", 10)
    assert runner._write_unique_ids(str(tmp_path / "numpy.ids"), hashes) == repeated
    assert workdir.read(str(tmp_path / "python.ids")) == workdir.read(str(tmp_path / "numpy.ids")) == expected

    # Across tasks: an id in k task files counts k - 1 times.
    def record(name, ids):
        workdir.write(str(tmp_path / name), b"".join(sorted(set(ids))))
        return TaskRecord(phase="files", key=name, inputs=[], params={}, docs_in=0, ids_file=name)

    a, b, c = hashes[:2000], hashes[1000:3000], hashes[2500:]
    records = [record("a.ids", a), record("b.ids", b), record("c.ids", c), record("d.ids", [])]
    per_task = [set(a), set(b), set(c)]
    want = sum(map(len, per_task)) - len(set().union(*per_task))
    assert runner._duplicate_ids_across(str(tmp_path), records) == want  # numpy (the threshold is 10 here)
    monkeypatch.setattr(duplicate_ids, "_NUMPY_IDS", 100_000)
    assert runner._duplicate_ids_across(str(tmp_path), records) == want  # a set


def test_integer_ids_within_64_bits_are_read_as_text(tmp_path):
    path = tmp_path / "ids.jsonl"
    path.write_bytes(b'{"id": 18446744073709551615, "text": "a"}\n{"id": -9223372036854775808, "text": "b"}\n{"id": 7, "text": "c"}\n')
    docs, q = _read(path)
    assert [d["id"] for d in docs] == ["18446744073709551615", "-9223372036854775808", "7"] and q.total == 0


def test_an_id_beyond_64_bits_is_bad_in_every_stage_so_mix_stays_aligned(tmp_path):
    """dedup (Python reader) and mix (Rust) quarantine the same line: the attribute file has no row
    for it, and mix reads the file without an attribute mismatch."""
    docs = tmp_path / "documents" / "a.jsonl"
    docs.parent.mkdir()
    docs.write_bytes(b'{"id": "a", "text": "first"}\n{"id": 18446744073709551616, "text": "big"}\n{"id": "z", "text": "first"}\n')
    dedup = ["dedup", "--documents", f"{tmp_path}/documents/*", "--dedupe.name", "dd"]
    run_cli(*dedup, "--dedupe.documents.attribute_name", "dup", "--dedupe.documents.key", "$.text", check=True)
    spec = tmp_path / "mix.yaml"
    out = tmp_path / "mixed"
    spec.write_text(
        f"streams:\n  - name: s\n    documents: [{tmp_path}/documents/*]\n    attributes: [dd]\n"
        f"    output: {{path: {out}}}\n    filter: {{syntax: jq, exclude: ['.attributes.dup']}}\n"
    )
    proc = run_cli("mix", "-c", str(spec), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    with gzip.open(out / "s-0000.jsonl.gz", "rt") as fh:
        assert [orjson.loads(line)["id"] for line in fh] == ["a"]
    errors = "".join(p.read_text() for p in (tmp_path / "mixed").rglob("*") if "_errors" in str(p) and p.is_file())
    assert "bad_id" in errors and "within 64 bits" in errors
