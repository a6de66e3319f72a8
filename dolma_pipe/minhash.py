"""MinHash for near-duplicate detection: the typed Python face of the Rust core (`rust_bloom/src/minhash/`).

This module owns the public API; the work happens in `dolma_pipe._rust`.

**Shingles.** A text's words are normalised (lower-cased runs of ``\\w`` characters by default,
or whitespace-separated words with ``words="whitespace"``); every character of a script written
without spaces between words (Han, kana, Thai, Lao, Tibetan, Myanmar, Khmer) is a word by itself,
so such text is shingled rather than dropped. A shingle is ``ngram`` consecutive words, hashed to
64 bits; a text with fewer words than ``ngram`` is one shingle, a text without words has none.

**Signatures.** ``num_perm`` hash functions h_i(x) = high 32 bits of (a_i x + b_i) mod 2^64,
a_i and b_i drawn from ``seed``; the signature holds each function's minimum over the shingles.
Two texts agree at a position with probability about their shingles' Jaccard similarity. The
same seed gives the same signatures on every machine (the vectorised and plain code paths compute
the same integers).

**LSH.** Signatures are cut into ``bands`` of ``rows`` values; texts sharing one band are
candidates. :func:`optimal_bands` picks bands x rows for a threshold as datasketch does (the
weighted areas under the S-curve on either side of the threshold); :func:`candidate_probability`
is the S-curve itself.

    mh = MinHasher(128, ngram=5, seed=1)
    sig = mh.signature(text)                     # list of 128 ints
    sigs = mh.signatures(texts)                  # many, without the GIL
    mh.jaccard(a, b)                             # exact Jaccard of two texts' shingle sets
    bands, rows = optimal_bands(0.8, 128)
"""

from __future__ import annotations

from dolma_pipe._rust import MinHasher, band_hashes, candidate_probability
from dolma_pipe._rust import jaccard as _jaccard
from dolma_pipe._rust import optimal_bands as _optimal_bands

__all__ = ["MinHasher", "band_hashes", "candidate_probability", "estimated_jaccard", "jaccard", "optimal_bands"]


def optimal_bands(threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5) -> tuple[int, int]:
    """Bands x rows (bands * rows <= ``num_perm``) for a Jaccard ``threshold``.

    Minimises ``fp_weight * FP + fn_weight * FN``, where FP is the area under the S-curve below
    the threshold and FN the area above it under its complement. With candidates verified
    against the real Jaccard afterwards, a high ``fn_weight`` is cheap (false candidates are
    dropped by the verification). Raises ValueError unless 0 < threshold < 1.
    """
    return _optimal_bands(threshold, num_perm, fp_weight, fn_weight)


def jaccard(a: list[int], b: list[int]) -> float:
    """|A ∩ B| / |A ∪ B| of two sorted lists without repeats (e.g. ``MinHasher.shingle_set``)."""
    return _jaccard(a, b)


def estimated_jaccard(a: list[int], b: list[int]) -> float:
    """The fraction of positions where two signatures agree (0.0 for empty signatures)."""
    n = min(len(a), len(b))
    return sum(1 for x, y in zip(a, b) if x == y) / n if n else 0.0
