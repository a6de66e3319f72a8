"""Phase ``attributes`` (one task per input file): Dolma's attribute rows from the decisions.

One row per good document of the file, in order, ``{"id": ..., "attributes": {...}}``, under the
configured attribute names (bare, as Dolma's deduper writes them):

* documents: ``[[0, len(text), 1]]`` on every later copy (the key is absent on the others, as in
  Dolma);
* paragraphs: ``[[start, end, score], ...]`` for every non-empty text (absent for an empty one,
  as in Dolma): score 1 for a duplicate paragraph; with ``by_ngram``, the fraction of the
  paragraph's n-grams seen before, for each paragraph at or above ``overlap_threshold``
  (a paragraph with fewer than two n-grams is compared whole: score 1.0 or 0.0);
* MinHash: ``[[0, len(text), 1]]`` on every member of a near-duplicate cluster but its survivor;
* decontamination: ``[[start, end, score], ...]`` of paragraphs found in the evaluation texts.

The rows are built (in Rust, ``rust_bloom/src/dedup/render.rs``) from the scan's meta file (ids,
lengths, paragraph lengths) and the later phases' outputs, without reading the documents again.
"""

from __future__ import annotations

from dolma_pipe import paths, storage, workdir
from dolma_pipe._rust import render_attributes
from dolma_pipe.compression import ATTRIBUTE_GZIP_LEVEL, Codec
from dolma_pipe.stage import TaskOutput

from . import scaleout
from .config import DedupConfig
from .exact import dup_records
from .workfiles import Layout, read_all


def attribute_name_of(rel: str) -> str:
    return paths.attribute_file_name(rel)


def write_jsonl_bytes(path: str, data: bytes) -> None:
    """JSON lines already encoded, compressed by file name (one gzip member with mtime 0 at the
    taggers' attribute level, a zstd frame, or plain), written atomically. gzip is libdeflate's
    (as the mixer's), and most of what the attributes phase spends."""
    codec = Codec.of_path(path)
    packed = codec.compress(data, ATTRIBUTE_GZIP_LEVEL if codec is Codec.GZIP else None)
    with storage.open_write_atomic(path) as raw:
        raw.write(packed)


def run_attributes(
    config: DedupConfig, layout: Layout, out_path: str, i: int, rel: str, buckets: int, substring_spans: bytes = b"", scaled: bool = False
) -> TaskOutput:
    """Writes the attribute file of input file ``i`` (relative name ``rel``)."""
    d = config.dedupe
    bloom = config.bloom_filter is not None
    meta = workdir.read(layout.scan(rel, "meta"))
    doc_dups = para_dups = b""
    if bloom:
        found = read_all(layout.per_file("bloom", rel))[1][0]
        if d.documents is not None:
            doc_dups = found
        else:
            para_dups = found
    else:
        if d.documents is not None:
            doc_dups = dup_records(layout, "documents", i, buckets)
        if d.paragraphs is not None:
            para_dups = dup_records(layout, "paragraphs", i, buckets)
    members = scaleout.members(layout, i, rel, scaled) if config.minhash is not None else b""
    ngram = d.paragraphs.by_ngram if d.paragraphs is not None else None
    data, marked = render_attributes(
        meta,
        documents=d.documents.attribute_name if d.documents is not None else None,
        paragraphs=d.paragraphs.attribute_name if d.paragraphs is not None else None,
        by_ngram=ngram is not None and ngram.ngram_length > 0,
        threshold=ngram.overlap_threshold if ngram is not None else 1.0,
        minhash=config.minhash.attribute_name if config.minhash is not None else None,
        decontamination=config.decontamination.attribute_name if config.decontamination is not None else None,
        substrings=config.substrings.attribute_name if config.substrings is not None else None,
        doc_dups=doc_dups,
        para_dups=para_dups,
        members=members,
        substring_spans=substring_spans,
    )
    write_jsonl_bytes(out_path, data)
    counts = {f"marked_{k}": v for k, v in marked.items() if v}
    return TaskOutput(counts={"docs_out": data.count(b"\n"), **counts})
