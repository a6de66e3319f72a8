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
(a truncated record, a wrong Content-Length), ``extractor_error`` (the extractor raised),
``extractor_crash`` (its process died on the page), ``tagger_error``.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from dolma_pipe import storage
from dolma_pipe._rust import html_nested_deeper
from dolma_pipe.documents import JsonlWriter
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Task, TaskOutput, file_task

from .arc import is_arc, read_arc
from .charset import Decoded, decode
from .extract import EXTRACTORS, Extractor, TooSlow, extract_capped
from .outcomes import Bad, Skip
from .payload import TooLarge, dechunk, open_payload
from .pdf import PDF_TYPE, PdfText
from .provenance import build_document, document_id
from .records import Damage, Record, digest_ok, read_records
from .run import WarcRun
from .sandbox import DEEP, HTML, PDF, ExtractorCrash, ExtractorFailed, Sandbox, class_path
from .tagging import TaggerGroup
from .urls import UrlFilter

T = TypeVar("T")
R = TypeVar("R")

# Record types with a payload to extract; the others are skipped as record_type.
CONTENT_RECORDS = frozenset({"response", "resource", "conversion"})
# Pages sent to the extractor at once (one round trip to its process): a batch ends at BATCH
# pages or BATCH_CHARS characters of HTML.
BATCH = 32
BATCH_CHARS = 4 << 20


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


@dataclass
class Page:
    """A record ready for the extractor: what the steps before extraction made of it."""

    record: Record
    content_type: str
    decoded: Decoded | None  # None for a PDF (``pdf`` holds it)
    doc_id: str
    pre_rows: list[dict[str, Any]]
    deep: bool
    pdf: bytes | None = None
    utf8: bytes = b""  # the HTML's UTF-8 bytes (what the extractor's process is sent)

    @property
    def html(self) -> str:
        return "" if self.decoded is None else self.decoded.text

    def to_extract(self) -> tuple[bytes, int, str]:
        """The page as the sandbox sends it: its bytes, kind and URL."""
        url = self.record.target_uri or ""
        return (self.pdf, PDF, url) if self.pdf is not None else (self.utf8, DEEP if self.deep else HTML, url)


