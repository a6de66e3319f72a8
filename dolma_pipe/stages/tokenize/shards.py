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
from dataclasses import replace
from typing import Any

import numpy as np

from dolma_pipe import storage, workdir
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import RunContext, StepResult, Task, TaskOutput, remove_stale
from dolma_pipe.workdir import WorkFileError
from train.shards import SIDECAR_SUFFIX, TOKENS_SUFFIX, ShardWriter, shard_name

from .config import TokenizeError
from .encode import INDEX_DTYPE
from .plan import SPLITS, BucketParams, Numbering, Split, bucket_key
from .rules import U64, shard_bounds
from .run import TokenizeRun

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

    def __init__(self, run: TokenizeRun, ctx: RunContext, p: BucketParams):
        lo = (p.bucket * U64) // p.buckets
        hi = ((p.bucket + 1) * U64) // p.buckets
        t_key, t_file, t_loc = (np.uint64(p.threshold[0]), p.threshold[1], p.threshold[2])
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for fi, info in enumerate(ctx.inputs):
            keys = workdir.load_array(run.work_path(info.rel, ".keys"), np.dtype("<u8"))
            a = int(np.searchsorted(keys, np.uint64(lo), side="left"))
            b = len(keys) if hi >= U64 else int(np.searchsorted(keys, np.uint64(hi), side="left"))
            if a == b:
                continue
            rows = np.array(workdir.load_array(run.work_path(info.rel, ".idx"), INDEX_DTYPE)[a:b])
            vkey = rows["vkey"]
            held_out = (vkey < t_key) | ((vkey == t_key) & ((fi < t_file) | ((fi == t_file) & (rows["loc"] < t_loc))))
            keep = held_out if p.split == "val" else ~held_out
            if keep.any():
                parts.append((np.array(keys[a:b])[keep], np.full(int(keep.sum()), fi, dtype=np.int32), rows[keep]))
        if parts:
            key = np.concatenate([part[0] for part in parts])
            files = np.concatenate([part[1] for part in parts])
            rows = np.concatenate([part[2] for part in parts])
            order = np.lexsort((rows["loc"], files, key))
            self.files, self.rows = files[order], rows[order]
        else:
            self.files, self.rows = np.zeros(0, np.int32), np.zeros(0, INDEX_DTYPE)
        self.bounds = shard_bounds(self.rows["ntok"], run.config.max_tokens)

    @property
    def n_shards(self) -> int:
        return len(self.bounds) - 1


