"""Suffix arrays, the typed Python face of ``rust_bloom/src/suffix/``.

A text is a file region of symbols: bytes (documents' UTF-8 text, documents separated by
:data:`SEPARATOR`, a byte UTF-8 never holds) or 16/32-bit token ids (a token shard, read in
place). Its suffix array (built by ``libsais``) is a file of packed positions, ``width`` bytes
each. Everything reads files in place (memory-mapped) and runs without the GIL:

- :func:`build_array` writes the array of a text (and says what the file hashes to);
- :class:`SuffixIndex` answers the range of suffixes that start with a pattern (so its count
  and positions), and the longest match at each start of a query; an array that holds a position
  past its text (a damaged file) raises ``ValueError``, never a panic;
- :func:`repeated_windows` merges several shards' arrays (never one array over all of them)
  to find every window of ``length`` bytes seen before (substring deduplication).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from dolma_pipe import _rust

Symbol = Literal["u8", "u16", "u32"]
# The formats are Rust's (rust_bloom/src/suffix/records.rs and mod.rs), read from the module.
# Between documents of a byte text: 0xFF is no byte of UTF-8, so no match crosses it.
SEPARATOR: int = _rust.SUFFIX_SEPARATOR
KEYS: int = _rust.SUFFIX_KEYS
# Bytes per symbol of a text, by symbol name.
SYMBOL_BYTES: dict[str, int] = _rust.SUFFIX_SYMBOL_BYTES
# A (shard, position) record of repeated_windows.
WINDOW = np.dtype(_rust.SUFFIX_RECORDS["window"])
# A byte range of a shard (repeated_ranges), and a character range of a document (char_ranges).
RANGE = np.dtype(_rust.SUFFIX_RECORDS["range"])
CHAR_RANGE = np.dtype(_rust.SUFFIX_RECORDS["char_range"])
# A byte range of one text (what char_ranges takes), and a match length (match_lengths' items).
BYTE_RANGE = np.dtype(_rust.SUFFIX_RECORDS["byte_range"])
MATCH_LENGTH = np.dtype(_rust.SUFFIX_RECORDS["match_length"])["length"]


def symbol_for(dtype: np.dtype | str) -> Symbol:
    """The symbol of a numpy dtype of a text (uint8, uint16, uint32)."""
    name = np.dtype(dtype).name
    symbols: dict[str, Symbol] = {"uint8": "u8", "uint16": "u16", "uint32": "u32"}
    if name not in symbols:
        raise ValueError(f"a text of {name} cannot be indexed (uint8, uint16 or uint32)")
    return symbols[name]


@dataclass(frozen=True)
class Built:
    """A suffix array as :func:`build_array` wrote it."""

    symbols: int
    width: int  # bytes per position
    xxh3: int  # xxh3-64 of the positions written (a work file's trailer left out): what the file hashes to


def build_array(text: str, symbol: Symbol, out: str, *, offset: int = 0, length: int | None = None, seal: bool = False) -> Built:
    """Writes the suffix array of ``text[offset:offset+length]`` packed to ``out`` (local paths;
    with a work file's checksum trailer when ``seal``)."""
    return Built(*_rust.build_suffix_array(text, symbol, out, offset=offset, length=length, seal=seal))


def build(text: str, symbol: Symbol, out: str, *, offset: int = 0, length: int | None = None, seal: bool = False) -> tuple[int, int]:
    """:func:`build_array`'s (symbols, bytes per position)."""
    built = build_array(text, symbol, out, offset=offset, length=length, seal=seal)
    return built.symbols, built.width


def file_xxh3(path: str) -> int:
    """The xxh3-64 of a whole local file, read without the GIL (threads hash files at once)."""
    return _rust.file_xxh3(path)


def bytes_xxh3(data: bytes) -> int:
    return _rust.bytes_xxh3(data)


class SuffixIndex:
    """One text and its suffix array, read in place."""

    def __init__(self, text: str, symbol: Symbol, sa: str, width: int, *, offset: int = 0, length: int | None = None):
        self.symbol = symbol
        self._inner = _rust.SuffixIndex(text, symbol, sa, width, offset=offset, length=length)

    def __len__(self) -> int:
        return len(self._inner)

    def range(self, pattern: bytes | list[int]) -> tuple[int, int]:
        """``(lo, hi)``: the sorted suffixes that start with ``pattern``."""
        return self._inner.range(pattern)

    def count(self, pattern: bytes | list[int]) -> int:
        return self._inner.count(pattern)

    def positions(self, lo: int, hi: int, limit: int | None = None) -> list[int]:
        """Text positions of the sorted suffixes ``lo..hi`` (the first ``limit``)."""
        return self._inner.positions(lo, hi, limit)

    def longest_matches(self, query: bytes | list[int], cap: int = 1 << 20) -> list[tuple[int, int, int]]:
        """Per start of ``query``: (length of its longest prefix found in the text, lo, hi)."""
        return self._inner.longest_matches(query, cap)

    def match_lengths(self, query: bytes | list[int], cap: int = 1 << 20) -> np.ndarray:
        """Per start of ``query``: the length of its longest prefix found in the text (at most
        ``cap``), a uint32 array."""
        return np.frombuffer(self._inner.match_lengths(query, cap), dtype=MATCH_LENGTH)

    def symbols(self, start: int, end: int) -> bytes | list[int]:
        return self._inner.symbols(start, end)


@dataclass(frozen=True)
class ShardRef:
    """A byte text (a region of a file) and its suffix array, for :func:`repeated_windows`."""

    text: str
    offset: int
    length: int
    sa: str
    width: int

    def spec(self) -> tuple[str, int, int, str, int]:
        return (self.text, self.offset, self.length, self.sa, self.width)


def repeated_windows(shards: list[ShardRef], length: int, key_lo: int, key_hi: int, keep_first: bool) -> np.ndarray:
    """The windows of ``length`` bytes (within one document) to remove among the suffixes whose
    first two bytes' key is in ``[key_lo, key_hi)``: every occurrence after the first in the
    global order (shard, then position) when ``keep_first``, else every occurrence of a repeated
    window. A :data:`WINDOW` array, unsorted."""
    raw = _rust.suffix_repeated_windows([s.spec() for s in shards], length, key_lo, key_hi, keep_first, SEPARATOR)
    return np.frombuffer(raw, dtype=WINDOW)


def repeated_ranges(shards: list[ShardRef], length: int, key_lo: int, key_hi: int, keep_first: bool) -> np.ndarray:
    """:func:`repeated_windows` joined into byte ranges: a :data:`RANGE` array sorted by shard and start."""
    raw = _rust.suffix_repeated_ranges([s.spec() for s in shards], length, key_lo, key_hi, keep_first, SEPARATOR)
    return np.frombuffer(raw, dtype=RANGE)


def char_ranges(text: ShardRef, doc_starts: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """Sorted, disjoint byte ranges (``start``, ``end`` fields) of a text of documents as whole
    characters within their documents (a :data:`CHAR_RANGE` array): a window's edge inside a
    multi-byte character keeps that character."""
    pairs = np.empty(len(ranges), dtype=BYTE_RANGE)
    pairs["start"], pairs["end"] = ranges["start"], ranges["end"]
    raw = _rust.suffix_char_ranges(text.text, text.offset, text.length, [int(x) for x in doc_starts], pairs.tobytes())
    return np.frombuffer(raw, dtype=CHAR_RANGE)


def key_bounds(shard: ShardRef, parts: int) -> list[int]:
    """Key boundaries (``parts + 1`` values, 0 to :data:`KEYS`) splitting ``shard``'s suffixes
    into nearly equal runs: how the search for repeats splits into tasks."""
    return _rust.suffix_key_bounds(shard.spec(), parts)
