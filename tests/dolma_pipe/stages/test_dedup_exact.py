"""dedup, exact mode: the first copy in the global order survives, in every pass, for any number
of processes, on Ray, across reruns and after a kill in any phase; bad input is quarantined and
attribute rows line up with the documents."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dolma_pipe.documents import read_documents, write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.manifest import read_manifest
from dolma_pipe.quarantine import Quarantine
from tests.support.cli import run_cli
from tests.support.dedup import (
    REPEATED,
    attribute_rows,
    config,
    kill_in_phase,
    planted_corpus,
    run,
    stand_in_mix,
)
from tests.support.outputs import stage_outputs

PHASES = ["scan", "documents", "bands", "verify", "clusters", "removed", "paragraphs", "attributes"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("dedup-exact")
    info = planted_corpus(root)
    (root / "documents" / "part-8.jsonl").write_bytes(
        b'{"id": 8, "text": "an integer id is read as a string"}\n{broken\n{"id": "no text"}\n'
    )
    return root, info


def _all_passes(corpus: Path, out: Path, **extra) -> dict:
    return config(f"{corpus}/documents/*", destination=str(out), buckets=3, minhash={"threshold": 0.7, "verify": "jaccard"}, **extra)


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("ref") / "out"
    run(_all_passes(corpus[0], out, processes=1))
    return stage_outputs(out / "dd")


def test_first_copies_in_the_global_order_survive(corpus, tmp_path):
    root, info = corpus
    summary = run(config(f"{root}/documents/*", processes=2))
    assert summary.status == "complete"
    rows = attribute_rows(root)
    marked = {k for k, (_, a) in rows.items() if a.get("dup_docs")}
    assert marked == info["copies"]
    for k in marked:
        doc, attrs = rows[k]
        assert attrs["dup_docs"] == [[0, len(doc["text"]), 1]]
    # The repeated paragraph: its first occurrence (file 1) survives, the later ones are marked
    # with their newline, in character offsets.
    para = {k: a["dup_paras"] for k, (_, a) in rows.items() if a.get("dup_paras")}
    assert set(para) == set(info["repeated"][1:])
    for k in info["repeated"][1:]:
        doc = rows[k][0]
        [[start, end, score]] = para[k]
        assert (start, score) == (0, 1) and doc["text"][start:end] == REPEATED + "\n"
    # Documents removed whole keep no paragraph marks of their own: (2, 0) repeats (1, 7).
    assert not rows[(2, 0)][1]["dup_paras"]
    manifest = read_manifest(str(root / "attributes" / "dd"))
    assert [p.name for p in manifest.phases] == ["scan", "documents", "removed", "paragraphs", "attributes"]
    assert manifest.results["parameters"]["mode"] == "exact"
    assert manifest.results["marked"]["marked_documents"] == 3


def test_a_group_never_loses_every_copy(corpus, tmp_path):
    """After dedup and a mixer's removal, every distinct document and paragraph is still there once."""
    root, _ = corpus
    out = tmp_path / "out"
    run(_all_passes(root, out, processes=2))
    rows = attribute_rows(root, destination=out)
    kept = stand_in_mix(rows, ["dup_docs", "minhash_duplicate"], ["dup_paras"])
    texts = {d["text"] for d, _ in rows.values()}
    surviving_texts = {rows[k][0]["text"] for k in kept}
    assert surviving_texts == texts, "every distinct text keeps its first copy"
    assert len(kept) == len(texts)
    assert sum(t.count(REPEATED) for t in kept.values()) == 1
    # Every paragraph of the corpus still occurs somewhere.
    paragraphs = {p for t in texts for p in t.split("\n") if p.strip()}
    assert paragraphs <= {p for t in kept.values() for p in t.split("\n")}


@pytest.mark.parametrize("processes", [2, 4])
def test_same_bytes_for_any_process_count(corpus, reference, tmp_path, processes):
    out = tmp_path / "out"
    run(_all_passes(corpus[0], out, processes=processes))
    assert stage_outputs(out / "dd") == reference


def test_same_bytes_when_rerun_with_force(corpus, reference, tmp_path):
    out = tmp_path / "out"
    run(_all_passes(corpus[0], out, processes=2))
    again = run(_all_passes(corpus[0], out, processes=2))
    assert all(r.skipped for r in again.results)
    forced = run(_all_passes(corpus[0], out, processes=2, force=True))
    assert not any(r.skipped for r in forced.results)
    assert stage_outputs(out / "dd") == reference


