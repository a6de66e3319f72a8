"""Training instances cut from token shards, their seeded global order, and fingerprints.

Shards are read through ``train.shards``, which owns their format (DESIGN.md section 3:
headerless uint16/uint32 ``.npy`` memmaps with ``.csv.gz`` sidecars). Instances are
consecutive ``seq_len``-token windows of one shard (documents are packed, as OLMo does; a
shard's tail shorter than ``seq_len`` is dropped).

The order is a permutation of all instances seeded by ``(seed, epoch)``. Step ``s`` takes the
next ``global_batch_size`` instances of that order and rank ``r`` takes its contiguous slice.
The only state is the number of instances (tokens / seq_len) already consumed, so a run can
resume with a different global batch size or number of ranks and still see every instance
exactly once per epoch.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from train.shards import ShardError, check_sidecar, dtype_for_vocab, find_shards, max_token_id, open_tokens, token_count


class DataError(ValueError):
    """Bad or missing shards (a ``train.shards.ShardError`` is re-raised as this), or a
    dataset that does not match a checkpoint."""


def token_dtype(name: str, vocab_size: int) -> np.dtype:
    """``data.token_dtype``: ``auto`` is the format's rule (``train.shards.dtype_for_vocab``)."""
    return dtype_for_vocab(vocab_size) if name == "auto" else np.dtype(name)


@dataclass
class ShardFile:
    path: Path
    name: str
    n_tokens: int


