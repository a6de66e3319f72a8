"""The ``build`` phase's tasks: one per source file, its part or parts of the index.

A token shard's array indexes the shard where it is (a local ``.npy`` read in place; one on S3
copied by the task, shard and sidecar), its documents from its sidecar; a document file's
documents (read as every stage reads them) give a byte text, their UTF-8 text with 0xFF after each
(no match crosses it), written beside its array with the documents' ids and lines. A source whose
array would not fit ``memory_per_task`` is indexed in several parts, cut between documents. A task
writes through :class:`.files.TaskFiles` (checksums, read back before the part is done; built in
scratch and uploaded for an index on S3); its marker's data is what ``index.json`` records of the
source and its parts (:mod:`.finish`).
"""

from __future__ import annotations

import functools
import io
from typing import Any

import numpy as np
import orjson

from dolma_pipe import paths, storage, suffix
from dolma_pipe.compression import gzip_member
from dolma_pipe.documents import read_documents
from dolma_pipe.manifest import InputFile
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import RunContext, Task, TaskOutput
from train.shards import (
    SIDECAR_SUFFIX,
    TOKENS_SUFFIX,
    ShardError,
    check_sidecar,
    read_sidecar,
    sidecar_path,
    token_count,
)

from .files import SuffixIndexError, TaskFiles
from .format import DOCUMENT_PART_FILES, PART_SUFFIXES, SIDECAR_COPY, SOURCE_COPY, copy_rel, hexdigest, part_rel
from .run import IndexRun


def _save_array(files: TaskFiles, rel: str, array: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, array)
    files.write_bytes(rel, buf.getvalue())


def _download(path: str, tmp: str) -> int:
    """A remote file copied to ``tmp``; the xxh3-64 of the copy (what the index records of it)."""
    storage.download(path, tmp, durable=True)
    return suffix.file_xxh3(tmp)


def _source_record(info: InputFile, local: str | None) -> dict[str, Any]:
    """A source as the index records it: size, time, the xxh3 of its bytes (read from ``local``,
    the file or its copy; none for a remote document file, read once and never again), and a
    remote object's ETag."""
    etag = storage.stat(info.path).etag if storage.is_remote(info.path) else ""
    digest = hexdigest(suffix.file_xxh3(local)) if local is not None else ""
    return {"path": info.path, "size": info.size, "mtime": info.mtime, "xxh3": digest, "etag": etag}


def _part_name(base: str, k: int, parts: int) -> str:
    return base if parts == 1 else f"{base}@{k}"


def _cut(lengths: np.ndarray, max_symbols: int) -> list[tuple[int, int]]:
    """Runs of consecutive documents ``[d0, d1)`` of at most ``max_symbols`` (a longer document alone)."""
    runs = []
    start, size = 0, 0
    for d, n in enumerate(lengths.tolist()):
        if d > start and size + n > max_symbols:
            runs.append((start, d))
            start, size = d, 0
        size += n
    if start < len(lengths) or not runs:
        runs.append((start, len(lengths)))
    return runs


