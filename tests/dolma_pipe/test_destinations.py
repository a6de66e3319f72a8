"""A run never writes over another run (dolma_pipe.destinations): issue 27's first finding."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from dolma_pipe.config import load_config
from dolma_pipe.destinations import DestinationTaken
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.convert import ConvertConfig, ConvertStage
from dolma_pipe.stages.dedup import DedupConfig, DedupStage
from dolma_pipe.stages.stats import StatsConfig, StatsStage
from taggers.stage import TagConfig, TagStage
from tests.support.cli import run_cli


def _run(stage_cls, config_cls, **cfg):
    cfg.setdefault("processes", 1)
    cfg.setdefault("progress", False)
    return run_stage(stage_cls(load_config(config_cls, None, cfg)), stream=io.StringIO())


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _tag(corpus: Path, name: str):
    return _run(TagStage, TagConfig, documents=[str(corpus / "documents" / "*")], experiment=name, taggers=["lengths_v1"])


def _dedup(corpus: Path, name: str):
    return _run(
        DedupStage,
        DedupConfig,
        documents=[str(corpus / "documents" / "*")],
        dedupe={"name": name, "documents": {"attribute_name": "dups", "key": "$.text"}},
    )


def test_dedup_refuses_the_attribute_name_a_tag_run_took(make_corpus):
    corpus = make_corpus(files=2, docs=20)
    _tag(corpus, "quality")
    root = corpus / "attributes" / "quality"
    before = _snapshot(root)
    with pytest.raises(DestinationTaken, match=r"holds a tag run \(complete.*change 'dedupe.name'"):
        _dedup(corpus, "quality")
    assert _snapshot(root) == before  # nothing written: not the lock, not a manifest
    # ... and the other way round, naming tag's key.
    _dedup(corpus, "dups")
    with pytest.raises(DestinationTaken, match=r"holds a dedup run.*change 'experiment'"):
        _tag(corpus, "dups")


def test_a_stage_refuses_another_stages_folder_and_the_cli_says_it_in_one_line(make_corpus, tmp_path):
    corpus = make_corpus(files=2, docs=20)
    out = tmp_path / "converted"
    _run(ConvertStage, ConvertConfig, documents=[str(corpus / "documents" / "*")], destination=str(out))
    manifest = (out / "_manifest.json").read_bytes()
    proc = run_cli("stats", "--documents", str(corpus / "documents" / "*"), "--destination", str(out))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"dolma-pipe stats: error: {out} holds a convert run ({proc.stderr.split('convert run (')[1].split(')')[0]}); "
        "a stats run would write over it: change 'destination' (every run needs a folder of its own)"
    ]
    assert (out / "_manifest.json").read_bytes() == manifest
    assert not (out / "stats.json").exists()


def test_a_folder_holding_another_runs_outputs_is_refused_but_a_folder_beside_them_is_not(make_corpus, tmp_path):
    corpus = make_corpus(files=2, docs=20)
    out = tmp_path / "converted"
    _run(ConvertStage, ConvertConfig, documents=[str(corpus / "documents" / "*")], destination=str(out))
    inside = out / "documents"
    with pytest.raises(DestinationTaken, match=r"inside the folder of a convert run .* holds its outputs \(documents/part-0000"):
        _run(StatsStage, StatsConfig, documents=[str(corpus / "documents" / "*")], destination=str(inside))
    assert sorted(p.name for p in inside.iterdir()) == ["part-0000.jsonl.gz", "part-0001.jsonl.gz"]
    # Dolma's layout: attributes and other runs' folders nest in the corpus folder, beside its documents.
    _tag(out, "lengths")
    _run(StatsStage, StatsConfig, documents=[str(out / "documents" / "*")], destination=str(out / "stats"))
    assert orjson.loads((out / "stats" / "_manifest.json").read_bytes())["status"] == "complete"


def test_a_rerun_of_the_same_stage_is_not_refused(make_corpus):
    corpus = make_corpus(files=2, docs=20)
    _dedup(corpus, "dups")
    again = _dedup(corpus, "dups")
    assert again.status == "complete" and all(r.skipped for r in again.results)


def test_a_destination_on_s3_is_checked_too(make_corpus, s3_bucket):
    corpus = make_corpus(files=2, docs=10)
    out = f"s3://{s3_bucket}/runs/converted"
    _run(ConvertStage, ConvertConfig, documents=[str(corpus / "documents" / "*")], destination=out)
    with pytest.raises(DestinationTaken, match="holds a convert run"):
        _run(StatsStage, StatsConfig, documents=[str(corpus / "documents" / "*")], destination=out)
    with pytest.raises(DestinationTaken, match="inside the folder of a convert run"):
        _run(StatsStage, StatsConfig, documents=[str(corpus / "documents" / "*")], destination=out + "/documents")
    _run(StatsStage, StatsConfig, documents=[str(corpus / "documents" / "*")], destination=out + "/stats")


def test_the_index_refuses_the_tokenize_runs_folder_and_its_shards_folder(tmp_path):
    pytest.importorskip("tokenizers", reason="could not import tokenizers")
    from dolma_pipe.stages.index import IndexConfig, IndexStage
    from tests.support.index import planted_documents, tokenize_corpus

    tokens = tokenize_corpus(tmp_path, planted_documents(files=2, docs=10))
    before = _snapshot(tokens)
    for destination in (tokens, tokens / "train"):
        with pytest.raises(DestinationTaken, match="tokenize run"):
            _run(IndexStage, IndexConfig, shards=[str(tokens / "train")], destination=str(destination))
    assert _snapshot(tokens) == before
