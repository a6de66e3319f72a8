"""Type stubs for the Rust extension `dolma_pipe._rust` (built from rust_bloom/ by maturin).

Import from `dolma_pipe.bloom`, which documents the semantics; this file only types them.
"""

from collections.abc import Iterable
from os import PathLike
from typing import Final

Key = str | bytes
StrPath = str | PathLike[str]

DEFAULT_SEED: Final[int]
FORMAT_VERSION: Final[int]
MAX_HASHES: Final[int]

class BloomFileError(ValueError):
    """A file is not a usable Bloom filter: bad magic, unsupported version, truncated,
    corrupted header or bit array, or unsealed. The message names the file and the problem."""

class BloomFilter:
    """A Bloom filter over str/bytes keys (a str is hashed as its UTF-8 bytes)."""

    def __init__(
        self,
        expected_items: int | None = None,
        fp_rate: float | None = None,
        *,
        num_bits: int | None = None,
        num_hashes: int | None = None,
        seed: int = ...,
    ) -> None: ...
    @staticmethod
    def create_shared(
        path: StrPath,
        expected_items: int | None = None,
        fp_rate: float | None = None,
        *,
        num_bits: int | None = None,
        num_hashes: int | None = None,
        seed: int = ...,
        overwrite: bool = False,
    ) -> BloomFilter: ...
    @staticmethod
    def open_shared(path: StrPath, *, readonly: bool = False, verify: bool = True) -> BloomFilter: ...
    @staticmethod
    def load(path: StrPath, *, verify: bool = True) -> BloomFilter: ...
    def save(self, path: StrPath) -> None: ...
    def insert(self, key: Key) -> bool:
        """Add the key; return True if it was (probably) present already."""
    def contains(self, key: Key) -> bool: ...
    def __contains__(self, key: Key) -> bool: ...
    def insert_many(self, keys: Iterable[Key]) -> list[bool]:
        """insert() for each key in order, without the GIL; one "was present" flag per key."""
    def contains_many(self, keys: Iterable[Key]) -> list[bool]: ...
    def seal(self) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> BloomFilter: ...
    def __exit__(self, *exc: object) -> bool: ...
    @property
    def num_bits(self) -> int: ...
    @property
    def num_hashes(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def path(self) -> str | None: ...
    @property
    def is_shared(self) -> bool: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def sealed(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def count(self) -> int:
        """Inserts that reported "new" (distinct keys, minus those lost to false positives)."""
    def bits_set(self) -> int: ...
    def estimated_count(self) -> float: ...
    def current_fp_rate(self) -> float: ...
    def __reduce__(self) -> tuple[object, tuple[str, bool]]: ...

def optimal_parameters(expected_items: int, fp_rate: float) -> tuple[int, int]: ...
def false_positive_rate(num_bits: int, num_hashes: int, items: int) -> float: ...
def _reopen_shared(path: StrPath, readonly: bool) -> BloomFilter: ...

# -- rule-tagger kernels (rust_bloom/src/text_stats/) ---------------------------------------
# Used by taggers/builtin/gopher.py and c4.py, whose Python code is the reference; offsets and
# lengths are code points, character classes are CPython's, and lower-cased text (``lower``) is
# Python's ``str.lower()`` passed in (None: the text is ASCII or needs no lower-casing).
# Batches run with the GIL released.

GopherRow = tuple[int, int, list[float], int | None, int]
Spans = list[tuple[int, int]]
C4Row = tuple[
    tuple[Spans, Spans, Spans, Spans, Spans],
    tuple[bool, bool, bool, bool, bool],
    tuple[int, int, int],
]

class GopherKernel:
    """The Gopher measures of gopher_v1, with per-language stop words fixed at construction."""

    def __init__(self, stop_words: list[tuple[str, list[str], list[str]]]) -> None:
        """stop_words: (language, regex alternatives in match order (lower-cased), word set (lower-cased))."""

    def stats_batch(
        self, texts: list[str], lowers: list[str | None], langs: list[str | None]
    ) -> list[GopherRow]:
        """Per text: (character_count, word_count, the 21 float measures in gopher.py's order
        (mean/median word length, hash/ellipsis/symbol ratios, alpha fraction, bullet and
        ellipsis line fractions, duplicate line/paragraph fractions and their characters, the
        nine n-gram fractions), required_word_count (None: no list for the language),
        unspaced-script words). ValueError if the lists differ in length."""

class C4Kernel:
    """The C4 line and page rules of c4_v1/c4_v2 (bad words through Aho-Corasick)."""

    def __init__(self, bad_words: list[str], min_words_per_line: int) -> None:
        """bad_words: the lower-cased, stripped list entries (phrases contain a space)."""

    def predict_batch(self, texts: list[str], lowers: list[str | None]) -> list[C4Row]:
        """Per text: ((no-ending-punctuation, too-few-words, ellipsis, javascript, policy) line
        spans as (start, end) code points with the newline inside, (naughty word, javascript,
        lorem ipsum, curly brace, policy) flags, (line count, kept sentences, characters))."""

    def predict_grouped_batch(
        self, texts: list[str], lowers: list[str | None], min_sentences: int
    ) -> list[dict[str, list[list[float]]]]:
        """Per text: the result of ``predict_batch`` as Dolma's grouped mapping
        ``{type: [[start, end, score], ...]}`` (what ``Tagger.group`` makes of c4.py's spans,
        the two default line types always present, ``keep`` from ``min_sentences``)."""

    def has_bad_word(self, lower: str) -> bool:
        """c4.py ``has_bad_word`` on lower-cased text."""
