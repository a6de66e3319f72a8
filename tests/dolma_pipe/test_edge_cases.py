"""Inputs that look harmless but lose data in naive pipelines: each must be kept or refused loudly."""

from __future__ import annotations

import decimal
import gzip
import os
import signal

import orjson
import pytest

from dolma_pipe.compression import CHUNK
from dolma_pipe.config import ConfigError, load_config, read_config_file
from dolma_pipe.documents import read_attribute_rows, read_documents, write_documents
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.runner import RunFailed, run_stage
from dolma_pipe.stages.convert import ConvertConfig, ConvertStage
from tests.support.cli import run_cli
from tests.support.documents import make_docs


def test_big_integers_stay_exact(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(b'{"id": 12345678901234567890, "text": "x", "metadata": {"u": 18446744073709551616, "n": -9223372036854775809}}\n')
    (doc,) = [d for _, d in read_documents(str(path))]
    assert doc["id"] == "12345678901234567890"  # 20 digits, within uint64 (ids beyond 64 bits are bad_id)
    assert doc["metadata"]["u"] == 18446744073709551616
    assert doc["metadata"]["n"] == -9223372036854775809  # 19 digits, below int64's minimum
    out = str(tmp_path / "out.jsonl")
    write_documents(out, [doc])
    assert b"18446744073709551616" in open(out, "rb").read() and b"-9223372036854775809" in open(out, "rb").read()


def test_long_digit_runs_are_found_as_the_regex_finds_them():
    """The check that sends a line to the stdlib parser: 20 consecutive ASCII digits or a minus and
    19, as ``\\d{20}|-\\d{19}``."""
    import random
    import re

    from dolma_pipe.documents import _has_long_digits

    regex = re.compile(rb"\d{20}|-\d{19}")
    rng = random.Random(3)
    alphabet = b'0123456789 -.e"a\xff\x00\xd9\xa0'  # digits, separators, non-ASCII bytes
    # Mostly digits, so that runs of about 20 are common.
    lines = [
        bytes(rng.choice(alphabet if rng.random() < 0.08 else b"0123456789") for _ in range(rng.randrange(0, 60))) for _ in range(20000)
    ]
    lines += [
        b"1" * 20,
        b"1" * 19,
        b"-" + b"1" * 19,
        b"-" + b"1" * 18,
        b"--" + b"1" * 19,
        b"x" + b"9" * 20 + b"x",
        b"1" * 19 + b"\xd9\xa0" + b"1",
        "\u0661".encode() * 20,
    ]
    assert [_has_long_digits(x) for x in lines] == [regex.search(x) is not None for x in lines]
    assert 1000 < sum(map(_has_long_digits, lines)) < 19000


def test_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "text": "x"}\r\n{"id": "b", "text": "y"}\r\n')
    assert [d["id"] for _, d in read_documents(str(path))] == ["a", "b"]


def test_line_spanning_many_chunks(tmp_path):
    long_text = "word " * (3 * CHUNK // 5)
    docs = [{"id": "short", "text": "s"}, {"id": "long", "text": long_text}, {"id": "after", "text": "a"}]
    for ext in ("jsonl", "jsonl.gz", "jsonl.zst"):
        path = str(tmp_path / f"long.{ext}")
        write_documents(path, docs)
        assert [d for _, d in read_documents(path)] == docs


def test_null_attributes_are_empty(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"id": "a", "attributes": null}\n')
    assert [r for _, r in read_attribute_rows(str(path))] == [{"id": "a", "attributes": {}}]


def test_parquet_bad_json_cell_quarantines_only_that_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / "p.parquet")
    table = pa.table({"id": ["1", "2", "3"], "text": ["a", "b", "c"], "metadata": ['{"k": 1}', "not json", '{"k": 3}']})
    pq.write_table(table.replace_schema_metadata({b"dolma_pipe.json_columns": b"metadata"}), path)
    q = Quarantine()
    docs = [(n, d) for n, d in read_documents(path, q)]
    assert [(n, d["id"], d["metadata"]) for n, d in docs] == [(1, "1", {"k": 1}), (3, "3", {"k": 3})]
    assert [(r.line, r.kind) for r in q.records] == [(2, "malformed_json")]


def test_parquet_decimal_and_binary_values_are_written(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / "p.parquet")
    pq.write_table(pa.table({"id": ["1"], "text": ["a"], "price": [decimal.Decimal("1.50")], "blob": [b"\x00\x01"]}), path)
    docs = [d for _, d in read_documents(path)]
    out = str(tmp_path / "o.jsonl")
    write_documents(out, docs)
    (back,) = [d for _, d in read_documents(out)]
    assert back["price"] == "1.50" and back["blob"] == "AAE="


def _convert(tmp_path, docs_glob, dest, **extra):
    cfg = load_config(ConvertConfig, None, {"documents": [docs_glob], "destination": str(dest), "processes": 1, "progress": False, **extra})
    return run_stage(ConvertStage(cfg))