def test_a_complete_run_removes_its_work_files_unless_told_to_keep_them(corpus, reference, tmp_path):
    out = tmp_path / "out"
    summary = run(_all_passes(corpus[0], out))
    assert summary.manifest.work_removed and not (out / "dd" / "_work").exists()
    # Kept, they are all there (the scan's meta, keys and bands of each file, every bucket), and
    # removing them later changes nothing a rerun does.
    kept = run(_all_passes(corpus[0], out, keep_work=True))
    assert all(r.skipped for r in kept.results) and not kept.manifest.work_removed
    out2 = tmp_path / "out2"
    run(_all_passes(corpus[0], out2, keep_work=True))
    inputs = read_manifest(str(out2 / "dd")).inputs
    assert sorted(p.name for p in (out2 / "dd" / "_work" / "scan").glob("*.meta")) == sorted(f"{f.rel}.meta" for f in inputs)
    assert {k: v for k, v in stage_outputs(out2 / "dd").items() if not k.startswith("_work/")} == reference


@pytest.mark.slow
@pytest.mark.parametrize("phase", PHASES)
def test_killed_in_any_phase_resumes_there(corpus, reference, tmp_path, phase):
    out = tmp_path / "out"
    overrides = _all_passes(corpus[0], out, processes=2)
    done = kill_in_phase(overrides, out / "dd", phase)
    manifest = read_manifest(str(out / "dd"))
    statuses = {p.name: p.status for p in manifest.phases}
    assert statuses[phase] in (("pending", "running") if phase == "scan" else ("running",)) and manifest.status == "running"
    before = PHASES[: PHASES.index(phase)]
    assert all(statuses[p] == "complete" for p in before)
    summary = run(overrides)
    record = summary.manifest.phase(phase)
    assert sum(r.skipped for r in record.tasks.values()) == done
    for p in before:
        assert all(r.skipped for r in summary.manifest.phase(p).tasks.values()), p
    assert stage_outputs(out / "dd") == reference


def test_bad_records_are_quarantined_and_rows_line_up(corpus):
    root, _ = corpus
    run(config(f"{root}/documents/*", processes=1))
    errors = (root / "attributes" / "dd" / "_errors" / "scan" / "part-8.jsonl.jsonl").read_text().splitlines()
    kinds = [(json.loads(e)["line"], json.loads(e)["kind"]) for e in errors]
    assert kinds == [(2, "malformed_json"), (3, "missing_text")]
    rows = attribute_rows(root)  # the lockstep reader refuses any misaligned row
    assert rows[(4, 0)][0]["id"] == "8"


def test_lines_read_like_read_documents(tmp_path):
    """Lines the Rust fast path takes and lines it leaves to Python give exactly read_documents' documents."""
    lines = [
        b'\xef\xbb\xbf{"id": "bom", "text": "first line after a BOM"}',
        b'{"id": "a", "text": "plain \\u00e9\\ud83d\\ude00", "metadata": {"n": [1, 2.5, null, true]}}',
        b"",
        b"   ",
        b'{"id": 12345678901234567890, "text": "a long integer id"}',
        b'{"id": 12345678901234567890123, "text": "an integer id beyond 64 bits: bad_id"}',
        b'{"id": "dup", "text": "first", "text": "second wins"}',
        b'{"id": "surrogate", "text": "x", "m": "\\ud800"}',
        b'{"id": "inf", "text": "x", "m": 1e400}',
        b'{"id": "deep", "text": "x", "m": ' + b"[" * 300 + b"]" * 300 + b"}",
        b'{"id": "ctl", "text": "a\x01b"}',
        b'{"id": "bad utf8 \xff", "text": "x"}',
        b'{"id": "cr", "text": "carriage return after"}\r',
        b'["not", "an", "object"]',
        b'{"id": "last", "text": "no newline at the end"}',
    ]
    data = b"\n".join(lines)
    for name, content in (("plain.jsonl", data), ("packed.jsonl.gz", None)):
        path = tmp_path / "documents" / name
        path.parent.mkdir(exist_ok=True)
        if content is not None:
            path.write_bytes(content)
        else:
            import gzip

            # Two gzip members, cut in the middle of a line.
            path.write_bytes(gzip.compress(data[:200], mtime=0) + gzip.compress(data[200:], mtime=0))
    run(config(f"{tmp_path}/documents/*", processes=1))
    for path in sorted((tmp_path / "documents").glob("*")):
        q = Quarantine()
        expected = [(line, d["id"], d["text"]) for line, d in read_documents(str(path), q)]
        assert [e[1] for e in expected] == ["bom", "a", "12345678901234567890", "dup", "deep", "cr", "last"]
        rows = attribute_rows(tmp_path)
        got = sorted((k, v[0]["id"]) for k, v in rows.items())
        assert [i for (_, i) in got if _[0] == sorted((tmp_path / "documents").glob("*")).index(path)] == [e[1] for e in expected]
        err = tmp_path / "attributes" / "dd" / "_errors" / "scan" / f"{path.name}.jsonl"
        ours = [(json.loads(e)["line"], json.loads(e)["kind"]) for e in err.read_text().splitlines()]
        assert ours == [(r.line, r.kind) for r in q.records]


