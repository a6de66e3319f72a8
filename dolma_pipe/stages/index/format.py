"""An index folder's record of itself: ``index.json``, what it was built from and of what parts.

::

    <index>/index.json                  this record (IndexInfo)
    <index>/shards/<name>.sa            a part's suffix array, packed (``width`` bytes a position)
    <index>/shards/<name>.starts.npy    where each of the part's documents starts (symbols, int64)
    <index>/shards/<name>.text          documents only: the part's text (UTF-8, 0xFF after each)
    <index>/shards/<name>.docs.jsonl.gz documents only: each document's id and line

A *source* is an input file (a token shard, or a document file), recorded with its size, time
and xxh3 digest: an index refuses to answer for a source that changed since. A *part* is one
suffix array over a run of a source's documents (a source larger than a task's memory is indexed
in several parts). Token shards are read in place, never copied.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from dolma_pipe import storage

INFO = "index.json"
FORMAT = 1


class Source(BaseModel):
    path: str
    size: int
    mtime: float
    xxh3: str
    # Token shards: the sidecar (start,end,id,src,loc per document).
    sidecar: Source | None = None
    docs: int = 0


class Part(BaseModel):
    name: str
    source: int  # index into IndexInfo.sources
    offset: int  # first symbol in the source's text
    length: int  # symbols
    width: int  # bytes per suffix-array position
    first_doc: int
    docs: int


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


def part_path(root: str, name: str, suffix: str) -> str:
    return storage.join(root, "shards", name + suffix)
