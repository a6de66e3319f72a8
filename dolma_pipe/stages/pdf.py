"""``pdf``: PDF files (local or ``s3://``) into Dolma documents, one task and one document per file.

The text layer is read as the warc stage reads a PDF record (:class:`~.warc.pdf.PdfText`: pdfium,
no OCR, pages separated by a blank line), in a child process of the worker's own (``isolate``, on
by default; one child per worker process, kept for its files), so that a PDF that crashes pdfium
or runs past ``max_seconds`` costs that file, never the run. Every file is counted: ``written``,
or skipped (``too_large``, ``too_slow``, ``empty_text``: a PDF of scanned pages has no text layer),
or quarantined with the file named (``not_pdf``: the bytes are no PDF; ``extractor_error``: pdfium
cannot open it; ``extractor_crash``: its process died on it).

A document: ``id`` a hash of the file's relative name and its content's sha256 (the same file at
the same place has the same id on every run and machine; an edited file, a new one), ``created``
the PDF's own creation date (its information dictionary's, else its XMP's) or absent, ``added``
the destination's first run's time (its manifest; the same on a rerun), ``metadata`` the file's
path, size, sha256, ``content_type`` and ``extractor``.
"""

from __future__ import annotations

import hashlib
import os
import re
from multiprocessing.util import Finalize
from typing import Any

from pydantic import Field, field_validator

from dolma_pipe import storage
from dolma_pipe.config import PathStr, RunOptions
from dolma_pipe.documents import JsonlWriter
from dolma_pipe.manifest import InputFile
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Resolved, Stage, Task, TaskOutput

from .warc.extract import TooSlow
from .warc.pdf import PDF_TYPE, PdfOnly, PdfText, creation_date
from .warc.provenance import dolma_time, parse_time
from .warc.run import resolve_added
from .warc.sandbox import PDF, ExtractorCrash, ExtractorFailed, Sandbox, class_path

_PDF_SUFFIX = re.compile(r"\.pdf$", re.IGNORECASE)
PDF_MAGIC = b"%PDF-"
MAGIC_WITHIN = 1024  # readers accept the header anywhere in the first KiB (bytes before it: junk)


class PdfConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1, description="PDF files or globs (local or s3://)")
    destination: PathStr = Field(..., description="output root: <destination>/documents/<file>.jsonl.gz, one document per PDF")
    source_name: str = Field(..., min_length=1, description="the documents' source field")
    max_file_bytes: int = Field(256 << 20, ge=1024, description="a PDF larger than this is skipped as too_large, unread")
    isolate: bool = Field(True, description="read PDFs in a child process, so that a crash or hang of pdfium costs one file")
    max_seconds: float = Field(60.0, gt=0, description="a PDF whose text takes longer than this is skipped as too_slow")
    added: str | None = Field(
        None, description="the documents' added time (ISO 8601); default: when this destination's first run started (kept by reruns)"
    )

    @field_validator("added")
    @classmethod
    def _added_is_a_time(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_time(v)
            except ValueError:
                raise ValueError(f"not an ISO 8601 time: {v!r}") from None
        return v


class PdfResolved(Resolved):
    """``added``: the config's, else when the destination's first run started (its manifest)."""

    added: str


def documents_name(rel: str) -> str:
    """``papers/a.pdf`` -> ``papers/a.jsonl.gz``."""
    return _PDF_SUFFIX.sub("", rel) + ".jsonl.gz"


def document_id(rel: str, sha256: str) -> str:
    return hashlib.sha1(f"{rel}\0{sha256}".encode("utf-8", "surrogatepass")).hexdigest()


class _Skip(Exception):
    def __init__(self, reason: str):
        self.reason = reason


class _Bad(Exception):
    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message


_SANDBOX: tuple[int, Sandbox] | None = None  # the process (pid) that started it, and it


def _sandbox(max_seconds: float) -> Sandbox:
    """The worker process's extractor child, started on its first PDF and kept for the next ones.
    A forked worker inherits its parent's (the pipes of another process's child): never used,
    never closed there, a new one started."""
    global _SANDBOX
    pid = os.getpid()
    if _SANDBOX is not None and _SANDBOX[0] == pid and _SANDBOX[1].max_seconds == max_seconds:
        return _SANDBOX[1]
    if _SANDBOX is not None and _SANDBOX[0] == pid:
        _SANDBOX[1].close()
    sandbox = Sandbox(class_path(PdfOnly), max_seconds)
    _SANDBOX = (pid, sandbox)
    # closed (the child ended and waited for) when the process exits: a pool worker runs
    # multiprocessing's finalizers as it ends, where atexit handlers are not run
    Finalize(sandbox, sandbox.close, exitpriority=10)
    return sandbox


class PdfStage(Stage[PdfConfig]):
    name = "pdf"
    description = "extract Dolma documents from PDF files (their text layer, by pdfium), every file accounted for"
    config_model = PdfConfig
    output_dir = "documents"

    @property
    def output_root(self) -> str:
        return self.config.destination

    def output_name(self, rel: str) -> str:
        return documents_name(rel)

    def resolve(self, inputs: list[InputFile]) -> PdfResolved:
        return PdfResolved(added=resolve_added(self.config.added, self.output_root, self.name))

    def process(self, task: Task, quarantine: Quarantine) -> TaskOutput:
        out = self.output_path(task.rel)
        assert out is not None and isinstance(self.resolved, PdfResolved)
        counts = {"written": 0}
        try:
            doc = self._document(task)
        except _Skip as skip:
            counts[f"skipped_{skip.reason}"] = 1
            doc = None
        except _Bad as bad:
            counts["quarantined"] = 1
            quarantine.add(task.path, 1, bad.kind, f"{task.path}: {bad.message}", None)
            doc = None
        if doc is None:
            storage.remove(out)  # nothing kept (a rerun after a change leaves no stale document)
        else:
            with JsonlWriter(out) as writer:
                writer.write(doc)
            quarantine.saw_document(doc["id"])
            counts["written"] = 1
        return TaskOutput(docs_in=1, counts={"docs_out": counts["written"], **counts})

    def _document(self, task: Task) -> dict[str, Any]:
        cfg = self.config
        if task.size > cfg.max_file_bytes:
            raise _Skip("too_large")
        data = storage.read_bytes(task.path)
        if PDF_MAGIC not in data[: MAGIC_WITHIN + len(PDF_MAGIC)]:
            raise _Bad("not_pdf", f"no {PDF_MAGIC.decode()} header in its first {MAGIC_WITHIN} bytes")
        reader = PdfText()
        result: str | Exception
        if cfg.isolate:
            answer = _sandbox(cfg.max_seconds).extract_many([(data, PDF, "")])[0]
            result = answer if isinstance(answer, Exception) else answer[0]
        else:
            try:
                result = reader.extract(data, cfg.max_seconds)
            except TooSlow as exc:
                result = exc
            except Exception as exc:  # a PDF pdfium cannot read: counted, never a dead task
                result = ExtractorFailed(f"{type(exc).__name__}: {exc}")
        if isinstance(result, TooSlow):
            raise _Skip("too_slow")
        if isinstance(result, ExtractorCrash):
            raise _Bad("extractor_crash", f"{reader.name}: {result}")
        if isinstance(result, Exception):
            raise _Bad("extractor_error", f"{reader.name}: {result}")
        if not result.strip():
            raise _Skip("empty_text")
        sha256 = hashlib.sha256(data).hexdigest()
        assert isinstance(self.resolved, PdfResolved)
        doc: dict[str, Any] = {"id": document_id(task.rel, sha256), "text": result, "source": cfg.source_name, "added": self.resolved.added}
        created = creation_date(data)
        if created is not None:
            doc["created"] = dolma_time(created)
        doc["metadata"] = {"path": task.path, "bytes": len(data), "sha256": sha256, "content_type": PDF_TYPE, "extractor": reader.name}
        return doc
