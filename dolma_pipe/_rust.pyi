"""Type stubs for the Rust extension `dolma_pipe._rust` (built from rust_bloom/ by maturin).

Import from `dolma_pipe.bloom`, which documents the semantics; this file only types them.
"""

from collections.abc import Iterable
from os import PathLike
from typing import Final

from dolma_pipe.errors import DolmaPipeError

Key = str | bytes
StrPath = str | PathLike[str]

DEFAULT_SEED: Final[int]
FORMAT_VERSION: Final[int]
MAX_HASHES: Final[int]

class BloomFileError(DolmaPipeError, ValueError):
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

class GopherKernel:
    """The Gopher measures of gopher_v1, with per-language stop words fixed at construction."""

    def __init__(self, stop_words: list[tuple[str, list[str], list[str]]]) -> None:
        """stop_words: (language, regex alternatives in match order (lower-cased), word set (lower-cased))."""

    def stats_batch(self, texts: list[str], lowers: list[str | None], langs: list[str | None]) -> list[dict[str, float]]:
        """Per text, its measures exactly as gopher.py's ``attributes`` returns them: a dict by
        type name, in this order: ``character_count`` and ``word_count`` (int),
        ``mean_word_length``, ``median_word_length``, ``hash_to_word_ratio``,
        ``ellipsis_to_word_ratio``, ``symbol_to_word_ratio``,
        ``fraction_of_words_with_alpha_character``, ``required_word_count`` (int; only when the
        language has a stop-word list), ``fraction_of_lines_starting_with_bullet_point``,
        ``fraction_of_lines_ending_with_ellipsis``, ``fraction_of_duplicate_lines``,
        ``fraction_of_characters_in_duplicate_lines``, ``fraction_of_duplicate_paragraphs``,
        ``fraction_of_characters_in_duplicate_paragraphs``,
        ``fraction_of_characters_in_most_common_{2,3,4}grams``,
        ``fraction_of_characters_in_duplicate_{5..10}grams``, then ``_unspaced_words`` (int:
        words that are single characters of unspaced scripts; for the verdict, not an
        attribute). ValueError if the lists differ in length."""

LineSpan = tuple[int, int]  # (start, end) in code points

class C4Result:
    """One document's C4 result; the fields are named as c4.py's attribute types. Line spans
    are (start, end) in code points, the newline inside."""

    @property
    def lines_with_no_ending_punctuation(self) -> list[LineSpan]: ...
    @property
    def lines_with_too_few_words(self) -> list[LineSpan]: ...
    @property
    def lines_ending_with_ellipsis(self) -> list[LineSpan]: ...
    @property
    def lines_with_javascript(self) -> list[LineSpan]: ...
    @property
    def lines_with_policy(self) -> list[LineSpan]: ...
    @property
    def has_naughty_word(self) -> bool: ...
    @property
    def has_javascript(self) -> bool: ...
    @property
    def has_lorem_ipsum(self) -> bool: ...
    @property
    def has_curly_brace(self) -> bool: ...
    @property
    def has_policy(self) -> bool: ...
    @property
    def line_count(self) -> int: ...
    @property
    def kept_sentence_count(self) -> int:
        """Sentences left in the lines C4 keeps (the lines of none of the five span types)."""
    @property
    def length(self) -> int:
        """``len(text)``: the end of the document-level spans."""
    @property
    def keep(self) -> bool:
        """``c4_keep`` of this page, with the ``min_sentences`` of the call."""

class C4Kernel:
    """The C4 line and page rules of c4_v1/c4_v2 (bad words through Aho-Corasick)."""

    def __init__(self, bad_words: list[str], min_words_per_line: int) -> None:
        """bad_words: the lower-cased, stripped list entries (phrases contain a space)."""

    def predict_batch(self, texts: list[str], lowers: list[str | None], min_sentences: int) -> list[C4Result]:
        """Per text, its ``C4Result``. ValueError if the lists differ in length."""

    def predict_grouped_batch(self, texts: list[str], lowers: list[str | None], min_sentences: int) -> list[dict[str, list[list[float]]]]:
        """Per text: its ``C4Result`` as Dolma's grouped mapping ``{type: [[start, end, score], ...]}``
        (what ``Tagger.group`` makes of c4.py's spans: the two default line types always present,
        the other line types and the flags only when not empty/true, then ``line_count``,
        ``kept_sentence_count`` and ``keep``)."""

    def has_bad_word(self, lower: str) -> bool:
        """c4.py ``has_bad_word`` on lower-cased text."""

def c4_keep(
    *,
    has_naughty_word: bool,
    has_lorem_ipsum: bool,
    has_curly_brace: bool,
    kept_sentence_count: int,
    min_sentences: int,
) -> bool:
    """The C4 page verdict, the one definition both paths use: drop a page with a bad word, lorem
    ipsum or a curly brace, or with fewer than ``min_sentences`` sentences left in its kept lines."""

# -- mixer rules (rust_bloom/src/filters/) --------------------------------------------------
# Used through dolma_pipe/filters.py, which documents the semantics (Dolma's mixer's).

def check_rule(kind: str, syntax_name: str, expr: str) -> tuple[int | None, str] | None:
    """Compile one rule: ``kind`` "filter", "span" (a span selector) or "replacement";
    ``syntax_name`` "jq" or "jsonpath". None when it compiles, else (1-based column or None, message)."""

def gzip_member(data: bytes, level: int) -> bytes:
    """``data`` as one complete gzip member (mtime 0, no name) at ``level`` (0-9), by zlib-rs."""

class GzipInflater:
    """Decompresses a gzip file (one or more members) fed chunk by chunk, by zlib-rs."""

    def __init__(self) -> None: ...
    def feed(self, chunk: bytes) -> bytes:
        """The bytes this chunk completes; ValueError if the data is not gzip or is corrupt."""
    def finish(self) -> bytes:
        """The last bytes; ValueError if the file ends inside a member (truncated)."""

class DocumentMixer:
    """A stream's rules over batches of raw document lines (not thread-safe: one per process)."""

    def __init__(
        self,
        filter_syntax: str | None,
        include: list[str],
        exclude: list[str],
        spans: list[tuple[str, str, float | None, float | None, str]],
        discard_fields: list[str],
        min_text_length: int,
        attribute_sets: int,
        provenance: bool,
        collect: bool,
    ) -> None:
        """spans: (selector, syntax, min_score, max_score, replacement) per span_replacement entry.
        ValueError if a rule does not compile."""

    def process(self, docs: list[bytes], linenos: list[int], attrs: list[list[bytes]], file_name: str) -> dict[str, object]:
        """Keys: out (bytes, kept documents as JSON lines), line_lengths, consumed (rows taken per
        attribute set), docs, kept, removed_include, removed_exclude (per exclude rule),
        removed_short, spans_replaced, bytes_in, bad ([(index, kind, message)]), ids (every good
        document's id), texts and keys
        (kept documents' texts and xxh3 id hashes, with ``collect``), error (None or (kind,
        doc index, set, row, message), kind "mismatch", "ended", "bad_row" or "rule")."""
