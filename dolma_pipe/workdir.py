"""A run's work files: where they live, how they are written, and how they are read back checked.

Work files are what one phase's tasks write for a later phase: dedup's key records, tokenize's
token runs, the mixer's members and count cache. They live in a run's work directory
(:class:`WorkDir`, local or ``s3://``), one folder per phase, and are written and read only
through this module:

- every work file is written atomically (:mod:`dolma_pipe.storage`) with a checksum trailer
  after its content (the format is the Rust crate's, ``rust_bloom/src/workfile/``: an xxh3-64
  per 64 KiB block, then a footer), so its content is unchanged for readers that seek or
  memory-map it;
- every read checks what it reads: a whole file, or only the blocks that hold a byte range (a
  bucket of a bucketed file), so a file cut short or damaged after it was written is never used.

A file that is missing, truncated or damaged raises :class:`WorkFileError`, which names it; the
runner then redoes the task that wrote it (see :mod:`dolma_pipe.runner`).
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

from dolma_pipe import storage
from dolma_pipe._rust import WORKFILE_BLOCK, WORKFILE_FOOTER_LEN, WorkFileSealer, WorkFileTable, workfile_footer
from dolma_pipe.errors import DolmaPipeError

if TYPE_CHECKING:
    import numpy as np

# Bytes read at once when a whole file is checked (a multiple of the block size).
CHECK_CHUNK = 128 * WORKFILE_BLOCK


class WorkFileError(DolmaPipeError, RuntimeError):
    """A work file is missing, truncated or damaged; ``path`` names it, ``problem`` says which."""

    def __init__(self, path: str, problem: str, detail: str = ""):
        self.path = path
        self.problem = problem  # "missing", "truncated" or "damaged"
        self.detail = detail or problem
        super().__init__(f"work file {path} is {self.detail}")

    def __reduce__(self) -> tuple[Any, ...]:  # workers send it back pickled
        return (WorkFileError, (self.path, self.problem, self.detail))


class WorkDir:
    """The folder (local or ``s3://``) of a run's work files: ``<root>/<phase>/...``."""

    def __init__(self, root: str):
        self.root = root

    def path(self, phase: str, *parts: str) -> str:
        return storage.join(self.root, phase, *parts)

    def contains(self, path: str) -> bool:
        return path.startswith(self.root.rstrip("/") + "/")

    def remove(self, keep: Callable[[str], bool] = lambda path: False) -> int:
        """Every file of the folder but those ``keep`` names (and then empty folders); how many went."""
        removed = 0
        if storage.is_remote(self.root):
            for path in storage.glob(storage.join(self.root, "**", "*")):
                if not keep(path):
                    storage.remove(path)
                    removed += 1
            return removed
        local = storage.local_path(self.root)
        for folder, _, names in os.walk(local, topdown=False):
            for name in names:
                path = os.path.join(folder, name)
                if not keep(path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                        removed += 1
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # only when empty
        return removed


# ---- writing ------------------------------------------------------------------------------------


class SealedWriter:
    """Writes a work file's content in pieces; the trailer is added when the file is closed."""

    def __init__(self, fh: IO[bytes], path: str):
        self._fh = fh
        self._sealer = WorkFileSealer()
        self.path = path

    def write(self, data: bytes) -> int:
        if not isinstance(data, bytes):
            data = bytes(data)
        self._sealer.update(data)
        return self._fh.write(data)

    @property
    def length(self) -> int:
        """Content bytes written so far (the offset of the next write)."""
        return self._sealer.length

    def _seal(self) -> None:
        self._fh.write(self._sealer.finish())


@contextlib.contextmanager
def open_write(path: str) -> Iterator[SealedWriter]:
    """A work file written in pieces, atomically; it appears, sealed, only if the block ends cleanly."""
    with storage.open_write_atomic(path) as fh:
        writer = SealedWriter(fh, path)
        yield writer
        writer._seal()


def write(path: str, data: bytes) -> None:
    """A whole work file in one call."""
    with open_write(path) as w:
        w.write(data)


def write_array(path: str, array: np.ndarray) -> None:
    """A numpy array's bytes (C order) as a work file; :func:`load_array` reads it back."""
    write(path, array.tobytes())


# ---- reading ------------------------------------------------------------------------------------


def _open(path: str) -> IO[bytes]:
    try:
        return storage.open_read(path)
    except storage.StorageError:
        if not storage.exists(path):
            raise WorkFileError(path, "missing") from None
        raise


def _problem(path: str, exc: ValueError) -> WorkFileError:
    problem, message = exc.args if len(exc.args) == 2 else ("damaged", str(exc))
    return WorkFileError(path, problem, message)


class Reader:
    """An open work file whose trailer is checked; reads byte ranges of its content, each checked."""

    def __init__(self, path: str):
        self.path = path
        self._fh = _open(path)
        try:
            self._fh.seek(0, os.SEEK_END)
            size = self._fh.tell()
            if size < WORKFILE_FOOTER_LEN:
                raise WorkFileError(path, "truncated", f"truncated ({size} bytes: no checksum trailer)")
            self._fh.seek(size - WORKFILE_FOOTER_LEN)
            footer = self._fh.read(WORKFILE_FOOTER_LEN)
            try:
                content_len, _, table_len = workfile_footer(footer, size)
                self._fh.seek(content_len)
                self._table = WorkFileTable(footer, self._fh.read(table_len))
            except ValueError as exc:
                raise _problem(path, exc) from None
        except BaseException:
            self._fh.close()
            raise
        self.content_len = content_len

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._fh.close()

    def _check(self, first: int, data: bytes) -> None:
        try:
            self._table.check(first, data)
        except ValueError as exc:
            raise _problem(self.path, exc) from None

    def read(self, offset: int, length: int) -> bytes:
        """Content bytes ``[offset, offset + length)``; the blocks holding them are read and checked."""
        if length <= 0:
            return b""
        if offset < 0 or offset + length > self.content_len:
            raise WorkFileError(self.path, "damaged", f"damaged (bytes {offset}..{offset + length} asked, it holds {self.content_len})")
        first, end = self._table.blocks_for(offset, length)
        block = self._table.block
        start = first * block
        self._fh.seek(start)
        data = self._fh.read(min(end * block, self.content_len) - start)
        self._check(first, data)
        return data[offset - start : offset - start + length]

    def chunks(self, size: int = CHECK_CHUNK) -> Iterator[bytes]:
        """The whole content in order, in checked chunks of ``size`` bytes (a multiple of the block)."""
        block = self._table.block
        size = max(block, size - size % block)
        self._fh.seek(0)
        for index, start in enumerate(range(0, self.content_len, size)):
            data = self._fh.read(min(size, self.content_len - start))
            self._check(index * (size // block), data)
            yield data

    def stream(self) -> IO[bytes]:
        """A file-like object over the content, checked chunk by chunk as it is read."""
        return io.BufferedReader(_Chunks(self.chunks()))


class _Chunks(io.RawIOBase):
    """A raw reader over an iterator of chunks (what zstandard's and gzip's readers take)."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._buf = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            nxt = next(self._chunks, None)
            if nxt is None:
                return 0
            self._buf = memoryview(nxt)
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def open_read(path: str) -> Reader:
    """The work file at ``path``, its trailer checked (use as a context manager)."""
    return Reader(path)


def read(path: str) -> bytes:
    """A whole work file's content, checked."""
    with Reader(path) as r:
        return b"".join(r.chunks())


def check(path: str) -> int:
    """Checks a whole work file without keeping it; returns its content length."""
    with Reader(path) as r:
        for _ in r.chunks():
            pass
        return r.content_len


def load_array(path: str, dtype: np.dtype) -> np.ndarray:
    """A work file of ``dtype`` items, checked, as a read-only array (memory-mapped when local).

    A plain ndarray over the map, not an ``np.memmap``: slicing a memmap runs Python-level
    ``__array_finalize__`` each time (tokenize's write phase slices once per document).
    """
    import numpy as np

    blob = load_blob(path)
    n = len(blob) // dtype.itemsize
    return np.zeros(0, dtype=dtype) if n == 0 else np.frombuffer(blob, dtype=dtype, count=n)


def load_blob(path: str) -> bytes | mmap.mmap:
    """A work file's content, checked, memory-mapped (slices are bytes).

    A remote file is first copied, checked chunk by chunk, into an anonymous temporary file of the
    node's own scratch space (``TMPDIR``), which is mapped: its pages are the kernel's to drop, as
    a local file's are, so a task reading many large work files (tokenize's write phase maps every
    token run its bucket draws from) needs disk there, not that much memory. The file has no name
    once made; its space is freed when the map is."""
    if storage.is_remote(path):
        with Reader(path) as r, storage.local_scratch(f"reading the work file {path}", r.content_len):
            with tempfile.TemporaryFile(prefix="dolma-pipe-work-") as tmp:
                for chunk in r.chunks():
                    tmp.write(chunk)
                tmp.flush()
                if r.content_len == 0:
                    return b""
                return mmap.mmap(tmp.fileno(), r.content_len, access=mmap.ACCESS_READ)
    n = check(path)
    if n == 0:
        return b""
    with open(storage.local_path(path), "rb") as fh:
        return mmap.mmap(fh.fileno(), n, access=mmap.ACCESS_READ)  # the content only, not the trailer
