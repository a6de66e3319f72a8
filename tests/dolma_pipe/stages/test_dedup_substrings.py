"""Substring dedup (``substrings:``): the spans against a brute-force scan of every window in the
global order (files by name, then line, then offset), for both ``keep`` rules; repeats across
files and across a file's parts; multi-byte UTF-8 (spans in whole characters); documents shorter
than the threshold; removed copies never credited; the mixer removes exactly the spans; the same
attributes for any process count and on Ray."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from dolma_pipe.config import load_config
from dolma_pipe.documents import read_attribute_rows, read_documents, write_documents
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.dedup import DedupConfig, DedupStage, substrings
from mixers.config import MixConfig
from mixers.stage import MixStage
from tests.support.dedup import attribute_rows, run
from tests.support.documents import WORDS
from tests.support.outputs import stage_outputs

L = 60  # bytes


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS + ["größe", "naïve", "日本語", "€uro", "emoji🙂"]) for _ in range(words))


def make_corpus(root: Path, seed: int = 0) -> list[list[dict]]:
    """Four files: shared sentences planted within and across files (a repeat that straddles
    files, one inside a document, one at a document's very end), multi-byte characters, and
    documents shorter than the threshold."""
    rng = random.Random(seed)
    shared = [_text(rng, 25) for _ in range(6)]
    files = []
    for f in range(4):
        docs = []
        for i in range(25):
            parts = [_text(rng, rng.randrange(3, 40))]
            if rng.random() < 0.5:
                parts.append(rng.choice(shared))
            if rng.random() < 0.3:
                parts.append(_text(rng, rng.randrange(1, 20)))
            text = " ".join(parts)
            if i % 7 == 3:
                text = text + " " + text[: rng.randrange(10, 200)]  # a repeat inside the document
            if i % 9 == 5:
                text = rng.choice(WORDS)  # shorter than L
            docs.append({"id": f"f{f}-{i}", "text": text, "source": "t"})
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), docs)
        files.append(docs)
    return files


def brute_force(files: list[list[dict]], length: int, keep_first: bool, skip: set[str] = frozenset()) -> dict[str, list[list[int]]]:
    """{doc id: [[start, end], ...] in characters}: every window seen before (or, keep none, seen
    twice), joined, cut to the whole characters inside."""
    seen: dict[bytes, list[tuple[int, int, int]]] = {}
    encoded = [[d["text"].encode("utf-8") if d["id"] not in skip else b"" for d in docs] for docs in files]
    for f, docs in enumerate(encoded):
        for i, b in enumerate(docs):
            for p in range(len(b) - length + 1):
                seen.setdefault(b[p : p + length], []).append((f, i, p))
    marked: dict[tuple[int, int], list[int]] = {}
    for occ in seen.values():
        if len(occ) >= 2:
            for f, i, p in occ[1:] if keep_first else occ:
                marked.setdefault((f, i), []).append(p)
    out: dict[str, list[list[int]]] = {}
    for f, docs in enumerate(files):
        for i, d in enumerate(docs):
            b = encoded[f][i]
            ranges: list[list[int]] = []
            for p in sorted(marked.get((f, i), [])):
                if ranges and p <= ranges[-1][1]:
                    ranges[-1][1] = max(ranges[-1][1], p + length)
                else:
                    ranges.append([p, p + length])
            spans = []
            for a, z in ranges:
                while a < z and (b[a] & 0xC0) == 0x80:
                    a += 1
                while z > a and z < len(b) and (b[z] & 0xC0) == 0x80:
                    z -= 1
                if a < z:
                    spans.append([len(b[:a].decode()), len(b[:z].decode())])
            out[d["id"]] = spans
    return out


def config(root: Path, **extra) -> dict:
    section = {"min_length": L, **extra.pop("substrings", {})}
    return {
        "documents": [str(root / "documents" / "*.gz")],
        "dedupe": {"name": "ss"},
        "substrings": section,
        "processes": 1,
        "progress": False,
        **extra,
    }


def spans_of(root: Path, destination: Path | None = None) -> dict[str, list[list[int]]]:
    rows = attribute_rows(root, "ss", destination)
    return {doc["id"]: [s[:2] for s in attrs.get("substring_duplicate", [])] for doc, attrs in rows.values()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[list[dict]]]:
    root = tmp_path_factory.mktemp("subs")
    return root, make_corpus(root)


@pytest.mark.parametrize("keep", ["first", "none"])
@pytest.mark.parametrize("split", [False, True])
def test_spans_are_every_repeat_in_the_global_order(corpus, tmp_path, monkeypatch, keep, split):
    root, files = corpus
    out = tmp_path / "out"
    if split:
        # The least budget a config takes (1 MiB) as if a byte of text took 1,000: parts of about
        # 1 KB, so every file (about 4 KB) splits and repeats cross parts.
        monkeypatch.setattr(substrings, "MEMORY_PER_BYTE", 1000)
    summary = run(config(root, destination=str(out), buckets=3, substrings={"keep": keep, "memory_per_task": 1 << 20}))
    got = spans_of(root, out)
    want = brute_force(files, L, keep == "first")
    assert got == want
    assert sum(map(len, want.values())) > 30  # the corpus has repeats of every kind
    parts = summary.manifest.phase("suffix").step["parts"]
    assert (len(parts) >= 3 * len(files)) == split


def test_the_mixer_removes_exactly_the_spans(corpus, tmp_path):
    root, files = corpus
    run(config(root))
    spans = spans_of(root)
    out = tmp_path / "mix"
    stream = {
        "name": "s",
        "documents": [str(root / "documents" / "*.gz")],
        "attributes": ["ss"],
        "span_replacement": [{"span": "$.attributes.substring_duplicate", "min_score": 0.5, "replacement": ""}],
        "output": {"path": str(out), "discard_fields": ["attributes"]},
    }
    run_stage(MixStage(load_config(MixConfig, None, {"streams": [stream], "progress": False})), stream=io.StringIO())
    mixed = {d["id"]: d["text"] for p in sorted(out.glob("*.gz")) for _, d in read_documents(str(p))}
    for docs in files:
        for d in docs:
            want = d["text"]
            for a, z in reversed(spans[d["id"]]):
                want = want[:a] + want[z:]
            assert mixed[d["id"]] == want


def test_a_document_removed_whole_is_never_the_first_copy(tmp_path):
    """An exact duplicate removed by the documents pass holds a string first; with it left out,
    the string's next copy is the first, and keeps it."""
    rng = random.Random(5)
    unique = _text(rng, 30)
    docs_a = [{"id": "a0", "text": "intro " + unique}, {"id": "a1", "text": "intro " + unique}]  # a1: exact copy of a0
    docs_b = [{"id": "b0", "text": _text(rng, 10) + " " + unique}]
    write_documents(str(tmp_path / "documents" / "a.jsonl.gz"), docs_a)
    write_documents(str(tmp_path / "documents" / "b.jsonl.gz"), docs_b)
    cfg = config(tmp_path)
    cfg["dedupe"]["documents"] = {"attribute_name": "dup_docs", "key": "$.text"}
    run(cfg)
    spans = spans_of(tmp_path)
    assert spans["a0"] == [] and spans["a1"] == []  # a1 is removed whole, and no first copy
    assert spans["b0"] == brute_force([docs_a, docs_b], L, True, skip={"a1"})["b0"] != []


@pytest.mark.parametrize("processes", [2])
def test_same_attributes_for_any_process_count(corpus, tmp_path, processes):
    root, _ = corpus
    one, two = tmp_path / "one", tmp_path / "two"
    run(config(root, destination=str(one), buckets=4))
    run(config(root, destination=str(two), buckets=4, processes=processes))
    assert stage_outputs(one / "ss") == stage_outputs(two / "ss")


@pytest.mark.slow
def test_s3_documents_need_a_local_work_directory_and_get_the_same_spans(corpus, tmp_path, s3_bucket):
    """Refused when the config loads (not after the scan), naming work_dir.output; with a local
    work directory, S3 documents get the spans a local run gives (issue 27, finding 8)."""
    import boto3

    from dolma_pipe.config import ConfigError

    root, files = corpus
    client = boto3.client("s3")
    for f in sorted((root / "documents").glob("*.gz")):
        client.upload_file(str(f), s3_bucket, f"corpus/documents/{f.name}")
    remote = f"s3://{s3_bucket}/corpus"
    cfg = config(root)
    cfg["documents"] = [f"{remote}/documents/*.gz"]
    with pytest.raises(ConfigError, match=rf"config key 'work_dir.output': .* it would be {remote}/attributes/ss/_work, on S3"):
        DedupStage(load_config(DedupConfig, None, cfg))
    with pytest.raises(ConfigError, match=r"config key 'work_dir.output': .* s3://.* is on S3"):
        DedupStage(load_config(DedupConfig, None, {**cfg, "work_dir": {"output": f"s3://{s3_bucket}/work"}}))
    run({**cfg, "work_dir": {"output": str(tmp_path / "work")}})
    local = tmp_path / "local"
    run({**config(root), "destination": str(local)})
    got = {}
    for f in sorted((root / "documents").glob("*.gz")):
        for _, row in read_attribute_rows(f"{remote}/attributes/ss/{f.name}"):
            got[row["id"]] = [s[:2] for s in row["attributes"].get("substring_duplicate", [])]
    assert got == spans_of(root, local) == brute_force(files, L, keep_first=True)


def test_a_rerun_of_a_finished_run_whose_work_was_removed_redoes_nothing(corpus, tmp_path):
    """The work directory (suffix arrays, ranges) is removed when a run completes: a rerun finds
    every task done without reading it (planning the key ranges read the largest part's suffix
    array, and failed), and leaves the same outputs; with an attribute file lost, the same
    outputs again."""
    root, _ = corpus
    out = tmp_path / "out"
    cfg = config(root, destination=str(out), buckets=3)
    run(cfg)
    assert not (out / "ss" / "_work").exists()
    first = stage_outputs(out / "ss")
    again = run(cfg)
    assert all(r.skipped for r in again.results) and not again.manifest.redone
    assert stage_outputs(out / "ss") == first
    # An attribute file gone too: its task needs the work files again (scan's, the arrays, the
    # ranges), and their writers are redone; counting the key ranges reads none of them.
    (out / "ss" / "part-2.jsonl.gz").unlink()
    redone = run(cfg)
    assert {r.phase for r in redone.manifest.redone} == {"scan", "suffix", "substrings", "attributes"}
    assert stage_outputs(out / "ss") == first


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_attributes_on_ray(self, corpus, tmp_path, ray_address):
        from dolma_pipe.executors import RayExecutor

        root, _ = corpus
        local, on_ray = tmp_path / "local", tmp_path / "ray"
        run(config(root, destination=str(local), buckets=2))
        with RayExecutor(2, ray_address) as ex:
            run(config(root, destination=str(on_ray), buckets=2, processes=2, ray_address=ray_address), executor=ex)
        assert stage_outputs(local / "ss") == stage_outputs(on_ray / "ss")
