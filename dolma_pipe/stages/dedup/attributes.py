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

The rows are built from the scan's meta file (ids, lengths, paragraph lengths) and the later
phases' outputs, without reading the documents again.
"""

from __future__ import annotations

from typing import Any

from dolma_pipe import paths, storage
from dolma_pipe.documents import JsonlWriter
from dolma_pipe.stage import TaskOutput

from .config import DedupConfig
from .exact import dup_records, minhash_removed
from .workfiles import PARA_SKIPPED, PARA_WHOLE, WHOLE_DOCUMENT, Layout, dups_by_document, read_all, read_meta

BATCH = 4096


def attribute_name_of(rel: str) -> str:
    return paths.attribute_file_name(rel)


def run_attributes(config: DedupConfig, layout: Layout, out_path: str, i: int, rel: str, buckets: int) -> TaskOutput:
    """Writes the attribute file of input file ``i`` (relative name ``rel``)."""
    d = config.dedupe
    bloom = config.bloom_filter is not None
    meta = read_meta(layout.scan(rel, "meta"))

    doc_dups: set[int] = set()
    para_dups: dict[int, list[int]] = {}
    if bloom:
        found = dups_by_document(read_all(layout.per_file("bloom", rel))[1][0])
        if d.documents is not None:
            doc_dups = set(found)
        else:
            para_dups = found
    else:
        if d.documents is not None:
            doc_dups = set(dups_by_document(dup_records(layout, "documents", i, buckets)))
        if d.paragraphs is not None:
            para_dups = dups_by_document(dup_records(layout, "paragraphs", i, buckets))
    near = minhash_removed(layout, i) if config.minhash is not None else set()
    decon = meta.decontamination_hits() if config.decontamination is not None else {}

    ngram = d.paragraphs.by_ngram if d.paragraphs is not None else None
    by_ngram = ngram is not None and ngram.ngram_length > 0
    threshold = ngram.overlap_threshold if ngram is not None else 1.0
    counts = {"marked_documents": 0, "marked_paragraphs": 0, "marked_near_duplicates": 0, "marked_contaminated": 0}
    rows: list[dict[str, Any]] = []
    ids = meta.ids()
    with JsonlWriter(out_path) as out:
        for doc in range(len(meta)):
            chars = meta.chars[doc]
            attrs: dict[str, Any] = {}
            if d.documents is not None and doc in doc_dups:
                attrs[d.documents.attribute_name] = [[0, chars, 1]]
                counts["marked_documents"] += 1
            if d.paragraphs is not None and chars > 0:
                spans = _paragraph_spans(meta, doc, para_dups.get(doc, []), by_ngram, threshold)
                attrs[d.paragraphs.attribute_name] = spans
                counts["marked_paragraphs"] += sum(1 for s in spans if s[2] > 0)
            if config.minhash is not None and doc in near:
                attrs[config.minhash.attribute_name] = [[0, chars, 1]]
                counts["marked_near_duplicates"] += 1
            if config.decontamination is not None and chars > 0:
                hits = decon.get(doc, [])
                attrs[config.decontamination.attribute_name] = hits
                counts["marked_contaminated"] += len(hits)
            rows.append({"id": ids[doc], "attributes": attrs})
            if len(rows) >= BATCH:
                out.write_many(rows)
                rows = []
        out.write_many(rows)
    storage_counts = {k: v for k, v in counts.items() if v}
    return TaskOutput(counts={"docs_out": len(meta), **storage_counts})


def _paragraph_spans(meta: Any, doc: int, dups: list[int], by_ngram: bool, threshold: float) -> list[list[Any]]:
    if not by_ngram:
        if not dups:
            return []
        spans = meta.paragraph_spans(doc)
        return [[spans[p][0], spans[p][1], 1] for p in sorted(set(dups)) if p != WHOLE_DOCUMENT]
    spans = meta.paragraph_spans(doc)
    info = meta.paragraph_info(doc)
    seen: dict[int, int] = {}
    for p in dups:
        seen[p] = seen.get(p, 0) + 1
    out: list[list[Any]] = []
    for p, n in enumerate(info):
        if n == PARA_SKIPPED:
            continue
        score = (1.0 if seen.get(p) else 0.0) if n == PARA_WHOLE else seen.get(p, 0) / n
        if score >= threshold:
            out.append([spans[p][0], spans[p][1], score])
    return out


def write_path(root: str, rel: str) -> str:
    return storage.join(root, attribute_name_of(rel))
