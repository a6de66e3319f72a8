"""Training instances cut from token shards, their seeded global order, and fingerprints.

Shards follow DESIGN.md section 3: headerless ``np.memmap`` files ``part-XXXXX.npy`` of
uint16/uint32 tokens (every document ends with EOS) next to ``part-XXXXX.csv.gz`` sidecars
(``start,end,id,src,loc``). Instances are consecutive ``seq_len``-token windows of one shard
(documents are packed, as OLMo does; a shard's tail shorter than ``seq_len`` is dropped).

The order is a permutation of all instances seeded by ``(seed, epoch)``. Step ``s`` takes the
next ``global_batch_size`` instances of that order and rank ``r`` takes its contiguous slice.
The only state is the number of instances (tokens / seq_len) already consumed, so a run can
resume with a different global batch size or number of ranks and still see every instance
exactly once per epoch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class DataError(ValueError):
    """Bad or missing shards, or a dataset that does not match a checkpoint."""


def token_dtype(name: str, vocab_size: int) -> np.dtype:
    if name == "auto":
        # DESIGN.md: uint16 when the vocabulary fits, uint32 otherwise
        return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)
    return np.dtype(name)


def find_shards(paths: list[str]) -> list[tuple[Path, str]]:
    """(file, name relative to the path it was found under), sorted, for .npy files or folders."""
    found: list[tuple[Path, str]] = []
    for p in paths:
        root = Path(p)
        if root.is_dir():
            files = sorted(root.rglob("*.npy"))
            found += [(f, str(f.relative_to(root))) for f in files]
        elif root.is_file():
            found.append((root, root.name))
        else:
            raise DataError(f"data path {p!r} does not exist")
    if not found:
        raise DataError(f"no .npy token shards under {paths}")
    return found


@dataclass
class Shard:
    path: Path
    name: str
    n_tokens: int


class TokenDataset:
    """Fixed-length instances over a list of shards; ``instance(i)`` is an int64 array."""

    def __init__(self, paths: list[str], seq_len: int, dtype: np.dtype, eos_id: int | None = None):
        self.seq_len = seq_len
        self.dtype = np.dtype(dtype)
        self.shards: list[Shard] = []
        for path, name in find_shards(paths):
            size = path.stat().st_size
            if size % self.dtype.itemsize:
                raise DataError(f"{path}: size {size} is not a multiple of {self.dtype} (wrong token_dtype?)")
            self.shards.append(Shard(path, name, size // self.dtype.itemsize))
        self._maps: dict[int, np.memmap] = {}
        if eos_id is not None:
            for i, s in enumerate(self.shards):
                if s.n_tokens and int(self._map(i)[-1]) != eos_id:
                    raise DataError(f"{s.path}: last token is not EOS ({eos_id}); wrong dtype or truncated shard?")
        counts = np.array([s.n_tokens // seq_len for s in self.shards], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)])
        self.n_instances = int(self._starts[-1])
        if self.n_instances == 0:
            raise DataError(f"shards under {paths} hold no instance of {seq_len} tokens")

    def _map(self, i: int) -> np.memmap:
        if i not in self._maps:
            self._maps[i] = np.memmap(self.shards[i].path, dtype=self.dtype, mode="r")
        return self._maps[i]

    def instance(self, index: int) -> np.ndarray:
        shard = int(np.searchsorted(self._starts, index, side="right") - 1)
        off = (index - int(self._starts[shard])) * self.seq_len
        return np.asarray(self._map(shard)[off : off + self.seq_len], dtype=np.int64)

    def batch(self, indices: np.ndarray) -> np.ndarray:
        return np.stack([self.instance(int(i)) for i in indices]) if len(indices) else np.zeros((0, self.seq_len), np.int64)

    def fingerprint(self) -> str:
        """A short hash of what the training order depends on.

        Shard names (relative to the configured path, so moving the data is fine), sizes, dtype
        and seq_len, plus a hash of each shard's first and last 4 KiB as a cheap content check.
        """
        h = hashlib.sha256()
        h.update(json.dumps([str(self.dtype), self.seq_len]).encode())
        for i, s in enumerate(self.shards):
            h.update(json.dumps([s.name, s.n_tokens]).encode())
            with open(s.path, "rb") as f:
                h.update(f.read(4096))
                f.seek(max(0, s.n_tokens * self.dtype.itemsize - 4096))
                h.update(f.read(4096))
        return h.hexdigest()[:16]


class GlobalOrder:
    """The seeded order of instances across epochs, and each rank's share of a step."""

    def __init__(self, n_instances: int, seed: int):
        self.n = n_instances
        self.seed = seed
        self._perm_cache: dict[int, np.ndarray] = {}

    def perm(self, epoch: int) -> np.ndarray:
        if epoch not in self._perm_cache:
            self._perm_cache = {epoch: np.random.default_rng([self.seed, epoch]).permutation(self.n)}
        return self._perm_cache[epoch]

    def global_indices(self, start: int, count: int) -> np.ndarray:
        """Instances ``start .. start+count`` of the endless, epoch-by-epoch order."""
        out = np.empty(count, dtype=np.int64)
        done = 0
        while done < count:
            epoch, pos = divmod(start + done, self.n)
            take = min(count - done, self.n - pos)
            out[done : done + take] = self.perm(epoch)[pos : pos + take]
            done += take
        return out

    def rank_indices(self, start: int, global_batch: int, rank: int, world: int) -> np.ndarray:
        if global_batch % world:
            raise DataError(f"global batch {global_batch} is not divisible by {world} ranks")
        per_rank = global_batch // world
        return self.global_indices(start, global_batch)[rank * per_rank : (rank + 1) * per_rank]


def check_fingerprint(saved: str | None, current: str, allow_mismatch: bool) -> str | None:
    """None if fine; a warning string if accepted by override; raises DataError otherwise."""
    if saved is None or saved == current:
        return None
    msg = (
        f"dataset fingerprint {current} differs from the checkpoint's {saved}: the shards, their "
        f"sizes, seq_len or token dtype changed since the checkpoint was written, so the data "
        f"order would not continue where it stopped"
    )
    if not allow_mismatch:
        raise DataError(msg + ". Set data.allow_fingerprint_mismatch: true to resume anyway.")
    return msg + " (accepted: data.allow_fingerprint_mismatch)"


def eval_indices(n_instances: int, max_instances: int, rank: int, world: int) -> np.ndarray:
    """Validation instances for one rank; every rank gets the same count (FSDP needs every
    rank in every forward), so the tail that does not divide evenly is left out."""
    n = min(n_instances, max_instances)
    n -= n % world
    return np.arange(rank, n, world, dtype=np.int64)


def write_shard(path: str | Path, docs: list[list[int]], eos_id: int, dtype=np.uint16, src: str = "test") -> None:
    """Write one shard in the DESIGN.md format (used by tests and the benchmark)."""
    import gzip

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokens, rows, pos = [], [], 0
    for i, doc in enumerate(docs):
        doc = list(doc) + [eos_id]
        tokens += doc
        rows.append(f"{pos},{pos + len(doc)},{path.stem}-{i},{src},{i}")
        pos += len(doc)
    arr = np.memmap(path, dtype=dtype, mode="w+", shape=(len(tokens),))
    arr[:] = np.asarray(tokens, dtype=dtype)
    arr.flush()
    del arr
    with gzip.open(path.with_suffix(".csv.gz"), "wt") as f:
        f.write("\n".join(rows) + "\n")
