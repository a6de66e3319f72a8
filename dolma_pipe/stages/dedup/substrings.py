"""Substring deduplication (``substrings:``): every repeat of ``min_length`` bytes or more after its
first occurrence, as Lee et al. 2022 (``deduplicate-text-datasets``) find them and Dolma 3 removes
them, from one suffix array per file merged without ever building one over the corpus.

* ``suffix`` (one task per input file): the file's documents' UTF-8 text, 0xFF after each (no
  match crosses it), into work files, in parts of at most ``memory_per_task``, and each part's
  suffix array (libsais). A document the documents or MinHash pass removes whole is written as
  empty text: no repeat is credited to a copy that goes anyway, so a string never loses every copy;
* ``substrings`` (one task per range of suffixes' first two bytes): the parts' arrays merged, in
  the order of their first ``min_length`` bytes; a run of equal windows (inside a document) is a
  repeated string, and its occurrences are marked: all but the first in the global order (files by
  name, then line, then offset) with ``keep: first``, all of them with ``keep: none`` (what
  ``deduplicate-text-datasets`` removes). Marked windows are joined into byte ranges per part;
* the ``attributes`` phase gathers each file's ranges from every task and writes them as
  ``[start, end, 1]`` spans in characters (only whole characters inside a repeat: a window's edge
  can fall inside a multi-byte character), which ``mix``'s span replacement removes.

Every decision depends on the global order alone: the same spans for any process count, local or
Ray.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dolma_pipe import storage, suffix, workdir
from dolma_pipe._rust import bucketed_by_first_u32
from dolma_pipe.documents import read_documents
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Task, TaskOutput
from dolma_pipe.workdir import WorkFileError

from .config import DedupConfig
from .workfiles import Layout, read_slice

# Bytes of memory per byte of text a part's suffix array takes to build (32-bit positions, the
# library's working space).
MEMORY_PER_BYTE = 5
RANGE_BYTES = suffix.RANGE.itemsize


def part_paths(layout: Layout, name: str) -> dict[str, str]:
    return {kind: layout.work.path("suffix", f"{name}.{kind}") for kind in ("text", "sa", "starts")}


def run_suffix(config: DedupConfig, layout: Layout, task: Task, removed: list[int], meta_docs: int) -> TaskOutput:
    """One file's text parts and their suffix arrays; data: the parts."""
    section = config.substrings
    assert section is not None
    budget = max(1, section.memory_per_task // MEMORY_PER_BYTE)
    gone = set(removed)
    parts: list[dict[str, Any]] = []
    texts: list[bytes] = []
    size = docs = 0

    def flush() -> None:
        nonlocal texts, size
        name = f"{task.rel}@{len(parts)}"
        files = part_paths(layout, name)
        lengths = np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts))
        with workdir.open_write(files["text"]) as w:
            for t in texts:
                w.write(t)
                w.write(bytes([suffix.SEPARATOR]))
        workdir.write_array(files["starts"], np.cumsum(lengths) - lengths)
        length = int(lengths.sum())
        width = _build_sealed(files["text"], length, files["sa"])
        parts.append({"name": name, "length": length, "width": width, "first_doc": docs - len(texts), "docs": len(texts)})
        texts, size = [], 0

    for _, doc in read_documents(task.path, Quarantine()):
        text = b"" if docs in gone else doc["text"].encode("utf-8", "surrogatepass")
        if texts and size + len(text) + 1 > budget:
            flush()
        texts.append(text)
        size += len(text) + 1
        docs += 1
    if texts or not parts:
        flush()
    if docs != meta_docs:
        raise WorkFileError(layout.scan(task.rel, "meta"), "damaged", f"damaged (it has {meta_docs} documents, the file now {docs})")
    files = [f for p in parts for f in part_paths(layout, p["name"]).values()]
    return TaskOutput(counts={"substring_bytes_indexed": sum(p["length"] for p in parts)}, data={"parts": parts}, files=files)


def _build_sealed(text: str, length: int, out: str) -> int:
    """The suffix array of a sealed text work file, itself a sealed work file (local work
    directories: the array is written where the library maps the text); its width."""
    if storage.is_remote(text):
        raise WorkFileError(text, "missing", "on S3: substring dedup needs a local work directory (work_dir.output)")
    with workdir.open_read(text) as r:
        if r.content_len != length:
            raise WorkFileError(text, "damaged", f"damaged ({r.content_len} bytes, {length} written)")
    with storage.atomic_local_path(out) as tmp:
        _, width = suffix.build(text, "u8", tmp, length=length, seal=True)
    return width


def shard_refs(layout: Layout, parts: list[dict[str, Any]]) -> list[suffix.ShardRef]:
    refs = []
    for p in parts:
        files = part_paths(layout, p["name"])
        refs.append(suffix.ShardRef(files["text"], 0, p["length"], files["sa"], p["width"]))
    return refs


