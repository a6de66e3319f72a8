"""Training instances cut from token shards, their seeded global order, and fingerprints.

Shards are read through ``train.shards``, which owns their format (docs/tokenize.md:
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
from typing import Any

import numpy as np

from train.errors import DataError
from train.shards import ShardError, check_sidecar, dtype_for_vocab, find_shards, open_tokens, sidecar_path, token_count


def token_dtype(name: str, vocab_size: int) -> np.dtype:
    """``data.token_dtype``: ``auto`` is the format's rule (``train.shards.dtype_for_vocab``)."""
    return dtype_for_vocab(vocab_size) if name == "auto" else np.dtype(name)


@dataclass
class ShardFile:
    path: Path
    name: str
    n_tokens: int


class TokenDataset:
    """Fixed-length instances over a list of shards; ``instance(i)`` is an int64 array.

    With ``vocab_size``, every instance read is checked to hold only ids below it: the
    start-up check (``validate_shards``) covers the shards as they were then, this covers a
    shard rewritten while the run goes on (a ``DataError`` naming the shard and the token
    instead of an index error deep in the model).
    """

    def __init__(self, paths: list[str], seq_len: int, dtype: np.dtype, eos_id: int | None = None, vocab_size: int | None = None):
        self.seq_len = seq_len
        self.dtype = np.dtype(dtype)
        self.vocab_size = vocab_size
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
        out = np.asarray(self._map(shard)[off : off + self.seq_len], dtype=np.int64)
        if self.vocab_size is not None and int(out.max()) >= self.vocab_size:
            pos = int(np.argmax(out >= self.vocab_size))
            raise DataError(
                f"{self.shards[shard].path}: token id {int(out[pos])} at token {off + pos} >= model.vocab_size "
                f"{self.vocab_size} (the shard changed after the start-up check?)"
            )
        return out

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


# Bumped when the checks or the cache layout change: older cache files are then ignored.
CHECKS_VERSION = 3
_READ_CHUNK = 16 << 20  # bytes read at a time by the scan (memory stays flat)


