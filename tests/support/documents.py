"""Documents for tests: synthetic ones from a small word list, and the bundled sample corpus's."""

from __future__ import annotations

import glob
import gzip
import json
import os
import random
from pathlib import Path

from tests.support.repo import SAMPLE_DOCUMENTS

WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no out up into"
).split()


def make_docs(n: int, seed: int = 0, words: int = 60, source: str = "test") -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "id": f"{source}-{seed}-{i}",
            "text": " ".join(rng.choices(WORDS, k=words)) + f" ünïcödé {i}.",
            "source": source,
            "added": "2026-01-01T00:00:00Z",
            "metadata": {"n": i, "tags": ["a", "b"]},
        }
        for i in range(n)
    ]


def sample_rows(pattern: str = "*/*") -> list[dict]:
    """Every document of the bundled sample corpus under ``pattern``, in file order."""
    from dolma_pipe.documents import read_documents

    return [row for path in sorted(glob.glob(os.path.join(SAMPLE_DOCUMENTS, pattern))) for _, row in read_documents(path)]


def write_synthetic_corpus(root: Path, files: int = 3, docs: int = 50, ext: str = "jsonl.gz", words: int = 60) -> Path:
    """``files`` document files of ``docs`` documents (:func:`make_docs`, seeded by the file's
    index) under ``root/documents/``; returns ``root``."""
    from dolma_pipe.documents import write_documents

    for f in range(files):
        write_documents(str(root / "documents" / f"part-{f:04d}.{ext}"), make_docs(docs, seed=f, words=words))
    return root


def sample_documents() -> list:
    """The sample corpus's documents (:func:`sample_rows`) as the taggers see them."""
    from taggers.base import Document

    return [Document.from_row(row) for row in sample_rows()]


def write_gzip_jsonl(path: Path, rows: list[dict]) -> None:
    """``rows`` as gzipped JSON lines at ``path`` (a fixed gzip time: the same bytes every run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode(), mtime=0))
