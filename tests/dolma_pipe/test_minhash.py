"""dolma_pipe.minhash, the Python face of the Rust MinHash core: shingles, signatures, LSH shape."""

from __future__ import annotations

import random

import pytest

from dolma_pipe.minhash import MinHasher, band_hashes, candidate_probability, estimated_jaccard, jaccard, optimal_bands
from tests.support.documents import sample_rows


def test_words_and_shingles():
    mh = MinHasher(16, ngram=2)
    assert mh.words_of("Hello, World! it's 42") == ["hello", "world", "it", "s", "42"]
    assert MinHasher(16, words="whitespace", lowercase=False).words_of("Hello, World!") == ["Hello,", "World!"]
    assert mh.words_of("中文 text") == ["中", "文", "text"]
    assert len(mh.shingles("a b c d")) == 3
    assert len(mh.shingles("one")) == 1 and mh.shingles("...") == []
    assert mh.shingles("The cat") == mh.shingles("the, CAT!")
    assert mh.shingle_set("a b a b a b") == sorted(set(mh.shingle_set("a b a b a b")))


def test_signatures_are_seeded_and_identical_in_batches():
    texts = [r["text"] for r in sample_rows("fortunes/*")[:50]]
    mh = MinHasher(64, seed=5)
    sigs = mh.signatures(texts)
    assert sigs == [mh.signature(t) for t in texts] == MinHasher(64, seed=5).signatures(texts)
    assert sigs != MinHasher(64, seed=6).signatures(texts)
    assert all(len(s) == 64 for s in sigs)
    assert mh.signature("") == [2**32 - 1] * 64
    assert (mh.num_perm, mh.ngram, mh.lowercase, mh.words, mh.seed) == (64, 5, True, "word", 5)
    assert repr(mh) == 'MinHasher(num_perm=64, ngram=5, lowercase=True, words="word", seed=5)'


def test_signature_agreement_estimates_the_jaccard():
    rng = random.Random(2)
    mh = MinHasher(256)
    text = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]) + str(i % 97) for i in range(600))
    words = text.split()
    for edits in (10, 40, 120):
        other = list(words)
        for i in rng.sample(range(len(words)), edits):
            other[i] = "x" + str(i)
        b = " ".join(other)
        exact = mh.jaccard(text, b)
        assert exact == jaccard(mh.shingle_set(text), mh.shingle_set(b))
        assert abs(estimated_jaccard(mh.signature(text), mh.signature(b)) - exact) < 0.08, edits


def test_lsh_shape():
    assert optimal_bands(0.8, 128) == (9, 13), "datasketch's choice for 128 permutations at 0.8"
    bands, rows = optimal_bands(0.8, 64, 0.05, 0.95)
    assert (bands, rows) == (10, 6) and candidate_probability(0.8, bands, rows) > 0.95
    assert candidate_probability(0.3, bands, rows) < 0.01
    with pytest.raises(ValueError, match="threshold"):
        optimal_bands(1.5, 64)
    sig = MinHasher(12).signature("some text to sign here")
    assert len(band_hashes(sig, 3, 4, 1)) == 3
    with pytest.raises(ValueError):
        band_hashes(sig, 4, 4, 1)
    with pytest.raises(ValueError, match="sorted"):
        jaccard([3, 1], [1])


def test_bad_arguments():
    with pytest.raises(ValueError, match="ngram"):
        MinHasher(8, ngram=0)
    with pytest.raises(ValueError, match="permutations"):
        MinHasher(0)
    with pytest.raises(ValueError, match="words"):
        MinHasher(8, words="chars")
