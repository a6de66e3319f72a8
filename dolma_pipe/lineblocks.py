"""JSON-lines files read as blocks of complete lines: a list of lines per decompressed chunk, not
a Python step per line, for readers whose per-document work happens elsewhere (the mix's rule
engine, the report's Rust columns).

Files are decompressed by :func:`dolma_pipe.compression.fast_decompressed` (gzip by zlib-rs);
``compression`` (a config's name for it, in Dolma's words: gz, zst, zstd, '') overrides what a
file's name says. As in :func:`dolma_pipe.documents.iter_lines`, blank lines are
skipped (they still count for line numbers), a UTF-8 byte-order mark is dropped, and a corrupt or
truncated archive is raised after every line before it. :class:`AttributeRows` hands out an
attribute file's rows in the batches of the document file they belong to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from dolma_pipe import storage
from dolma_pipe.attributes import AttributeMismatchError
from dolma_pipe.compression import Codec, fast_decompressed
from dolma_pipe.documents import lines_codec
from dolma_pipe.read_errors import DocumentError

Block = tuple[list[int], list[bytes]]  # line numbers and lines (blank lines left out)


def _blank_free(linenos: list[int], lines: list[bytes], notes: Counter | None) -> Block:
    if b"" in lines or any(map(bytes.isspace, lines)):
        kept = [(n, line) for n, line in zip(linenos, lines) if line and not line.isspace()]
        if notes is not None:
            notes["blank_lines"] += len(lines) - len(kept)
        return [n for n, _ in kept], [line for _, line in kept]
    return linenos, lines


def line_blocks(path: str, compression: str | None = None, notes: Counter | None = None) -> Iterator[Block]:
    """(line numbers, lines) per decompressed chunk of a JSON-lines file, blank lines left out
    (and counted in ``notes["blank_lines"]``, as the documents reader notes them)."""
    codec = Codec.named(compression) if compression is not None else lines_codec(path)
    lineno = 0
    pending = b""
    first = True
    failure: DocumentError | None = None
    try:
        for out in fast_decompressed(path, codec):
            if first and out:
                first = False
                if out.startswith(b"\xef\xbb\xbf"):
                    out = out[3:]
            lines = out.split(b"\n")
            if pending:  # the line the last chunk left open (not the whole chunk copied behind it)
                lines[0] = pending + lines[0]
            pending = lines.pop()
            if lines:
                numbers = list(range(lineno + 1, lineno + 1 + len(lines)))
                lineno += len(lines)
                block = _blank_free(numbers, lines, notes)
                if block[1]:
                    yield block
    except DocumentError as exc:
        failure = exc
    if pending and not pending.isspace():
        yield [lineno + 1], [pending]
    elif pending and notes is not None:
        notes["blank_lines"] += 1
    if failure is not None:
        raise failure


def read_lines(path: str, compression: str | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of the non-blank lines of a JSON-lines file."""
    for numbers, lines in line_blocks(path, compression):
        yield from zip(numbers, lines)


class AttributeRows:
    """The rows of one attribute file, topped up block by block as a document file's batches ask
    for them (a reader pairs each document with the next row); a read error names the file."""

    def __init__(self, path: str, compression: str | None = None):
        self.path = path
        self.blocks = line_blocks(path, compression)
        self.numbers: list[int] = []  # the line numbers of ``lines``, for messages
        self.lines: list[bytes] = []
        self.done = False

    def top_up(self, n: int) -> None:
        """Read blocks until ``n`` rows are at hand or the file ends."""
        while len(self.lines) < n and not self.done:
            try:
                block = next(self.blocks, None)
            except (DocumentError, storage.StorageError) as exc:
                raise AttributeMismatchError(f"attribute file {self.path} cannot be read: {exc}") from None
            if block is None:
                self.done = True
            else:
                self.numbers += block[0]
                self.lines += block[1]

    def take(self, n: int) -> None:
        """Drop the first ``n`` rows (used)."""
        del self.numbers[:n]
        del self.lines[:n]
