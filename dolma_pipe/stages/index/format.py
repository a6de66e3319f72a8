"""An index folder's record of itself: ``index.json``, what it was built from and of what parts.

::

    <index>/index.json                   this record (IndexInfo)
    <index>/shards/<name>.sa             a part's suffix array, packed (``width`` bytes a position)
    <index>/shards/<name>.starts.npy     where each of the part's documents starts (symbols, int64)
    <index>/shards/<name>.text           documents only: the part's text (UTF-8, 0xFF after each)
    <index>/shards/<name>.docs.jsonl.gz  documents only: each document's id and line
    <index>/sources/<name>.npy           a token shard on S3 (a local index): the copy answered from
    <index>/sources/<name>.csv.gz        and its sidecar (never read as shards: the folder is an
                                         index run's, train.shards.select_shards)

A *source* is an input file (a token shard, or a document file), recorded with its size, time
and xxh3 digest (and an S3 object's ETag): an index refuses to answer for a source that changed
since. A *part* is one suffix array over a run of a source's documents (a source larger than a
task's memory is indexed in several parts), recorded with the xxh3 digest of each of its files
as the build wrote them: a query checks them when it opens the index, a rerun of ``index``
rebuilds a part that no longer matches. Local token shards are read in place, never copied.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from dolma_pipe import storage

INFO = "index.json"
# 2: every part's files carry their checksums (format 1 had none: such an index is rebuilt).
FORMAT = 2
# A part's files, by kind of index.
TOKEN_PART_FILES = (".sa", ".starts.npy")
DOCUMENT_PART_FILES = (".sa", ".starts.npy", ".text", ".docs.jsonl.gz")
PART_SUFFIXES = DOCUMENT_PART_FILES
# A copy of a remote token shard (and its sidecar) in a local index: a shard, named as one.
SOURCE_COPY = ".npy"
SIDECAR_COPY = ".csv.gz"


class Source(BaseModel):
    path: str
    size: int
    mtime: float
    xxh3: str
    etag: str = ""  # an S3 object's, when it was built from (S3 times have whole seconds)
    # Token shards: the sidecar (start,end,id,src,loc per document).
    sidecar: Source | None = None
    docs: int = 0
    # A remote token shard indexed into a local folder: its copy, relative to the index (the copy
    # answers; it holds the bytes the digests above describe).
    local_copy: str | None = None


class Part(BaseModel):
    name: str
    source: int  # index into IndexInfo.sources
    offset: int  # first symbol in the source's text
    length: int  # symbols
    width: int  # bytes per suffix-array position
    first_doc: int
    docs: int
    # Each of the part's files (by suffix): the xxh3-64 (hex) of the bytes the build wrote.
    files: dict[str, str] = Field(default_factory=dict)


class IndexInfo(BaseModel):
    format: int = FORMAT
    kind: Literal["tokens", "documents"]
    symbol: Literal["u8", "u16", "u32"]
    tokenizer: dict | None = None  # token indexes: name_or_path, file, sha256, eos_token_id ...
    sources: list[Source] = Field(default_factory=list)
    parts: list[Part] = Field(default_factory=list)

    @property
    def symbols(self) -> int:
        return sum(p.length for p in self.parts)

    @property
    def documents(self) -> int:
        return sum(p.docs for p in self.parts)


def part_rel(name: str, suffix: str) -> str:
    """A part's file, relative to the index."""
    return f"shards/{name}{suffix}"


def part_path(root: str, name: str, suffix: str) -> str:
    return storage.join(root, part_rel(name, suffix))


def copy_rel(name: str, suffix: str) -> str:
    """A local index's copy of a remote source, relative to the index (``suffix``:
    :data:`SOURCE_COPY` or :data:`SIDECAR_COPY`)."""
    return f"sources/{name}{suffix}"


def copy_path(root: str, name: str, suffix: str) -> str:
    return storage.join(root, copy_rel(name, suffix))


def hexdigest(value: int) -> str:
    return f"{value:016x}"
