"""MinHash clusters past one task's memory: the phases that replace ``clusters`` above
``minhash.cluster_memory``.

=============  ===================  =====================================================
phase          tasks                what
=============  ===================  =====================================================
graph          pair sources         the kept pairs as edges, into ``parts`` hash ranges
star-01 ...    hash ranges          large-star, small-star, ... (:mod:`.components`): the
                                    rounds of phase ``star``, until every node is settled
labels         hash ranges          each star's (survivor, member, size), to the
                                    survivor's file group
numbers        file groups          clusters ranked by survivor within the group
names          file groups          each file's MEMBER records, and its rows of the
                                    clusters file (ids and lines from the file's meta)
clusters-file  one                  the groups' rows merged into ``_clusters.jsonl.gz``
=============  ===================  =====================================================

A hash-range task holds the edges of its range's nodes only; a file-group task the clustered
documents of its files only; the last task streams. ``parts`` is chosen so that a range's share
of the edges fits ``cluster_memory``, and the file groups so that a group's clustered documents
do (:func:`plan`; a group is at least one file). Every file between tasks is a work file
(:mod:`dolma_pipe.workdir`, sealed and checked), written by one task as one bucketed file
(``bucketed_by_first_u32``) of which each next task reads its own bucket, so tasks on different
machines share nothing but the storage layer. Cluster numbers, survivors and row order follow
the same global rule as the single task, so the outputs are the same bytes.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from dolma_pipe import storage, workdir
from dolma_pipe._rust import bucketed_by_first_u32, bucketed_file
from dolma_pipe.documents import JsonlWriter
from dolma_pipe.stage import RunContext, Task, TaskOutput

from .workfiles import MEMBER, PAIR, VERIFIED, Layout, read_all, read_meta, read_slice

# numpy (and :mod:`.components`, which is numpy) are imported by the functions that run the
# clustering: every dedup run imports this module (exact mode reads its members), and numpy's
# import was a tenth of a Bloom-mode paragraph run's CPU on 20,000 documents.
if TYPE_CHECKING:
    import numpy as np

# The most star steps a run takes (rounds of the repeated phase ``star``); a chain of n documents
# takes about 1.6 log2(n) steps with the mixed order (32 for a million), so 48 covers a chain of
# about a billion. A run that needs more stops with a message saying so.
MAX_STEPS = 48
# Memory per kept pair: of the single task (union-find, then a Python row per clustered
# document: about 1 KiB per document, up to two documents per pair), and of a hash-range task
# (the pair's two EDGE records in and out, sorted copies and masks: about 400 bytes).
SINGLE_BYTES_PER_PAIR = 2048
RANGE_BYTES_PER_PAIR = 512
# Memory per clustered document of a file-group task (its row of the clusters file, sorted).
GROUP_BYTES_PER_DOCUMENT = 512
# At most this many hash ranges (each task writes a bucket per range).
MAX_PARTS = 4096
# Rows merged into the clusters file per batch, and bytes read per block of a group's rows.
_BATCH = 8192
_BLOCK = 1 << 20


@dataclass(frozen=True)
class Plan:
    """How the scaled-out clustering splits its work: hash ranges, and file groups (the first
    file of each, consecutive files by input bytes)."""

    parts: int
    groups: list[int]
    sources: int

    def group_of(self, nodes: np.ndarray) -> np.ndarray:
        import numpy as np

        return (
            np.searchsorted(np.asarray(self.groups, dtype=np.int64), (nodes >> np.uint64(32)).astype(np.int64), side="right") - 1
        ).astype(np.uint32)

    def files_of(self, group: int, files: int) -> range:
        end = self.groups[group + 1] if group + 1 < len(self.groups) else files
        return range(self.groups[group], end)


def kept_pairs(ctx: RunContext, verified: bool) -> int:
    step = ctx.steps["verify" if verified else "bands"].data.get("counts", {})
    return int(step.get("verified_pairs" if verified else "candidate_pairs", 0))


def plan(ctx: RunContext, verified: bool, buckets: int, cluster_memory: int) -> Plan | None:
    """The split of the work, or None when the single task fits ``cluster_memory``."""
    pairs = kept_pairs(ctx, verified)
    if pairs * SINGLE_BYTES_PER_PAIR <= cluster_memory:
        return None
    parts = max(1, min(MAX_PARTS, math.ceil(pairs * RANGE_BYTES_PER_PAIR / cluster_memory)))
    # A group task holds a row per clustered document of its files: up to two a pair.
    groups = file_groups(
        [f.size for f in ctx.inputs], max(1, min(MAX_PARTS, math.ceil(2 * pairs * GROUP_BYTES_PER_DOCUMENT / cluster_memory)))
    )
    return Plan(parts=parts, groups=groups, sources=len(groups) if verified else buckets)


def file_groups(sizes: list[int], count: int) -> list[int]:
    """The first file of each of at most ``count`` groups of consecutive files of about equal bytes."""
    starts: list[int] = []
    total = sum(sizes) or 1
    done = 0
    for i, size in enumerate(sizes):
        if not starts or (done * count // total > len(starts) - 1 and len(starts) < count):
            starts.append(i)
        done += size
    return starts


# ---- where the files go ----------------------------------------------------------------------


def step_name(step: int) -> str:
    return f"star-{step:02d}"


def part_path(layout: Layout, phase: str, task: int) -> str:
    return layout.work.path("components", phase, f"part-{task:05d}.bkt")


def rows_path(layout: Layout, group: int) -> str:
    return layout.work.path("components", "rows", f"part-{group:05d}.jsonl")


def _gather(layout: Layout, phase: str, tasks: int, bucket: int, dtype: np.dtype) -> np.ndarray:
    """Bucket ``bucket`` of every file the ``tasks`` tasks of ``phase`` wrote, as records."""
    import numpy as np

    data = b"".join(read_slice(part_path(layout, phase, t), bucket) for t in range(tasks))
    return np.frombuffer(data, dtype=dtype)


def _write(path: str, records: np.ndarray, buckets: int) -> None:
    workdir.write(path, bucketed_by_first_u32(records.tobytes(), records.dtype.itemsize, buckets))


# ---- the tasks -------------------------------------------------------------------------------


def run_graph(layout: Layout, task: Task, ctx: RunContext, p: Plan, verified: bool) -> TaskOutput:
    """The kept pairs of one source (a file group's verified pairs, or a bucket of candidate
    pairs) as EDGE records, each held by both endpoints' ranges."""
    import numpy as np

    from . import components as cc

    n = len(ctx.inputs)
    source = task.params["source"]
    record = VERIFIED if verified else PAIR
    dtype = np.dtype([("file", "<u4"), ("doc", "<u4"), ("later", "<u4")] + ([("sim", "<f4")] if verified else []))
    lo: list[np.ndarray] = []
    hi: list[np.ndarray] = []
    if verified:
        slices = [(i, read_all(layout.per_file("verified", ctx.inputs[i].rel))[1][0]) for i in p.files_of(source, n)]
    else:
        slices = [(i, read_slice(layout.bucket("pairs", source), i)) for i in range(n)]
    for i, buf in slices:
        recs = np.frombuffer(buf, dtype=dtype, count=len(buf) // record)
        lo.append((recs["file"].astype(np.uint64) << np.uint64(32)) | recs["doc"].astype(np.uint64))
        hi.append((np.uint64(i) << np.uint64(32)) | recs["later"].astype(np.uint64))
    a = np.concatenate(lo) if lo else np.zeros(0, dtype=np.uint64)
    b = np.concatenate(hi) if hi else np.zeros(0, dtype=np.uint64)
    _write(part_path(layout, "graph", source), cc.both_ways(cc.mix(a), cc.mix(b), p.parts), p.parts)
    return TaskOutput(counts={"graph_edges": len(a)})


def run_step(layout: Layout, task: Task, p: Plan) -> TaskOutput:
    """One star step over one hash range's neighbour lists."""
    from . import components as cc

    step, part = task.params["step"], task.params["part"]
    previous, tasks = ("graph", p.sources) if step == 1 else (step_name(step - 1), p.parts)
    edges = _gather(layout, previous, tasks, part, cc.EDGE)
    src, dst = cc.neighbour_lists(edges["src"], edges["dst"])
    del edges
    a, b, unsettled = cc.star_step(src, dst, large=step % 2 == 1)
    _write(part_path(layout, step_name(step), part), cc.both_ways(a, b, p.parts), p.parts)
    return TaskOutput(counts={"star_edges": len(src), "unsettled_nodes": unsettled})


def run_labels(layout: Layout, task: Task, p: Plan, last: int) -> TaskOutput:
    """Each star centred in this range: its members with their survivor and size, to the
    survivor's file group."""
    import numpy as np

    from . import components as cc

    part = task.params["part"]
    edges = _gather(layout, step_name(last), p.parts, part, cc.EDGE)
    survivor, node, size = cc.star_labels(*cc.neighbour_lists(edges["src"], edges["dst"]))
    out = np.empty(len(node), dtype=cc.LABEL)
    out["group"], out["survivor"], out["node"], out["size"] = p.group_of(survivor), survivor, node, size
    _write(part_path(layout, "labels", part), out, len(p.groups))
    return TaskOutput(counts={"labelled_documents": len(node)})


def run_numbers(layout: Layout, task: Task, p: Plan) -> TaskOutput:
    """The clusters whose survivor is in this file group, ranked in the global order of their
    survivors; each member sent to its own file group."""
    import numpy as np

    from . import components as cc

    group = task.params["group"]
    rows = _gather(layout, "labels", p.parts, group, cc.LABEL)
    rows = rows[np.lexsort((rows["node"], rows["survivor"]))]
    new = np.concatenate(([True], rows["survivor"][1:] != rows["survivor"][:-1])) if len(rows) else np.zeros(0, dtype=bool)
    out = np.empty(len(rows), dtype=cc.NUMBERED)
    out["group"], out["node"], out["survivor_group"] = p.group_of(rows["node"]), rows["node"], group
    out["rank"], out["size"] = np.cumsum(new) - 1, rows["size"]
    out["survivor"] = rows["node"] == rows["survivor"]
    _write(part_path(layout, "numbers", group), out, len(p.groups))
    return TaskOutput(counts={"cluster_ranks": int(np.count_nonzero(new))}, data={"clusters": int(np.count_nonzero(new))})


def number_offsets(records: list[Any]) -> list[int]:
    """The first cluster number of each file group's clusters (the numbers phase's records in
    group order)."""
    counts = [r.data["clusters"] for r in sorted(records, key=lambda r: r.params["group"])]
    return [0, *itertools.accumulate(counts)][:-1] if counts else []


def run_names(layout: Layout, task: Task, ctx: RunContext, p: Plan, offsets: list[int]) -> TaskOutput:
    """Each file of this group: its MEMBER records (what the attribute writer reads), and the
    group's rows of the clusters file, sorted by (cluster, node), without the survivor's id
    (the merge takes it from each cluster's first row, its survivor)."""
    import numpy as np

    from . import components as cc

    group = task.params["group"]
    n = len(ctx.inputs)
    recs = _gather(layout, "numbers", len(p.groups), group, cc.NUMBERED)
    recs = recs[np.argsort(recs["node"], kind="stable")]
    cluster = np.asarray(offsets, dtype=np.uint64)[recs["survivor_group"]] + recs["rank"].astype(np.uint64)
    files = (recs["node"] >> np.uint64(32)).astype(np.int64)
    docs = (recs["node"] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    rows: list[tuple[int, int, bytes]] = []
    written = []
    for i in p.files_of(group, n):
        lo, hi = np.searchsorted(files, i), np.searchsorted(files, i, side="right")
        member = np.empty((hi - lo, 4), dtype="<u4")
        member[:, 0], member[:, 1], member[:, 2], member[:, 3] = docs[lo:hi], cluster[lo:hi], recs["size"][lo:hi], recs["survivor"][lo:hi]
        path = layout.per_file("members", ctx.inputs[i].rel)
        workdir.write(path, bucketed_file(member.tobytes(), MEMBER))
        written.append(path)
        if hi == lo:
            continue
        meta = read_meta(layout.scan(ctx.inputs[i].rel, "meta"))
        rel = ctx.inputs[i].rel
        for k in range(lo, hi):
            d = int(docs[k])
            c = int(cluster[k])
            node = int(recs["node"][k])
            rows.append((c, node, orjson.dumps([c, node, meta.id(d), rel, meta.lines[d], int(recs["size"][k]), bool(recs["survivor"][k])])))
    rows.sort()
    with workdir.open_write(rows_path(layout, group)) as w:
        for _, _, line in rows:
            w.write(line + b"\n")
    return TaskOutput(counts={"named_documents": len(rows)}, files=written)


def _lines(path: str) -> Iterator[list[Any]]:
    """A group's rows, read a block at a time."""
    with workdir.open_read(path) as r:
        rest = b""
        for offset in range(0, r.content_len, _BLOCK):
            block = rest + r.read(offset, min(_BLOCK, r.content_len - offset))
            lines = block.split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield orjson.loads(line)
        if rest:
            yield orjson.loads(rest)


def run_clusters_file(layout: Layout, root: str, p: Plan, clusters_file: str) -> TaskOutput:
    """Every group's rows merged by (cluster, node) into the clusters file, as the single task
    writes it; each cluster's first row is its survivor, whose id the others get."""
    merged = heapq.merge(*(_lines(rows_path(layout, g)) for g in range(len(p.groups))), key=lambda row: (row[0], row[1]))
    clusters = documents = 0
    survivor_id = ""
    batch: list[dict[str, Any]] = []
    with JsonlWriter(storage.join(root, clusters_file)) as out:
        for cluster, _, doc_id, rel, line, size, is_survivor in merged:
            if is_survivor:
                survivor_id = doc_id
                clusters += 1
            documents += 1
            batch.append(
                {
                    "id": doc_id,
                    "file": rel,
                    "line": line,
                    "cluster": cluster,
                    "size": size,
                    "survivor": is_survivor,
                    "survivor_id": survivor_id,
                }
            )
            if len(batch) >= _BATCH:
                out.write_many(batch)
                batch = []
        out.write_many(batch)
    return TaskOutput(
        counts={"clusters": clusters, "clustered_documents": documents},
        data={"clusters": clusters, "clustered_documents": documents, "near_duplicates": documents - clusters},
    )


def members(layout: Layout, file_index: int, rel: str, scaled: bool) -> bytes:
    """The MEMBER records of one file, from whichever clustering ran."""
    if scaled:
        return read_all(layout.per_file("members", rel))[1][0]
    return read_slice(layout.single("minhash/members.bkt"), file_index)
