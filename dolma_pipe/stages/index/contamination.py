"""Exact contamination counts: how many of an evaluation set's n-grams occur in the index.

Each evaluation document is encoded as the index's symbols (tokens, or UTF-8 bytes) and every
n-gram of it (every start, ``ngram`` symbols) is looked up at once: the longest match at each
start (:meth:`SuffixIndex.longest_matches`) is at least ``ngram`` exactly when that n-gram occurs.
Per evaluation file: n-grams, those found, their share, and documents with at least one.
"""

from __future__ import annotations

from typing import Any

from dolma_pipe import paths
from dolma_pipe.documents import read_documents
from dolma_pipe.quarantine import Quarantine

from .config import ContaminationConfig
from .query import Index


def count_contamination(root: str, section: ContaminationConfig) -> dict[str, dict[str, Any]]:
    index = Index(root, verify=False)  # just built and checked
    n = section.ngram
    out: dict[str, dict[str, Any]] = {}
    for f in paths.expand(list(section.evaluation)):
        ngrams = found = docs = with_any = 0
        for _, doc in read_documents(f.path, Quarantine()):
            query = index.encode(doc["text"])
            docs += 1
            if len(query) < n:
                continue
            best = index.longest_matches(query, n)
            windows = len(query) - n + 1
            hits = sum(1 for i in range(windows) if best[i] >= n)
            ngrams += windows
            found += hits
            with_any += hits > 0
        out[f.rel] = {
            "documents": docs,
            "documents_with_any": with_any,
            "ngrams": ngrams,
            "found": found,
            "share": found / ngrams if ngrams else 0.0,
        }
    return out
