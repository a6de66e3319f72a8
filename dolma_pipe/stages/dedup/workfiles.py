"""Where a dedup run keeps its intermediate files, and how they are read back.

Every phase writes its results under the work directory (``work_dir.output``, default
``<output root>/_work``) as work files (:mod:`dolma_pipe.workdir`: written atomically with a
checksum trailer, and checked when read), so a killed task leaves nothing that looks finished, a
rerun redoes exactly the unfinished tasks, and a damaged file makes the runner redo the task
that wrote it. The binary formats are
``rust_bloom/src/dedup/records.rs``'s: *bucketed* files hold fixed-size records grouped into
buckets behind a table of offsets, and a task that owns one bucket (a hash range, or one input
file) reads only its slice (three small reads; a range request on S3).

Per input file (``scan/<rel>.<kind>``): ``meta`` (ids, lengths, paragraph lengths,
decontamination hits), ``docs``/``paras``/``bands`` (key records by hash range), ``sigs`` and
``sets`` (MinHash signatures and shingle sets for verification).
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass

from dolma_pipe import storage, workdir
from dolma_pipe._rust import (
    DEDUP_BUCKET_MAGIC,
    DEDUP_META_MAGIC,
    DEDUP_RECORD_SIZES,
    DEDUP_SETS_MAGIC,
    DEDUP_WHOLE_DOCUMENT,
)
from dolma_pipe.workdir import WorkDir, WorkFileError

# The formats are the Rust crate's (records.rs, scan.rs), exported by it.
BUCKET_MAGIC: bytes = DEDUP_BUCKET_MAGIC
META_MAGIC: bytes = DEDUP_META_MAGIC
SETS_MAGIC: bytes = DEDUP_SETS_MAGIC
DOC, PARA, BAND, DUP, PAIR, VERIFIED, MEMBER = (DEDUP_RECORD_SIZES[k] for k in ("doc", "para", "band", "dup", "pair", "verified", "member"))
WHOLE_DOCUMENT: int = DEDUP_WHOLE_DOCUMENT


def _damaged(path: str, what: str) -> WorkFileError:
    return WorkFileError(path, "damaged", f"damaged ({what})")


class Layout:
    """Names of a run's work files, per phase, in its work directory."""

    def __init__(self, work: WorkDir):
        self.work = work

    def scan(self, rel: str, kind: str) -> str:
        return self.work.path("scan", f"{rel}.{kind}")

    def bucket(self, phase: str, bucket: int) -> str:
        return self.work.path(phase, f"bucket-{bucket:05d}.bkt")

    def per_file(self, phase: str, rel: str) -> str:
        return self.work.path(phase, f"{rel}.bkt")

    def single(self, name: str) -> str:
        return storage.join(self.work.root, name)


def _u32s(data: bytes | memoryview) -> array:
    a = array("I")
    a.frombytes(bytes(data))
    if sys.byteorder != "little":
        a.byteswap()
    return a


def _u64s(data: bytes | memoryview) -> array:
    a = array("Q")
    a.frombytes(bytes(data))
    if sys.byteorder != "little":
        a.byteswap()
    return a


def read_slice(path: str, bucket: int) -> bytes:
    """The records of one bucket of a bucketed file (only the blocks holding them are read)."""
    with workdir.open_read(path) as r:
        head = r.read(0, 16)
        if head[:8] != BUCKET_MAGIC:
            raise _damaged(path, "not a dedup bucketed file")
        record_size, buckets = struct.unpack_from("<II", head, 8)
        if not 0 <= bucket < buckets:
            raise _damaged(path, f"it has {buckets} buckets, no bucket {bucket}")
        lo, hi = struct.unpack("<QQ", r.read(16 + 8 * bucket, 16))
        return r.read(16 + 8 * (buckets + 1) + lo * record_size, (hi - lo) * record_size)


def read_all(path: str) -> tuple[int, list[bytes]]:
    """(record size, every bucket's records) of a whole bucketed file."""
    data = workdir.read(path)
    if data[:8] != BUCKET_MAGIC:
        raise _damaged(path, "not a dedup bucketed file")
    record_size, buckets = struct.unpack_from("<II", data, 8)
    offsets = _u64s(memoryview(data)[16 : 16 + 8 * (buckets + 1)])
    base = 16 + 8 * (buckets + 1)
    return record_size, [data[base + offsets[b] * record_size : base + offsets[b + 1] * record_size] for b in range(buckets)]


def dups_by_document(records: bytes) -> dict[int, list[int]]:
    """DUP records as {document: [paragraph, ...]} (paragraph WHOLE_DOCUMENT for a document)."""
    out: dict[int, list[int]] = {}
    pairs = _u32s(records)
    for i in range(0, len(pairs), 2):
        out.setdefault(pairs[i], []).append(pairs[i + 1])
    return out


def u32_records(records: bytes) -> array:
    return _u32s(records)


