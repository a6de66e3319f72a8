"""What the index tests share: a token corpus (real ``tokenize`` shards of documents with planted
repeats, through a small tokenizer trained here), brute-force answers, and a slowed build to kill.

``python -m tests.support.index CONFIG_JSON SECONDS`` runs the index stage with
every build task slowed by ``SECONDS`` (the phase's run wrapped here, before the workers start),
so a test can kill it between two of them.
"""

from __future__ import annotations

import io
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson

from dolma_pipe.config import load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.runner import RunSummary, run_stage
from dolma_pipe.stage import Phase, RunContext, Task, TaskOutput
from dolma_pipe.stages.index import IndexConfig, IndexStage
from dolma_pipe.stages.tokenize import TokenizeConfig, TokenizeStage
from tests.support.documents import WORDS
from tests.support.tokens import train_tokenizer
from train.shards import find_shards, read_shard

EOS = 1  # train_tokenizer's <|endoftext|>
EXTRA = ["größe", "naïve", "日本語", "€uro", "emoji🙂", "Debian", "package", "manager"]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS + EXTRA) for _ in range(words))


def planted_documents(files: int = 3, docs: int = 40, seed: int = 0) -> list[list[dict]]:
    """Documents sharing sentences (within and across files), repeating themselves, and some
    shorter than any n-gram the tests ask."""
    rng = random.Random(seed)
    shared = [text(rng, 30) for _ in range(5)]
    out = []
    for f in range(files):
        rows = []
        for i in range(docs):
            parts = [text(rng, rng.randrange(5, 60))]
            if rng.random() < 0.5:
                parts.insert(rng.randrange(2), rng.choice(shared))
            body = " ".join(parts)
            if i % 6 == 2:
                body += " " + body[: rng.randrange(20, 120)]
            if i % 11 == 4:
                body = rng.choice(WORDS)
            rows.append({"id": f"f{f}-{i}", "text": body, "source": "t"})
        out.append(rows)
    return out


def write_corpus(root: Path, files: list[list[dict]]) -> None:
    for f, rows in enumerate(files):
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), rows)


def tokenize_corpus(root: Path, files: list[list[dict]], **extra) -> Path:
    """``tokenize`` of the corpus: several train shards of uint16 tokens, with their manifest
    (``extra`` config keys: a ``validation`` split, say)."""
    write_corpus(root, files)
    tok = train_tokenizer(root / "tokenizer.json", [d["text"] for rows in files for d in rows], vocab_size=300)
    out = root / "tokens"
    cfg = {
        "documents": [str(root / "documents" / "*.gz")],
        "destination": str(out),
        "tokenizer": {"name_or_path": tok, "eos_token_id": EOS},
        "max_tokens": 1500,
        "processes": 1,
        "progress": False,
        **extra,
    }
    run_stage(TokenizeStage(load_config(TokenizeConfig, None, cfg)), stream=io.StringIO())
    return out


def shard_documents(tokens: Path) -> list[tuple[str, list[int]]]:
    """(id, tokens with EOS) of every train document, in shard order."""
    out = []
    for path, _ in find_shards([tokens / "train"]):
        shard = read_shard(path, np.uint16, eos_id=EOS)
        out += [(d.id, shard.document(i).tolist()) for i, d in enumerate(shard.docs)]
    return out


def scan_count(docs: list, pattern: list) -> int:
    """Occurrences of ``pattern`` inside the documents (sequences of symbols), a scan."""
    n = len(pattern)
    return sum(1 for d in docs for p in range(len(d) - n + 1) if d[p : p + n] == pattern)


def scan_longest(docs: list, query: list, i: int) -> int:
    """The longest prefix of ``query[i:]`` found inside a document, by scanning."""
    best = 0
    for d in docs:
        for p in range(len(d)):
            k = 0
            while i + k < len(query) and p + k < len(d) and d[p + k] == query[i + k]:
                k += 1
            best = max(best, k)
    return best


def index_config(destination: Path, **extra) -> dict:
    return {"destination": str(destination), "processes": 1, "progress": False, **extra}


def run_index(cfg: dict, executor=None) -> RunSummary:
    return run_stage(IndexStage(load_config(IndexConfig, None, cfg)), executor=executor, stream=io.StringIO())


class SlowIndexStage(IndexStage):
    """The index stage with its build tasks slowed (a class importable by name: it pickles)."""

    delay = 0.0

    def phases(self) -> list[Phase]:
        return [replace(p, run=self._slow_build) for p in super().phases()]

    def _slow_build(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        time.sleep(self.delay)
        return self._build(task, quarantine, ctx)


if __name__ == "__main__":
    SlowIndexStage.delay = float(sys.argv[2])
    run_stage(SlowIndexStage(load_config(IndexConfig, None, orjson.loads(sys.argv[1]))))
