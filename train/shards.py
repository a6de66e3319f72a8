"""The token-shard format (docs/tokenize.md): the one place that writes and reads it.

A shard is two files next to each other:

- ``part-XXXXX.npy``: the token ids of its documents, concatenated, as a *headerless*
  ``np.memmap`` (raw integers in the machine's byte order, little-endian on x86 and ARM; no
  ``.npy`` header despite the suffix), ``uint16`` when every id of the vocabulary fits
  (``vocab_size <= 65536``), ``uint32`` otherwise. Every document ends with the EOS token, so
  documents can be told apart without the sidecar.
- ``part-XXXXX.csv.gz``: one CSV row ``start,end,id,src,loc`` per document, no header, in
  token order: ``[start, end)`` are token offsets into the ``.npy`` file (the rows are
  contiguous and cover the whole file), ``id`` the document id, ``src`` where it came from
  (its input file), ``loc`` its line in that file. Rows are written with the ``csv``
  module's defaults, as Dolma writes them: minimal quoting (an id with a comma, a quote or a
  line break stays one field) and ``\r\n`` line ends.

This is what Dolma's tokenizer writes and what OLMo's and OLMo-core's loaders read. The
trainer (``train.data``) reads shards through this module and ``dolma-pipe tokenize`` writes
them through it; neither knows the layout. Only numpy and the standard library are used, so
either side can import it without the other's dependencies.

Writing: ``ShardWriter`` writes one shard under temporary hidden names and renames them on
``close()`` (the sidecar first, the ``.npy`` last), so a shard that is visible is complete;
a writer that got no document leaves no file. ``ShardSetWriter`` writes ``part-00000``,
``part-00001``, ... in a folder, starting a new shard before one would pass a token budget.
Reading: ``read_shard`` (tokens as a memmap, the sidecar as ``DocRecord`` rows, checked), or
the pieces ``open_tokens``, ``iter_sidecar`` and ``check_sidecar`` for a streaming check.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "DocRecord",
    "Shard",
    "ShardError",
    "ShardSetWriter",
    "ShardWriter",
    "TOKENS_SUFFIX",
    "SIDECAR_SUFFIX",
    "check_shard_runs",
    "check_sidecar",
    "dtype_for_vocab",
    "find_shards",
    "iter_sidecar",
    "max_token_id",
    "open_tokens",
    "read_shard",
    "read_sidecar",
    "select_shards",
    "shard_name",
    "sidecar_path",
    "token_count",
]

TOKENS_SUFFIX = ".npy"
SIDECAR_SUFFIX = ".csv.gz"
# What every dolma-pipe run writes in its output folder; its ``status`` is ``complete`` once it finished.
MANIFEST = "_manifest.json"
SHARD_DTYPES = (np.dtype(np.uint16), np.dtype(np.uint32))


class ShardError(ValueError):
    """A shard that breaks the format, or documents that cannot be written into one."""


# -- names and dtypes ----------------------------------------------------------------------


def shard_name(index: int) -> str:
    """The stem of shard ``index``: ``shard_name(3) == "part-00003"`` (more digits past 99999)."""
    if index < 0:
        raise ValueError(f"shard index must be >= 0, got {index}")
    return f"part-{index:05d}"


def sidecar_path(tokens_path: str | Path) -> Path:
    """``dir/part-00000.npy`` -> ``dir/part-00000.csv.gz``."""
    return Path(tokens_path).with_suffix(SIDECAR_SUFFIX)


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    """``uint16`` when every token id of the vocabulary fits (``vocab_size <= 65536``), else ``uint32``."""
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if vocab_size > 2**32:
        raise ValueError(f"vocab_size {vocab_size} does not fit in uint32 token ids")
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def _shard_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in SHARD_DTYPES:
        raise ShardError(f"token dtype must be uint16 or uint32, got {dt}")
    return dt


def _tmp_name(final: Path) -> Path:
    # hidden and without the final suffix, so neither a reader nor find_shards takes it for a shard
    return final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:12]}")


# -- writing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocRecord:
    """One sidecar row: the document's tokens are ``[start, end)`` of its shard (EOS included)."""

    start: int
    end: int
    id: str
    src: str
    loc: int

    @property
    def n_tokens(self) -> int:
        return self.end - self.start


