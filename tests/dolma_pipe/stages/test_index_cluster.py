"""The index built on a Ray cluster whose nodes share no disk (two worker nodes on 127.0.0.1, each
with its own ``/tmp``: tests/dolma_pipe/test_cluster_no_shared_disk.py's cluster): token shards
on S3, the index on S3. Each worker copies its shard into its own scratch space, builds the parts
there and uploads them; the index is the same objects as the same build on the local executor,
and ``query --index s3://`` answers from a checked local copy what the local build answers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dolma_pipe import storage
from dolma_pipe.config import load_config
from dolma_pipe.manifest import read_manifest
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.tokenize import TokenizeConfig, TokenizeStage
from tests.dolma_pipe.stages.index_support import EOS, index_config, planted_documents, run_index, write_corpus
from tests.dolma_pipe.test_cluster_no_shared_disk import cluster  # noqa: F401 (the module-scoped fixture)
from tests.helpers import train_tokenizer

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]


def _objects(prefix: str) -> dict[str, bytes]:
    """The index's objects but its manifest, lock and markers (which name times, hosts, executors)."""
    out = {}
    for path in storage.glob(f"{prefix}/**"):
        rel = path[len(prefix) + 1 :]
        if not rel.startswith(("_done/", "_manifest.json", "_lock.json", "_failures.log")):
            out[rel] = storage.read_bytes(path)
    return out


def test_an_s3_index_built_by_nodes_that_share_no_disk(cluster, s3_bucket, tmp_path):  # noqa: F811
    address, auth = cluster
    files = planted_documents(files=3, docs=30, seed=8)
    write_corpus(tmp_path, files)
    tokenizer = train_tokenizer(tmp_path / "tokenizer.json", [d["text"] for rows in files for d in rows], vocab_size=300)
    tokens = f"s3://{s3_bucket}/tokens"
    cfg = {
        "documents": [str(tmp_path / "documents" / "*.gz")],
        "destination": tokens,
        "tokenizer": {"name_or_path": tokenizer, "eos_token_id": EOS},
        "max_tokens": 1200,
        "validation": {"fraction": 0.2},
        "processes": 1,
        "progress": False,
    }
    run_stage(TokenizeStage(load_config(TokenizeConfig, None, cfg)), stream=io.StringIO())
    shards = [f"{tokens}/train", f"{tokens}/val"]

    local = f"s3://{s3_bucket}/index-local"
    run_index(index_config(local, shards=shards, processes=2))
    dest = f"s3://{s3_bucket}/index"
    config = tmp_path / "index.json"
    config.write_text(json.dumps(index_config(dest, shards=shards)))
    proc = subprocess.run(
        [sys.executable, "-m", "dolma_pipe", "index", "-c", str(config), "--ray-address", address, "--processes", "2", "--no-progress"],
        cwd=tmp_path,
        env={**os.environ, **auth},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert read_manifest(dest).executor.name == "ray"
    built = _objects(dest)
    assert len([k for k in built if k.endswith(".sa")]) >= 4 and built == _objects(local)

    answers = []
    for root in (dest, local):
        r = subprocess.run(
            [sys.executable, "-m", "dolma_pipe", "query", "--index", root, "--cache", str(tmp_path / "cache"), "--tokens", str(EOS)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        answers.append(r.stdout)
    assert answers[0] == answers[1] and int(answers[0].replace(",", "")) == sum(len(rows) for rows in files)
    assert any(Path(tmp_path / "cache").rglob("*.sa"))