def test_truncated_and_corrupt_archives(tmp_path):
    import gzip

    good = b"".join(json.dumps({"id": f"d{i}", "text": f"document number {i}"}).encode() + b"\n" for i in range(50))
    packed = gzip.compress(good, mtime=0)
    (tmp_path / "documents").mkdir()
    (tmp_path / "documents" / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "documents" / "junk.jsonl.gz").write_bytes(packed + b"trailing junk")
    (tmp_path / "documents" / "empty.jsonl.gz").write_bytes(b"")
    run(config(f"{tmp_path}/documents/*", processes=1))
    for name in ("cut.jsonl.gz", "junk.jsonl.gz", "empty.jsonl.gz"):
        q = Quarantine()
        expected = [d["id"] for _, d in read_documents(str(tmp_path / "documents" / name), q)]
        err = tmp_path / "attributes" / "dd" / "_errors" / "scan" / f"{name}.jsonl"
        ours = [(json.loads(e)["line"], json.loads(e)["kind"]) for e in err.read_text().splitlines()]
        assert ours == [(r.line, r.kind) for r in q.records], name
        rows = [json.loads(line) for line in __import__("gzip").open(tmp_path / "attributes" / "dd" / name)] if expected else []
        assert [r["id"] for r in rows] == expected


def test_parquet_and_zstd_inputs(tmp_path):
    docs = [{"id": f"p{i}", "text": "same text" if i % 3 == 0 else f"text {i}"} for i in range(9)]
    write_documents(str(tmp_path / "documents" / "a.parquet"), docs[:5])
    write_documents(str(tmp_path / "documents" / "b.jsonl.zst"), docs[5:])
    run(config(f"{tmp_path}/documents/*", processes=2))
    assert (tmp_path / "attributes" / "dd" / "a.jsonl.gz").exists()
    rows = attribute_rows(tmp_path)
    marked = sorted(d["id"] for d, a in rows.values() if a.get("dup_docs"))
    assert marked == ["p3", "p6"]


def test_min_words_min_length_and_skip_empty_all_filter(tmp_path):
    """Dolma ignores min_length and skip_empty once min_words > 0, and then deduplicates nothing."""
    texts = [
        "short one",
        "short one",
        "a longer paragraph with more than five words\n\n",
        "a longer paragraph with more than five words\n\n",
    ]
    write_documents(str(tmp_path / "documents" / "a.jsonl"), [{"id": str(i), "text": t} for i, t in enumerate(texts)])
    cfg = config(f"{tmp_path}/documents/*")
    cfg["dedupe"].update(min_words=5, min_length=3, skip_empty=True)
    run(cfg)
    rows = attribute_rows(tmp_path)
    assert not rows[(0, 1)][1].get("dup_docs"), "two words < min_words: not a key"
    assert rows[(0, 3)][1]["dup_docs"] == [[0, len(texts[3]), 1]]
    # Paragraphs: the long one repeats (with its newline); the empty ones are skipped.
    assert rows[(0, 3)][1]["dup_paras"] == []  # the whole document is removed, its paragraphs take no part
    cfg["dedupe"].pop("documents")
    run({**cfg, "force": True})
    rows = attribute_rows(tmp_path)
    assert rows[(0, 3)][1]["dup_paras"] == [[0, 45, 1]]
    assert rows[(0, 1)][1]["dup_paras"] == []


def test_paragraph_spans_in_characters_with_a_long_separator(tmp_path):
    text = "ünïcödé 😀 paragraph one\n\nrepeated paragraph ✓\n\nend"
    other = "first ✓\n\nrepeated paragraph ✓"
    write_documents(str(tmp_path / "documents" / "a.jsonl"), [{"id": "0", "text": other}, {"id": "1", "text": text}])
    cfg = config(f"{tmp_path}/documents/*")
    cfg["dedupe"] = {"name": "dd", "paragraphs": {"attribute_name": "dup_paras", "paragraph_separator": "\n\n"}}
    run(cfg)
    [[start, end, score]] = attribute_rows(tmp_path)[(0, 1)][1]["dup_paras"]
    assert text[start:end] == "repeated paragraph ✓\n\n" and score == 1


def test_cli_end_to_end_and_summary(corpus, tmp_path):
    root, _ = corpus
    cfg = tmp_path / "dedup.yaml"
    cfg.write_text(json.dumps(config(f"{root}/documents/*", destination=str(tmp_path / "out"))))
    proc = run_cli("dedup", "-c", str(cfg), "--processes", "2", check=True)
    assert "duplicate documents (dup_docs)" in proc.stdout and "3" in proc.stdout
    assert (tmp_path / "out" / "dd" / "part-0.jsonl.gz").exists()


