"""dedup with Dolma's own dedupe configs and data, unchanged, against what Dolma 1.2.1 writes;
Bloom mode (the ``bloom_filter`` section): deterministic, resumable, filters refused when wrong,
corrupt or stale."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from dolma_pipe.bloom import BloomFileError
from dolma_pipe.documents import write_documents
from tests.support.cli import run_cli
from tests.support.dedup import attribute_rows, config, planted_corpus, run, stand_in_mix
from tests.support.documents import sample_rows
from tests.support.outputs import stage_outputs

DATA = Path(__file__).parent / "data" / "dolma_dedupe"
CONFIGS = {"dedupe-by-url": "dedupe_by_url", "dedupe-paragraphs": "dedupe_paragraphs", "dedupe-paragraph-ngrams": "dedupe_paragraph_ngrams"}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in gzip.open(path)]


@pytest.fixture
def dolma_tree(tmp_path, monkeypatch) -> Path:
    """Dolma's configs name paths relative to its repository root: that layout, as the cwd."""
    shutil.copytree(DATA / "provided", tmp_path / "tests" / "data" / "provided")
    shutil.copytree(DATA / "config", tmp_path / "tests" / "config")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", list(CONFIGS))
def test_dolmas_configs_run_unchanged_and_match_dolma(dolma_tree, name):
    proc = run_cli("dedup", "-c", f"tests/config/{name}.json")
    assert proc.returncode == 0, proc.stderr
    got = _rows(dolma_tree / "tests/data/provided/deduper/attributes" / CONFIGS[name] / "000.json.gz")
    expected = _rows(DATA / "expected_dolma_1.2.1" / f"{name}.json.gz")
    docs = _rows(dolma_tree / "tests/data/provided/deduper/documents/000.json.gz")
    assert [r["id"] for r in got] == [r["id"] for r in expected] == [d["id"] for d in docs]
    differences = 0
    for doc, ours, theirs in zip(docs, got, expected):
        assert ours["attributes"].keys() == theirs["attributes"].keys(), doc["id"]
        text = doc["text"]
        for attr, spans in theirs["attributes"].items():
            assert len(ours["attributes"][attr]) == len(spans), (doc["id"], attr)
            for k, ((s1, e1, v1), (s2, e2, v2)) in enumerate(zip(ours["attributes"][attr], spans)):
                assert s1 == s2 and v1 == pytest.approx(v2, abs=1e-6), (doc["id"], attr, k)
                if e1 == e2:
                    continue
                differences += 1
                if name == "dedupe-by-url":
                    # Dolma's span covers the key's length (the URL, in bytes); ours the document.
                    assert (e1, e2) == (len(text), len(doc["id"].encode()))
                else:
                    # Dolma's last paragraph of a non-ASCII text ends one past the text (it adds a
                    # newline when the character offset is below the byte length); ours ends with it.
                    assert k == len(spans) - 1 and e1 == len(text) and e2 == len(text) + 1 and not text.isascii()
    assert differences == 1
    sidecar = json.loads(Path(json.load(open(f"tests/config/{name}.json"))["bloom_filter"]["file"] + ".dedup.json").read_text())
    assert sidecar["kind"]["keys"] == ("documents" if name == "dedupe-by-url" else "paragraphs")


def test_dolmas_document_dir_configs(dolma_tree):
    """filepath-good: documents under pathnotd0cumentz/ (dedupe.document_dir) get their attributes
    beside them, the n-gram config's; filepath-bad: the same path without document_dir is refused."""
    provided = dolma_tree / "tests/data/provided/deduper"
    (provided / "pathnotd0cumentz").mkdir()
    shutil.copy(provided / "documents/000.json.gz", provided / "pathnotd0cumentz/000.json.gz")
    shutil.rmtree(provided / "documents")
    proc = run_cli("dedup", "-c", "tests/config/filepath-good.json")
    assert proc.returncode == 0, proc.stderr
    got = _rows(provided / "attributes/dedupe_paragraph_ngrams/000.json.gz")
    expected = _rows(DATA / "expected_dolma_1.2.1" / "dedupe-paragraph-ngrams.json.gz")
    assert [r["id"] for r in got] == [r["id"] for r in expected]
    proc = run_cli("dedup", "-c", "tests/config/filepath-bad.json")
    assert proc.returncode != 0 and "no 'documents/' component" in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("dedup-bloom")
    return root, planted_corpus(root)


