"""Which members go into which output shard: a rule of the inputs' order and sizes alone.

After every file of a stream has been filtered, its members (in input order, then line order)
are packed into consecutive shards: a shard takes members while its compressed size stays
within ``max_size_in_bytes`` (a single larger member gets a shard of its own). The rule reads
only the members' sizes in the global input order, never which worker finished first, so the
same inputs give the same shards for any process count or executor, and the shards read one
after another give the documents in input order.

Shards are named ``<name>-0000.jsonl.gz``, ``<name>-0001.jsonl.gz``, ... all alike. (Dolma names
its last shard ``.json.gz`` and the others ``.jsonl.gz``; and it bounds shards by the sizes of
the input files, before filtering, so its shards are not the same files as ours.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    """One member of an intermediate file: where it is, its size, its documents."""

    path: str
    offset: int
    length: int
    docs: int

    def as_list(self) -> list[str | int]:
        return [self.path, self.offset, self.length, self.docs]

    @staticmethod
    def from_list(v: list) -> Piece:
        return Piece(str(v[0]), int(v[1]), int(v[2]), int(v[3]))


def pack(pieces: list[Piece], max_bytes: int) -> list[list[Piece]]:
    """Consecutive pieces grouped into shards of at most ``max_bytes`` (unless one piece is larger)."""
    shards: list[list[Piece]] = []
    current: list[Piece] = []
    size = 0
    for piece in pieces:
        if current and size + piece.length > max_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(piece)
        size += piece.length
    if current:
        shards.append(current)
    return shards


def shard_name(name: str, index: int, ext: str) -> str:
    return f"{name}-{index:04d}.jsonl{ext}"


def shard_pattern(name: str) -> re.Pattern[str]:
    """The names ``shard_name`` gives group ``name``'s shards, any index and any compression: what
    a finished run may remove from the group's output folder when an earlier run left more."""
    return re.compile(re.escape(name) + r"-\d{4,}\.jsonl(?:\.gz|\.zst)?")


def member_bytes(max_bytes: int) -> int:
    """Raw (uncompressed) bytes per member: small enough for shards to be cut close to the bound,
    large enough to compress well. JSON lines compress 3-5x, so a quarter of the bound in raw
    bytes makes members of a tenth or less of a shard."""
    return min(max(max_bytes // 4, 1 << 20), 64 << 20)
