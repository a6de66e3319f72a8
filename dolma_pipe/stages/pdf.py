"""``pdf``: PDF files (local or ``s3://``) into Dolma documents, one document per file, several
files per task and per output file.

Groups (:func:`plan_groups`): within each folder, the files in sorted relative-name order; a file
starts a new group when it is its folder's first, when a hash of its relative name is 0 modulo
``files_per_task`` (a group holds ``files_per_task`` files on average; content-defined, so that
adding or removing a file changes its own group only, not every group after it), or when the
group already holds ``4 * files_per_task`` files. A group is one task, keyed by its first file's
relative name, written to ``<destination>/documents/<first file>.jsonl.gz``; ``files_per_task: 1``
is one task and one output per file. The rule reads nothing but the names, so the groups, and
the outputs, are the same for any process count, locally or on Ray, and on every rerun. A rerun
redoes a group whose files changed (its marker names them, sizes and times), keeps the others,
and, before any task runs, removes the outputs, markers and quarantine files of earlier groups
that held a file this run reads but are no group now (their other files must be deleted ones:
a file still there that the run's patterns leave out is refused, naming it, since regrouping
would drop its document); groups of files this run does not read at all are kept.

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
path relative to the folder its pattern starts from (as the id's; never where the checkout is),
size, sha256, ``content_type`` and ``extractor``. A group's task records the files it skipped
and why (``data["skipped"]``, relative name -> reason).
"""

from __future__ import annotations

import hashlib
import os
import re
from multiprocessing.util import Finalize
from typing import Any

from pydantic import Field

from dolma_pipe import storage
from dolma_pipe.config import ConfigError, PathStr, RunOptions
from dolma_pipe.documents import JsonlWriter
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.markers import errors_path, ids_name, marker_path
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, Resolved, RunContext, Stage, Task, TaskOutput

from .warc.config import AddedTime
from .warc.extract import TooSlow
from .warc.outcomes import Bad, Skip
from .warc.pdf import PDF_TYPE, PdfOnly, PdfText, creation_date
from .warc.run import resolve_added
from .warc.sandbox import PDF, ExtractorCrash, ExtractorFailed, Sandbox, class_path
from .warc.times import dolma_time

_PDF_SUFFIX = re.compile(r"\.pdf$", re.IGNORECASE)
PDF_MAGIC = b"%PDF-"
MAGIC_WITHIN = 1024  # readers accept the header anywhere in the first KiB (bytes before it: junk)
GROUP_CAP = 4  # a group holds at most this many times files_per_task files


class PdfConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1, description="PDF files or globs (local or s3://)")
    destination: PathStr = Field(
        ..., description="output root: <destination>/documents/<first file of a group>.jsonl.gz, one document per PDF"
    )
    files_per_task: int = Field(
        64, ge=1, description="PDFs per task and output file, on average (grouped within each folder by name; 1: one per PDF)"
    )
    source_name: str = Field(..., min_length=1, description="the documents' source field")
    max_file_bytes: int = Field(256 << 20, ge=1024, description="a PDF larger than this is skipped as too_large, unread")
    isolate: bool = Field(True, description="read PDFs in a child process, so that a crash or hang of pdfium costs one file")
    max_seconds: float = Field(60.0, gt=0, description="a PDF whose text takes longer than this is skipped as too_slow")
    added: AddedTime = Field(
        None, description="the documents' added time (ISO 8601); default: when this destination's first run started (kept by reruns)"
    )


class PdfResolved(Resolved):
    """``added``: the config's, else when the destination's first run started (its manifest)."""

    added: str


def documents_name(rel: str) -> str:
    """``papers/a.pdf`` -> ``papers/a.jsonl.gz``."""
    return _PDF_SUFFIX.sub("", rel) + ".jsonl.gz"


def document_id(rel: str, sha256: str) -> str:
    return hashlib.sha1(f"{rel}\0{sha256}".encode("utf-8", "surrogatepass")).hexdigest()