def _bloom(corpus: Path, out: Path, kind: str, **extra) -> dict:
    cfg = config(f"{corpus}/documents/*", destination=str(out), **extra)
    cfg["dedupe"] = {"name": kind, kind: cfg["dedupe"][kind]}
    cfg["bloom_filter"] = {"file": str(out / f"{kind}.bloom"), "estimated_doc_count": 10_000, "desired_false_positive_rate": 1e-6}
    return cfg


def test_bloom_mode_is_deterministic_and_resumable(corpus, tmp_path):
    root, info = corpus
    refs = {}
    for processes in (1, 2):
        out = tmp_path / f"p{processes}"
        summary = run(_bloom(root, out, "paragraphs", processes=processes))
        assert summary.manifest.results["filter"]["num_hashes"] > 0
        refs[processes] = stage_outputs(out / "paragraphs") | {"filter": (out / "paragraphs.bloom").read_bytes()}
    assert refs[1] == refs[2]
    # A rerun of a finished run redoes nothing and leaves the (published) filter as it is.
    out = tmp_path / "p1"
    again = run(_bloom(root, out, "paragraphs", processes=2))
    assert all(r.skipped for r in again.results)
    # --force redoes it from the filter the run started from, not from its own result.
    forced = run(_bloom(root, out, "paragraphs", processes=2, force=True))
    assert not any(r.skipped for r in forced.results)
    assert stage_outputs(out / "paragraphs") | {"filter": (out / "paragraphs.bloom").read_bytes()} == refs[1]
    rows = attribute_rows(root, "paragraphs", destination=out)
    assert {k for k, (_, a) in rows.items() if a.get("dup_paras")} == set(info["repeated"][1:]) | {(0, 5), (2, 0), (3, 9)}


def test_dolma_style_separate_runs_never_lose_a_group(corpus, tmp_path):
    """Dolma's usual setup, one config for documents and one for paragraphs: with one global order
    the paragraphs of a kept document are never all marked, so a mixer keeps every text once."""
    root, _ = corpus
    run(_bloom(root, tmp_path, "documents", processes=2))
    run(_bloom(root, tmp_path, "paragraphs", processes=2))
    docs = attribute_rows(root, "documents", destination=tmp_path)
    paras = attribute_rows(root, "paragraphs", destination=tmp_path)
    rows = {k: (d, {**a, **paras[k][1]}) for k, (d, a) in docs.items()}
    kept = stand_in_mix(rows, ["dup_docs"], ["dup_paras"])
    texts = {d["text"] for d, _ in rows.values()}
    assert {rows[k][0]["text"] for k in kept} == texts
    assert all(kept[k] == rows[k][0]["text"] or "\n" in rows[k][0]["text"] for k in kept)


def test_decontamination_dolmas_way_with_a_read_only_filter(tmp_path):
    """Dolma's decontamination: a filter made from evaluation paragraphs, used read-only."""
    evaluation = [
        {"id": f"q{i}", "text": f"Evaluation question number {i} with quite a few words in it to be long enough."} for i in range(5)
    ]
    write_documents(str(tmp_path / "eval" / "documents" / "e.jsonl"), evaluation)
    train = [{"id": "t0", "text": f"intro\n{evaluation[2]['text']}\noutro"}, {"id": "t1", "text": "clean text\nnothing here"}]
    write_documents(str(tmp_path / "train" / "documents" / "t.jsonl"), train)
    bloom = {"file": str(tmp_path / "eval.bloom"), "estimated_doc_count": 1000, "desired_false_positive_rate": 1e-9}
    dedupe = {"name": "decon", "paragraphs": {"attribute_name": "bff_contaminated"}, "skip_empty": True}
    run({"documents": [f"{tmp_path}/eval/documents/*"], "dedupe": dedupe, "bloom_filter": bloom, "processes": 1, "progress": False})
    run(
        {
            "documents": [f"{tmp_path}/train/documents/*"],
            "dedupe": dedupe,
            "bloom_filter": {**bloom, "read_only": True},
            "processes": 2,
            "progress": False,
        }
    )
    rows = attribute_rows(tmp_path / "train", "decon")
    [[s, e, score]] = rows[(0, 0)][1]["bff_contaminated"]
    assert train[0]["text"][s:e] == evaluation[2]["text"] + "\n" and score == 1
    assert rows[(0, 1)][1]["bff_contaminated"] == []


def _filter_error(cfg: dict, tmp_path: Path) -> str:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    proc = run_cli("dedup", "-c", str(path))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    return proc.stderr.strip()


