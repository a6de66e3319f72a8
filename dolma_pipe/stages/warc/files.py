"""The stage's one phase: one task per WARC file, every record written, skipped or quarantined.

A task reads its file once (a remote file is copied to local scratch first: the reader needs to
seek past damage) and writes ``<destination>/documents/<file>.jsonl.gz`` and one attribute file
per tagger, all atomically. Its counts say what became of every record: ``records`` is the sum
of ``written``, the ``skipped_<reason>`` counts and ``quarantined`` (whose kinds are in the
task's errors, with the record's place and byte range).

Skip reasons: ``record_type`` (warcinfo, request, metadata...), ``revisit``, ``redirect``,
``http_status`` (another status than 2xx), ``no_url``, ``blocked_domain`` / ``blocked_url`` /
``banned_word`` (the URL filter), ``too_large``, ``content_type``, ``too_slow``, ``empty_text``,
``pre_taggers`` / ``post_taggers`` (Dolma's ``skip``). Quarantine kinds: ``corrupt_record``
(bytes no record could be read from: a corrupt gzip member, garbage), ``payload_digest_mismatch``
(a truncated record, a wrong Content-Length), ``extractor_error``, ``tagger_error``.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from dolma_pipe import storage
from dolma_pipe.documents import JsonlWriter
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Task, TaskOutput, file_task

from .arc import is_arc, read_arc
from .charset import decode
from .extract import EXTRACTORS, Extractor, TooSlow, extract_capped, nested_deeper
from .payload import open_payload
from .provenance import build_document, document_id
from .records import Damage, Record, read_records
from .run import WarcRun
from .tagging import TaggerGroup
from .urls import UrlFilter

# Record types with a payload to extract; the others are skipped as record_type.
CONTENT_RECORDS = frozenset({"response", "resource", "conversion"})


class Skip(Exception):
    """A record the stage does not write, and why (a count, not an error)."""

    def __init__(self, reason: str):
        self.reason = reason


class Bad(Exception):
    """A record quarantined: its kind and what is wrong."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message


@contextmanager
def local_copy(path: str) -> Iterator[str]:
    """``path`` as a local file: itself, or a scratch copy of a remote object."""
    if not storage.is_remote(path):
        yield storage.local_path(path)
        return
    with tempfile.TemporaryDirectory(prefix="dolma-pipe-warc-") as scratch:
        local = os.path.join(scratch, "input.warc")
        storage.download(path, local)
        yield local