def test_inputs_that_would_share_an_output_are_refused(tmp_path):
    d = tmp_path / "in" / "documents"
    write_documents(str(d / "a.jsonl"), make_docs(1))
    write_documents(str(d / "a.json.gz"), make_docs(1, seed=2))
    with pytest.raises(ValueError, match="would both be written to 'a.jsonl.gz'"):
        _convert(tmp_path, f"{d}/*", tmp_path / "out")


def test_outputs_are_never_read_back_as_inputs(tmp_path):
    d = tmp_path / "data" / "documents"
    (d).mkdir(parents=True)
    (d / "a.jsonl").write_bytes(b'{"id": "1", "text": "x"}\n{bad\n')
    for _ in range(2):
        summary = _convert(tmp_path, f"{tmp_path}/data/**/*.jsonl*", tmp_path / "data" / "clean")
        assert [r.key for r in summary.results] == ["a.jsonl"]
    with pytest.raises(ValueError, match="under the destination"):
        _convert(tmp_path, f"{tmp_path}/data/clean/documents/*", tmp_path / "data" / "clean")


def test_changed_settings_redo_finished_files(tmp_path):
    d = tmp_path / "in" / "documents"
    write_documents(str(d / "a.jsonl"), make_docs(3))
    out = tmp_path / "out"
    _convert(tmp_path, f"{d}/*", out, format="jsonl")
    again = _convert(tmp_path, f"{d}/*", out, format="jsonl", processes=2)
    assert [r.skipped for r in again.results] == [True]  # how it runs is not a change
    changed = _convert(tmp_path, f"{d}/*", out, format="parquet")
    assert [r.skipped for r in changed.results] == [False]
    assert (out / "documents" / "a.parquet").exists()


def test_max_errors_counts_finished_files_on_rerun(tmp_path):
    d = tmp_path / "in" / "documents"
    d.mkdir(parents=True)
    (d / "a.jsonl").write_bytes(b"{bad\n{bad\n{bad\n")
    (d / "b.jsonl").write_bytes(b'{"id": "1", "text": "x"}\n')
    with pytest.raises(RunFailed, match="exceed --max-errors 1"):
        _convert(tmp_path, f"{d}/*", tmp_path / "out", max_errors=1)
    with pytest.raises(RunFailed, match="exceed --max-errors 1"):
        _convert(tmp_path, f"{d}/*", tmp_path / "out", max_errors=1)
    assert _convert(tmp_path, f"{d}/*", tmp_path / "out", max_errors=3).status == "complete"


class _DyingStage(ConvertStage):
    """``convert`` whose worker is killed on one file (the rerun is a plain ``convert``)."""

    def process(self, task, quarantine):
        if task.rel.startswith("part-0002"):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().process(task, quarantine)


def test_a_killed_worker_fails_the_run_cleanly(make_corpus, tmp_path):
    root = make_corpus(files=6, docs=5)
    cfg = load_config(
        ConvertConfig, None, {"documents": [f"{root}/documents/*"], "destination": str(tmp_path / "o"), "processes": 2, "progress": False}
    )
    with pytest.raises(RunFailed, match="failed"):
        run_stage(_DyingStage(cfg))
    manifest = orjson.loads((tmp_path / "o" / "_manifest.json").read_bytes())
    assert manifest["status"] == "failed" and manifest["failures"]
    summary = run_stage(ConvertStage(cfg))  # the rerun finishes the rest
    assert summary.status == "complete" and summary.totals["docs_out"] == 30


def test_unreadable_config_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        read_config_file(str(tmp_path))
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"documents: [caf\xe9]\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_config_file(str(bad))


def test_unwritable_destination_is_one_message(tmp_path, make_corpus):
    root = make_corpus(files=1, docs=2)
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for dest, says in ((blocker, "is an existing file"), (blocker / "sub", f"is inside {blocker}, which is an existing file")):
        proc = run_cli("convert", "--documents", f"{root}/documents/*", "--destination", str(dest))
        assert proc.returncode == 1 and "Traceback" not in proc.stderr and says in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert blocker.read_text() == "x"
    proc = run_cli("convert", "--documents", f"{root}/documents/*", "--destination", "gs://bucket/x")
    assert proc.returncode == 1 and "only local paths and s3://" in proc.stderr and "Traceback" not in proc.stderr


def test_s3_folder_placeholders_are_not_inputs(s3_bucket):
    import boto3

    from dolma_pipe import storage

    boto3.client("s3").put_object(Bucket=s3_bucket, Key="in/documents/", Body=b"")
    write_documents(f"s3://{s3_bucket}/in/documents/a.jsonl", make_docs(2))
    assert storage.glob(f"s3://{s3_bucket}/in/documents/*") == [f"s3://{s3_bucket}/in/documents/a.jsonl"]


def test_truncated_archive_reports_the_real_line(tmp_path):
    docs = make_docs(3000, words=20)
    data = gzip.compress(b"".join(orjson.dumps(d) + b"\n\n" for d in docs))  # blank lines between
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    q = Quarantine()
    good = [n for n, _ in read_documents(str(path), q)]
    trunc = [r for r in q.records if r.kind == "truncated_archive"]
    assert trunc and trunc[0].line > good[-1] >= 2 * len(good) - 1