class ShardWriter:
    """Writes one shard: ``with ShardWriter(dir / "part-00000.npy", vocab_size=..., eos_id=...) as w:``.

    ``add`` takes one document's token ids (any integer array-like), ``add_batch`` many at
    once as one concatenated array plus offsets. With ``add_eos`` (the default) the writer
    appends EOS to every document; with ``add_eos=False`` every document must already end
    with it. Token ids must lie in ``[0, vocab_size)``; the dtype (by default the one
    ``dtype_for_vocab`` picks) must hold every id of the vocabulary.

    Files go to hidden temporary names and are renamed by ``close()``; leaving the ``with``
    block by an exception (or calling ``abort()``) removes them, and a writer that got no
    document writes nothing. The sidecar is gzip-compressed with no timestamp or name in its
    header, so equal input gives byte-identical files.
    """

    def __init__(self, path: str | Path, *, vocab_size: int, eos_id: int, dtype=None, add_eos: bool = True):
        self.path = Path(path)
        if self.path.suffix != TOKENS_SUFFIX:
            raise ValueError(f"{self.path}: a shard's token file ends in {TOKENS_SUFFIX}")
        self.sidecar = sidecar_path(self.path)
        self.vocab_size = int(vocab_size)
        self.dtype = dtype_for_vocab(self.vocab_size) if dtype is None else _shard_dtype(dtype)
        if self.vocab_size - 1 > np.iinfo(self.dtype).max:
            raise ShardError(
                f"{self.dtype} cannot hold the token ids of a vocabulary of {self.vocab_size} "
                f"(largest {np.iinfo(self.dtype).max}); use uint32"
            )
        if not 0 <= eos_id < self.vocab_size:
            raise ShardError(f"eos_id {eos_id} is outside the vocabulary [0, {self.vocab_size})")
        self.eos_id = int(eos_id)
        self.add_eos = add_eos
        self.n_tokens = 0
        self.n_docs = 0
        self._closed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tokens_tmp = _tmp_name(self.path)
        self._sidecar_tmp = _tmp_name(self.sidecar)
        self._tokens_f = open(self._tokens_tmp, "wb")
        self._sidecar_raw = open(self._sidecar_tmp, "wb")
        # filename="" and mtime=0: nothing in the gzip header depends on the time or the temp name
        self._sidecar_gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._sidecar_raw, mtime=0, compresslevel=6)
        self._sidecar_text = io.TextIOWrapper(self._sidecar_gz, encoding="utf-8", newline="")
        # the csv module's defaults, as Dolma writes: minimal quoting, "\r\n" line ends (with a
        # bare "\n" terminator a "\r" inside an id would go unquoted and split the row)
        self._rows = csv.writer(self._sidecar_text)

    # -- adding documents

    def add(self, tokens, *, id: str, src: str, loc: int) -> DocRecord:
        """Append one document; returns its sidecar row."""
        arr = np.asarray(tokens)
        self.add_batch(arr, [0, len(arr)], ids=[id], srcs=[src], locs=[loc])
        return DocRecord(self.n_tokens - len(arr) - int(self.add_eos), self.n_tokens, id, src, int(loc))

    def add_batch(self, tokens, offsets, *, ids: Sequence[str], srcs: Sequence[str] | str, locs: Sequence[int]) -> None:
        """Append ``len(ids)`` documents: document ``i`` is ``tokens[offsets[i]:offsets[i + 1]]``
        (``offsets`` has one more entry than there are documents, starts at 0 and ends at
        ``len(tokens)``). ``srcs`` may be one string for all of them."""
        self._check_open()
        arr = np.asarray(tokens)
        if arr.ndim != 1:
            raise ShardError(f"token ids must be a 1-D array, got shape {arr.shape}")
        if arr.size == 0:
            arr = arr.astype(np.int64)
        elif not np.issubdtype(arr.dtype, np.integer):
            raise ShardError(f"token ids must be integers, got {arr.dtype}")
        off = np.asarray(offsets, dtype=np.int64)
        n = len(ids)
        if off.ndim != 1 or len(off) != n + 1 or (n and (off[0] != 0 or off[-1] != len(arr))) or np.any(np.diff(off) < 0):
            raise ShardError(f"offsets must be {n + 1} non-decreasing positions from 0 to {len(arr)} (one more than the {n} documents)")
        srcs = [srcs] * n if isinstance(srcs, str) else list(srcs)
        locs = [int(x) for x in locs]
        if len(srcs) != n or len(locs) != n:
            raise ShardError(f"{n} ids but {len(srcs)} srcs and {len(locs)} locs")
        for name, values in (("id", ids), ("src", srcs)):
            bad = next((v for v in values if not isinstance(v, str)), None)
            if bad is not None:
                raise ShardError(f"document {name} must be a string, got {bad!r}")
        if n == 0:
            return
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.vocab_size):
            pos = int(np.flatnonzero((arr < 0) | (arr >= self.vocab_size))[0])
            bad_id, doc = int(arr[pos]), int(np.searchsorted(off, pos, side="right")) - 1
            fits = "" if 0 <= bad_id <= np.iinfo(self.dtype).max else f" and does not fit in {self.dtype}"
            raise ShardError(f"document {ids[doc]!r}: token id {bad_id} is outside the vocabulary [0, {self.vocab_size}){fits}")
        if self.add_eos:
            arr = np.insert(arr, off[1:], self.eos_id)
            ends = off[1:] + np.arange(1, n + 1)
        else:
            ends = off[1:]
            ok = np.diff(off) > 0
            if arr.size:
                ok &= arr[np.maximum(ends - 1, 0)] == self.eos_id
            if not ok.all():
                i = int(np.flatnonzero(~ok)[0])
                raise ShardError(
                    f"document {ids[i]!r} does not end with EOS ({self.eos_id}) (add_eos=False: every document must bring its own)"
                )
        starts = np.concatenate([[0], ends[:-1]]) + self.n_tokens
        self._tokens_f.write(arr.astype(self.dtype, copy=False).tobytes())
        self._rows.writerows(zip(starts.tolist(), (ends + self.n_tokens).tolist(), ids, srcs, locs))
        self.n_tokens += len(arr)
        self.n_docs += n

    # -- finishing

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self.path}: writer is closed")

    def _close_files(self) -> None:
        self._sidecar_text.close()  # closes the gzip stream, which leaves the raw file open
        for f in (self._sidecar_raw, self._tokens_f):
            f.flush()
            os.fsync(f.fileno())
            f.close()

    def close(self) -> Path | None:
        """Finish the shard: the path of its ``.npy`` file, or None (and no file) if it got no document."""
        if self._closed:
            return self.path if self.n_docs else None
        if self.n_docs == 0:
            self.abort()
            return None
        try:
            self._close_files()
            self._closed = True
            os.replace(self._sidecar_tmp, self.sidecar)
            os.replace(self._tokens_tmp, self.path)  # last: a visible .npy has its sidecar
        except BaseException:
            self.abort()
            raise
        return self.path

    def abort(self) -> None:
        """Drop what was written; no file of this shard is left (temporaries included)."""
        if not self._closed:
            self._closed = True
            self.n_docs = 0
            for f in (self._sidecar_text, self._sidecar_raw, self._tokens_f):
                try:
                    f.close()
                except (OSError, ValueError):
                    pass
        for tmp in (self._tokens_tmp, self._sidecar_tmp):
            tmp.unlink(missing_ok=True)

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class ShardSetWriter:
    """Writes ``part-XXXXX`` shards into ``directory``, numbered from ``first_index``, starting a
    new shard before one would pass ``max_tokens`` (EOS included). Documents are never split: a
    document longer than ``max_tokens`` gets a shard of its own. ``close()`` returns the paths
    of the ``.npy`` files written."""

    def __init__(
        self,
        directory: str | Path,
        *,
        vocab_size: int,
        eos_id: int,
        max_tokens: int,
        first_index: int = 0,
        dtype=None,
        add_eos: bool = True,
    ):
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        self.directory = Path(directory)
        self.max_tokens = max_tokens
        self.next_index = first_index
        self._kw = dict(vocab_size=vocab_size, eos_id=eos_id, dtype=dtype, add_eos=add_eos)
        self._extra = 1 if add_eos else 0
        self._current: ShardWriter | None = None
        self.paths: list[Path] = []

    def _writer(self, n_new: int) -> ShardWriter:
        w = self._current
        if w is not None and w.n_docs and w.n_tokens + n_new > self.max_tokens:
            self._finish()
            w = None
        if w is None:
            w = self._current = ShardWriter(self.directory / (shard_name(self.next_index) + TOKENS_SUFFIX), **self._kw)
            self.next_index += 1
        return w

    def _finish(self) -> None:
        if self._current is not None:
            path = self._current.close()
            if path is not None:
                self.paths.append(path)
            self._current = None

    def add(self, tokens, *, id: str, src: str, loc: int) -> DocRecord:
        arr = np.asarray(tokens)
        return self._writer(len(arr) + self._extra).add(arr, id=id, src=src, loc=loc)

    def add_batch(self, tokens, offsets, *, ids: Sequence[str], srcs: Sequence[str] | str, locs: Sequence[int]) -> None:
        off = np.asarray(offsets, dtype=np.int64)
        srcs = [srcs] * len(ids) if isinstance(srcs, str) else list(srcs)
        ids, locs = list(ids), list(locs)
        if len(off) != len(ids) + 1:
            raise ShardError(f"offsets must have one more entry than the {len(ids)} documents")
        sizes = np.diff(off) + self._extra
        i = 0
        while i < len(ids):
            w = self._writer(int(sizes[i]))
            # the documents i..j-1 that fit into this shard (at least one)
            room = self.max_tokens - w.n_tokens
            j = i + max(1, int(np.searchsorted(np.cumsum(sizes[i:]), room, side="right")))
            w.add_batch(np.asarray(tokens)[off[i] : off[j]], off[i : j + 1] - off[i], ids=ids[i:j], srcs=srcs[i:j], locs=locs[i:j])
            i = j

    def close(self) -> list[Path]:
        self._finish()
        return self.paths

    def abort(self) -> None:
        """Drop the shard being written (finished ones stay)."""
        if self._current is not None:
            self._current.abort()
            self._current = None

    def __enter__(self) -> ShardSetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# -- reading -------------------------------------------------------------------------------