class Build:
    """Plans a task per source (a shard with its sidecar), names the files it may write, and builds them."""

    def __init__(self, run: IndexRun):
        self.run = run

    def plan(self, ctx: RunContext) -> list[Task]:
        tasks = []
        for f in ctx.inputs:
            inputs = [f]
            if self.run.kind == "tokens":
                side = f.path[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX
                try:
                    info = storage.stat(side)
                except storage.StorageError:
                    raise paths.PathError(f"{f.path}: its sidecar {side} is missing (every shard has one)") from None
                inputs.append(InputFile(path=side, rel=f.rel[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX, size=info.size, mtime=info.mtime))
            tasks.append(Task(key=f.rel, inputs=tuple(inputs)))
        return tasks

    def outputs(self, task: Task) -> list[str]:
        return self.run.outputs(task.inputs[0].rel)

    def build(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        with TaskFiles(self.run.root) as files:
            out = self._build_tokens(task, files) if self.run.kind == "tokens" else self._build_documents(task, quarantine, files)
            files.verify()  # what the record will say is what is on disk
            etags = files.publish()
        for part in out.data["parts"]:
            part["files"] = {s: files.digests[rel] for s in PART_SUFFIXES if (rel := part_rel(part["name"], s)) in files.digests}
        out.data["files"] = {rel: files.digests[rel] for rel in files.kept}
        if etags:
            out.data["etags"] = etags
        out.files = [files.path(rel) for rel in files.kept]
        return out

    def _index_part(self, files: TaskFiles, text: str, name: str, offset: int, length: int) -> int:
        """Builds one part's array (text symbols ``[offset, offset + length)``); its width."""
        size = self.run.dtype.itemsize
        symbol = self.run.symbol

        def write(tmp: str) -> suffix.Built:
            try:
                return suffix.build_array(text, symbol, tmp, offset=offset * size, length=length * size)
            except ValueError as exc:
                raise SuffixIndexError(str(exc)) from None

        return files.write(part_rel(name, ".sa"), write, lambda built: built.xxh3).width

    def _shard_here(self, task: Task, files: TaskFiles) -> tuple[str, str | None]:
        """The shard as a local file (its sidecar beside it), and where a local index keeps its
        copy: a local shard is read in place; a remote one is copied, shard and sidecar (into the
        index when it is local, to answer from; into the task's scratch folder when the index is
        on S3, whose queries fetch the shard from where it is)."""
        npy = task.inputs[0].path
        if not storage.is_remote(npy):
            return npy, None
        base = self.run.base(task.inputs[0].rel)
        keep = not files.remote
        for info, tail in ((task.inputs[0], SOURCE_COPY), (task.inputs[1], SIDECAR_COPY)):
            files.write(copy_rel(base, tail), functools.partial(_download, info.path), int, keep=keep)
        return files.local(copy_rel(base, SOURCE_COPY)), copy_rel(base, SOURCE_COPY) if keep else None

    def _build_tokens(self, task: Task, files: TaskFiles) -> TaskOutput:
        npy, copy = self._shard_here(task, files)
        try:
            n = token_count(npy, self.run.dtype)
            check_sidecar(npy, n)
            rows = read_sidecar(npy)
        except ShardError as exc:
            raise SuffixIndexError(f"{task.inputs[0].path}: {exc}") from None
        starts = np.fromiter((r.start for r in rows), dtype=np.int64, count=len(rows))
        lengths = np.fromiter((r.end - r.start for r in rows), dtype=np.int64, count=len(rows))
        base = self.run.base(task.inputs[0].rel)
        runs = _cut(lengths, self.run.max_symbols)
        parts = []
        for k, (d0, d1) in enumerate(runs):
            name = _part_name(base, k, len(runs))
            offset = int(starts[d0]) if d1 > d0 else 0
            length = int(starts[d1 - 1] + lengths[d1 - 1]) - offset if d1 > d0 else 0
            width = self._index_part(files, npy, name, offset, length)
            _save_array(files, part_rel(name, ".starts.npy"), starts[d0:d1] - offset)
            parts.append({"name": name, "offset": offset, "length": length, "width": width, "first_doc": d0, "docs": d1 - d0})
        source = _source_record(task.inputs[0], npy)
        source.update(docs=len(rows), sidecar=_source_record(task.inputs[1], str(sidecar_path(npy))), local_copy=copy)
        return TaskOutput(docs_in=len(rows), counts={"symbols": n, "parts": len(parts)}, data={"source": source, "parts": parts})

    def _build_documents(self, task: Task, quarantine: Quarantine, files: TaskFiles) -> TaskOutput:
        base = self.run.base(task.rel)
        parts: list[dict] = []
        pending: list[tuple[int, str, bytes]] = []
        size = 0
        docs = 0

        def flush(k: int) -> None:
            nonlocal pending, size
            name = f"{base}@{k}"  # renamed below when the file is one part
            text = b"".join(b + bytes([suffix.SEPARATOR]) for _, _, b in pending)
            files.write_bytes(part_rel(name, ".text"), text)
            lengths = np.fromiter((len(b) + 1 for _, _, b in pending), dtype=np.int64, count=len(pending))
            starts = np.cumsum(lengths) - lengths
            _save_array(files, part_rel(name, ".starts.npy"), starts)
            rows = b"".join(orjson.dumps({"id": doc_id, "line": line}) + b"\n" for line, doc_id, _ in pending)
            files.write_bytes(part_rel(name, ".docs.jsonl.gz"), gzip_member(rows))
            width = self._index_part(files, files.local(part_rel(name, ".text")), name, 0, len(text))
            parts.append(
                {"name": name, "offset": 0, "length": len(text), "width": width, "first_doc": docs - len(pending), "docs": len(pending)}
            )
            pending, size = [], 0

        for line, doc in read_documents(task.path, quarantine):
            b = doc["text"].encode("utf-8", "surrogatepass")
            if pending and size + len(b) + 1 > self.run.max_symbols:
                flush(len(parts))
            pending.append((line, doc["id"], b))
            size += len(b) + 1
            docs += 1
        if pending:
            flush(len(parts))
        if len(parts) == 1:  # one part: named as its source
            for s in DOCUMENT_PART_FILES:
                files.rename(part_rel(parts[0]["name"], s), part_rel(base, s))
            parts[0]["name"] = base
        info = task.inputs[0]
        source = _source_record(info, None if storage.is_remote(info.path) else info.path)
        source["docs"] = docs
        return TaskOutput(
            docs_in=docs,
            counts={"symbols": sum(p["length"] for p in parts), "parts": len(parts)},
            data={"source": source, "parts": parts},
        )