def test_wrong_corrupt_and_stale_filters_are_refused(corpus, tmp_path):
    root, _ = corpus
    out = tmp_path / "out"
    cfg = _bloom(root, out, "paragraphs", processes=1)
    run(cfg)
    filter_path = Path(cfg["bloom_filter"]["file"])
    good = filter_path.read_bytes()
    # Corrupt: one bit of the bit array flipped.
    bad = bytearray(good)
    bad[8192 + 100] ^= 0x10
    filter_path.write_bytes(bytes(bad))
    err = _filter_error(cfg, tmp_path)
    assert str(filter_path) in err and "checksum" in err
    # Wrong: not a filter at all.
    filter_path.write_bytes(b"not a bloom filter" * 100)
    err = _filter_error(cfg, tmp_path)
    assert str(filter_path) in err and "magic" in err
    # Truncated.
    filter_path.write_bytes(good[:5000])
    assert "truncated" in _filter_error(cfg, tmp_path)
    # Stale: made for whole paragraphs, asked for n-grams; made with other sizes.
    filter_path.write_bytes(good)
    ngrams = json.loads(json.dumps(cfg))
    ngrams["dedupe"]["paragraphs"]["by_ngram"] = {"ngram_length": 6, "stride": 3, "overlap_threshold": 0.5}
    err = _filter_error(ngrams, tmp_path)
    assert str(filter_path) in err and "stale" in err and "ngram_length" in err
    resized = json.loads(json.dumps(cfg))
    resized["bloom_filter"]["size_in_bytes"] = 1 << 16
    err = _filter_error(resized, tmp_path)
    assert "stale" in err and "bits" in err
    # A filter without its sidecar (not made by dolma-pipe dedup).
    Path(str(filter_path) + ".dedup.json").unlink()
    assert "sidecar" in _filter_error(cfg, tmp_path)
    # Read-only needs an existing filter.
    missing = json.loads(json.dumps(cfg))
    missing["bloom_filter"] = {"file": str(tmp_path / "nope.bloom"), "read_only": True}
    assert "does not exist" in _filter_error(missing, tmp_path)


@pytest.mark.parametrize("mode", ["exact", "bloom"])
def test_paragraphs_of_near_duplicates_removed_whole_do_not_count(tmp_path, mode):
    """A near-duplicate removed by MinHash does not hold the first copy of a paragraph: the next
    surviving document does, so the paragraph survives the mix."""
    rows = [r for r in sample_rows("linux-doc/*") if len(r["text"].split()) > 300][:3]
    a = rows[0]["text"]
    b = a.replace(" the ", " a ", 3)  # a near copy of a
    shared = "This exact paragraph appears in the near copy and in a later document, nowhere else."
    docs = [
        {"id": "a", "text": a},
        {"id": "b", "text": b + "\n" + shared},
        {"id": "c", "text": rows[1]["text"] + "\n" + shared},
    ]
    write_documents(str(tmp_path / "documents" / "d.jsonl"), docs)
    cfg = config(f"{tmp_path}/documents/*", minhash={"threshold": 0.8})
    cfg["dedupe"] = {"name": "dd", "paragraphs": {"attribute_name": "dup_paras"}, "skip_empty": True}
    if mode == "bloom":
        cfg["bloom_filter"] = {"file": str(tmp_path / "f.bloom"), "estimated_doc_count": 10_000, "desired_false_positive_rate": 1e-9}
    summary = run(cfg)
    assert "removed" in [p.name for p in summary.manifest.phases]
    got = attribute_rows(tmp_path)
    assert got[(0, 1)][1]["minhash_duplicate"] and not got[(0, 0)][1].get("minhash_duplicate")
    c_text = docs[2]["text"]
    assert all(c_text[s:e].rstrip("\n") != shared for s, e, _ in got[(0, 2)][1]["dup_paras"]), "c holds the first surviving copy"
    kept = stand_in_mix(got, ["minhash_duplicate"], ["dup_paras"])
    assert sum(t.count(shared) for t in kept.values()) == 1


@pytest.mark.slow
def test_killed_in_the_bloom_phase_resumes_from_the_starting_filter(corpus, tmp_path):
    from tests.support.dedup import kill_in_phase

    root, _ = corpus
    ref = tmp_path / "ref"
    run(_bloom(root, ref, "paragraphs", processes=1))
    expected = stage_outputs(ref / "paragraphs") | {"filter": (ref / "paragraphs.bloom").read_bytes()}
    out = tmp_path / "out"
    cfg = _bloom(root, out, "paragraphs", processes=2)
    kill_in_phase(cfg, out / "paragraphs", "bloom")
    assert not (out / "paragraphs.bloom").exists(), "nothing published before the phase ends"
    run(cfg)
    assert stage_outputs(out / "paragraphs") | {"filter": (out / "paragraphs.bloom").read_bytes()} == expected