# The one kind of run whose folders hold token shards; any other run's folder holds its own files.
SHARD_RUN = "tokenize"
# Path components that are bookkeeping, never data: hidden files (a writer's temporaries) and the
# runner's ``_done/``, ``_errors/``, ``_work``-style folders and ``_``-files.
SKIPPED_PREFIXES = (".", "_")


def find_shards(paths: Iterable[str | Path]) -> list[tuple[Path, str]]:
    """The shards named by ``paths`` (``.npy`` files, or folders searched recursively), as
    ``(file, name relative to the path it was found under)``, each folder's sorted by name, by the
    rule of :func:`select_shards` (hidden and ``_`` names skipped, another run's folder skipped) and
    :func:`check_shard_runs` (shards of an unfinished run, or another run's files, refused)."""
    found: list[tuple[Path, str]] = []
    paths = list(paths)
    for p in paths:
        root = Path(p)
        if root.is_dir():
            listing = [os.path.join(d, f) for d, dirs, files in os.walk(root) for f in files]
            for f in select_shards(str(root), listing, _read_local):
                found.append((Path(f), os.path.relpath(f, root)))
        elif root.is_file():
            found.append((root, root.name))
        else:
            raise ShardError(f"data path {str(p)!r} does not exist")
    if not found:
        raise ShardError(f"no {TOKENS_SUFFIX} token shards under {[str(p) for p in paths]}")
    check_shard_runs([str(f) for f, _ in found], _read_local)
    return found


