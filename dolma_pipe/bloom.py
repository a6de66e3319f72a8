"""Bloom filters for deduplication: the typed Python face of the Rust core (`rust_bloom/`).

This module owns the public API; the work happens in `dolma_pipe._rust`.

Keys are `str` or `bytes`; a `str` is hashed as its UTF-8 encoding, so `"a"` and `b"a"` are the
same key. Hashing is seeded xxh3-128 with Kirsch–Mitzenmacher double hashing: stable across
runs, machines and versions of this package, because filters are saved and reused.

Three ways to hold a filter::

    bf = BloomFilter(expected_items=10_000_000, fp_rate=1e-4)       # private, in memory
    bf = BloomFilter.load("para.bloom")                            # a saved file, copied in
    bf = BloomFilter.create_shared("para.bloom", 10_000_000, 1e-4)  # a file mapped shared
    bf = BloomFilter.open_shared("para.bloom")                     #   ... from other processes

**Test-and-set.** ``insert(key)`` returns True if the key was already present. It is atomic per
key across threads and processes sharing a filter: when several workers insert the same new key
at the same time, exactly one of them gets False ("new"). Inserts of one key are serialised by
a striped spin lock stored next to the bits (plain per-bit ``fetch_or`` cannot give this
guarantee once a key's bits span several words); a lookup-only fast path skips the lock for
keys already present. ``insert_many`` processes keys in order (a key repeated in the batch is
new only at its first occurrence) with the GIL released.

**Files** have a 4 KiB header (magic ``DPBLOOM\\0``, format version, m, k, seed, layout, a
header checksum, a "sealed" flag, the count and an xxh3 checksum of the bit array), a 4 KiB lock
page and the bit array. ``save`` writes a sealed file atomically (temp file + rename). ``load``
refuses, with :class:`BloomFileError` naming the file, anything with wrong magic, another
version, a corrupted header, a wrong size (truncated) or a bit array that does not match its
checksum.

**Shared filters** live in the file itself (mmap): every process's inserts are immediately
visible to the others. The checksum is written by ``seal()``, which the coordinating process
calls once no process is inserting any more (for example after its workers finished); the first
insert through any handle afterwards clears the sealed flag again. ``open_shared`` verifies the
checksum of a sealed file (``verify=False`` skips it); an unsealed file (in use, never sealed,
or left by a crashed writer) opens without verification, and ``load`` refuses it unless
``verify=False``. ``flush()`` only asks the kernel to write pages to disk (msync); other
processes never need it. A shared filter pickles as "reopen this path", so it can be passed to
multiprocessing workers. ``create_shared(..., overwrite=True)`` replaces the file by a rename,
so processes still using the old file keep the old filter; never truncate a mapped file.
Stripe locks record the holder's pid: a worker killed mid-insert is detected (after 0.5 s) and
its lock taken over, so a crash cannot wedge the file.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from dolma_pipe._rust import (
    DEFAULT_SEED,
    FORMAT_VERSION,
    MAX_BITS,
    MAX_HASHES,
    BloomFileError,
    BloomFilter,
)
from dolma_pipe._rust import false_positive_rate as _false_positive_rate
from dolma_pipe._rust import optimal_parameters as _optimal_parameters

__all__ = [
    "DEFAULT_SEED",
    "FORMAT_VERSION",
    "MAX_BITS",
    "MAX_HASHES",
    "BloomFileError",
    "BloomFilter",
    "BloomParameters",
    "false_positive_rate",
    "optimal_parameters",
]


class BloomParameters(NamedTuple):
    """The shape of a filter: its number of bits and of hash functions."""

    num_bits: int
    num_hashes: int

    @property
    def size_bytes(self) -> int:
        """Bytes of bit array (whole 64-bit words), excluding the 8 KiB file header."""
        return math.ceil(self.num_bits / 64) * 8


def optimal_parameters(expected_items: int, fp_rate: float) -> BloomParameters:
    """The textbook optimum for ``expected_items`` keys at false-positive rate ``fp_rate``.

    m = ceil(-n ln p / (ln 2)^2) bits and k = round(m / n * ln 2) hashes, k clamped to
    [1, MAX_HASHES]. Raises ValueError unless n >= 1 and 0 < p < 1. Computed by the same Rust
    code that sizes ``BloomFilter(expected_items, fp_rate)``.
    """
    num_bits, num_hashes = _optimal_parameters(expected_items, fp_rate)
    return BloomParameters(num_bits, num_hashes)


def false_positive_rate(num_bits: int, num_hashes: int, items: int) -> float:
    """Expected false-positive rate after ``items`` distinct inserts: (1 - e^(-k n / m))^k."""
    return _false_positive_rate(num_bits, num_hashes, items)