def _starts_group(rel: str, per_task: int) -> bool:
    digest = hashlib.sha1(rel.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % per_task == 0


def plan_groups(inputs: list[InputFile], per_task: int) -> list[tuple[InputFile, ...]]:
    """The files in groups (the module's rule), each in sorted relative-name order, ordered by
    their first file's name."""
    by_folder: dict[str, list[InputFile]] = {}
    for info in inputs:
        by_folder.setdefault(info.rel.rpartition("/")[0], []).append(info)
    groups: list[tuple[InputFile, ...]] = []
    for files in by_folder.values():
        group: list[InputFile] = []
        for info in sorted(files, key=lambda f: f.rel):
            if group and (len(group) >= GROUP_CAP * per_task or _starts_group(info.rel, per_task)):
                groups.append(tuple(group))
                group = []
            group.append(info)
        groups.append(tuple(group))
    return sorted(groups, key=lambda g: g[0].rel)


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

    def phases(self) -> list[Phase]:
        return [Phase("groups", plan=self._plan_groups, run=self._run_group, outputs=self._group_outputs, unit="group")]

    def _plan_groups(self, ctx: RunContext) -> list[Task]:
        tasks = [Task(key=group[0].rel, inputs=group) for group in plan_groups(ctx.inputs, self.config.files_per_task)]
        self._clear_stale(tasks, ctx.inputs)
        return tasks

    def _group_outputs(self, task: Task) -> list[str]:
        out = self.output_path(task.key)
        assert out is not None
        return [out]

    def _clear_stale(self, tasks: list[Task], inputs: list[InputFile]) -> None:
        """Remove what an earlier grouping of this run's files left (documents, marker, quarantined
        records, id file): a file added or removed can change a group's first file, and so its key;
        the old group's output must not stay beside the new one's, looking current. Only a group
        that held a file this run reads is superseded: one of files this run does not read (another
        pattern's, or files since deleted) is kept, so a narrower pattern, or a typo in one, removes
        nothing."""
        root = self.output_root
        keys = {t.key for t in tasks}
        rels = {info.rel for info in inputs}
        stale = rels - keys  # an older group keyed by a file that is no group's first file now
        current = {storage.local_path(marker_path(root, key)) for key in keys}
        markers = storage.glob_info(storage.join(root, "_done", "**", "*.done"))
        for info in markers:
            if storage.local_path(info.path) in current:
                continue  # a planned group's marker (the runner reads it): never superseded
            record = TaskRecord.model_validate_json(storage.read_bytes(info.path))
            if record.key not in keys and any(i.rel in rels for i in record.inputs):
                # its files this run does not read must be gone: one still there would lose its document
                left = [i.path for i in record.inputs if i.rel not in rels and storage.exists(i.path)]
                if left:
                    raise ConfigError(
                        f"documents: {root} holds the group {record.key!r} of an earlier run, which also holds {left[0]}"
                        f"{f' and {len(left) - 1} more' if len(left) > 1 else ''}: that file is still there and this run's "
                        "patterns do not read it, so regrouping would drop its document; run with the earlier patterns, "
                        "or into another destination"
                    )
                stale.add(record.key)
        if not stale:
            return
        # what is there, from one listing a folder: most of ``stale`` (every file that is not its
        # group's first) never had outputs, and a delete each would be a request each on S3
        there = {storage.local_path(info.path) for info in markers}
        for folder, suffix in (("documents", ".jsonl.gz"), ("_errors", ".jsonl"), ("_ids", ".ids")):
            there |= {storage.local_path(info.path) for info in storage.glob_info(storage.join(root, folder, "**", "*" + suffix))}
        for key in sorted(stale):
            out = self.output_path(key)
            assert out is not None
            for path in (out, marker_path(root, key), errors_path(root, key), storage.join(root, ids_name(key))):
                if storage.local_path(path) in there:
                    storage.remove(path)

    def _run_group(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        out = self.output_path(task.key)
        assert out is not None
        counts = {"written": 0}
        skipped: dict[str, str] = {}
        docs = []
        for info in task.inputs:
            try:
                docs.append(self._document(info))
            except Skip as skip:
                counts[f"skipped_{skip.reason}"] = counts.get(f"skipped_{skip.reason}", 0) + 1
                skipped[info.rel] = skip.reason
            except Bad as bad:
                counts["quarantined"] = counts.get("quarantined", 0) + 1
                quarantine.add(info.path, 1, bad.kind, f"{info.path}: {bad.message}", None)
        if not docs:
            storage.remove(out)  # nothing kept (a rerun after a change leaves no stale document)
        else:
            with JsonlWriter(out) as writer:
                for doc in docs:
                    writer.write(doc)
                    quarantine.saw_document(doc["id"])
            counts["written"] = len(docs)
        return TaskOutput(
            docs_in=len(task.inputs), counts={"docs_out": counts["written"], **counts}, data={"skipped": skipped} if skipped else {}
        )

    def _document(self, info: InputFile) -> dict[str, Any]:
        cfg = self.config
        if info.size > cfg.max_file_bytes:
            raise Skip("too_large")
        data = storage.read_bytes(info.path)
        if PDF_MAGIC not in data[: MAGIC_WITHIN + len(PDF_MAGIC)]:
            raise Bad("not_pdf", f"no {PDF_MAGIC.decode()} header in its first {MAGIC_WITHIN} bytes")
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
            raise Skip("too_slow")
        if isinstance(result, ExtractorCrash):
            raise Bad("extractor_crash", f"{reader.name}: {result}")
        if isinstance(result, Exception):
            raise Bad("extractor_error", f"{reader.name}: {result}")
        if not result.strip():
            raise Skip("empty_text")
        sha256 = hashlib.sha256(data).hexdigest()
        assert isinstance(self.resolved, PdfResolved)
        doc: dict[str, Any] = {"id": document_id(info.rel, sha256), "text": result, "source": cfg.source_name, "added": self.resolved.added}
        created = creation_date(data)
        if created is not None:
            doc["created"] = dolma_time(created)
        doc["metadata"] = {"path": info.rel, "bytes": len(data), "sha256": sha256, "content_type": PDF_TYPE, "extractor": reader.name}
        return doc
