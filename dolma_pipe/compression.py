"""How a document file's bytes are compressed: one vocabulary, whole members written, members read.

:class:`Codec` is the one vocabulary of compressions. A file's name says which (``.gz``;
``.zst`` or ``.zstd``; anything else is plain), and so does a config, in Dolma's words
(``compression.input`` and ``.output``: ``gz``, ``zst`` or ``zstd``, ``""`` for none: see
:data:`CONFIG_NAMES`); each codec knows the extension it writes and its default level.

Writing: :meth:`Codec.compress` makes one whole member (a gzip member with ``mtime`` 0,
compressed by libdeflate in :func:`gzip_member`; a zstd frame; the bytes as they are), so equal
input gives equal bytes, and members written one after another are one valid stream that every
reader (Python's ``gzip``, Dolma's ``MultiGzDecoder``, ``zcat``) reads whole: the mixer joins
shards from them without decompressing a document twice.

Reading: a file is any number of members (frames) one after another. :func:`decompressed` yields
its bytes and, after every byte before it, raises
:class:`~dolma_pipe.read_errors.TruncatedArchive` when the last member ends early (neither
``gzip`` nor zstd's stream reader says so) or :class:`~dolma_pipe.read_errors.DocumentError` when
the data is corrupt. :func:`fast_decompressed` is the same with gzip inflated by zlib-rs
(:class:`GzipInflater`, about twice CPython's zlib), for readers that do little per line.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from enum import Enum
from typing import IO, Any, cast

import zstandard

from dolma_pipe import _rust, storage
from dolma_pipe.read_errors import DocumentError, TruncatedArchive

CHUNK = 1 << 20
GZIP_LEVEL = 5
# Attribute files (taggers', dedup's) are intermediates, rewritten whenever a tagger or a config
# changes: gzip level 3 costs about three quarters of level 5's CPU for ~3% larger files.
ATTRIBUTE_GZIP_LEVEL = 3
ZSTD_LEVEL = 3

GzipInflater = _rust.GzipInflater


class Codec(str, Enum):
    """A compression; its value is the name messages and :func:`dolma_pipe.documents.compression_of` use."""

    GZIP = "gzip"
    ZSTD = "zstd"
    NONE = "none"

    @classmethod
    def of_path(cls, path: str) -> Codec:
        """The codec a file's name says: ``.gz``, ``.zst`` or ``.zstd``, else none."""
        name = path.lower()
        if name.endswith(".gz"):
            return cls.GZIP
        if name.endswith((".zst", ".zstd")):
            return cls.ZSTD
        return cls.NONE

    @classmethod
    def named(cls, name: str | Codec) -> Codec:
        """The codec a config names in Dolma's words (a codec is itself); ValueError for another name."""
        if isinstance(name, Codec):
            return name
        try:
            return CONFIG_NAMES[name]
        except KeyError:
            raise ValueError(f"unknown compression {name!r}: one of {', '.join(map(repr, CONFIG_NAMES))}") from None

    @property
    def extension(self) -> str:
        """What a file written with this codec ends with (after ``.jsonl``)."""
        return _EXTENSIONS[self]

    @property
    def level(self) -> int:
        """The default level (the documents writer's and the mixer's)."""
        return _LEVELS[self]

    def compress(self, raw: bytes, level: int | None = None) -> bytes:
        """``raw`` as one whole member (gzip, ``mtime`` 0), one zstd frame, or as it is."""
        if self is Codec.GZIP:
            return gzip_member(raw, self.level if level is None else level)
        if self is Codec.ZSTD:
            return zstandard.ZstdCompressor(level=self.level if level is None else level).compress(raw)
        return raw


# Dolma's names for compressions in a config (``compression.input``, ``compression.output``,
# a source's ``compression``), in the order error messages list them.
CONFIG_NAMES: dict[str, Codec] = {"gz": Codec.GZIP, "zst": Codec.ZSTD, "zstd": Codec.ZSTD, "": Codec.NONE}
_EXTENSIONS = {Codec.GZIP: ".gz", Codec.ZSTD: ".zst", Codec.NONE: ""}
_LEVELS = {Codec.GZIP: GZIP_LEVEL, Codec.ZSTD: ZSTD_LEVEL, Codec.NONE: 0}


def gzip_member(data: bytes, level: int = GZIP_LEVEL) -> bytes:
    """``data`` as one complete gzip member (mtime 0: equal input, equal bytes); members
    concatenate into one valid gzip stream. libdeflate's level 5 (the default) writes the size
    zlib's level 6 does with about a third of CPython zlib's CPU (docs/benchmarks.md, "Mixing")."""
    return _rust.gzip_member(data, level)