# Text a search task merges by default (``buckets`` unset): enough tasks to keep every process
# busy on a corpus of some size, few enough that each one's fixed cost (opening every part) is small.
TEXT_PER_KEY_RANGE = 8 << 20


def key_range_count(config: DedupConfig, parts: list[dict[str, Any]]) -> int:
    """How many key ranges the ``substrings`` phase merges in: ``buckets``, or one per
    ``TEXT_PER_KEY_RANGE`` of text. From the parts' lengths alone: planning reads no work file (a
    rerun of a complete run plans with its work directory removed)."""
    if config.buckets:
        return config.buckets
    total = sum(p["length"] for p in parts)
    return max(1, min(4096, -(-total // TEXT_PER_KEY_RANGE)))


def largest_part(parts: list[dict[str, Any]]) -> int:
    """The part whose suffixes the key ranges split evenly (the first of the longest)."""
    return max(range(len(parts)), key=lambda j: (parts[j]["length"], -j))


def key_range(layout: Layout, parts: list[dict[str, Any]], bucket: int, buckets: int) -> tuple[int, int]:
    """Range ``bucket`` of the ``buckets`` key ranges that split the largest part's suffixes into
    nearly equal runs (empty where a key many suffixes share takes more than one run's share).
    Read from that part's suffix array by the task that merges the range, which reads it anyway."""
    if not parts:
        return (0, suffix.KEYS) if bucket == 0 else (suffix.KEYS, suffix.KEYS)
    bounds = suffix.key_bounds(shard_refs(layout, [parts[largest_part(parts)]])[0], buckets)
    return bounds[bucket], bounds[bucket + 1]


def run_substrings(config: DedupConfig, layout: Layout, task: Task, parts: list[dict[str, Any]]) -> TaskOutput:
    """One key range's repeated windows, joined into byte ranges per part: a bucketed work file."""
    section = config.substrings
    assert section is not None
    # The arrays are read in place: each is checked first (a missing or damaged one has its writer
    # redone), the largest part's before it gives the range; an empty range reads no other.
    largest = largest_part(parts) if parts else -1
    arrays = [part_paths(layout, p["name"])["sa"] for p in parts]
    if parts:
        workdir.check(arrays[largest])
    lo, hi = key_range(layout, parts, task.params["bucket"], task.params["buckets"])
    ranges = np.zeros(0, dtype=suffix.RANGE)
    if lo < hi:
        for j, array in enumerate(arrays):
            if j != largest:
                workdir.check(array)
        ranges = suffix.repeated_ranges(shard_refs(layout, parts), section.min_length, lo, hi, section.keep == "first")
    workdir.write(layout.bucket("substrings", task.params["bucket"]), bucketed_by_first_u32(ranges.tobytes(), RANGE_BYTES, len(parts)))
    lengths = ranges["end"] - ranges["start"]
    return TaskOutput(counts={"substring_ranges": len(ranges)}, data={"ranges": len(ranges), "bytes": int(lengths.sum())})


def char_spans(layout: Layout, parts: list[dict[str, Any]], part_ids: list[int], buckets: int) -> bytes:
    """One file's repeated substrings as (document, first char, end char) records for the
    attribute writer: its parts' ranges from every task, joined, in whole characters."""
    out = []
    for j in part_ids:
        p = parts[j]
        pieces = [np.frombuffer(read_slice(layout.bucket("substrings", b), j), dtype=suffix.RANGE) for b in range(buckets)]
        ranges = np.concatenate(pieces) if pieces else np.zeros(0, suffix.RANGE)
        if not len(ranges):
            continue
        ranges = np.sort(ranges, order=["start", "end"])
        merged = _union(ranges)
        files = part_paths(layout, p["name"])
        starts = workdir.load_array(files["starts"], np.dtype("<i8"))
        with workdir.open_read(files["text"]) as r:
            if r.content_len != p["length"]:
                raise WorkFileError(files["text"], "damaged", "damaged (not the length its part records)")
        chars = suffix.char_ranges(suffix.ShardRef(files["text"], 0, p["length"], files["sa"], p["width"]), starts, merged).copy()
        chars["doc"] += p["first_doc"]
        out.append(chars)
    return np.concatenate(out).tobytes() if out else b""


def _union(ranges: np.ndarray) -> np.ndarray:
    """Sorted byte ranges joined where they overlap or touch."""
    out = np.zeros(len(ranges), dtype=[("start", "<u8"), ("end", "<u8")])
    k = -1
    for start, end in zip(ranges["start"].tolist(), ranges["end"].tolist()):
        if k >= 0 and start <= out["end"][k]:
            out["end"][k] = max(out["end"][k], end)
        else:
            k += 1
            out["start"][k], out["end"][k] = start, end
    return out[: k + 1]
