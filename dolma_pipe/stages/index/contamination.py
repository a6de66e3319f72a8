"""Exact contamination counts: how many of an evaluation set's n-grams occur in the index.

Each evaluation document is encoded as the index's symbols (tokens, or UTF-8 bytes) and every
n-gram of it (every start, ``ngram`` symbols) is looked up at once: the longest match at each
start (:meth:`SuffixIndex.longest_matches`) is at least ``ngram`` exactly when that n-gram occurs.
Per evaluation file: n-grams, those found, their share, and documents with at least one (and the
bad records left out). A file with no document to count is an error naming it: no silent zero.
"""

from __future__ import annotations

from typing import Any

from dolma_pipe import paths
from dolma_pipe.documents import read_documents
from dolma_pipe.quarantine import Quarantine

from .config import ContaminationConfig
from .files import SuffixIndexError
from .query import Index


def count_contamination(root: str, section: ContaminationConfig) -> dict[str, dict[str, Any]]:
    index = Index(root, verify=False)  # just built and checked
    n = section.ngram
    out: dict[str, dict[str, Any]] = {}
    for f in paths.expand(list(section.evaluation)):
        ngrams = found = docs = with_any = 0
        bad = Quarantine()
        for _, doc in read_documents(f.path, bad):
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
        if docs == 0:
            first = next(iter(bad.records), None)
            why = f" ({bad.total:,} bad record(s); line {first.line}: {first.message})" if first is not None else ""
            raise SuffixIndexError(
                f"config key 'contamination.evaluation': {f.path} holds no document with a text to count{why}; "
                "an evaluation set is JSON lines with 'id' and 'text' (or Parquet), as every stage reads documents"
            )
        bad.close()
        out[f.rel] = {
            "bad_records": bad.total,
            "documents": docs,
            "documents_with_any": with_any,
            "ngrams": ngrams,
            "found": found,
            "share": found / ngrams if ngrams else 0.0,
        }
    return out