class GzipMemberStream:
    """A write-only stream of gzip members: what is written is buffered and compressed by
    :func:`gzip_member` every ``member_bytes`` (never inside one ``write``, so a member holds whole
    lines when lines are written whole), the rest on :meth:`close`; a stream nothing was written to
    is one empty member, as ``gzip.GzipFile`` writes. On the mixer's bench documents, 1 MB members at
    level 5 came to within 0.4% of the size of Dolma's one continuous zlib-6 stream."""

    def __init__(self, raw: IO[bytes], level: int = GZIP_LEVEL, member_bytes: int = CHUNK):
        self.raw, self.level, self.member_bytes = raw, level, member_bytes
        self._buf: list[bytes] = []
        self._size = 0
        self._members = 0

    def write(self, data: bytes) -> int:
        self._buf.append(data)
        self._size += len(data)
        if self._size >= self.member_bytes:
            self._emit()
        return len(data)

    def _emit(self) -> None:
        self.raw.write(gzip_member(b"".join(self._buf), self.level))
        self._buf, self._size = [], 0
        self._members += 1

    def close(self) -> None:
        if self._size or not self._members:
            self._emit()


def corrupt_data(path: str, codec: Codec, detail: object) -> DocumentError:
    return DocumentError(f"{path}: corrupt {codec.value} data ({detail})")


def truncated_archive(path: str, codec: Codec) -> TruncatedArchive:
    return TruncatedArchive(f"{path}: truncated {codec.value} archive (stream ended early)")


def _members(
    raw: IO[bytes], path: str, codec: Codec, new_decompressor: Callable[[], Any], errors: tuple[type[Exception], ...]
) -> Iterator[bytes]:
    """Decompress a stream of concatenated members/frames, detecting a truncated last one.

    Neither ``gzip`` nor ``zstandard``'s readers report every truncation (zstd's
    stream reader just stops), so the end of each member is checked here.
    """
    decomp = new_decompressor()
    pending = False  # input fed to the current member that has not reached its end
    while True:
        block = raw.read(CHUNK)
        if not block:
            break
        while block:
            try:
                out = decomp.decompress(block)
            except errors as exc:
                raise corrupt_data(path, codec, exc) from exc
            pending = True
            if out:
                yield out
            if decomp.eof:
                block = decomp.unused_data
                decomp = new_decompressor()
                pending = False
            else:
                block = b""
    if pending:
        raise truncated_archive(path, codec)


def _gzip_members(raw: IO[bytes], path: str) -> Iterator[bytes]:
    # wbits 47 = 32 + 15: accept gzip or zlib headers, as `gzip` would.
    return _members(raw, path, Codec.GZIP, lambda: zlib.decompressobj(wbits=47), (zlib.error,))


def _zstd_frames(raw: IO[bytes], path: str) -> Iterator[bytes]:
    dctx = zstandard.ZstdDecompressor()
    return _members(raw, path, Codec.ZSTD, dctx.decompressobj, (zstandard.ZstdError,))


def _plain(raw: IO[bytes], path: str) -> Iterator[bytes]:
    while True:
        block = raw.read(CHUNK)
        if not block:
            return
        yield block


_DECODERS: dict[Codec, Callable[[IO[bytes], str], Iterator[bytes]]] = {
    Codec.GZIP: _gzip_members,
    Codec.ZSTD: _zstd_frames,
    Codec.NONE: _plain,
}


def decompressed(raw: IO[bytes], path: str, codec: Codec) -> Iterator[bytes]:
    """The bytes of ``raw`` (``path``'s, named in errors) decompressed as ``codec``, in blocks."""
    return _DECODERS[codec](raw, path)


class _Replay:
    """A raw stream whose first block was already read (to look at the magic bytes)."""

    def __init__(self, first: bytes, raw: IO[bytes]):
        self.first, self.raw = first, raw

    def read(self, n: int = -1) -> bytes:
        if self.first:
            out, self.first = self.first, b""
            return out
        return self.raw.read(n)


def chunks_after(first: bytes, raw: IO[bytes], path: str, codec: Codec) -> Iterator[bytes]:
    """:func:`decompressed` of ``raw`` whose first block was already taken (to look at its magic
    bytes): for readers with a faster path for some files (Rust gzip) and this for the rest."""
    return decompressed(cast(IO[bytes], _Replay(first, raw)), path, codec)


def fast_decompressed(path: str, codec: Codec) -> Iterator[bytes]:
    """The bytes of the file at ``path`` decompressed as ``codec``: a gzip file (by its magic bytes)
    inflated by zlib-rs, anything else (zstd frames, a zlib stream under a ``.gz`` name, plain
    text) as :func:`decompressed` reads it; the same errors."""
    with storage.open_read(path) as raw:
        block = raw.read(CHUNK)
        if codec is Codec.GZIP and block.startswith(b"\x1f\x8b"):
            inflater = GzipInflater()
            fed = bool(block)
            while block:
                try:
                    yield inflater.feed(block)
                except ValueError as exc:
                    raise corrupt_data(path, codec, exc) from None
                block = raw.read(CHUNK)
            if fed:
                try:
                    yield inflater.finish()
                except ValueError:
                    raise truncated_archive(path, codec) from None
            return
        yield from chunks_after(block, raw, path, codec)
