"""``dolma-pipe index``: one suffix array per shard of a corpus, built as tasks on the runner.

Two kinds of corpus:

- **token shards** written by ``tokenize`` (the trainer's data; :mod:`.sources` lists them): a
  local ``.npy`` is read in place (its array indexes it where it is; nothing is copied), one on
  S3 is copied by its task (kept in a local index to answer from), its documents from its
  sidecar; the tokenizer and dtype come from the tokenize run's manifest unless given;
- **documents**: each file's documents (read as every stage reads them) give a byte text, their
  UTF-8 text with 0xFF after each (no match crosses it), and the documents' ids and lines.

One task per source file builds its part or parts (a source whose array would not fit
``memory_per_task`` is indexed in several parts, cut between documents); the step after writes
``index.json`` (:mod:`.format`), removes parts an earlier build left, and, when asked, counts the
evaluation sets' n-grams found in the index. Resumable per source (a rerun after a shard
changed, or with a part damaged since, rebuilds that shard's parts only); the same files for any
process count, local or Ray, since each part depends on its source alone. A task writes through
:class:`.files.TaskFiles` (checksums, read back before the part is done; built in scratch and
uploaded for an index on S3).
"""

from __future__ import annotations

import functools
import io
from typing import Any, Literal

import numpy as np
import orjson

from dolma_pipe import paths, storage, suffix
from dolma_pipe.compression import gzip_member
from dolma_pipe.documents import read_documents
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Stage, StepResult, Task, TaskOutput
from train.shards import (
    SIDECAR_SUFFIX,
    TOKENS_SUFFIX,
    ShardError,
    check_sidecar,
    read_sidecar,
    sidecar_path,
    token_count,
)

from .config import MEMORY_PER_SYMBOL, IndexConfig
from .files import SuffixIndexError, TaskFiles, changed_sources, damaged_parts
from .format import (
    DOCUMENT_PART_FILES,
    INFO,
    PART_SUFFIXES,
    SIDECAR_COPY,
    SOURCE_COPY,
    IndexInfo,
    Part,
    Source,
    copy_path,
    copy_rel,
    hexdigest,
    part_path,
    part_rel,
)
from .resolved import IndexResolved, token_settings
from .sources import list_shards, refuse_destination_among_shards


def _save_array(files: TaskFiles, rel: str, array: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, array)
    files.write_bytes(rel, buf.getvalue())


def _where_the_text_is(kind: str, info: IndexInfo, root: str) -> str:
    if kind == "documents":
        return "beside them"
    if any(s.local_copy for s in info.sources):
        return "of the S3 shards copied beside them"
    if storage.is_remote(root) and any(storage.is_remote(s.path) for s in info.sources):
        return "read from the shards where they are, by a query's local copy"
    return "read in place"


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


