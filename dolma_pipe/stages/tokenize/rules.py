"""Dolma's rules for the tokens of a document and the rules this stage adds: the seeded hashes of
ids that order documents and choose the held-out ones, special tokens, greedy shard packing.
Every phase applies the same rules, so they live here once."""

from __future__ import annotations

import hashlib

import numpy as np

U64 = 1 << 64


def seed_key(seed: int, domain: bytes) -> bytes:
    return hashlib.sha256(domain + b"\0" + str(seed).encode()).digest()[:32]


def hash_ids(ids: list[bytes], key: bytes) -> np.ndarray:
    """Seeded 64-bit hashes of document ids (blake2b keyed by the seed), as uint64."""
    blake = hashlib.blake2b
    digests = b"".join(blake(i, digest_size=8, key=key).digest() for i in ids)
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


def add_special_tokens(flat: np.ndarray, lengths: np.ndarray, bos: int | None, eos: int) -> tuple[np.ndarray, np.ndarray]:
    """Dolma's ``add_special_tokens`` on a batch: BOS in front unless a document starts with it,
    EOS at the end unless it ends with it.  ``flat`` is the documents' ids concatenated, every
    length > 0; returns the new ids and lengths."""
    ends = np.cumsum(lengths)
    starts = ends - lengths
    need_eos = flat[ends - 1] != eos
    positions = [ends[need_eos]]
    values = [np.full(int(need_eos.sum()), eos, dtype=flat.dtype)]
    new_lengths = lengths + need_eos
    if bos is not None:
        need_bos = flat[starts] != bos
        positions.append(starts[need_bos])
        values.append(np.full(int(need_bos.sum()), bos, dtype=flat.dtype))
        new_lengths = new_lengths + need_bos
    pos = np.concatenate(positions)
    # A document's EOS and the next one's BOS share a position: the stable sort keeps EOS first.
    order = np.argsort(pos, kind="stable")
    return np.insert(flat, pos[order], np.concatenate(values)[order]), new_lengths


def shard_bounds(lengths: np.ndarray, max_tokens: int) -> list[int]:
    """Greedy packing: document indices where shards start, plus the end.  A shard takes documents
    while it stays within ``max_tokens``; a document longer than that gets a shard of its own."""
    n = len(lengths)
    cum = np.cumsum(lengths, dtype=np.int64)
    bounds = [0]
    base = 0
    i = 0
    while i < n:
        j = max(i + 1, int(np.searchsorted(cum, base + max_tokens, side="right")))
        bounds.append(j)
        base = int(cum[j - 1])
        i = j
    return bounds