def test_config_errors_name_the_key(tmp_path):
    write_documents(str(tmp_path / "documents" / "a.jsonl"), [{"id": "0", "text": "x"}])
    base = config(f"{tmp_path}/documents/*")
    cases = [
        ({"dedupe": {**base["dedupe"], "num_partitions": 4}}, "dedupe.num_partitions"),
        ({"dedupe": {**base["dedupe"], "file_partition": True}}, "dedupe.file_partition"),
        ({"compression": {"input": "gzip"}}, "compression.input"),
        ({"dryrun": True}, "dryrun"),
        ({"dedupe": {"name": "x"}}, "nothing to do"),
        ({"dedupe": {**base["dedupe"], "documents": {"attribute_name": "a", "key": "$.a[*]"}}}, "dedupe.documents.key"),
        ({"minhash": {"treshold": 0.5}}, "unknown config key 'minhash.treshold'"),
        ({"minhash": {"bands": 4}}, "minhash.bands and minhash.rows"),
        ({"minhash": {"bands": 1000, "rows": 1000}}, "minhash.bands x minhash.rows: 1000 x 1000 = 1,000,000 hash functions; at most 4,096"),
        (
            {
                "dedupe": {"name": "x", "paragraphs": {"attribute_name": "p"}},
                "bloom_filter": {"file": str(tmp_path / "f.bin"), "size_in_bytes": 10**14, "estimated_doc_count": 10},
            },
            "bloom_filter.size_in_bytes: a filter of 100,000,000,000,000 bytes; at most 1,099,511,627,776",
        ),
        ({"bloom_filter": {"file": str(tmp_path / "f.bin"), "estimated_doc_count": 10, "desired_false_positive_rate": 0.01}}, "not both"),
    ]
    for extra, expected in cases:
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({**base, **extra}))
        proc = run_cli("dedup", "-c", str(path))
        assert proc.returncode != 0 and expected in proc.stderr, (extra, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_adding_a_file_redoes_the_run(tmp_path):
    write_documents(str(tmp_path / "documents" / "a.jsonl"), [{"id": "0", "text": "one"}, {"id": "1", "text": "two"}])
    cfg = config(f"{tmp_path}/documents/*")
    run(cfg)
    time.sleep(0.01)
    write_documents(str(tmp_path / "documents" / "0.jsonl"), [{"id": "z", "text": "two"}])
    again = run(cfg)
    assert not any(r.skipped for r in again.results)
    rows = attribute_rows(tmp_path)
    assert rows[(1, 1)][1].get("dup_docs") == [[0, 3, 1]], "0.jsonl sorts first: its copy survives"


@pytest.mark.slow
def test_documents_and_outputs_on_s3(corpus, reference, s3_bucket):
    """Work files are read by slices (ranged reads on S3): a run on object storage gives the same attributes."""
    from dolma_pipe import storage

    root, _ = corpus
    for path in sorted((root / "documents").glob("*")):
        storage.write_bytes(f"s3://{s3_bucket}/c/documents/{path.name}", path.read_bytes())
    out = f"s3://{s3_bucket}/out"
    cfg = _all_passes(root, Path("/unused"), processes=2)
    cfg.update(documents=[f"s3://{s3_bucket}/c/documents/*"], destination=out)
    assert run(cfg).status == "complete"
    for name, data in reference.items():
        if not name.startswith(("_", "part-")) or name.startswith(("_done", "_work", "_errors")):
            continue
        assert storage.read_bytes(f"{out}/dd/{name}") == data, name


def test_blank_lines_and_duplicate_ids_are_noted_as_in_every_stage(tmp_path):
    (tmp_path / "documents").mkdir()
    (tmp_path / "documents" / "a.jsonl").write_text('{"id": "x", "text": "one"}\n\n{"id": "x", "text": "two"}\n')
    (tmp_path / "documents" / "b.jsonl").write_text('{"id": "x", "text": "three"}\n')
    summary = run(config(f"{tmp_path}/documents/*"))
    warnings = summary.manifest.phase("scan").warnings()
    assert warnings["blank_lines"] == 1 and warnings["duplicate_ids"] == 2


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_bytes_on_ray(self, corpus, reference, tmp_path, ray_address):
        out = tmp_path / "out"
        with RayExecutor(2, ray_address) as ex:
            summary = run(_all_passes(corpus[0], out, processes=2, ray_address=ray_address), executor=ex)
        assert summary.manifest.executor.name == "ray"
        assert stage_outputs(out / "dd") == reference
