"""Each source's documents as a pool of token counts, and a proxy's training data drawn from the pools.

A **pool** is one source's tokenized documents, read from its shards' sidecars once (the ``pools``
phase) and kept as a work file: per document its id hash, tokens, shard and start. A proxy run
takes ``weight * proxy.tokens`` tokens from each source the way a Dolmino mix takes a source's
request (:mod:`mixers.dolmino`): whole repeats of every document, then the subset of smallest
seeded rank whose tokens come closest to the rest. Ranks are a rule of each document's id, the
seed and the source, so a proxy's data does not depend on shard order or on which worker built it,
and runs that share a seed take nested subsets (a run with more of a source takes a superset of the
documents a run with less takes: the runs differ by their mixtures, not by luck of the draw).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dolma_pipe import workdir
from mixers import dolmino
from train.shards import ShardError, ShardWriter, find_shards, open_tokens, read_sidecar


class PoolError(ShardError):
    """A source's shards cannot be read as a pool; the message names the source and the file."""


def id_hash(doc_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


@dataclass
class Pool:
    """One source's documents: ``shards[shard[i]]`` holds document ``i`` at ``start[i]``, ``tokens[i]`` long."""

    name: str
    shards: list[str]
    keys: np.ndarray  # uint64 id hashes
    tokens: np.ndarray  # int64 tokens per document (EOS included)
    shard: np.ndarray  # int32 index into shards
    start: np.ndarray  # int64 first token in its shard

    @property
    def available(self) -> int:
        return int(self.tokens.sum())

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, keys=self.keys, tokens=self.tokens, shard=self.shard, start=self.start, shards=np.array(self.shards, dtype=np.str_))
        return buf.getvalue()

    @staticmethod
    def from_bytes(name: str, data: bytes) -> Pool:
        z = np.load(io.BytesIO(data))
        return Pool(name, [str(s) for s in z["shards"]], z["keys"], z["tokens"], z["shard"], z["start"])


def read_pool(name: str, paths: list[str]) -> Pool:
    """The documents of a source's shards, in shard order (sidecars only; the tokens stay on disk)."""
    try:
        found = find_shards(paths)
    except ShardError as e:
        raise PoolError(f"source {name!r}: {e}") from None
    shards, keys, tokens, shard, start = [], [], [], [], []
    for i, (path, _) in enumerate(found):
        try:
            rows = read_sidecar(path)
        except ShardError as e:
            raise PoolError(f"source {name!r}: {path}: {e}") from None
        shards.append(str(path))
        keys.append(np.fromiter((id_hash(r.id) for r in rows), dtype=np.uint64, count=len(rows)))
        tokens.append(np.fromiter((r.end - r.start for r in rows), dtype=np.int64, count=len(rows)))
        start.append(np.fromiter((r.start for r in rows), dtype=np.int64, count=len(rows)))
        shard.append(np.full(len(rows), i, dtype=np.int32))
    return Pool(name, shards, np.concatenate(keys), np.concatenate(tokens), np.concatenate(shard), np.concatenate(start))


def save_pool(path: str, pool: Pool) -> None:
    workdir.write(path, pool.to_bytes())


def load_pool(path: str, name: str) -> Pool:
    return Pool.from_bytes(name, workdir.read(path))


@dataclass
class Take:
    """What a proxy takes of one source: every document ``whole`` times, then those in ``subset``."""

    requested: int
    whole: int
    subset: np.ndarray  # bool per document
    tokens: int


def take(pool: Pool, requested: int, seed: int) -> Take:
    """The documents giving ``requested`` tokens of ``pool`` (within one document), for ``seed``."""
    available = pool.available
    if requested <= 0 or available == 0:
        return Take(requested, 0, np.zeros(len(pool.keys), dtype=bool), 0)
    whole, rest = divmod(requested, available)
    subset = np.zeros(len(pool.keys), dtype=bool)
    sub_tokens = 0
    if rest:
        threshold, sub_tokens, _ = dolmino.pick_subsets(pool.name, lambda: [(pool.keys, pool.tokens)], {seed: rest})[seed]
        subset = dolmino.selected(dolmino.seeded_ranks(pool.keys, seed, pool.name), threshold)
    return Take(requested, whole, subset, whole * available + sub_tokens)


def write_proxy_data(folder: Path, pools: list[Pool], takes: list[Take], *, vocab_size: int, eos_id: int, dtype: np.dtype) -> list[Path]:
    """One shard per source taken from, ``<source>-00000.npy``: its whole repeats, then its subset,
    each in the pool's order. Returns the shards written."""
    written = []
    for pool, t in zip(pools, takes):
        if t.tokens == 0:
            continue
        out = folder / f"{pool.name}-00000.npy"
        with ShardWriter(out, vocab_size=vocab_size, eos_id=eos_id, dtype=dtype, add_eos=False) as w:
            for mask in [np.ones(len(pool.keys), dtype=bool)] * t.whole + [t.subset]:
                for s, shard_path in enumerate(pool.shards):
                    idx = np.flatnonzero(mask & (pool.shard == s))
                    if not len(idx):
                        continue
                    try:
                        data = open_tokens(shard_path, dtype)
                    except ShardError as e:
                        raise PoolError(f"source {pool.name!r}: {e}") from None
                    for lo in range(0, len(idx), 4096):
                        part = idx[lo : lo + 4096]
                        pieces = [np.asarray(data[b : b + n]) for b, n in zip(pool.start[part].tolist(), pool.tokens[part].tolist())]
                        offsets = np.concatenate([[0], np.cumsum([len(p) for p in pieces])])
                        w.add_batch(
                            np.concatenate(pieces),
                            offsets,
                            ids=[f"{pool.name}-{i}" for i in part.tolist()],
                            srcs=pool.name,
                            locs=part.tolist(),
                        )
        written.append(out)
    return written
