"""Demo of the Rust Bloom filter on the sample corpus: how many documents and paragraphs repeat.

A preview of what `dolma-pipe dedup` will do with the same filter: every document text and every
paragraph is test-and-set in one filter sized for the corpus; a key already present is a
duplicate (or, at the configured rate, a false positive).

Usage: python examples/bloom_demo.py 'demo-output/corpus/documents/*/*.jsonl.gz'
"""

from __future__ import annotations

import sys

from dolma_pipe import storage
from dolma_pipe.bloom import BloomFilter
from dolma_pipe.documents import read_documents


def main(pattern: str) -> None:
    docs = [doc for path in storage.glob(pattern) for _, doc in read_documents(path)]
    paragraphs = [p.strip() for d in docs for p in d["text"].split("\n\n") if len(p.strip()) >= 40]
    bloom = BloomFilter(expected_items=len(docs) + len(paragraphs), fp_rate=1e-6)
    doc_dups = sum(bloom.insert_many(["doc:" + d["text"] for d in docs]))
    para_dups = sum(bloom.insert_many(["para:" + p for p in paragraphs]))
    print(f"Bloom filter: {bloom.num_bits:,} bits, {bloom.num_hashes} hashes, fp rate 1e-6")
    print(f"documents:  {len(docs):,} read, {doc_dups:,} exact duplicates of an earlier document")
    print(f"paragraphs: {len(paragraphs):,} of 40+ chars, {para_dups:,} repeat an earlier paragraph")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo-output/corpus/documents/*/*.jsonl.gz")
