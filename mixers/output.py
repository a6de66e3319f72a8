"""Output files made of independent compressed members, and shards made by joining them.

Each mixing task writes the documents it keeps to one file of gzip members (or zstd frames, or
plain bytes), cutting a new member every ``member_bytes`` of JSON lines, and records each
member's offset, length and document count. An intermediate file is a work file
(:mod:`dolma_pipe.workdir`: sealed with a checksum trailer, its members read back checked). A file of several gzip members (zstd frames) is one
valid gzip (zstd) stream that every reader (Python's ``gzip``, Dolma's ``MultiGzDecoder``, ``zcat``)
reads whole, so a shard is made by copying members' bytes one after another: no document is
decompressed or compressed twice. Members are compressed deterministically
(:meth:`dolma_pipe.compression.Codec.compress`: gzip ``mtime`` 0), so outputs are byte-identical
whatever ran them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any

from dolma_pipe import storage, workdir
from dolma_pipe.compression import Codec

COPY_CHUNK = 8 << 20


@dataclass(frozen=True)
class Member:
    offset: int
    length: int
    docs: int
    raw_bytes: int

    def as_list(self) -> list[int]:
        return [self.offset, self.length, self.docs, self.raw_bytes]


class MemberWriter:
    """Writes JSON lines to ``path`` (atomically) as members of about ``member_bytes`` raw bytes."""

    def __init__(
        self,
        path: str,
        compression: Codec | str,
        member_bytes: int,
        level: int | None = None,
        empty_member: bool = False,
        work_file: bool = False,
    ):
        self.path = path
        self.compression = Codec.named(compression)  # a codec, or a config's name for one
        self.member_bytes = max(1, member_bytes)
        self.level = level
        # Write one empty member when nothing is kept (a final output file must be a valid archive).
        self.empty_member = empty_member
        self.members: list[Member] = []
        self.docs = 0
        # A work file (members for a later phase) is sealed; a final output is plain compressed data.
        self._ctx: Any = workdir.open_write(path) if work_file else storage.open_write_atomic(path)
        self._fh: IO[bytes] | workdir.SealedWriter | None = None
        self._buf: list[bytes] = []
        self._buf_bytes = 0
        self._buf_docs = 0
        self._offset = 0

    def __enter__(self) -> MemberWriter:
        self._fh = self._ctx.__enter__()
        return self

    def write(self, data: bytes, line_lengths: list[int]) -> None:
        """Add complete JSON lines (``line_lengths`` gives each line's bytes, newline included)."""
        if not data:
            return
        if self._buf_bytes + len(data) < self.member_bytes:
            self._buf.append(data)
            self._buf_bytes += len(data)
            self._buf_docs += len(line_lengths)
            return
        # A member ends at the end of the line that brings it to member_bytes: ``taken`` is where
        # the buffered part of ``data`` starts, ``end`` where the current line ends.
        taken = end = 0
        for n in line_lengths:
            end += n
            self._buf_bytes += n
            self._buf_docs += 1
            if self._buf_bytes >= self.member_bytes:
                self._buf.append(data[taken:end])
                self._emit()
                taken = end
        if end != len(data):
            raise ValueError(f"{self.path}: line lengths add up to {end:,} bytes, the data has {len(data):,}")
        if taken < end:
            self._buf.append(data[taken:])  # its bytes and documents are counted already

    def _emit(self) -> None:
        if not self._buf_docs:
            return
        raw = b"".join(self._buf)
        # Shards are cut between members, so a member must hold whole lines: one that does not
        # would split a document across two shards.
        ends = raw.count(b"\n")
        if ends != self._buf_docs or not raw.endswith(b"\n"):
            raise ValueError(f"{self.path}: a member of {self._buf_docs:,} documents holds {ends:,} line ends (a bug in its writer)")
        packed = self.compression.compress(raw, self.level)
        assert self._fh is not None
        self._fh.write(packed)
        self.members.append(Member(self._offset, len(packed), self._buf_docs, len(raw)))
        self._offset += len(packed)
        self.docs += self._buf_docs
        self._buf, self._buf_bytes, self._buf_docs = [], 0, 0

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> Any:
        if exc_type is None:
            self._emit()
            if not self.members and self.empty_member and self.compression is not Codec.NONE:
                assert self._fh is not None
                self._fh.write(self.compression.compress(b"", self.level))
        return self._ctx.__exit__(exc_type, exc, tb)


def concatenate(pieces: list[tuple[str, int, int]], out_path: str) -> int:
    """Write the byte ranges ``(path, offset, length)`` of work files one after another to
    ``out_path``, each checked as it is read; its size."""
    written = 0
    with storage.open_write_atomic(out_path) as out:
        i = 0
        while i < len(pieces):
            path = pieces[i][0]
            with workdir.open_read(path) as src:
                while i < len(pieces) and pieces[i][0] == path:
                    _, offset, length = pieces[i]
                    for start in range(offset, offset + length, COPY_CHUNK):
                        out.write(src.read(start, min(COPY_CHUNK, offset + length - start)))
                    written += length
                    i += 1
    return written
