"""The values tokenize's phases hand each other, typed: the split (the step after ``encode``), the
shard numbering (the step after ``pack``) and a bucket task's parameters (``pack`` and ``write``).

Each is stored as the dict it converts to (the manifest keeps a step's data, a marker its task's
parameters, and a task whose parameters differ from its marker's is redone), so the conversions
keep their keys, order and JSON types (lists, never tuples).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

SPLITS = ("train", "val")


def bucket_key(split: str, bucket: int) -> str:
    """A bucket task's key: its split and number (``train-00003``), in key order within a split."""
    return f"{split}-{bucket:05d}"


def split_of(key: str) -> str:
    return key.split("-")[0]


@dataclass(frozen=True)
class Split:
    """Which documents are held out, and how many documents, tokens and buckets each split has."""

    # The (validation key, file, line) documents below which are held out ([0, 0, 0]: none).
    threshold: list[int]
    buckets: dict[str, int]
    docs: dict[str, int]
    tokens: dict[str, int]

    def to_data(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Split:
        return cls(**data)


@dataclass(frozen=True)
class Numbering:
    """Where each bucket's shards start (buckets in key order, per split), and each split's shards."""

    first: dict[str, int]
    shards: dict[str, int]

    def to_data(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Numbering:
        return cls(**data)

    def ranges(self) -> dict[str, range]:
        """The shard numbers of each bucket: from its first up to the next bucket's of its split,
        or the split's end."""
        keys = sorted(self.first, key=lambda k: (SPLITS.index(split_of(k)), k))
        out = {}
        for i, k in enumerate(keys):
            split = split_of(k)
            nxt = next((self.first[j] for j in keys[i + 1 :] if split_of(j) == split), self.shards[split])
            out[k] = range(self.first[k], nxt)
        return out


@dataclass(frozen=True)
class BucketParams:
    """A ``pack`` or ``write`` task's parameters: its key range of a split, the split's threshold,
    and (``write``) the shards it writes, numbered from ``first``."""

    split: str
    bucket: int
    buckets: int
    threshold: list[int]
    first: int | None = None
    shards: int | None = None

    def to_params(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> BucketParams:
        return cls(**params)

    @property
    def shard_range(self) -> range:
        """The shard numbers a ``write`` task writes."""
        assert self.first is not None and self.shards is not None, "a pack task writes no shard"
        return range(self.first, self.first + self.shards)
