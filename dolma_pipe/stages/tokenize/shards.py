"""Phases 2 and 3, ``pack`` and ``write``: one task per key-range bucket of each split.

``pack`` reads the bucket's index rows from every file, orders them, and counts the shards
greedy packing gives, so shards can be numbered globally before any is written; ``write`` writes
the same documents' shards through ``train.shards`` (the one owner of the format), numbered from
the bucket's first index. Afterwards shards an earlier run with other settings left are removed.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from dolma_pipe import storage, workdir
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import RunContext, StepResult, Task, TaskOutput, remove_stale
from dolma_pipe.workdir import WorkFileError
from train.shards import SIDECAR_SUFFIX, TOKENS_SUFFIX, ShardWriter, shard_name

from .config import TokenizeError
from .encode import INDEX_DTYPE
from .rules import U64, shard_bounds

if TYPE_CHECKING:
    from .stage import TokenizeStage

SPLITS = ("train", "val")
# Documents gathered per ShardWriter.add_batch call in the write phase.
WRITE_BATCH = 8192
# The files of a shard this stage writes (``part-00003.npy`` and ``part-00003.csv.gz``): what a
# finished run removes when an earlier run left more shards than it wrote.
STALE_SHARD = re.compile(r"part-\d+(?:" + re.escape(TOKENS_SUFFIX) + "|" + re.escape(SIDECAR_SUFFIX) + ")")


@contextlib.contextmanager
def _staged(final: str) -> Iterator[str]:
    """Where a shard's writer writes: ``final`` itself when local; for an ``s3://`` destination a
    local folder, whose shard is uploaded when the block ends cleanly (the sidecar first, then the
    tokens, as the writer renames them: a visible ``.npy`` has its sidecar)."""
    if not storage.is_remote(final):
        yield final
        return
    folder = tempfile.mkdtemp(prefix="dolma-pipe-shard-")
    try:
        path = os.path.join(folder, final.rsplit("/", 1)[-1])
        yield path
        tokens = final[: -len(TOKENS_SUFFIX)]
        for local, remote in ((path[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX, tokens + SIDECAR_SUFFIX), (path, final)):
            storage.upload(local, remote)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _Bucket:
    """The documents of one key-range bucket of one split, in output order, gathered from every file."""

    def __init__(self, stage: TokenizeStage, ctx: RunContext, split: str, bucket: int, buckets: int, threshold: list[int]):
        lo = (bucket * U64) // buckets
        hi = ((bucket + 1) * U64) // buckets
        t_key, t_file, t_loc = (np.uint64(threshold[0]), threshold[1], threshold[2])
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for fi, info in enumerate(ctx.inputs):
            keys = workdir.load_array(stage.work_path(info.rel, ".keys"), np.dtype("<u8"))
            a = int(np.searchsorted(keys, np.uint64(lo), side="left"))
            b = len(keys) if hi >= U64 else int(np.searchsorted(keys, np.uint64(hi), side="left"))
            if a == b:
                continue
            rows = np.array(workdir.load_array(stage.work_path(info.rel, ".idx"), INDEX_DTYPE)[a:b])
            vkey = rows["vkey"]
            held_out = (vkey < t_key) | ((vkey == t_key) & ((fi < t_file) | ((fi == t_file) & (rows["loc"] < t_loc))))
            keep = held_out if split == "val" else ~held_out
            if keep.any():
                parts.append((np.array(keys[a:b])[keep], np.full(int(keep.sum()), fi, dtype=np.int32), rows[keep]))
        if parts:
            key = np.concatenate([p[0] for p in parts])
            files = np.concatenate([p[1] for p in parts])
            rows = np.concatenate([p[2] for p in parts])
            order = np.lexsort((rows["loc"], files, key))
            self.files, self.rows = files[order], rows[order]
        else:
            self.files, self.rows = np.zeros(0, np.int32), np.zeros(0, INDEX_DTYPE)
        self.bounds = shard_bounds(self.rows["ntok"], stage.config.max_tokens)

    @property
    def n_shards(self) -> int:
        return len(self.bounds) - 1


class Shards:
    """The pack and write phases' tasks and the steps after them."""

    def __init__(self, stage: TokenizeStage):
        self.stage = stage

    def bucket_tasks(self, ctx: RunContext, extra: dict[str, dict[str, Any]] | None = None) -> list[Task]:
        step = ctx.steps["encode"].data
        tasks = []
        for split in SPLITS:
            n = step["buckets"][split]
            for b in range(n):
                key = f"{split}-{b:05d}"
                params = {"split": split, "bucket": b, "buckets": n, "threshold": step["threshold"], **(extra or {}).get(key, {})}
                tasks.append(Task(key=key, params=params))
        return tasks

    def plan_buckets(self, ctx: RunContext) -> list[Task]:
        return self.bucket_tasks(ctx)

    def gather(self, task: Task, ctx: RunContext) -> _Bucket:
        p = task.params
        return _Bucket(self.stage, ctx, p["split"], p["bucket"], p["buckets"], p["threshold"])

    def pack(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        bucket = self.gather(task, ctx)
        return TaskOutput(data={"shards": bucket.n_shards, "docs": len(bucket.rows), "tokens": int(bucket.rows["ntok"].sum())})

    def number(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Driver: the first shard index of each bucket (buckets in key order, per split)."""
        first: dict[str, int] = {}
        shards = dict.fromkeys(SPLITS, 0)
        for r in sorted(records, key=lambda r: (SPLITS.index(r.params["split"]), r.params["bucket"])):
            first[r.key] = shards[r.params["split"]]
            shards[r.params["split"]] += r.data["shards"]
        return StepResult(data={"first": first, "shards": shards})

    # -- phase 3: write each bucket's shards

    def plan_writes(self, ctx: RunContext) -> list[Task]:
        step = ctx.steps["pack"].data
        shards = {}
        first = step["first"]
        keys = sorted(first, key=lambda k: (SPLITS.index(k.split("-")[0]), k))
        for i, k in enumerate(keys):
            split = k.split("-")[0]
            nxt = next((first[j] for j in keys[i + 1 :] if j.split("-")[0] == split), step["shards"][split])
            shards[k] = {"first": first[k], "shards": nxt - first[k]}
        return self.bucket_tasks(ctx, shards)

    def write_outputs(self, task: Task) -> list[str]:
        p = task.params
        paths = []
        for i in range(p["first"], p["first"] + p["shards"]):
            npy = self.stage.shard_path(p["split"], i)
            paths += [npy, npy[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX]
        return paths

    def write(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = task.params
        bucket = self.gather(task, ctx)
        if bucket.n_shards != p["shards"]:
            raise TokenizeError(f"bucket {task.key}: {bucket.n_shards} shards now, {p['shards']} when counted (inputs changed mid-run?)")
        with storage.local_scratch(f"tokenize's write task {task.key}", self._scratch_need(bucket, ctx)):
            return self._write(task, bucket, ctx)

    def _scratch_need(self, bucket: _Bucket, ctx: RunContext) -> int:
        """Bytes of local scratch a write task uses with remote paths: the token runs and ids of
        every file its bucket draws from (copied and mapped), and one shard staged for upload."""
        need = 0
        if storage.is_remote(self.stage.work.root):
            wanted = [
                self.stage.work_path(ctx.inputs[fi].rel, ext) for fi in sorted(set(bucket.files.tolist())) for ext in (".tok", ".ids")
            ]
            need += sum(size or 0 for size in storage.sizes(wanted).values())
        if storage.is_remote(self.stage.output_root) and bucket.n_shards:
            # The largest shard's tokens, and its sidecar (a row of start,end,id,src,loc a document).
            edges = list(zip(bucket.bounds[:-1], bucket.bounds[1:]))
            tokens = max(int(bucket.rows["ntok"][a:b].sum()) for a, b in edges)
            docs = max(b - a for a, b in edges)
            need += tokens * self.stage.dtype.itemsize + 64 * docs
        return need

    def _write(self, task: Task, bucket: _Bucket, ctx: RunContext) -> TaskOutput:
        p = task.params
        runs: dict[int, np.ndarray] = {}
        blobs: dict[int, bytes | mmap.mmap] = {}

        def open_file(fi: int) -> None:
            rel = ctx.inputs[fi].rel
            runs[fi] = workdir.load_array(self.stage.work_path(rel, ".tok"), self.stage.dtype)
            blobs[fi] = workdir.load_blob(self.stage.work_path(rel, ".ids"))

        files, rows = bucket.files.tolist(), bucket.rows
        starts, ntoks, locs = rows["start"].tolist(), rows["ntok"].tolist(), rows["loc"].tolist()
        id_offs, id_ends = rows["id_off"].tolist(), rows["id_end"].tolist()
        tokens_written = 0
        for s in range(bucket.n_shards):
            final = self.stage.shard_path(p["split"], p["first"] + s)
            with (
                _staged(final) as path,
                ShardWriter(
                    path, vocab_size=self.stage.tok_info.vocab_size, eos_id=self.stage.eos_id, dtype=self.stage.dtype, add_eos=False
                ) as w,
            ):
                lo, hi = bucket.bounds[s], bucket.bounds[s + 1]
                for a in range(lo, hi, WRITE_BATCH):
                    b = min(hi, a + WRITE_BATCH)
                    pieces, ids, srcs = [], [], []
                    for i in range(a, b):
                        fi = files[i]
                        if fi not in runs:
                            open_file(fi)
                        pieces.append(runs[fi][starts[i] : starts[i] + ntoks[i]])
                        ids.append(blobs[fi][id_offs[i] : id_ends[i]].decode("utf-8", "surrogatepass"))
                        srcs.append(ctx.inputs[fi].path)
                    offsets = np.zeros(b - a + 1, dtype=np.int64)
                    np.cumsum(ntoks[a:b], out=offsets[1:])
                    w.add_batch(np.concatenate(pieces), offsets, ids=ids, srcs=srcs, locs=locs[a:b])
                tokens_written += w.n_tokens
        return TaskOutput(counts={f"{p['split']}_shards": bucket.n_shards}, data={"docs": len(rows), "tokens": tokens_written})

    def finish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Driver: drop shards an earlier run with other settings left, and check ours (the runner then
        removes _work/ but for the validation candidates, unless ``keep_work``)."""
        shards = ctx.steps["pack"].data["shards"]
        stale = 0
        for split in SPLITS:
            folder = storage.join(self.stage.output_root, split)
            expected = {shard_name(i) + suffix for i in range(shards[split]) for suffix in (TOKENS_SUFFIX, SIDECAR_SUFFIX)}
            stale += len({p.rsplit("/", 1)[-1].split(".", 1)[0] for p in remove_stale(folder, STALE_SHARD, expected)})
            local = storage.local_path(folder)
            if not storage.is_remote(folder) and os.path.isdir(local) and not os.listdir(local):
                os.rmdir(local)
            wanted = [self.stage.shard_path(split, i) for i in range(shards[split])]
            for path, size in storage.sizes(wanted).items():
                if size is None:
                    raise WorkFileError(path, "missing")  # the runner redoes its write task
        split_step = ctx.steps["encode"].data
        summary: dict[str, Any] = {
            "tokenizer": {
                "name_or_path": self.stage.config.tokenizer.name_or_path,
                "file": self.stage.tok_info.path,
                "sha256": self.stage.tok_info.sha256,
                "vocab_size": self.stage.tok_info.vocab_size,
                "eos_token_id": self.stage.eos_id,
                "bos_token_id": self.stage.bos_id,
                "pad_token_id": self.stage.pad_id,
            },
            "dtype": str(self.stage.dtype),
            "stale_shards_removed": stale,
            "splits": {
                split: {
                    "path": storage.join(self.stage.output_root, split),
                    "docs": split_step["docs"][split],
                    "tokens": split_step["tokens"][split],
                    "shards": shards[split],
                }
                for split in SPLITS
            },
        }
        rows = [("split", "documents", "tokens", "shards", "path")]
        for split, s in summary["splits"].items():
            if s["shards"]:
                rows.append((split, f"{s['docs']:,}", f"{s['tokens']:,}", f"{s['shards']:,}", s["path"]))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        table = "\n".join("  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows)
        table += f"\n{self.stage.tok_info.vocab_size:,}-entry tokenizer, {self.stage.dtype} tokens, EOS {self.stage.eos_id}"
        if stale:
            table += f"\nremoved {stale:,} stale shard(s) an earlier run left in {self.stage.output_root}"
        return StepResult(data=summary, table=table)