class TokenDataset:
    """Fixed-length instances over a list of shards; ``instance(i)`` is an int64 array."""

    def __init__(self, paths: list[str], seq_len: int, dtype: np.dtype, eos_id: int | None = None):
        self.seq_len = seq_len
        self.dtype = np.dtype(dtype)
        self.shards: list[ShardFile] = []
        try:
            for path, name in find_shards(paths):
                self.shards.append(ShardFile(path, name, token_count(path, self.dtype)))
        except ShardError as e:
            raise DataError(str(e)) from None
        self._maps: dict[int, np.ndarray] = {}
        if eos_id is not None:
            for i, s in enumerate(self.shards):
                if s.n_tokens and int(self._map(i)[-1]) != eos_id:
                    raise DataError(f"{s.path}: last token is not EOS ({eos_id}); wrong dtype or truncated shard?")
        counts = np.array([s.n_tokens // seq_len for s in self.shards], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)])
        self.n_instances = int(self._starts[-1])
        if self.n_instances == 0:
            raise DataError(f"shards under {paths} hold no instance of {seq_len} tokens")

    def _map(self, i: int) -> np.ndarray:
        if i not in self._maps:
            self._maps[i] = open_tokens(self.shards[i].path, self.dtype)
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
        for s in self.shards:
            h.update(json.dumps([s.name, s.n_tokens]).encode())
            with open(s.path, "rb") as f:
                h.update(f.read(4096))
                f.seek(max(0, s.n_tokens * self.dtype.itemsize - 4096))
                h.update(f.read(4096))
        return h.hexdigest()[:16]


def scan_shard(path: Path, dtype: np.dtype, n_tokens: int) -> dict:
    """One pass over a shard: its largest token id and the problem of its ``.csv.gz`` sidecar
    (missing, unreadable, rows outside the shard, not contiguous or not covering it), as
    ``{"max": int, "sidecar": str | None}``."""
    top = max_token_id(open_tokens(path, dtype)) if n_tokens else 0
    try:
        check_sidecar(path, n_tokens)
        problem = None
    except ShardError as e:
        problem = str(e)
    return {"max": top, "sidecar": problem}


def validate_shards(
    ds: TokenDataset,
    vocab_size: int,
    cache_dir: str | Path | None = None,
    rank: int = 0,
    world: int = 1,
    all_gather: Callable[[dict], list[dict]] | None = None,
) -> None:
    """Check every token id is < ``vocab_size`` and every sidecar is sound; raise one
    ``DataError`` naming the first bad shard (the same on every rank).

    The scan reads each shard once: ranks split the shards between them (``all_gather``
    collects the results), and the per-shard results are cached in ``cache_dir`` under the
    dataset fingerprint, so a restart on the same data reads nothing.
    """
    fp = ds.fingerprint()
    # "v2": the checks of train.shards (contiguous rows covering the shard)
    cache = Path(cache_dir) / f"shard-checks-v2-{fp}.json" if cache_dir else None
    results: dict[str, dict] | None = None
    if cache is not None and cache.exists():
        try:
            results = json.loads(cache.read_text())
        except ValueError:
            results = None
    if results is None or set(results) != {s.name for s in ds.shards}:
        mine = {s.name: scan_shard(s.path, ds.dtype, s.n_tokens) for i, s in enumerate(ds.shards) if i % world == rank}
        results = {}
        for part in all_gather(mine) if all_gather else [mine]:
            results.update(part)
        if cache is not None and rank == 0:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(results))
            tmp.replace(cache)
    for s in ds.shards:
        r = results[s.name]
        if r["max"] >= vocab_size:
            raise DataError(
                f"{s.path}: token id {r['max']} >= model.vocab_size {vocab_size} "
                f"(shards from another tokenizer, or the wrong data.token_dtype?)"
            )
        if r["sidecar"]:
            raise DataError(f"{s.path}: {r['sidecar']}")


class GlobalOrder:
    """The seeded order of instances across epochs, and each rank's share of a step."""

    def __init__(
        self,
        n_instances: int,
        seed: int,
        cache_dir: str | Path | None = None,
        is_writer: bool = True,
        barrier: Callable[[], None] | None = None,
    ):
        """``cache_dir``: keep each epoch's permutation there as a raw file, written once (by the
        ``is_writer`` rank; ``barrier`` makes the others wait for it) and memory-mapped by every
        rank, so no rank holds or recomputes the full order. Without it, the order is computed
        in memory. Either way the order is the same."""
        self.n = n_instances
        self.seed = seed
        # the smallest dtype that holds every index: 4 bytes per instance, not 8
        self.dtype = np.dtype(np.uint32 if n_instances <= 2**32 else np.int64)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.is_writer = is_writer
        self.barrier = barrier
        self._perm_cache: dict[int, np.ndarray] = {}

    def _compute(self, epoch: int) -> np.ndarray:
        # the same draws as rng.permutation(n) (which shuffles an int64 arange), in self.dtype
        perm = np.arange(self.n, dtype=self.dtype)
        np.random.default_rng([self.seed, epoch]).shuffle(perm)
        return perm

    def cache_path(self, epoch: int) -> Path:
        return self.cache_dir / f"order-seed{self.seed}-epoch{epoch}-n{self.n}.{self.dtype.name}"

    def _cached(self, epoch: int) -> np.ndarray:
        path = self.cache_path(epoch)
        size = self.n * self.dtype.itemsize
        if self.is_writer and not (path.exists() and path.stat().st_size == size):
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
            self._compute(epoch).tofile(tmp)
            tmp.replace(path)  # readers never see a partial file
            for old in self.cache_dir.glob(f"order-seed{self.seed}-epoch*-n{self.n}.*"):
                e = old.name.split("-epoch")[1].split("-")[0]
                if e.isdigit() and int(e) < epoch - 1:
                    old.unlink(missing_ok=True)
        if self.barrier is not None:
            self.barrier()
        if not path.exists() or path.stat().st_size != size:
            raise DataError(f"{path}: data order cache missing or truncated (is checkpoint.save_dir shared by all nodes?)")
        return np.memmap(path, dtype=self.dtype, mode="r", shape=(self.n,))

    def perm(self, epoch: int) -> np.ndarray:
        if epoch not in self._perm_cache:
            perm = self._cached(epoch) if self.cache_dir is not None else self._compute(epoch)
            # keep this epoch and the one before (a step may straddle the boundary)
            self._perm_cache = {e: p for e, p in self._perm_cache.items() if e == epoch - 1}
            self._perm_cache[epoch] = perm
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
