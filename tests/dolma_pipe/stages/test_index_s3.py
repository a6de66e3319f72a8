"""Token shards on S3 (where ``tokenize`` writes them) are indexed, as docs/index.md promises, on a
local moto S3 server: the tokenize manifest beside them is read through the storage layer and the
shards are listed and read through it; a local index keeps a checked copy of each S3 shard to
answer from, an index on S3 is built in local scratch and uploaded, and ``query --index s3://``
reads a checksum-verified local copy from a cache folder. The parts are the bytes an index of the
same shards on local disk has; a changed S3 shard is refused; a replaced part object is rebuilt
by a rerun and refused by a query with a fresh cache."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import numpy as np
import pytest

from dolma_pipe import storage
from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.index import Index, IndexQueryError
from dolma_pipe.stages.tokenize import TokenizeConfig, TokenizeStage
from tests.support.cli import run_cli
from tests.support.index import EOS, index_config, planted_documents, run_index, tokenize_corpus
from tests.support.outputs import stage_outputs

pytest.importorskip("moto")


@pytest.fixture(scope="module")
def local_tokens(tmp_path_factory) -> Path:
    """The corpus tokenized on local disk (with a validation split: two folders of shards)."""
    root = tmp_path_factory.mktemp("s3-index")
    return tokenize_corpus(root, planted_documents(files=2, docs=25, seed=21), validation={"fraction": 0.3})


def _tokenize_to(local_tokens: Path, destination: str) -> None:
    """The same tokenize run, its shards written to ``destination`` (the same bytes)."""
    root = local_tokens.parent
    cfg = {
        "documents": [str(root / "documents" / "*.gz")],
        "destination": destination,
        "tokenizer": {"name_or_path": str(root / "tokenizer.json"), "eos_token_id": EOS},
        "max_tokens": 1500,
        "validation": {"fraction": 0.3},
        "processes": 1,
        "progress": False,
    }
    run_stage(TokenizeStage(load_config(TokenizeConfig, None, cfg)), stream=io.StringIO())


def _objects(prefix: str) -> dict[str, bytes]:
    return {p[len(prefix) :].lstrip("/"): storage.read_bytes(p) for p in storage.glob(f"{prefix}/**")}


def _queries(index: Index, tokens: Path) -> dict[str, int]:
    """Counts of n-grams drawn from the shards' documents (train and val)."""
    rng = random.Random(4)
    out = {}
    for path in sorted(tokens.rglob("part-*.npy")):
        data = np.fromfile(path, dtype=np.uint16)
        for _ in range(15):
            k = rng.randrange(1, 6)
            p = rng.randrange(len(data) - k)
            out[repr(data[p : p + k].tolist())] = index.count(data[p : p + k].tolist())
    return out


def test_s3_shards_index_into_a_local_folder(local_tokens, s3_bucket, tmp_path):
    remote = f"s3://{s3_bucket}/tokens"
    _tokenize_to(local_tokens, remote)
    here = tmp_path / "local-index"
    run_index(index_config(here, shards=[str(local_tokens / "train"), str(local_tokens / "val")]))
    out = tmp_path / "index"
    summary = run_index(index_config(out, shards=[f"{remote}/train", f"{remote}/val"]))
    assert summary.manifest.results["sources"] == len(list(local_tokens.rglob("part-*.npy"))) >= 3
    # The parts are the local index's bytes; each S3 shard has its copy beside them.
    assert stage_outputs(out / "shards") == stage_outputs(here / "shards")
    copies = {str(p.relative_to(out / "sources")): p.read_bytes() for p in (out / "sources").rglob("*") if p.is_file()}
    assert copies == {f"{split}/{p.name}": p.read_bytes() for split in ("train", "val") for p in (local_tokens / split).iterdir()}
    index = Index(str(out))
    assert all(s.path.startswith(remote) and s.local_copy for s in index.info.sources)
    assert _queries(index, local_tokens) == _queries(Index(str(here)), local_tokens)
    hits = index.find([EOS], limit=3)
    assert len(hits) == 3 and all(h.id for h in hits)
    # A shard rewritten on S3 since: the index no longer describes it.
    shard = f"{remote}/train/part-00000.npy"
    data = bytearray(storage.read_bytes(shard))
    data[4] ^= 1
    storage.write_bytes(shard, bytes(data))
    with pytest.raises(IndexQueryError, match=rf"{shard} changed since the index .* was built from it"):
        Index(str(out))
    redone = run_index(index_config(out, shards=[f"{remote}/train", f"{remote}/val"]))
    assert sum(not t.skipped for t in redone.results) == 1
    assert Index(str(out)).count([EOS]) == index.count([EOS])


def test_an_index_on_s3_is_queried_through_a_checked_cache(local_tokens, s3_bucket, tmp_path):
    remote = f"s3://{s3_bucket}/tokens"
    _tokenize_to(local_tokens, remote)
    here = tmp_path / "local-index"
    run_index(index_config(here, shards=[str(local_tokens / "train"), str(local_tokens / "val")]))
    dest = f"s3://{s3_bucket}/index"
    cfg = index_config(dest, shards=[f"{remote}/train", f"{remote}/val"])
    run_index(cfg)
    objects = _objects(dest)
    assert {k: v for k, v in objects.items() if k.startswith("shards/")} == {
        f"shards/{k}": v for k, v in stage_outputs(here / "shards").items()
    }
    assert not any(k.startswith("sources/") for k in objects)  # the shards are on S3 already
    cache = tmp_path / "cache"
    index = Index(dest, cache=str(cache))
    assert _queries(index, local_tokens) == _queries(Index(str(here)), local_tokens)
    cached = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    assert len(cached) == len([k for k in objects if k.startswith("shards/")]) + 2 * len(index.info.sources)  # parts, shards
    r = run_cli("query", "--index", dest, "--cache", str(cache), "--tokens", str(EOS), "--output", "jsonl", check=True)
    assert json.loads(r.stdout)["count"] == index.count([EOS])
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()} == cached  # checked, not fetched again
    # A part object replaced on S3: a query with a fresh cache refuses it; a rerun rebuilds it.
    sa = f"{dest}/shards/train/part-00001.sa"
    data = bytearray(storage.read_bytes(sa))
    data[len(data) // 2] ^= 4
    storage.write_bytes(sa, bytes(data))
    with pytest.raises(IndexQueryError, match=r"part train/part-00001 is damaged .*rerun dolma-pipe index"):
        Index(dest, cache=str(tmp_path / "fresh"))
    summary = run_index(cfg)
    assert [(d.key, d.path) for d in summary.manifest.redone] == [("train/part-00001.npy", sa)]
    assert _objects(dest).keys() == objects.keys()
    assert Index(dest, cache=str(tmp_path / "fresh")).count([EOS]) == index.count([EOS])