@dataclass
class Meta:
    """What the scan kept of one file's documents (scan.rs's meta file), in document order."""

    lines: array
    chars: array
    flags: bytes
    id_offsets: array
    id_blob: bytes
    para_offsets: array
    para_lens: array
    para_info: array
    decon: bytes
    separator_chars: int

    def __len__(self) -> int:
        return len(self.chars)

    def id(self, doc: int) -> str:
        return self.id_blob[self.id_offsets[doc] : self.id_offsets[doc + 1]].decode("utf-8")

    def ids(self) -> list[str]:
        return _decode_ids(self.id_blob, self.id_offsets, len(self))

    def paragraph_spans(self, doc: int) -> list[tuple[int, int]]:
        """Each paragraph's [start, end) in characters, the separator included, clipped to the text."""
        total = self.chars[doc]
        start = 0
        out = []
        for i in range(self.para_offsets[doc], self.para_offsets[doc + 1]):
            end = min(start + self.para_lens[i] + self.separator_chars, total)
            out.append((start, end))
            start = end
        return out

    def paragraph_info(self, doc: int) -> array:
        return self.para_info[self.para_offsets[doc] : self.para_offsets[doc + 1]]

    def decontamination_hits(self) -> dict[int, list[list[float | int]]]:
        """{document: [[start, end, score], ...]} of decontamination hits."""
        out: dict[int, list[list[float | int]]] = {}
        for doc, start, end, score in struct.iter_unpack("<IIIf", self.decon):
            out.setdefault(doc, []).append([start, end, 1 if score == 1.0 else round(score, 6)])
        return out


def _meta_sections(data: bytes, path: str) -> tuple[int, int, list[memoryview]]:
    """(documents, separator characters, the nine sections as zero-copy views) of a meta file."""
    if data[:8] != META_MAGIC:
        raise _damaged(path, "not a dedup meta file")
    n, sep_chars = struct.unpack_from("<II", data, 8)
    pos = 16
    sections: list[memoryview] = []
    view = memoryview(data)
    for _ in range(9):
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        sections.append(view[pos : pos + length])
        pos += length
    if pos != len(data):
        raise _damaged(path, "its sections do not add up")
    return n, sep_chars, sections


def _decode_ids(blob: bytes, offsets: array, n: int) -> list[str]:
    return [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]


def parse_meta(data: bytes, path: str = "meta") -> Meta:
    n, sep_chars, sections = _meta_sections(data, path)
    lines, chars, flags, id_off, id_blob, para_off, para_lens, para_info, decon = sections
    meta = Meta(
        lines=_u32s(lines),
        chars=_u32s(chars),
        flags=bytes(flags),
        id_offsets=_u64s(id_off),
        id_blob=bytes(id_blob),
        para_offsets=_u64s(para_off),
        para_lens=_u32s(para_lens),
        para_info=_u32s(para_info),
        decon=bytes(decon),
        separator_chars=sep_chars,
    )
    if len(meta.lines) != n or len(meta.flags) != n or len(meta.id_offsets) != n + 1:
        raise _damaged(path, "its sections do not add up")
    return meta


def meta_ids(data: bytes, path: str = "meta") -> list[str]:
    """The documents' ids of a meta file, in order: what the duplicate-id check needs, without
    :func:`parse_meta`'s copies of the paragraph arrays (a million entries for the bench corpus)."""
    n, _, sections = _meta_sections(data, path)
    id_offsets = _u64s(sections[3])
    if len(id_offsets) != n + 1:
        raise _damaged(path, "its sections do not add up")
    return _decode_ids(bytes(sections[4]), id_offsets, n)


def documents_in(path: str) -> int:
    """How many documents a meta file holds (its header; the whole file is checked)."""
    n, _, _ = _meta_sections(workdir.read(path), path)
    return n


def read_meta(path: str) -> Meta:
    return parse_meta(workdir.read(path), path)


def read_set_values(path: str, docs: list[int]) -> dict[int, bytes]:
    """The shingle sets (sorted u32 values as bytes) of some documents of a ``sets`` file."""
    out: dict[int, bytes] = {}
    if not docs:
        return out
    wanted = sorted(set(docs))
    with workdir.open_read(path) as r:
        head = r.read(0, 16)
        if head[:8] != SETS_MAGIC:
            raise _damaged(path, "not a dedup sets file")
        (n,) = struct.unpack_from("<Q", head, 8)
        offsets = _u64s(r.read(16, 8 * (n + 1)))
        base = 16 + 8 * (n + 1)
        if len(wanted) * 4 >= n:
            # Many of the file's documents: one read of all the values is cheaper than seeks.
            values = r.read(base, r.content_len - base)
            for doc in wanted:
                out[doc] = values[4 * offsets[doc] : 4 * offsets[doc + 1]]
            return out
        for doc in wanted:
            out[doc] = r.read(base + 4 * offsets[doc], 4 * (offsets[doc + 1] - offsets[doc]))
    return out


def read_signatures(path: str, docs: list[int]) -> dict[int, bytes]:
    """The signatures (u32 values as bytes) of some documents of a ``sigs`` file."""
    out: dict[int, bytes] = {}
    if not docs:
        return out
    with workdir.open_read(path) as r:
        head = r.read(0, 16)
        if head[:8] != BUCKET_MAGIC:
            raise _damaged(path, "not a dedup bucketed file")
        record_size, buckets = struct.unpack_from("<II", head, 8)
        base = 16 + 8 * (buckets + 1)
        for doc in sorted(set(docs)):
            out[doc] = r.read(base + doc * record_size, record_size)
    return out
