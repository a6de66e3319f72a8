"""Phase ``scan`` (one task per input file): every document's keys, in order, into work files.

The file is decompressed by :mod:`dolma_pipe.documents`' own readers and fed, chunk by chunk,
to the Rust scanner (``rust_bloom/src/dedup/scan.rs``), which cuts lines exactly as
:func:`dolma_pipe.documents.iter_lines` does and reads each line's ``id``, ``text`` and key on
a fast path that accepts only lines ``read_documents`` accepts the same way. Every other line
(an integer id, bad JSON, invalid UTF-8, a missing ``text``...) comes back here and goes through
the same code as in every other stage: it is quarantined with its file and line, or normalised
and handed back. Parquet files are read by ``read_documents``. So the documents this stage sees
are exactly those the mixer will see, in the same order: attribute rows line up.

Outputs per file (see :mod:`.workfiles`): ``meta``, and per pass the key records by hash range
(``docs``, ``paras``, ``bands``), the signatures or shingle sets that verification reads
(``sigs``, ``sets``); in Bloom read-only mode also the keys found in the filter (``bloom``).
"""

from __future__ import annotations

import json
from typing import Any, cast

from dolma_pipe import storage, workdir
from dolma_pipe._rust import DecontamSet, DedupScanner, ScanPlan, bucketed_file, key_path_steps
from dolma_pipe.compression import CHUNK, Codec, chunks_after, corrupt_data, truncated_archive
from dolma_pipe.documents import compression_of, parse_document_line, read_documents
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.read_errors import DocumentError, quarantine_if_empty, quarantine_read_error
from dolma_pipe.stage import Task, TaskOutput

from .config import DedupConfig, DedupResolved
from .workfiles import DOC, DUP, PARA, WHOLE_DOCUMENT, Layout, meta_ids

# Built once per worker process: a scan plan holds the decontamination set and the MinHash
# permutations, both worth reusing across the files a worker scans.
_PLANS: dict[str, ScanPlan] = {}
_DECONTAM: dict[str, DecontamSet] = {}

# The scan's counts as the run reports them.
COUNTS = (
    "paragraphs",
    "document_keys",
    "documents_without_key",
    "documents_key_skipped",
    "paragraph_keys",
    "paragraphs_skipped",
    "minhash_documents",
    "documents_without_shingles",
    "decontaminated_paragraphs",
)


def plan_kwargs(config: DedupConfig, resolved: DedupResolved) -> dict[str, Any]:
    """The scan plan's arguments (JSON-able; the decontamination set is added separately), from the
    config and what the run resolved (hash ranges, MinHash bands x rows)."""
    d = config.dedupe
    buckets = resolved.buckets
    kw: dict[str, Any] = {"min_length": d.min_length or 0, "min_words": d.min_words or 0, "skip_empty": bool(d.skip_empty)}
    bloom = config.bloom_filter is not None
    if d.documents is not None:
        kw["document_key"] = d.documents.key
        kw["document_buckets"] = 1 if bloom else buckets
    if d.paragraphs is not None:
        kw["paragraph_separator"] = d.paragraphs.paragraph_separator
        ng = d.paragraphs.by_ngram
        if ng is not None and ng.ngram_length > 0:
            kw.update(ngram_length=ng.ngram_length, ngram_stride=ng.stride, skip_short_paragraphs=ng.skip_short_paragraphs)
        kw["paragraph_buckets"] = 1 if bloom else buckets
    m = config.minhash
    if m is not None:
        assert resolved.minhash is not None
        bands, rows = resolved.minhash.bands, resolved.minhash.rows
        kw["minhash"] = {
            "num_perm": bands * rows,
            "seed": m.seed,
            "bands": bands,
            "rows": rows,
            "ngram": m.ngram,
            "lowercase": m.lowercase,
            "words": m.words,
            "buckets": buckets,
            "keep_signatures": m.verify == "signature",
            "keep_sets": m.verify == "jaccard",
        }
    return kw


def get_plan(config: DedupConfig, resolved: DedupResolved, decontam_path: str | None) -> ScanPlan:
    kw = plan_kwargs(config, resolved)
    cache_key = json.dumps([kw, decontam_path], sort_keys=True)
    plan = _PLANS.get(cache_key)
    if plan is None:
        decontam = None
        if decontam_path is not None:
            decontam = _DECONTAM.get(decontam_path)
            if decontam is None:
                decontam = _DECONTAM[decontam_path] = DecontamSet.from_bytes(workdir.read(decontam_path))
        plan = _PLANS[cache_key] = ScanPlan(**kw, decontamination=decontam)
    return plan


class KeyReader:
    """The documents pass's key in a document read by Python (the fast path reads it in Rust)."""

    def __init__(self, path: str | None):
        self.steps: list[str | int] = key_path_steps(path) if path else []

    def __call__(self, doc: dict) -> Any:
        value: Any = doc
        for step in self.steps:
            if isinstance(step, int):
                if not isinstance(value, list) or step >= len(value):
                    return None
            elif not isinstance(value, dict) or step not in value:
                return None
            value = value[step]
        # A value that is not a string (nor missing) is passed as is: the scanner counts it as
        # "not a key"; None (JSON null) counts as missing.
        return value


def _python_line(scanner: DedupScanner, key: KeyReader, path: str, lineno: int, line: bytes, quarantine: Quarantine) -> None:
    """One line the fast path left to Python: decided exactly as ``read_documents`` decides."""
    doc = parse_document_line(path, lineno, line, quarantine)
    if doc is not None:
        scanner.add_document(lineno, doc["id"], doc["text"], key(doc) if key.steps else None)