def _read_local(path: str) -> bytes | None:
    """A local file's bytes, None when there is none."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as e:
        raise ShardError(f"{path}: cannot read the manifest of the run that wrote these shards ({e})") from None


def select_shards(root: str, files: Iterable[str], read: Callable[[str], bytes | None]) -> list[str]:
    """The token shards among ``files`` (every file under the folder ``root``, as ``/``-joined
    paths: local ones or a URL's keys), sorted, by one rule for every reader of shards:

    - a ``.npy`` file is a shard unless a component of its path below ``root`` starts with ``.``
      (a writer's temporaries) or ``_`` (a run's ``_done/``, ``_errors/``, ``_work``...);
    - a folder holding the ``_manifest.json`` of a dolma-pipe run other than ``tokenize`` (an
      index, a tag or dedup run written there) is that run's: nothing under it is a shard. A given
      ``root`` that is one is refused, as is such a folder that holds a shard with its sidecar
      beside that run's files (whose files are whose, nothing can tell).

    ``read(path)`` returns a file's bytes (None when there is none): how manifests are read.
    Plain ``.npy`` shards with no manifest anywhere (OLMo's) are shards."""
    root = root.rstrip("/")
    files = sorted(set(files))
    present = set(files)
    runs = {f.rsplit("/", 1)[0] for f in files if f.rsplit("/", 1)[-1] == MANIFEST} | {root}
    foreign = {}
    for folder in runs:
        run = _run_at(folder, read)
        if run is not None and run[0] != SHARD_RUN:
            foreign[folder] = run[0]
    out = []
    for f in files:
        parts = f[len(root) + 1 :].split("/")
        if not parts[-1].endswith(TOKENS_SUFFIX) or any(part.startswith(SKIPPED_PREFIXES) for part in parts):
            continue
        owner = next((d for d in foreign if f.startswith(d + "/")), None)
        if owner is None:
            out.append(f)
        elif owner == f.rsplit("/", 1)[0] and f[: -len(TOKENS_SUFFIX)] + SIDECAR_SUFFIX in present:
            raise ShardError(_mixed(owner, foreign[owner]))
    if root in foreign:
        raise ShardError(_foreign(root, foreign[root]))
    return out


def check_shard_runs(shards: Iterable[str], read: Callable[[str], bytes | None]) -> None:
    """Refuse shards whose folder, or the folder above (where ``tokenize`` keeps its manifest:
    ``<destination>/{train,val}/part-*.npy``), holds the manifest of a run that did not complete
    (a killed ``tokenize``), or of a run other than ``tokenize`` (its files are not shards)."""
    checked: set[str] = set()
    for f in shards:
        folder = f.rsplit("/", 1)[0]
        for up in (folder, folder.rsplit("/", 1)[0]):
            if up and up not in checked:
                checked.add(up)
                run = _run_at(up, read)
                if run is None:
                    continue
                stage, status = run
                if stage != SHARD_RUN:
                    raise ShardError(_mixed(up, stage) if up == folder else _foreign(up, stage))
                if status != "complete":
                    raise ShardError(
                        f"{up}/{MANIFEST}: the shards under {up} are the output of an unfinished {stage} run (status {status}); "
                        f"rerun that {stage} to finish it"
                    )


def _a(stage: str) -> str:
    return f"{'an' if stage[:1] in 'aeiou' else 'a'} {stage}"


def _foreign(folder: str, stage: str) -> str:
    return f"{folder} holds the output of {_a(stage)} run (its {MANIFEST}), not token shards; give the folder tokenize wrote them to"


def _mixed(folder: str, stage: str) -> str:
    return (
        f"{folder} holds token shards and the output of {_a(stage)} run (its {MANIFEST}) side by side; whose files are whose "
        f"cannot be told: move that run's files out (an index goes in a folder of its own)"
    )


def _run_at(folder: str, read: Callable[[str], bytes | None]) -> tuple[str, str] | None:
    """(stage, status) of the dolma-pipe run whose manifest ``folder`` holds; None for none (or a
    file of that name that is no run's manifest).

    Shards are written under their final names one by one, so a killed ``tokenize`` leaves a
    partial set that looks whole; only the run's manifest (status ``running`` or ``failed``) tells.
    """
    raw = read(f"{folder}/{MANIFEST}")
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None  # not a dolma-pipe run's manifest (those are written whole, by rename)
    if not isinstance(data, dict) or not isinstance(data.get("stage"), str) or "status" not in data:
        return None
    return data["stage"], str(data["status"])


def token_count(path: str | Path, dtype) -> int:
    """Number of tokens in a shard's ``.npy`` file (refuses a size that is not a whole number of tokens)."""
    dt = np.dtype(dtype)
    size = Path(path).stat().st_size
    if size % dt.itemsize:
        raise ShardError(f"{path}: size {size} is not a multiple of {dt} (wrong token_dtype?)")
    return size // dt.itemsize


def open_tokens(path: str | Path, dtype) -> np.ndarray:
    """A shard's tokens as a read-only memmap (an empty array for an empty file)."""
    n = token_count(path, dtype)
    if n == 0:
        return np.zeros(0, dtype=np.dtype(dtype))
    return np.memmap(path, dtype=np.dtype(dtype), mode="r", shape=(n,))


def max_token_id(tokens: np.ndarray, chunk: int = 1 << 24) -> int:
    """The largest token id (0 for no tokens), read in chunks so memory stays flat."""
    top = 0
    for i in range(0, len(tokens), chunk):
        top = max(top, int(tokens[i : i + chunk].max()))
    return top


def iter_sidecar(path: str | Path) -> Iterator[DocRecord]:
    """The rows of a ``.csv.gz`` sidecar, in order. A row needs at least ``start,end``
    (``id``, ``src`` and ``loc`` default to ``""``, ``""`` and -1); a malformed row, a missing
    file or a broken archive raises ``ShardError`` naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise ShardError(f"sidecar {path.name} is missing (every shard has one: start,end,id,src,loc per document)")
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                try:
                    start, end = int(row[0]), int(row[1])
                    loc = int(row[4]) if len(row) > 4 and row[4] != "" else -1
                except (ValueError, IndexError):
                    raise ShardError(
                        f"{path.name} line {reader.line_num}: expected start,end,id,src,loc, got {','.join(row)[:80]!r}"
                    ) from None
                yield DocRecord(start, end, row[2] if len(row) > 2 else "", row[3] if len(row) > 3 else "", loc)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise ShardError(f"{path.name}: unreadable ({e})") from None


def _check_spans(records: Iterable[DocRecord], n_tokens: int, name: str) -> int:
    prev_end = 0
    count = 0
    for count, r in enumerate(records, 1):
        if not (0 <= r.start < r.end <= n_tokens):
            raise ShardError(
                f"{name} row {count}: document [{r.start}, {r.end}) is outside the shard's "
                f"{n_tokens} tokens or empty (wrong token_dtype or a mismatched sidecar?)"
            )
        if r.start != prev_end:
            raise ShardError(
                f"{name} row {count}: document [{r.start}, {r.end}) does not start where the "
                f"previous one ends ({prev_end}); the rows must be contiguous"
            )
        prev_end = r.end
    if prev_end != n_tokens:
        raise ShardError(
            f"{name}: the documents cover tokens [0, {prev_end}) but the shard has {n_tokens} (wrong token_dtype or a mismatched sidecar?)"
        )
    return count


def check_sidecar(tokens_path: str | Path, n_tokens: int) -> int:
    """Check (streaming) that the shard's sidecar exists, parses, and that its documents are
    contiguous, non-empty and cover exactly the shard's ``n_tokens`` tokens. Returns the
    number of documents; raises ``ShardError``."""
    side = sidecar_path(tokens_path)
    return _check_spans(iter_sidecar(side), n_tokens, side.name)


def read_sidecar(tokens_path: str | Path) -> list[DocRecord]:
    """All sidecar rows of the shard whose ``.npy`` file is ``tokens_path`` (not checked)."""
    return list(iter_sidecar(sidecar_path(tokens_path)))


@dataclass(frozen=True)
class Shard:
    """A shard opened for reading: its tokens (memmap) and its documents (sidecar rows)."""

    path: Path
    tokens: np.ndarray
    docs: list[DocRecord]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def document(self, i: int) -> np.ndarray:
        """The tokens of document ``i`` (its EOS included)."""
        d = self.docs[i]
        return self.tokens[d.start : d.end]


def read_shard(path: str | Path, dtype, *, eos_id: int | None = None) -> Shard:
    """Open the shard whose token file is ``path`` (``dtype``: uint16 or uint32, see
    ``dtype_for_vocab``) and check its sidecar against it: rows contiguous, inside the file and
    covering it; with ``eos_id``, every document also ends with EOS."""
    path = Path(path)
    dt = _shard_dtype(dtype)
    tokens = open_tokens(path, dt)
    docs = read_sidecar(path)
    side = sidecar_path(path).name
    _check_spans(docs, len(tokens), side)
    if eos_id is not None and docs:
        ends = np.fromiter((d.end for d in docs), dtype=np.int64, count=len(docs))
        bad = np.flatnonzero(np.asarray(tokens[ends - 1]) != eos_id)
        if len(bad):
            d = docs[int(bad[0])]
            raise ShardError(
                f"{path.name}: document {d.id!r} [{d.start}, {d.end}) does not end with EOS ({eos_id}) (wrong token_dtype or eos_id?)"
            )
    return Shard(path, tokens, docs)
