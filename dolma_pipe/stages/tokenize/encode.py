"""Phase 1, ``encode``: one task per input file, its documents into token runs and an index.

Batches of ``batch_size`` documents through one ``encode_batch`` call (the GIL is released while
the Rust tokenizer runs), special tokens added with numpy, tokens appended to the work file
``encode/<file>.tok`` in input order, and a per-document index (order key, validation key, token
offset and count, line, id) sorted by key. Memory: one batch plus the file's index (56 bytes a
document). The driver step after it decides which documents are held out and how many buckets
each split has (:class:`.plan.Split`).
"""

from __future__ import annotations

import itertools
import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from dolma_pipe import tokenizer as toks
from dolma_pipe import workdir
from dolma_pipe.documents import read_documents
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import RunContext, StepResult, Task, TaskOutput, file_task
from dolma_pipe.workdir import SealedWriter

from .config import TokenizeError
from .plan import Split
from .rules import U64, add_special_tokens, hash_ids
from .run import TokenizeRun

if TYPE_CHECKING:
    from tokenizers import Tokenizer

# A bucket of the pack/write phases holds about this many shards' worth of tokens ...
SHARDS_PER_BUCKET = 4
# ... and at most this many documents (its index is held in memory: ~60 bytes a document).
MAX_DOCS_PER_BUCKET = 4_000_000
# One row of a file's index, sorted by (key, loc); ``key`` itself is kept apart (``.keys``),
# contiguous, so a bucket's rows are found by binary search without reading the rest.
INDEX_DTYPE = np.dtype([("vkey", "<u8"), ("start", "<i8"), ("ntok", "<i8"), ("loc", "<i8"), ("id_off", "<i8"), ("id_end", "<i8")])
# Per file, the candidates for a count-based validation split: its smallest validation keys.
CANDIDATE_DTYPE = np.dtype([("vkey", "<u8"), ("loc", "<i8"), ("ntok", "<i8")])
# The work files an encode task writes.
SUFFIXES = (".tok", ".ids", ".keys", ".idx", ".cand")


def _set_parallelism() -> None:
    """Parallelism comes from processes: each worker encodes with one thread (TOKENIZERS_PARALLELISM=false).

    The default ``processes`` is one per core; tokenizers' own threads on top would only compete
    with them, and a process that used them must not fork pool workers afterwards (they would
    deadlock).  A user's own TOKENIZERS_PARALLELISM wins.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class _FileEncoder:
    """One file's documents, a batch at a time: tokens and ids to their work files as they come,
    and per kept document, numpy columns only (40 bytes a document) for the file's index."""

    def __init__(self, run: TokenizeRun, tok: Tokenizer, tokens_out: SealedWriter, ids_out: SealedWriter):
        self.tok, self.tokens_out, self.ids_out = tok, tokens_out, ids_out
        self.bos_id, self.eos_id, self.dtype = run.bos_id, run.eos_id, run.dtype
        self.order_key, self.valid_key = run.order_key, run.valid_key
        self.cols: dict[str, list[np.ndarray]] = {"key": [], "vkey": [], "ntok": [], "loc": [], "id_len": []}
        self.empty = self.n_tokens = 0

    def add(self, batch: list[tuple[int, str, str]]) -> None:
        """Encodes a batch of (line, id, stripped text)."""
        # encode_batch, not encode_batch_fast: in tokenizers 0.23 the "fast" one is ~25% slower here
        encs = self.tok.encode_batch([t for _, _, t in batch], add_special_tokens=False)
        lists = [e.ids for e in encs]
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        keep = lengths > 0
        self.empty += int((~keep).sum())  # a text that encodes to nothing: Dolma would write an empty row
        if not keep.any():
            return
        lengths = lengths[keep]
        flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(lengths.sum()))
        flat, lengths = add_special_tokens(flat, lengths, self.bos_id, self.eos_id)
        self.tokens_out.write(flat.astype(self.dtype).tobytes())
        self.n_tokens += int(flat.size)
        kept = [(line, doc_id.encode("utf-8", "surrogatepass")) for (line, doc_id, _), k in zip(batch, keep.tolist()) if k]
        ids = [i for _, i in kept]
        self.ids_out.write(b"".join(ids))
        self.cols["key"].append(hash_ids(ids, self.order_key))
        self.cols["vkey"].append(hash_ids(ids, self.valid_key))
        self.cols["ntok"].append(lengths)
        self.cols["loc"].append(np.fromiter((line for line, _ in kept), dtype=np.int64, count=len(kept)))
        self.cols["id_len"].append(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)))

    def index(self) -> tuple[np.ndarray, np.ndarray]:
        """The order keys and the index rows of the kept documents, in input order."""
        col = {k: np.concatenate(v) if v else np.zeros(0, np.uint64 if "key" in k else np.int64) for k, v in self.cols.items()}
        ntok = col["ntok"]
        index = np.zeros(len(ntok), INDEX_DTYPE)
        index["vkey"] = col["vkey"]
        index["ntok"] = ntok
        index["start"] = np.cumsum(ntok) - ntok
        index["loc"] = col["loc"]
        index["id_end"] = np.cumsum(col["id_len"])
        index["id_off"] = index["id_end"] - col["id_len"]
        return col["key"], index