def test_a_filter_and_work_files_on_s3_give_the_local_runs_filter_and_attributes(corpus, tmp_path, s3_bucket):
    """bloom_filter.file and the destination on object storage: the filter is downloaded once to a
    local cache, saved through a local file, published to S3 with its sidecar; the bytes equal a
    local run's, a rerun redoes nothing, and the published filter serves a read-only run."""
    from dolma_pipe import storage

    root, _ = corpus
    local = tmp_path / "local"
    run(_bloom(root, local, "paragraphs", processes=2))
    reference = stage_outputs(local / "paragraphs")
    remote = f"s3://{s3_bucket}/run"
    cfg = _bloom(root, local, "paragraphs", processes=2)
    cfg["destination"] = remote
    cfg["bloom_filter"]["file"] = f"s3://{s3_bucket}/filters/paragraphs.bloom"
    summary = run(cfg)
    assert summary.status == "complete"
    assert storage.read_bytes(cfg["bloom_filter"]["file"]) == (local / "paragraphs.bloom").read_bytes()
    sidecar = json.loads(storage.read_bytes(cfg["bloom_filter"]["file"] + ".dedup.json"))
    assert sidecar["kind"] == {"keys": "paragraphs", "separator": "\n"} and sidecar["checksum"] > 0
    attributes = [name for name in reference if name.endswith(".jsonl.gz") and not name.startswith("_")]
    assert attributes
    for name in attributes:
        assert storage.read_bytes(f"{remote}/paragraphs/{name}") == reference[name], name
    assert all(r.skipped for r in run(cfg).results)
    # Read-only from S3 and from the local copy of the same filter: the same answers.
    answers = {}
    for where, filter_file in (("s3", cfg["bloom_filter"]["file"]), ("local", str(local / "paragraphs.bloom"))):
        ro = _bloom(root, tmp_path / f"ro-{where}", "paragraphs", processes=1)
        ro["bloom_filter"] = {"file": filter_file, "read_only": True}
        assert run(ro).status == "complete"
        answers[where] = attribute_rows(root, "paragraphs", destination=tmp_path / f"ro-{where}")
    assert answers["s3"] == answers["local"]
    assert any(a.get("dup_paras") for _, a in answers["s3"].values())
    # A damaged filter on S3 is refused under its S3 name (not the name of its local copy).
    good = storage.read_bytes(cfg["bloom_filter"]["file"])
    storage.write_bytes(cfg["bloom_filter"]["file"], good[:-1] + bytes([good[-1] ^ 0x01]))
    with pytest.raises(BloomFileError, match=f"^{cfg['bloom_filter']['file']}: .*checksum"):
        run({**cfg, "force": True})


def test_a_run_killed_while_publishing_or_without_its_work_files_never_extends_its_own_filter(corpus, tmp_path):
    """Publishing writes its record, then the sidecar, then the filter. Killed before the filter
    was replaced, a rerun publishes it and gives the uninterrupted run's outputs; a run whose record
    is gone (work files deleted) refuses to start from its own result, which would mark every
    paragraph it holds as a duplicate."""
    root, _ = corpus
    out = tmp_path / "out"
    # A kill leaves the work files a complete run removes.
    cfg = _bloom(root, out, "paragraphs", processes=2, keep_work=True)
    run(cfg)
    filter_path = Path(cfg["bloom_filter"]["file"])
    expected = stage_outputs(out / "paragraphs") | {"filter": filter_path.read_bytes()}
    filter_path.unlink()  # killed after the record and the sidecar, before the filter was written
    again = run(cfg)
    assert all(r.skipped for r in again.results)
    assert stage_outputs(out / "paragraphs") | {"filter": filter_path.read_bytes()} == expected
    (out / "paragraphs" / "_work" / "bloom" / "published.json").unlink()
    for overrides in ({}, {"force": True}):
        err = _filter_error({**cfg, **overrides}, tmp_path)
        assert str(filter_path) in err and "published by this run" in err and "delete the filter" in err
    assert filter_path.read_bytes() == expected["filter"]
    # A directory given as the filter file.
    (tmp_path / "adir").mkdir()
    err = _filter_error({**cfg, "bloom_filter": {**cfg["bloom_filter"], "file": str(tmp_path / "adir")}}, tmp_path)
    assert "is a directory" in err