def _drain(scanner: DedupScanner, key: KeyReader, path: str, quarantine: Quarantine) -> None:
    while (back := scanner.drain()) is not None:
        _python_line(scanner, key, path, back[0], back[1], quarantine)


def scan_documents(scanner: DedupScanner, key: KeyReader, path: str, quarantine: Quarantine) -> None:
    """Feeds every document of ``path`` to ``scanner``; bad records go to ``quarantine``.

    Gzip files are decompressed in Rust (zlib-rs, about twice CPython's zlib), with the same
    member, truncation and corruption rules as :mod:`dolma_pipe.documents`; other formats by
    ``documents``' own readers.
    """
    kind = compression_of(path)
    if kind == "parquet":
        for row, doc in read_documents(path, quarantine):
            scanner.add_document(row, doc["id"], doc["text"], key(doc) if key.steps else None)
        return
    failure: DocumentError | None = None
    try:
        with storage.open_read(path) as raw:
            first = raw.read(CHUNK)
            if kind == "gzip" and first[:2] == b"\x1f\x8b":
                block = first
                while block:
                    try:
                        scanner.push_gzip(block)
                    except ValueError as exc:
                        failure = corrupt_data(path, Codec.GZIP, exc)
                    _drain(scanner, key, path, quarantine)
                    if failure is not None:
                        break
                    block = raw.read(CHUNK)
                if failure is None and scanner.gzip_truncated:
                    failure = truncated_archive(path, Codec.GZIP)
            else:
                try:
                    for chunk in chunks_after(first, raw, path, kind):
                        scanner.push(chunk)
                        _drain(scanner, key, path, quarantine)
                except DocumentError as exc:
                    failure = exc
    except storage.StorageError as exc:
        quarantine_read_error(quarantine, path, exc, 0)
        return
    # An unfinished last line is a line (as in iter_lines, also before an archive error).
    last = scanner.end_of_input()
    if last is not None:
        _python_line(scanner, key, path, last[0], last[1], quarantine)
    if failure is not None:
        quarantine_read_error(quarantine, path, failure, scanner.last_line + 1)


def bloom_lookup(records: bytes, record_size: int, filter_: Any) -> bytes:
    """DUP records of the key records found in a read-only Bloom filter."""
    keys = [records[i : i + 16] for i in range(0, len(records), record_size)]
    found = filter_.contains_many(keys)
    out = bytearray()
    for j, hit in enumerate(found):
        if hit:
            base = j * record_size
            out += records[base + 16 : base + 20]
            out += records[base + 20 : base + 24] if record_size == PARA else WHOLE_DOCUMENT.to_bytes(4, "little")
    return bytes(out)


def run_scan(
    config: DedupConfig,
    layout: Layout,
    task: Task,
    quarantine: Quarantine,
    resolved: DedupResolved,
    decontam_path: str | None,
    bloom_filter: Any = None,
) -> TaskOutput:
    plan = get_plan(config, resolved, decontam_path)
    scanner = DedupScanner(plan)
    key = KeyReader(config.dedupe.documents.key if config.dedupe.documents is not None else None)
    scan_documents(scanner, key, task.path, quarantine)
    out = scanner.finish()
    counts = out["counts"]
    if compression_of(task.path) != "parquet":
        # What read_documents says and notes for the runner (Parquet files went through it already):
        # a file with no records, blank lines, and every good document's id for the duplicate-id check.
        quarantine_if_empty(quarantine, task.path, counts["lines"])
        if counts["blank_lines"]:
            quarantine.notes["blank_lines"] += counts["blank_lines"]
        if config.duplicate_ids != "ignore":
            for doc_id in meta_ids(out["meta"]):
                quarantine.saw_document(doc_id)
    workdir.write(layout.scan(task.rel, "meta"), out["meta"])
    for kind, name in (("documents", "docs"), ("paragraphs", "paras"), ("bands", "bands"), ("signatures", "sigs"), ("sets", "sets")):
        data = cast("dict[str, bytes | None]", out)[kind]  # the kernel's output, keyed by kind
        if data is not None:
            workdir.write(layout.scan(task.rel, name), data)
    by_name = cast("dict[str, int]", counts)
    result = {k: int(by_name[k]) for k in COUNTS if by_name.get(k)}
    if bloom_filter is not None:
        # Read-only Bloom mode: the lookups need no global order, so they happen here.
        kind, size = ("docs", DOC) if config.dedupe.documents is not None else ("paras", PARA)
        from .workfiles import read_slice

        dups = bloom_lookup(read_slice(layout.scan(task.rel, kind), 0), size, bloom_filter)
        workdir.write(layout.per_file("bloom", task.rel), bucketed_file(dups, DUP))
        result["bloom_hits"] = len(dups) // DUP
    # Lines the Rust fast path left to Python (integer ids, unusual JSON): how the scan went, not
    # what it found, so kept with the task's record rather than summed with the counts.
    how = {"lines_parsed_in_python": int(by_name.get("python_lines", 0))}
    return TaskOutput(docs_in=int(counts["documents"]), counts=result, data=how)


def scan_outputs(config: DedupConfig, layout: Layout, rel: str) -> list[str]:
    kinds = ["meta"]
    if config.dedupe.documents is not None:
        kinds.append("docs")
    if config.dedupe.paragraphs is not None:
        kinds.append("paras")
    if config.minhash is not None:
        kinds.append("bands")
        kinds += {"signature": ["sigs"], "jaccard": ["sets"], "none": []}[config.minhash.verify]
    out = [layout.scan(rel, k) for k in kinds]
    if config.bloom_filter is not None and config.bloom_filter.read_only:
        out.append(layout.per_file("bloom", rel))
    return out