class Shards:
    """The pack and write phases' tasks and the steps after them."""

    def __init__(self, run: TokenizeRun):
        self.run = run

    def bucket_tasks(self, ctx: RunContext, writes: dict[str, range] | None = None) -> list[Task]:
        """A task per bucket of each split; for ``write``, each with the shards it writes."""
        split = Split.from_data(ctx.steps["encode"].data)
        tasks = []
        for name in SPLITS:
            n = split.buckets[name]
            for b in range(n):
                key = bucket_key(name, b)
                p = BucketParams(split=name, bucket=b, buckets=n, threshold=split.threshold)
                if writes is not None and key in writes:
                    p = replace(p, first=writes[key].start, shards=len(writes[key]))
                tasks.append(Task(key=key, params=p.to_params()))
        return tasks

    # -- phase 2: count each bucket's shards

    def plan_buckets(self, ctx: RunContext) -> list[Task]:
        return self.bucket_tasks(ctx)

    def gather(self, task: Task, ctx: RunContext) -> _Bucket:
        return _Bucket(self.run, ctx, BucketParams.from_params(task.params))

    def pack(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        bucket = self.gather(task, ctx)
        return TaskOutput(data={"shards": bucket.n_shards, "docs": len(bucket.rows), "tokens": int(bucket.rows["ntok"].sum())})

    def number(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Driver: the first shard index of each bucket (buckets in key order, per split)."""
        first: dict[str, int] = {}
        shards = dict.fromkeys(SPLITS, 0)
        tasks = [(BucketParams.from_params(r.params), r) for r in records]
        for p, r in sorted(tasks, key=lambda t: (SPLITS.index(t[0].split), t[0].bucket)):
            first[r.key] = shards[p.split]
            shards[p.split] += r.data["shards"]
        return StepResult(data=Numbering(first=first, shards=shards).to_data())

    # -- phase 3: write each bucket's shards

    def plan_writes(self, ctx: RunContext) -> list[Task]:
        numbering = Numbering.from_data(ctx.steps["pack"].data)
        return self.bucket_tasks(ctx, numbering.ranges())

    def write_outputs(self, task: Task) -> list[str]:
        p = BucketParams.from_params(task.params)
        paths = []
        for i in p.shard_range:
            npy = self.run.shard_path(p.split, i)
            paths += [npy, npy[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX]
        return paths

    def write(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = BucketParams.from_params(task.params)
        bucket = self.gather(task, ctx)
        if bucket.n_shards != p.shards:
            raise TokenizeError(f"bucket {task.key}: {bucket.n_shards} shards now, {p.shards} when counted (inputs changed mid-run?)")
        with storage.local_scratch(f"tokenize's write task {task.key}", self._scratch_need(bucket, ctx)):
            return self._write(p, bucket, ctx)

    def _scratch_need(self, bucket: _Bucket, ctx: RunContext) -> int:
        """Bytes of local scratch a write task uses with remote paths: the token runs and ids of
        every file its bucket draws from (copied and mapped), and one shard staged for upload."""
        need = 0
        if storage.is_remote(self.run.work.root):
            wanted = [self.run.work_path(ctx.inputs[fi].rel, ext) for fi in sorted(set(bucket.files.tolist())) for ext in (".tok", ".ids")]
            need += sum(size or 0 for size in storage.sizes(wanted).values())
        if storage.is_remote(self.run.root) and bucket.n_shards:
            # The largest shard's tokens, and its sidecar (a row of start,end,id,src,loc a document).
            edges = list(zip(bucket.bounds[:-1], bucket.bounds[1:]))
            tokens = max(int(bucket.rows["ntok"][a:b].sum()) for a, b in edges)
            docs = max(b - a for a, b in edges)
            need += tokens * self.run.dtype.itemsize + 64 * docs
        return need

    def _write(self, p: BucketParams, bucket: _Bucket, ctx: RunContext) -> TaskOutput:
        runs: dict[int, np.ndarray] = {}
        blobs: dict[int, bytes | mmap.mmap] = {}
        dtype, eos_id, vocab_size = self.run.dtype, self.run.eos_id, self.run.resolved.tokenizer.vocab_size

        def open_file(fi: int) -> None:
            rel = ctx.inputs[fi].rel
            runs[fi] = workdir.load_array(self.run.work_path(rel, ".tok"), dtype)
            blobs[fi] = workdir.load_blob(self.run.work_path(rel, ".ids"))

        files, rows = bucket.files.tolist(), bucket.rows
        starts, ntoks, locs = rows["start"].tolist(), rows["ntok"].tolist(), rows["loc"].tolist()
        id_offs, id_ends = rows["id_off"].tolist(), rows["id_end"].tolist()
        tokens_written = 0
        for s, number in enumerate(p.shard_range):
            final = self.run.shard_path(p.split, number)
            with _staged(final) as path, ShardWriter(path, vocab_size=vocab_size, eos_id=eos_id, dtype=dtype, add_eos=False) as w:
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
        return TaskOutput(counts={f"{p.split}_shards": bucket.n_shards}, data={"docs": len(rows), "tokens": tokens_written})

    # -- the step after: stale shards, the summary

    def finish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Driver: drop shards an earlier run with other settings left, and check ours (the runner then
        removes _work/ but for the validation candidates, unless ``keep_work``)."""
        shards = Numbering.from_data(ctx.steps["pack"].data).shards
        stale = sum(self._keep_only(split, shards[split]) for split in SPLITS)
        split = Split.from_data(ctx.steps["encode"].data)
        summary = self.summary(split, shards, stale)
        return StepResult(data=summary, table=self.table(summary, stale))

    def _keep_only(self, split: str, count: int) -> int:
        """Removes the shards of ``split`` past this run's ``count`` (an emptied folder too), and
        checks this run's are there; the number of shards removed."""
        folder = storage.join(self.run.root, split)
        expected = {shard_name(i) + suffix for i in range(count) for suffix in (TOKENS_SUFFIX, SIDECAR_SUFFIX)}
        stale = len({p.rsplit("/", 1)[-1].split(".", 1)[0] for p in remove_stale(folder, STALE_SHARD, expected)})
        local = storage.local_path(folder)
        if not storage.is_remote(folder) and os.path.isdir(local) and not os.listdir(local):
            os.rmdir(local)
        wanted = [self.run.shard_path(split, i) for i in range(count)]
        for path, size in storage.sizes(wanted).items():
            if size is None:
                raise WorkFileError(path, "missing")  # the runner redoes its write task
        return stale

    def summary(self, split: Split, shards: dict[str, int], stale: int) -> dict[str, Any]:
        """What the manifest records of the run's shards (``index`` and ``mix-search`` read its tokenizer)."""
        ids = self.run.resolved.tokenizer
        return {
            "tokenizer": {
                "name_or_path": self.run.config.tokenizer.name_or_path,
                "file": self.run.tokenizer_path,
                "sha256": ids.sha256,
                "vocab_size": ids.vocab_size,
                "eos_token_id": ids.eos_token_id,
                "bos_token_id": ids.bos_token_id,
                "pad_token_id": ids.pad_token_id,
            },
            "dtype": self.run.resolved.dtype,
            "stale_shards_removed": stale,
            "splits": {
                name: {
                    "path": storage.join(self.run.root, name),
                    "docs": split.docs[name],
                    "tokens": split.tokens[name],
                    "shards": shards[name],
                }
                for name in SPLITS
            },
        }

    def table(self, summary: dict[str, Any], stale: int) -> str:
        rows = [("split", "documents", "tokens", "shards", "path")]
        for split, s in summary["splits"].items():
            if s["shards"]:
                rows.append((split, f"{s['docs']:,}", f"{s['tokens']:,}", f"{s['shards']:,}", s["path"]))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        table = "\n".join("  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows)
        table += f"\n{self.run.resolved.tokenizer.vocab_size:,}-entry tokenizer, {self.run.dtype} tokens, EOS {self.run.eos_id}"
        if stale:
            table += f"\nremoved {stale:,} stale shard(s) an earlier run left in {self.run.root}"
        return table
