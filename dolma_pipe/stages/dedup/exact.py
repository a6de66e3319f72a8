"""Exact mode's cross-file phases: the first copy of each key in the global order survives.

The global order is the input files' order (their relative names, sorted), then the line, then
the paragraph, then the n-gram. Keys are 128-bit digests split into hash ranges (*buckets*):

* ``documents`` (one task per bucket): every copy of a document key lives in one bucket, so
  the bucket's task sees them all; reading the files' slices in file order (each in line order),
  every key already seen is a duplicate. No false positives beyond a 128-bit collision, and the
  same answer for any number of processes or machines.
* ``removed`` (one task per file, only with paragraphs and a document-level pass): the file's
  documents that the documents or MinHash pass removes, gathered from their buckets.
* ``paragraphs`` (one task per bucket): the same rule over paragraph (or n-gram) keys, leaving
  out the documents that are removed whole. A paragraph therefore survives in the first
  document that survives: a document kept by the document pass keeps its paragraphs unless they
  occurred earlier elsewhere, and no repeated paragraph loses every copy.
"""

from __future__ import annotations

import struct

from dolma_pipe import workdir
from dolma_pipe._rust import FirstOccurrence, bucketed_file
from dolma_pipe.stage import RunContext, Task, TaskOutput

from . import scaleout
from .workfiles import MEMBER, Layout, read_slice, u32_records

# Reasons in a ``removed`` file.
BY_DOCUMENTS, BY_MINHASH = 1, 2


def bucket_tasks(buckets: int) -> list[Task]:
    return [Task(key=f"bucket-{b:05d}", params={"bucket": b}) for b in range(buckets)]


def first_occurrences(layout: Layout, phase: str, kind: str, size: int, b: int, ctx: RunContext, skip_removed: bool) -> TaskOutput:
    """One hash range's first occurrences, the files read one at a time in the global order
    (memory holds the range's distinct keys, not its records)."""
    fo = FirstOccurrence(size, len(ctx.inputs))
    for i, f in enumerate(ctx.inputs):
        fo.add(i, read_slice(layout.scan(f.rel, kind), b), removed_documents(layout, f.rel) if skip_removed else [])
    out, dups, records, keys = fo.finish()
    workdir.write(layout.bucket(phase, b), out)
    name = "duplicate_documents" if phase == "documents" else "duplicate_paragraph_keys"
    return TaskOutput(counts={name: dups}, data={"records": records, "keys": keys, "duplicates": dups})


def documents_removed_by(layout: Layout, file_index: int, buckets: int) -> set[int]:
    """Documents of one file that the documents pass marks (from every documents bucket)."""
    out: set[int] = set()
    for b in range(buckets):
        recs = u32_records(read_slice(layout.bucket("documents", b), file_index))
        out.update(recs[0::2])
    return out


def minhash_removed(layout: Layout, file_index: int, rel: str, scaled: bool) -> set[int]:
    """Documents of one file that are near-duplicates but not their cluster's survivor."""
    recs = u32_records(scaleout.members(layout, file_index, rel, scaled))
    return {recs[i] for i in range(0, len(recs), MEMBER // 4) if recs[i + 3] == 0}


def run_removed(layout: Layout, i: int, rel: str, buckets: int, documents: bool, minhash: bool, scaled: bool = False) -> TaskOutput:
    """The documents of file ``i`` removed whole by the documents or the MinHash pass."""
    by_docs = documents_removed_by(layout, i, buckets) if documents else set()
    by_near = minhash_removed(layout, i, rel, scaled) if minhash else set()
    recs = b"".join(
        struct.pack("<II", d, (BY_DOCUMENTS if d in by_docs else 0) | (BY_MINHASH if d in by_near else 0))
        for d in sorted(by_docs | by_near)
    )
    workdir.write(layout.per_file("removed", rel), bucketed_file(recs, 8))
    return TaskOutput(counts={"documents_removed": len(by_docs | by_near)})


def removed_documents(layout: Layout, rel: str) -> list[int]:
    return list(u32_records(read_slice(layout.per_file("removed", rel), 0))[0::2])


def dup_records(layout: Layout, phase: str, file_index: int, buckets: int) -> bytes:
    """One file's DUP records from every bucket of a phase."""
    return b"".join(read_slice(layout.bucket(phase, b), file_index) for b in range(buckets))