class Extraction:
    """One WARC file's records into documents and attribute rows (one per worker task)."""

    def __init__(self, run: WarcRun, task: Task, quarantine: Quarantine):
        self.run = run
        self.config = run.config
        self.task = task
        self.quarantine = quarantine
        self.counts: Counter[str] = Counter()
        self.extractor: Extractor = EXTRACTORS[self.config.linearizer]()
        self.urls = UrlFilter(self.config.urls)
        self.pre = TaggerGroup(self.config.pre.taggers, self.config.pre.skip)
        self.post = TaggerGroup(self.config.post.taggers, self.config.post.skip)

    def run_file(self) -> TaskOutput:
        rel = self.task.rel
        docs_path = self.run.documents_path(rel)
        names = self.pre.names + self.post.names
        with local_copy(self.task.path) as local, ExitStack() as stack:
            docs = stack.enter_context(JsonlWriter(docs_path))
            attrs = [stack.enter_context(JsonlWriter(self.run.attributes_path(n, rel), level=3)) for n in names]
            reader = read_arc if is_arc(local) else read_records
            for item in reader(local, self.config.max_record_bytes):
                self.counts["records"] += 1
                written = self._one(item)
                if written is None:
                    continue
                doc, rows = written
                docs.write(doc)
                self.quarantine.saw_document(doc["id"])
                for writer, row in zip(attrs, rows):
                    writer.write(row)
        if self.counts["written"] == 0:
            # Nothing kept (every record is counted with its reason): no empty files for later stages.
            for path in self.run.outputs(rel):
                storage.remove(path)
        return TaskOutput(docs_in=self.counts["records"], counts={"docs_out": self.counts["written"], **self.counts})

    def _one(self, item: Record | Damage) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The record's document and attribute rows, or None (counted as skipped or quarantined)."""
        try:
            if isinstance(item, Damage):
                end = item.offset + item.length
                raise Bad("corrupt_record", f"bytes {item.offset}-{end} hold no readable record ({item.problem})")
            written = self._document(item)
        except Skip as skip:
            self.counts[f"skipped_{skip.reason}"] += 1
            return None
        except Bad as bad:
            self.counts["quarantined"] += 1
            offset = item.offset
            self.quarantine.add(self.task.path, item.index, bad.kind, f"record {item.index} at byte {offset}: {bad.message}", None)
            return None
        self.counts["written"] += 1
        return written

    def _check(self, record: Record) -> None:
        """Skip by what the record's headers say, before its payload is looked at."""
        if record.type == "revisit":
            raise Skip("revisit")
        if record.type not in CONTENT_RECORDS:
            raise Skip("record_type")
        status = record.http_status
        if record.is_http and (status is None or not 200 <= status < 300):
            raise Skip("redirect" if status is not None and 300 <= status < 400 else "http_status")
        if not record.target_uri:
            raise Skip("no_url")
        if self.urls.active:
            blocked = self.urls.blocked(record.target_uri)
            if blocked is not None:
                raise Skip(blocked)
        if record.too_large:
            raise Skip("too_large")
        if record.digest_ok is False:
            raise Bad("payload_digest_mismatch", f"payload of {record.payload_size} bytes does not match {record.payload_digest}")

    def _document(self, record: Record) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        self._check(record)
        assert record.body is not None
        declared = record.http_headers.get("content-type") if record.is_http else record.headers.get("content-type")
        payload = open_payload(record.body, record.http_headers, declared)
        if payload.content_type not in self.config.content_types:
            raise Skip("content_type")
        if payload.problem is not None:
            self.counts["payload_damaged"] += 1  # broken framing or compression: extracted from what reads
        decoded = decode(payload.body, payload.charset)
        path, source = self.task.path, self.config.source_name
        doc_id = document_id(record, self.task.rel)
        meta = {"url": record.target_uri, "html": decoded.text}
        pre_rows = self._tag(self.pre, doc_id, "", meta, "pre_taggers")
        deep = nested_deeper(decoded.text, self.config.max_depth)
        if deep:
            self.counts["deep_markup"] += 1  # extracted without the main-content rules (extract.py)
        try:
            text = extract_capped(self.extractor, decoded.text, self.config.max_seconds, deep)
        except TooSlow:
            raise Skip("too_slow") from None
        except Exception as exc:  # a page the extractor cannot read: counted, never a dead task
            raise Bad("extractor_error", f"{self.extractor.name}: {type(exc).__name__}: {exc}") from None
        if not text.strip():
            raise Skip("empty_text")
        html = decoded.text if self.config.store_html_in_metadata else None
        doc = build_document(
            record, doc_id, path, source, self.run.resolved.added, payload.content_type, decoded, text, self.extractor.name, html
        )
        post_rows = self._tag(self.post, doc_id, text, doc["metadata"], "post_taggers")
        return doc, pre_rows + post_rows

    def _tag(self, group: TaggerGroup, doc_id: str, text: str, metadata: dict[str, Any], reason: str) -> list[dict[str, Any]]:
        try:
            rows = group.tag(doc_id, text, self.config.source_name, metadata)
        except Exception as exc:
            raise Bad("tagger_error", f"{reason}: {type(exc).__name__}: {exc}") from None
        if rows is None:
            raise Skip(reason)
        return rows


class WarcFiles:
    """The phase: a task per WARC file (:class:`Extraction`)."""

    def __init__(self, run: WarcRun):
        self.run = run

    def phase(self) -> Phase:
        return Phase("files", plan=self.plan, run=self.extract, outputs=self.outputs, unit="file")

    def plan(self, ctx: RunContext) -> list[Task]:
        return [file_task(f) for f in ctx.inputs]

    def outputs(self, task: Task) -> list[str]:
        return self.run.outputs(task.rel)

    def extract(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return Extraction(self.run, task, quarantine).run_file()