class Encode:
    """The encode phase's tasks and the step after them."""

    def __init__(self, run: TokenizeRun):
        self.run = run

    def plan(self, ctx: RunContext) -> list[Task]:
        return [file_task(f) for f in ctx.inputs]

    def outputs(self, task: Task) -> list[str]:
        return [self.run.work_path(task.rel, s) for s in SUFFIXES]

    def encode(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        _set_parallelism()
        cfg = self.run.config
        tok = toks.load(self.run.tokenizer_file(), cfg.tokenizer.encode_special_tokens)
        docs_in = 0
        with (
            workdir.open_write(self.run.work_path(task.rel, ".tok")) as out,
            workdir.open_write(self.run.work_path(task.rel, ".ids")) as ids_out,
        ):
            encoder = _FileEncoder(self.run, tok, out, ids_out)
            batch: list[tuple[int, str, str]] = []
            for line, doc in read_documents(task.path, quarantine, cfg.fields.fields()):
                docs_in += 1
                doc_id, text = doc["id"], doc["text"].strip()  # as Dolma: surrounding whitespace is not tokenized
                if not text:
                    encoder.empty += 1
                    continue
                batch.append((line, doc_id, text))
                if len(batch) >= cfg.batch_size:
                    encoder.add(batch)
                    batch = []
            if batch:
                encoder.add(batch)
        keys, index = encoder.index()
        order = np.lexsort((index["loc"], keys))
        workdir.write_array(self.run.work_path(task.rel, ".keys"), keys[order])
        workdir.write_array(self.run.work_path(task.rel, ".idx"), index[order])
        n, n_tokens = len(index), encoder.n_tokens
        data: dict[str, Any] = {"docs": n, "tokens": n_tokens}
        v = cfg.validation
        if v is not None and v.fraction is not None:
            held = index["vkey"] < np.uint64(self.fraction_threshold())
            data.update(val_docs=int(held.sum()), val_tokens=int(index["ntok"][held].sum()))
        elif v is not None and v.documents is not None:
            cand = np.zeros(n, CANDIDATE_DTYPE)
            cand["vkey"], cand["loc"], cand["ntok"] = index["vkey"], index["loc"], index["ntok"]
            cand = cand[np.lexsort((cand["loc"], cand["vkey"]))][: v.documents]
            workdir.write_array(self.run.work_path(task.rel, ".cand"), cand)
        return TaskOutput(docs_in=docs_in, counts={"documents": n, "tokens": n_tokens, "empty_docs": encoder.empty}, data=data)

    def fraction_threshold(self) -> int:
        v = self.run.config.validation
        assert v is not None and v.fraction is not None
        return min(U64 - 1, math.floor(v.fraction * U64))

    def split(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Driver: which documents are held out (a threshold on (validation key, file, line)), and the buckets."""
        docs = sum(r.data.get("docs", 0) for r in records)
        tokens = sum(r.data.get("tokens", 0) for r in records)
        if docs == 0:
            raise TokenizeError("no document to tokenize: every input document is empty or bad (see _errors/)")
        v = self.run.config.validation
        if v is None:
            threshold, val_docs, val_tokens = [0, 0, 0], 0, 0
        elif v.fraction is not None:
            threshold = [self.fraction_threshold(), 0, 0]
            val_docs = sum(r.data.get("val_docs", 0) for r in records)
            val_tokens = sum(r.data.get("val_tokens", 0) for r in records)
        else:
            assert v.documents is not None
            if v.documents >= docs:
                raise TokenizeError(
                    f"validation.documents is {v.documents:,} but the inputs hold {docs:,} documents; nothing would be left to train on"
                )
            threshold, val_tokens = self.count_threshold(ctx, v.documents)
            val_docs = v.documents
        per_split = {"train": (docs - val_docs, tokens - val_tokens), "val": (val_docs, val_tokens)}
        split = Split(
            threshold=threshold,
            buckets={name: self.buckets(d, t) for name, (d, t) in per_split.items()},
            docs={name: d for name, (d, _) in per_split.items()},
            tokens={name: t for name, (_, t) in per_split.items()},
        )
        return StepResult(data=split.to_data())

    def buckets(self, docs: int, tokens: int) -> int:
        """A split's buckets: each about :data:`SHARDS_PER_BUCKET` shards and at most
        :data:`MAX_DOCS_PER_BUCKET` documents; none for an empty split."""
        if docs == 0:
            return 0
        return max(1, math.ceil(tokens / (SHARDS_PER_BUCKET * self.run.config.max_tokens)), math.ceil(docs / MAX_DOCS_PER_BUCKET))

    def count_threshold(self, ctx: RunContext, n: int) -> tuple[list[int], int]:
        """The (n+1)-th smallest (validation key, file, line): documents below it are held out."""
        best = np.zeros(0, dtype=[("vkey", "<u8"), ("file", "<i8"), ("loc", "<i8"), ("ntok", "<i8")])
        for fi, info in enumerate(ctx.inputs):
            cand = workdir.load_array(self.run.work_path(info.rel, ".cand"), CANDIDATE_DTYPE)
            more = np.zeros(len(cand), best.dtype)
            more["vkey"], more["file"], more["loc"], more["ntok"] = cand["vkey"], fi, cand["loc"], cand["ntok"]
            best = np.concatenate([best, more])
            best = best[np.lexsort((best["loc"], best["file"], best["vkey"]))][: n + 1]
        edge = best[n]
        return [int(edge["vkey"]), int(edge["file"]), int(edge["loc"])], int(best["ntok"][:n].sum())
