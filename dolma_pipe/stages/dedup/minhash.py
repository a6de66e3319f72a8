"""MinHash near-duplicates: band buckets, verification, clusters (phases after ``scan``).

* ``bands`` (one task per hash range of band hashes): documents sharing a band (same band
  index, same hash) are candidate pairs. A group of at most ``max_group`` documents gives all
  its pairs; a larger one (a band shared by boilerplate) a chain and a star, which connects it
  without a quadratic number of pairs. Pairs go into buckets by the later document's file.
* ``verify`` (one task per file, unless ``verify: none``): the pairs whose later document is in
  this file, kept when the real Jaccard of the two shingle sets (``jaccard``) or the agreement of
  the two signatures (``signature``) reaches the threshold. It reads only the sets or signatures
  of documents in pairs.
* ``clusters`` (one task): connected components of the kept pairs (union-find in Rust); each
  component's survivor is its first document in the global order, whatever order pairs came
  in. Memory grows with the documents in pairs, not with the corpus. It writes each file's
  members (the attribute writer marks every member but the survivor) and the clusters file
  ``_clusters.jsonl.gz``: one row per clustered document with its id, file and line, cluster
  number, cluster size, whether it is the survivor, and the survivor's id.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from dolma_pipe import storage, workdir
from dolma_pipe._rust import band_candidates, bucketed_file, cluster_pairs, verify_pairs
from dolma_pipe.documents import JsonlWriter
from dolma_pipe.stage import RunContext, Task, TaskOutput

from .config import MinhashSection
from .workfiles import BAND, PAIR, VERIFIED, Layout, read_all, read_meta, read_set_values, read_signatures, read_slice, u32_records

CLUSTERS_FILE = "_clusters.jsonl.gz"


def run_bands(layout: Layout, task: Task, ctx: RunContext, max_group: int) -> TaskOutput:
    b = task.params["bucket"]
    slices = [(i, read_slice(layout.scan(f.rel, "bands"), b)) for i, f in enumerate(ctx.inputs)]
    out, pairs = band_candidates(slices, len(ctx.inputs), max_group)
    workdir.write(layout.bucket("pairs", b), out)
    return TaskOutput(counts={"candidate_pairs": pairs}, data={"band_records": sum(len(s) for _, s in slices) // BAND})


def run_verify(layout: Layout, files: list[int], ctx: RunContext, buckets: int, m: MinhashSection) -> TaskOutput:
    """Verifies the candidate pairs whose later document is in one of ``files`` (a group task):
    every file's sets or signatures needed by the group are read once, then each file's pairs are
    checked."""
    pairs = {i: [read_slice(layout.bucket("pairs", b), i) for b in range(buckets)] for i in files}
    wanted: dict[int, set[int]] = defaultdict(set)
    for i, bufs in pairs.items():
        for buf in bufs:
            recs = u32_records(buf)
            for k in range(0, len(recs), 3):
                wanted[recs[k]].add(recs[k + 1])
                wanted[i].add(recs[k + 2])
    kind = "sets" if m.verify == "jaccard" else "sigs"
    reader = read_set_values if m.verify == "jaccard" else read_signatures
    nodes: list[int] = []
    values: list[bytes] = []
    for f, docs in sorted(wanted.items()):
        got = reader(layout.scan(ctx.inputs[f].rel, kind), sorted(docs))
        for doc, value in got.items():
            nodes.append((f << 32) | doc)
            values.append(value)
    counts = {"verified_pairs": 0, "rejected_pairs": 0}
    results = verify_pairs([(i, pairs[i]) for i in files], nodes, values, m.verify, m.threshold)
    for i, (records, candidates, kept) in zip(files, results):
        workdir.write(layout.per_file("verified", ctx.inputs[i].rel), bucketed_file(records, VERIFIED))
        counts["verified_pairs"] += kept
        counts["rejected_pairs"] += candidates - kept
    return TaskOutput(counts={k: v for k, v in counts.items() if v})


def run_clusters(layout: Layout, root: str, task: Task, ctx: RunContext, buckets: int, verified: bool) -> TaskOutput:
    n = len(ctx.inputs)
    if verified:
        slices = [(i, read_all(layout.per_file("verified", f.rel))[1][0]) for i, f in enumerate(ctx.inputs)]
        members, clustered = cluster_pairs(slices, VERIFIED, n)
    else:
        slices = [(i, read_slice(layout.bucket("pairs", b), i)) for b in range(buckets) for i in range(n)]
        members, clustered = cluster_pairs(slices, PAIR, n)
    workdir.write(layout.single("minhash/members.bkt"), members)
    rows = list(struct.iter_unpack("<QQII", clustered))
    # Ids and lines of the clustered documents, one meta file at a time.
    needed: dict[int, set[int]] = defaultdict(set)
    for node, survivor, _, _ in rows:
        needed[node >> 32].add(node & 0xFFFFFFFF)
        needed[survivor >> 32].add(survivor & 0xFFFFFFFF)
    names: dict[int, tuple[str, int]] = {}
    for f, docs in sorted(needed.items()):
        meta = read_meta(layout.scan(ctx.inputs[f].rel, "meta"))
        for d in docs:
            names[(f << 32) | d] = (meta.id(d), meta.lines[d])
    files = [f.rel for f in ctx.inputs]
    lines = [
        {
            "id": names[node][0],
            "file": files[node >> 32],
            "line": names[node][1],
            "cluster": cluster,
            "size": size,
            "survivor": node == survivor,
            "survivor_id": names[survivor][0],
        }
        for node, survivor, cluster, size in rows
    ]
    with JsonlWriter(storage.join(root, CLUSTERS_FILE)) as out:
        out.write_many(lines)
    clusters = rows[-1][2] + 1 if rows else 0
    return TaskOutput(
        counts={"clusters": clusters, "clustered_documents": len(rows)},
        data={"clusters": clusters, "clustered_documents": len(rows), "near_duplicates": len(rows) - clusters},
    )