def _file_stamp(path: Path) -> list[int] | None:
    """What the cache compares to decide that a file is unchanged without reading it: size,
    modification time and inode-change time (in ns). The change time cannot be set back by
    ``touch`` or a time-preserving copy, so any rewrite of the bytes changes the stamp."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _shard_stamp(path: Path) -> list:
    return [_file_stamp(path), _file_stamp(sidecar_path(path))]


def scan_shard(path: Path, dtype: np.dtype, n_tokens: int) -> dict:
    """One pass over every byte of a shard: its largest token id, a hash of its content and of
    its ``.csv.gz`` sidecar, and the sidecar's problem (missing, unreadable, rows outside the
    shard, not contiguous or not covering it), as ``{"max", "sha1", "sidecar_sha1",
    "sidecar", "stamp"}``. ``stamp`` (size and times of both files) is taken before reading,
    so a file that changes during the scan is scanned again next time."""
    stamp = _shard_stamp(path)
    tokens = open_tokens(path, dtype)
    h = hashlib.sha1(usedforsecurity=False)
    top = 0
    step = max(1, _READ_CHUNK // tokens.dtype.itemsize)
    for i in range(0, len(tokens), step):  # whole tokens per block, each byte read once
        block = np.ascontiguousarray(tokens[i : i + step])
        h.update(block.data)
        top = max(top, int(block.max()))
    side = sidecar_path(path)
    side_sha1 = hashlib.sha1(side.read_bytes(), usedforsecurity=False).hexdigest() if side.exists() else None
    try:
        check_sidecar(path, n_tokens)
        problem = None
    except ShardError as e:
        problem = str(e)
    return {"max": top, "sha1": h.hexdigest(), "sidecar_sha1": side_sha1, "sidecar": problem, "stamp": stamp}


def _checks_cache_path(ds: TokenDataset, cache_dir: str | Path) -> Path:
    # one file per dataset (the train and the validation shards each have theirs), named by
    # the shards' absolute paths and dtype; its entries are keyed by shard name
    key = hashlib.sha256(json.dumps([str(ds.dtype), [str(s.path.resolve()) for s in ds.shards]]).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"shard-checks-v{CHECKS_VERSION}-{key}.json"


def _read_checks_cache(cache: Path) -> dict[str, dict]:
    try:
        raw = json.loads(cache.read_text())
    except (OSError, ValueError):  # none yet, or cut off by a kill: start afresh
        return {}
    if not isinstance(raw, dict) or raw.get("version") != CHECKS_VERSION or not isinstance(raw.get("shards"), dict):
        return {}
    # an entry without every field is left out (its shard is scanned again)
    fields = {"max", "sidecar", "stamp"}
    return {k: v for k, v in raw["shards"].items() if isinstance(v, dict) and fields <= v.keys()}


def shard_checks(
    ds: TokenDataset,
    cache: Path | None = None,
    rank: int = 0,
    world: int = 1,
    all_gather: Callable[[Any], list[Any]] | None = None,
) -> tuple[dict[str, dict], set[str]]:
    """The scan result of every shard of ``ds``, and the names of those that were read now
    (the others came from ``cache``).

    A cached result is used only while the shard's and its sidecar's size, modification time
    and change time are those recorded when it was scanned; any other shard is scanned again
    (its full hash is recorded with the result). Ranks agree on what to scan (``all_gather``
    of each one's list), split it between them, and gather the results; rank 0 writes the
    cache.
    """
    cached = _read_checks_cache(cache) if cache is not None else {}
    stale = [s.name for s in ds.shards if cached.get(s.name, {}).get("stamp") != _shard_stamp(s.path)]
    if all_gather is not None:  # one rank seeing a change is enough (e.g. stale NFS attributes)
        stale = sorted(set().union(*all_gather(stale)))
    results = {s.name: cached[s.name] for s in ds.shards if s.name not in stale}
    if stale:
        by_name = {s.name: s for s in ds.shards}
        mine = {name: scan_shard(by_name[name].path, ds.dtype, by_name[name].n_tokens) for i, name in enumerate(stale) if i % world == rank}
        for part in all_gather(mine) if all_gather is not None else [mine]:
            results.update(part)
        if cache is not None and rank == 0:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f".{cache.name}.tmp{os.getpid()}")
            tmp.write_text(json.dumps({"version": CHECKS_VERSION, "dtype": str(ds.dtype), "shards": results}))
            tmp.replace(cache)
    return results, set(stale)


def check_shard_results(
    ds: TokenDataset, results: dict[str, dict], vocab_size: int, cache: Path | None = None, fresh: set[str] | None = None
) -> None:
    """Raise one ``DataError`` naming the first bad shard: a token id ``>= vocab_size`` or a
    sidecar problem. A verdict that comes from ``cache`` (the shard is not in ``fresh``) says
    so and names the file."""
    for s in ds.shards:
        r = results[s.name]
        if cache is not None and fresh is not None and s.name not in fresh:
            where = (
                f" [cached result of an earlier check in {cache}: the shard and its sidecar have the size and times "
                f"recorded then; delete the file to check again]"
            )
        else:
            where = ""
        if r["max"] >= vocab_size:
            raise DataError(
                f"{s.path}: token id {r['max']} >= model.vocab_size {vocab_size} "
                f"(shards from another tokenizer, or the wrong data.token_dtype?){where}"
            )
        if r["sidecar"]:
            raise DataError(f"{s.path}: {r['sidecar']}{where}")


def validate_shards(
    ds: TokenDataset,
    vocab_size: int,
    cache_dir: str | Path | None = None,
    rank: int = 0,
    world: int = 1,
    all_gather: Callable[[Any], list[Any]] | None = None,
) -> None:
    """Check every token id is < ``vocab_size`` and every sidecar is sound; raise one
    ``DataError`` naming the first bad shard (the same on every rank).

    The scan reads each shard once: ranks split the shards between them (``all_gather``
    collects the results), and the per-shard results are cached in ``cache_dir`` (see
    ``shard_checks``), so a restart on unchanged data reads nothing and a changed shard is
    read again.
    """
    cache = _checks_cache_path(ds, cache_dir) if cache_dir is not None else None
    results, fresh = shard_checks(ds, cache, rank, world, all_gather)
    check_shard_results(ds, results, vocab_size, cache, fresh)


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

    def cache_path(self, epoch: int, cache_dir: Path) -> Path:
        return cache_dir / f"order-seed{self.seed}-epoch{epoch}-n{self.n}.{self.dtype.name}"

    def _cached(self, epoch: int, cache_dir: Path) -> np.ndarray:
        path = self.cache_path(epoch, cache_dir)
        size = self.n * self.dtype.itemsize
        if self.is_writer and not (path.exists() and path.stat().st_size == size):
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
            self._compute(epoch).tofile(tmp)
            tmp.replace(path)  # readers never see a partial file
            for old in cache_dir.glob(f"order-seed{self.seed}-epoch*-n{self.n}.*"):
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
            perm = self._cached(epoch, self.cache_dir) if self.cache_dir is not None else self._compute(epoch)
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
    """Validation instances for one rank: the first ``min(n_instances, max_instances)``,
    dealt round-robin, so that together the ranks evaluate every one of them.

    Every rank gets the same number of slots (FSDP needs every rank in every forward): the
    ranks short of it get trailing ``-1`` slots, which ``evaluate_loss`` fills with a real
    instance and leaves out of the loss. So 1, 2 or 4 ranks report the same loss.
    """
    n = min(n_instances, max_instances)
    per_rank = -(-n // world)
    idx = np.arange(rank, per_rank * world, world, dtype=np.int64)
    idx[idx >= n] = -1
    return idx