class Extraction:
    """One WARC file's records into documents and attribute rows (one per worker task).

    Records are read, checked and decoded one by one; the pages to extract go to the extractor in
    batches (:data:`BATCH` pages or :data:`BATCH_CHARS` characters: one round trip to the sandbox
    each), and their documents are written in the file's order.
    """

    def __init__(self, run: WarcRun, task: Task, quarantine: Quarantine):
        self.run = run
        self.config = run.config
        self.task = task
        self.quarantine = quarantine
        self.counts: Counter[str] = Counter()
        self.extractor: Extractor = EXTRACTORS[self.config.linearizer]()
        # In a child process of its own (sandbox.py) unless `isolate` is off: a crash or a hang
        # in the extractor's C code then costs one page, never the task.
        self.sandbox = Sandbox(class_path(type(self.extractor)), self.config.max_seconds) if self.config.isolate else None
        self.urls = UrlFilter(self.config.urls, self.run.resolved.blocklists)
        self.pdf = PdfText()
        modules, options = self.config.tagger_modules, self.config.tagger_options
        self.pre = TaggerGroup(self.config.pre.taggers, self.config.pre.skip, modules, options)
        self.post = TaggerGroup(self.config.post.taggers, self.config.post.skip, modules, options)
        self.writers: list[JsonlWriter] = []  # the documents', then each tagger's

    def run_file(self) -> TaskOutput:
        rel = self.task.rel
        names = self.pre.names + self.post.names
        with local_copy(self.task.path) as local, ExitStack() as stack:
            if self.sandbox is not None:
                stack.enter_context(self.sandbox)
            paths = [self.run.documents_path(rel), *(self.run.attributes_path(n, rel) for n in names)]
            self.writers = [stack.enter_context(JsonlWriter(p, level=None if i == 0 else 3)) for i, p in enumerate(paths)]
            reader = read_arc if is_arc(local) else read_records
            batch: list[Page] = []
            chars = 0
            for item in reader(local, self.config.max_record_bytes):
                self.counts["records"] += 1
                page = self._counted(item, self._prepare, item)
                if page is None:
                    continue
                batch.append(page)
                chars += len(page.pdf) if page.pdf is not None else len(page.html)
                if len(batch) >= BATCH or chars >= BATCH_CHARS:
                    self._extract_batch(batch)
                    batch, chars = [], 0
            self._extract_batch(batch)
        if self.counts["written"] == 0:
            # Nothing kept (every record is counted with its reason): no empty files for later stages.
            for path in self.run.outputs(rel):
                storage.remove(path)
        return TaskOutput(docs_in=self.counts["records"], counts={"docs_out": self.counts["written"], **self.counts})

    def _counted(self, where: Record | Damage, step: Callable[[T], R], arg: T) -> R | None:
        """``step(arg)``, or None when it skips or quarantines the record ``where`` (counted either way)."""
        try:
            return step(arg)
        except Skip as skip:
            self.counts[f"skipped_{skip.reason}"] += 1
        except Bad as bad:
            self.counts["quarantined"] += 1
            message = f"record {where.index} at byte {where.offset}: {bad.message}"
            self.quarantine.add(self.task.path, where.index, bad.kind, message, None)
        return None

    def _check(self, record: Record) -> None:
        """Skip by what the record's headers say, before its payload is looked at."""
        length = record.headers.get("content-length", "0").strip()
        if not length.isdigit():  # fastwarc reads no block for it: the record's bytes are lost
            raise Bad("corrupt_record", f"its Content-Length {length[:40]!r} is not a number")
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
        if record.digest_ok is False and not self._digest_of_dechunked(record):
            raise Bad("payload_digest_mismatch", f"payload of {record.payload_size} bytes does not match {record.payload_digest}")

    @staticmethod
    def _digest_of_dechunked(record: Record) -> bool:
        """Whether a chunked payload's digest is of its body without the framing (as some crawlers
        compute it; warcio and Common Crawl digest the bytes as stored)."""
        if record.body is None or "chunked" not in record.http_headers.get("transfer-encoding", "").lower():
            return False
        body, broken = dechunk(record.body)
        return broken is None and digest_ok(record.payload_digest, body) is True

    def _prepare(self, item: Record | Damage) -> Page:
        """Everything before extraction: checks, the payload undone and typed, decoding, pre-taggers."""
        if isinstance(item, Damage):
            end = item.offset + item.length
            raise Bad("corrupt_record", f"bytes {item.offset}-{end} hold no readable record ({item.problem})")
        record = item
        self._check(record)
        assert record.body is not None
        declared = record.http_headers.get("content-type") if record.is_http else record.headers.get("content-type")
        try:
            payload = open_payload(record.body, record.http_headers, declared, self.config.max_record_bytes)
        except TooLarge:
            raise Skip("too_large") from None  # its content encoding inflates past the cap
        if payload.content_type not in self.config.content_types:
            raise Skip("content_type")
        if payload.problem is not None:
            self.counts["payload_damaged"] += 1  # broken framing or compression: extracted from what reads
        if payload.content_type == PDF_TYPE:
            doc_id = document_id(record, self.task.rel)
            pre_rows = self._tag(self.pre, doc_id, "", {"url": record.target_uri, "html": ""}, "pre_taggers")
            return Page(record, PDF_TYPE, None, doc_id, pre_rows, False, pdf=payload.body)
        decoded = decode(payload.body, payload.charset)
        doc_id = document_id(record, self.task.rel)
        pre_rows = self._tag(self.pre, doc_id, "", {"url": record.target_uri, "html": decoded.text}, "pre_taggers")
        # The page's UTF-8 bytes: the body itself when it was read as UTF-8 (most pages), no copy.
        utf8 = payload.body if decoded.utf8_body else decoded.text.encode("utf-8", "surrogatepass")
        deep = self.extractor.depth_quadratic and html_nested_deeper(utf8, self.config.max_depth)
        if deep:
            self.counts["deep_markup"] += 1  # extracted without the main-content rules (extract.py)
        return Page(record, payload.content_type, decoded, doc_id, pre_rows, deep, utf8=utf8)

    def _extract_batch(self, batch: list[Page]) -> None:
        if not batch:
            return
        if self.sandbox is not None:
            results = self.sandbox.extract_many([p.to_extract() for p in batch])
        else:
            results = [self._in_process(p) for p in batch]
        built: list[tuple[Page, dict[str, Any]]] = []
        for page, result in zip(batch, results):
            doc = self._counted(page.record, self._finish, (page, result))
            if doc is not None:
                built.append((page, doc))
        # The post-taggers see the batch's documents at once (one fastText call, not one a document).
        source = self.config.source_name
        tagged = self.post.tag_many([(page.doc_id, doc["text"], source, doc["metadata"]) for page, doc in built])
        for (page, doc), post_rows in zip(built, tagged):
            rows = self._counted(page.record, self._post_rows, (page, post_rows))
            if rows is not None:
                self._write(doc, rows)

    def _in_process(self, page: Page) -> tuple[str, str] | Exception:
        try:
            if page.pdf is not None:
                return self.pdf.extract(page.pdf, self.config.max_seconds), self.pdf.name
            return extract_capped(self.extractor, page.html, self.config.max_seconds, page.deep, page.record.target_uri)
        except Exception as exc:  # a page the extractor cannot read: counted, never a dead task
            return exc

    def _finish(self, item: tuple[Page, tuple[str, str] | Exception]) -> dict[str, Any]:
        """The document of an extracted page (its post-taggers run on the batch: :meth:`_extract_batch`)."""
        page, result = item
        name = self.pdf.name if page.pdf is not None else self.extractor.name
        if isinstance(result, TooSlow):
            raise Skip("too_slow")
        if isinstance(result, ExtractorCrash):
            raise Bad("extractor_crash", f"{name}: {result}")
        if isinstance(result, Exception):
            raise Bad(
                "extractor_error", f"{name}: {result if isinstance(result, ExtractorFailed) else f'{type(result).__name__}: {result}'}"
            )
        text, name = result  # name: what made the text (combined: the extractor whose text was kept)
        if not text.strip():
            raise Skip("empty_text")
        record, cfg = page.record, self.config
        html = page.decoded.text if cfg.store_html_in_metadata and page.decoded is not None else None
        path, added = self.task.path, self.run.resolved.added
        doc = build_document(record, page.doc_id, path, cfg.source_name, added, page.content_type, page.decoded, text, name, html)
        doc["metadata"]["registered_domain"] = self.urls.registered_domain(record.target_uri or "")  # PSL's (urls.py)
        return doc

    @staticmethod
    def _post_rows(item: tuple[Page, list[dict[str, Any]] | None | Exception]) -> list[dict[str, Any]]:
        """The page's attribute rows, pre-taggers' then post-taggers', given what the post-taggers gave."""
        page, post_rows = item
        return page.pre_rows + _rows_or_raise(post_rows, "post_taggers")

    def _write(self, doc: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        self.counts["written"] += 1
        self.writers[0].write(doc)
        self.quarantine.saw_document(doc["id"])
        for writer, row in zip(self.writers[1:], rows):
            writer.write(row)

    def _tag(self, group: TaggerGroup, doc_id: str, text: str, metadata: dict[str, Any], reason: str) -> list[dict[str, Any]]:
        (rows,) = group.tag_many([(doc_id, text, self.config.source_name, metadata)])
        return _rows_or_raise(rows, reason)


def _rows_or_raise(rows: list[dict[str, Any]] | None | Exception, reason: str) -> list[dict[str, Any]]:
    """A tagger group's rows for a record, or the record quarantined (a tagger raised) or skipped
    (``skip``, and no tagger gave a span): ``reason`` is ``pre_taggers`` or ``post_taggers``."""
    if isinstance(rows, Exception):
        raise Bad("tagger_error", f"{reason}: {type(rows).__name__}: {rows}")
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