class IndexStage(Stage[IndexConfig]):
    name = "index"
    description = "suffix arrays over token shards or documents: exact counts, finding and tracing text"
    config_model = IndexConfig
    # A source's parts depend on it alone (a new or changed shard redoes its own task); the
    # contamination counts are the step after, run every time.
    run_keys = frozenset({"contamination"})

    def __init__(self, config: IndexConfig):
        super().__init__(config)
        self.kind: Literal["tokens", "documents"] = "tokens" if config.shards is not None else "documents"
        self.tokenizer: dict | None = None
        self.symbol: suffix.Symbol
        if self.kind == "tokens":
            self.dtype, self.tokenizer, runs = token_settings(config)
            self.symbol = suffix.symbol_for(self.dtype)
            refuse_destination_among_shards(config.destination, list(config.shards or []), runs)
        else:
            self.dtype, self.symbol = np.dtype(np.uint8), "u8"
        self.max_symbols = max(1, config.memory_per_task // MEMORY_PER_SYMBOL[self.symbol])

    @property
    def output_root(self) -> str:
        return self.config.destination

    def input_patterns(self) -> list[str]:
        return list(self.config.documents or [])

    def plan_inputs(self) -> list[InputFile]:
        """Documents: the files the patterns match. Token shards: every shard of the paths given
        (``train.shards``' rule: no hidden or ``_`` names, nothing of another run), named by its
        path below the folder the given paths share, so shards of equal names in two folders
        (``tok/train`` and ``tok/val``) are ``train/part-00000.npy`` and ``val/part-00000.npy``;
        one folder's shards keep their own names."""
        if self.kind == "documents":
            return super().plan_inputs()
        assert self.config.shards is not None
        try:
            return [InputFile(path=info.path, rel=rel, size=info.size, mtime=info.mtime) for info, rel in list_shards(self.config.shards)]
        except ShardError as exc:
            raise paths.PathError(str(exc)) from None

    def resolve(self, inputs: list[InputFile]) -> IndexResolved:
        tok = self.tokenizer or {}
        return IndexResolved(
            kind=self.kind,
            symbol=self.symbol,
            max_symbols=self.max_symbols,
            tokenizer_sha256=tok.get("sha256"),
            eos_token_id=tok.get("eos_token_id"),
        )

    # ---- the build phase ----------------------------------------------------------------------

    def phases(self) -> list[Phase]:
        return [Phase("build", plan=self._plan, run=self._build, outputs=self._outputs, after=self._finish, unit="file")]

    def _plan(self, ctx: RunContext) -> list[Task]:
        tasks = []
        for f in ctx.inputs:
            inputs = [f]
            if self.kind == "tokens":
                side = f.path[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX
                try:
                    info = storage.stat(side)
                except storage.StorageError:
                    raise paths.PathError(f"{f.path}: its sidecar {side} is missing (every shard has one)") from None
                inputs.append(InputFile(path=side, rel=f.rel[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX, size=info.size, mtime=info.mtime))
            tasks.append(Task(key=f.rel, inputs=tuple(inputs)))
        return tasks

    def _base(self, rel: str) -> str:
        return rel[: -len(TOKENS_SUFFIX)] if self.kind == "tokens" else rel

    def _outputs(self, task: Task) -> list[str]:
        base = self._base(task.inputs[0].rel)
        out = [part_path(self.output_root, base, s) for s in PART_SUFFIXES]
        return out + [copy_path(self.output_root, base, s) for s in (SOURCE_COPY, SIDECAR_COPY)]

    def _build(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        with TaskFiles(self.output_root) as files:
            out = self._build_tokens(task, files) if self.kind == "tokens" else self._build_documents(task, quarantine, files)
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
        size = self.dtype.itemsize

        def write(tmp: str) -> suffix.Built:
            try:
                return suffix.build_array(text, self.symbol, tmp, offset=offset * size, length=length * size)
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
        base = self._base(task.inputs[0].rel)
        keep = not files.remote
        for info, tail in ((task.inputs[0], SOURCE_COPY), (task.inputs[1], SIDECAR_COPY)):
            files.write(copy_rel(base, tail), functools.partial(_download, info.path), int, keep=keep)
        return files.local(copy_rel(base, SOURCE_COPY)), copy_rel(base, SOURCE_COPY) if keep else None

    def _build_tokens(self, task: Task, files: TaskFiles) -> TaskOutput:
        npy, copy = self._shard_here(task, files)
        try:
            n = token_count(npy, self.dtype)
            check_sidecar(npy, n)
            rows = read_sidecar(npy)
        except ShardError as exc:
            raise SuffixIndexError(f"{task.inputs[0].path}: {exc}") from None
        starts = np.fromiter((r.start for r in rows), dtype=np.int64, count=len(rows))
        lengths = np.fromiter((r.end - r.start for r in rows), dtype=np.int64, count=len(rows))
        base = self._base(task.inputs[0].rel)
        runs = _cut(lengths, self.max_symbols)
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
        base = self._base(task.rel)
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
            if pending and size + len(b) + 1 > self.max_symbols:
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

    def damaged_outputs(self, phase: str, records: list[TaskRecord]) -> dict[str, tuple[str, str]]:
        """Finished build tasks whose files no longer hash to what the build wrote (a flipped
        bit), or were built without checksums: redone by the runner, the rest kept."""
        tasks = {r.key: r.data for r in records}
        return {**changed_sources(tasks), **damaged_parts(self.output_root, tasks)}

    # ---- the step after: index.json, stale parts, contamination --------------------------------

    def _finish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        order = {f.rel: i for i, f in enumerate(ctx.inputs)}
        records = sorted(records, key=lambda r: order[r.key])
        info = IndexInfo(kind=self.kind, symbol=self.symbol, tokenizer=self.tokenizer)
        for i, r in enumerate(records):
            info.sources.append(Source.model_validate(r.data["source"]))
            info.parts += [Part(source=i, **p) for p in r.data["parts"]]
        removed = self._remove_stale(records)
        storage.write_bytes(storage.join(self.output_root, INFO), orjson.dumps(info.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
        index_bytes = sum(p.length * p.width for p in info.parts)
        data: dict[str, Any] = {
            "kind": self.kind,
            "sources": len(info.sources),
            "parts": len(info.parts),
            "documents": info.documents,
            "symbols": info.symbols,
            "index_bytes": index_bytes,
            "stale_parts_removed": removed,
        }
        lines = [
            f"index of {info.documents:,} documents, {info.symbols:,} {'tokens' if self.kind == 'tokens' else 'bytes'} in "
            f"{len(info.parts):,} part(s) of {len(info.sources):,} source(s) -> {self.output_root}",
            f"  suffix arrays: {index_bytes / 1e6:,.1f} MB ({index_bytes / max(info.symbols, 1):.2f} bytes a symbol, the text "
            + _where_the_text_is(self.kind, info, self.output_root)
            + ")",
        ]
        if self.config.contamination is not None:
            from .contamination import count_contamination

            found = count_contamination(self.output_root, self.config.contamination)
            data["contamination"] = found
            lines.append(
                f"  evaluation n-grams ({self.config.contamination.ngram} {'tokens' if self.kind == 'tokens' else 'bytes'}) found in the index:"
            )
            for name, row in found.items():
                left_out = f" ({row['bad_records']:,} bad records left out)" if row["bad_records"] else ""
                lines.append(
                    f"    {name}: {row['found']:,} of {row['ngrams']:,} ({row['share']:.2%}); "
                    f"{row['documents_with_any']:,} of {row['documents']:,} documents{left_out}"
                )
        return StepResult(data=data, table="\n".join(lines))

    def _remove_stale(self, records: list[TaskRecord]) -> int:
        """Part files and source copies an earlier build left (other sources, other parts):
        removed, so the folder holds this index only."""
        keep = {storage.join(self.output_root, rel) for r in records for rel in r.data.get("files", {})}
        removed = 0
        for folder in ("shards", "sources"):
            for path in storage.glob(storage.join(self.output_root, folder, "**")):
                name = path.rsplit("/", 1)[-1]
                if path not in keep and not name.startswith("."):
                    storage.remove(path)
                    removed += 1
        return removed
