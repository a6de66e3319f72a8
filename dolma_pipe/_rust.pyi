"""Type stubs for the Rust extension `dolma_pipe._rust` (built from rust_bloom/ by maturin).

Import from `dolma_pipe.bloom`, which documents the semantics; this file only types them.
"""

from collections.abc import Iterable
from os import PathLike
from typing import Final, Literal, TypedDict, final

from dolma_pipe.errors import DolmaPipeError

_Key = str | bytes
_StrPath = str | PathLike[str]

DEFAULT_SEED: Final[int]
FORMAT_VERSION: Final[int]
MAX_HASHES: Final[int]
MAX_BITS: Final[int]

class BloomFileError(DolmaPipeError, ValueError):
    """A file is not a usable Bloom filter: bad magic, unsupported version, truncated,
    corrupted header or bit array, or unsealed. The message names the file and the problem."""

@final
class BloomFilter:
    """A Bloom filter over str/bytes keys (a str is hashed as its UTF-8 bytes)."""

    def __new__(
        cls,
        expected_items: int | None = None,
        fp_rate: float | None = None,
        *,
        num_bits: int | None = None,
        num_hashes: int | None = None,
        seed: int = ...,
    ) -> BloomFilter: ...
    @staticmethod
    def create_shared(
        path: _StrPath,
        expected_items: int | None = None,
        fp_rate: float | None = None,
        *,
        num_bits: int | None = None,
        num_hashes: int | None = None,
        seed: int = ...,
        overwrite: bool = False,
    ) -> BloomFilter: ...
    @staticmethod
    def open_shared(path: _StrPath, *, readonly: bool = False, verify: bool = True) -> BloomFilter: ...
    @staticmethod
    def load(path: _StrPath, *, verify: bool = True) -> BloomFilter: ...
    def save(self, path: _StrPath) -> None: ...
    def insert(self, key: _Key) -> bool:
        """Add the key; return True if it was (probably) present already."""
    def contains(self, key: _Key) -> bool: ...
    def __contains__(self, key: _Key, /) -> bool: ...
    def insert_many(self, keys: Iterable[_Key]) -> list[bool]:
        """insert() for each key in order, without the GIL; one "was present" flag per key."""
    def contains_many(self, keys: Iterable[_Key]) -> list[bool]: ...
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
def bloom_file_header(path: _StrPath) -> dict[str, int | bool]:
    """num_hashes, num_bits, seed, sealed, count and checksum of a filter file's header (checked;
    BloomFileError if it is not a filter's), without reading its bit array."""

def false_positive_rate(num_bits: int, num_hashes: int, items: int) -> float: ...
def _reopen_shared(path: _StrPath, readonly: bool) -> BloomFilter: ...

# -- rule-tagger kernels (rust_bloom/src/text_stats/) ---------------------------------------
# Used by taggers/builtin/gopher.py and c4.py, whose Python code is the reference; offsets and
# lengths are code points, character classes are CPython's, and lower-cased text (``lower``) is
# Python's ``str.lower()`` passed in (None: the text is ASCII or needs no lower-casing).
# Batches run with the GIL released.

_GopherMode = Literal["paper", "dolma_v1", "dolma_v2"]

@final
class GopherKernel:
    """The Gopher measures in one of three modes: the paper's (our ``gopher``, per-language stop
    words fixed at construction) or Dolma 1.2.1's ``gopher_v1`` / ``gopher_v2`` definitions."""

    def __new__(cls, stop_words: list[tuple[str, list[str], list[str]]], mode: _GopherMode = "paper") -> GopherKernel:
        """stop_words (paper mode): (language, regex alternatives in match order (lower-cased), word
        set (lower-cased)). ValueError for an unknown mode or an empty stop word."""

    @property
    def mode(self) -> _GopherMode: ...
    def grouped_batch(self, texts: list[str]) -> list[dict[str, list[list[float]]]]:
        """Dolma modes: per text, the grouped mapping Dolma's tagger writes, in its span order:
        ``{type: [[0, len(text), round(value, 5)]]}`` (the n-gram types only for n up to the
        number of words). ValueError in paper mode."""

    def stats_batch(self, texts: list[str], lowers: list[str | None], langs: list[str | None]) -> list[dict[str, float]]:
        """Paper mode (ValueError otherwise): per text, its measures exactly as gopher.py's ``attributes`` returns them: a dict by
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

_LineSpan = tuple[int, int]  # (start, end) in code points

@final
class C4Result:
    """One document's C4 result; the fields are named as c4.py's attribute types. Line spans
    are (start, end) in code points, the newline inside."""

    @property
    def lines_with_no_ending_punctuation(self) -> list[_LineSpan]: ...
    @property
    def lines_with_too_few_words(self) -> list[_LineSpan]: ...
    @property
    def lines_ending_with_ellipsis(self) -> list[_LineSpan]: ...
    @property
    def lines_with_javascript(self) -> list[_LineSpan]: ...
    @property
    def lines_with_policy(self) -> list[_LineSpan]: ...
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

_C4Mode = Literal["paper", "dolma_v1", "dolma_v2"]

@final
class C4Kernel:
    """The C4 line and page rules in one of three modes: the paper's with our verdict (``c4``) or
    Dolma 1.2.1's ``c4_v1`` / ``c4_v2`` (bad words through Aho-Corasick)."""

    def __new__(cls, bad_words: list[str], min_words_per_line: int, mode: _C4Mode = "paper") -> C4Kernel:
        """bad_words: paper mode, the lower-cased, stripped list entries; Dolma modes, the list's
        lines as they are (either way an entry with a space is a phrase). ValueError for an unknown mode."""

    @property
    def mode(self) -> _C4Mode: ...
    def predict_batch(self, texts: list[str], lowers: list[str | None], min_sentences: int) -> list[C4Result]:
        """Per text, its ``C4Result``. ValueError if the lists differ in length."""

    def predict_grouped_batch(
        self, texts: list[str], lowers: list[str | None], min_sentences: int = 3
    ) -> list[dict[str, list[list[float]]]]:
        """Per text: its ``C4Result`` as the grouped mapping ``{type: [[start, end, score], ...]}``.
        Paper mode: what ``Tagger.group`` makes of c4.py's spans (the two default line types always
        present, the other line types and the flags only when not empty/true, then ``line_count``,
        ``kept_sentence_count`` and ``keep``). Dolma modes: what Dolma writes (the two line types
        and the flags only when not empty/true, then ``line_count``)."""

    def has_bad_word(self, lower: str) -> bool:
        """The mode's bad-word test on lower-cased text (paper: c4.py ``has_bad_word``; Dolma: a
        whole ``split()`` word of the list, or a phrase of the list anywhere)."""

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

def char_length_grouped_batch(texts: list[str]) -> list[dict[str, list[list[float]]]]:
    """Per text, what Dolma's ``char_length_with_paragraphs_v1`` writes: ``paragraph`` spans over
    Dolma's paragraphs (non-blank lines with their newline) scored by their length (absent when
    there is none), then ``document`` scored by ``len(text)``."""

def pii_windows_batch(
    texts: list[str],
) -> list[tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]]]]:
    """Per text, where taggers/builtin/pii.py's patterns can match: (e-mail, phone, IPv4, IPv6)
    windows, each a list of (start, end) code point offsets covering runs of consecutive lines
    that hold an ``@`` / 8 decimal digits / a digit-dot-digit / ``::`` or 7 colons (newline
    excluded). No pattern crosses a newline, so ``finditer(text, start, end)`` over them finds
    every match a run over the whole text finds."""

# -- mixer rules (rust_bloom/src/filters/) --------------------------------------------------
# Used through dolma_pipe/filters.py, which documents the semantics (Dolma's mixer's).

def check_rule(kind: str, syntax_name: str, expr: str) -> tuple[int | None, str] | None:
    """Compile one rule: ``kind`` "filter", "span" (a span selector) or "replacement";
    ``syntax_name`` "jq" or "jsonpath". None when it compiles, else (1-based column or None, message)."""

def rule_attributes(syntax_name: str, expr: str) -> list[str]:
    """The attribute names a jq or JSONPath rule (or span selector) reads as fixed keys of the
    document's ``attributes``, in order; ValueError when it does not parse."""

def gzip_member(data: bytes, level: int) -> bytes:
    """``data`` as one complete gzip member (mtime 0, no name) at ``level`` (0-9), by zlib-rs."""

@final
class GzipInflater:
    """Decompresses a gzip file (one or more members) fed chunk by chunk, by zlib-rs."""

    def __new__(cls) -> GzipInflater: ...
    def feed(self, chunk: bytes) -> bytes:
        """The bytes this chunk completes; ValueError if the data is not gzip or is corrupt."""
    def finish(self) -> bytes:
        """The last bytes; ValueError if the file ends inside a member (truncated)."""

@final
class DocumentMixer:
    """A stream's rules over batches of raw document lines (not thread-safe: one per process)."""

    def __new__(
        cls,
        filter_syntax: str | None,
        include: list[str],
        exclude: list[str],
        spans: list[tuple[str, str, float | None, float | None, str]],
        discard_fields: list[str],
        min_text_length: int,
        attribute_sets: int,
        provenance: bool,
        collect: bool,
    ) -> DocumentMixer:
        """spans: (selector, syntax, min_score, max_score, replacement) per span_replacement entry.
        ValueError if a rule does not compile."""

    def set_write(self, write: bool) -> None:
        """False: decide and count only (no span replacement, no output lines)."""
    def process(self, docs: list[bytes], linenos: list[int], attrs: list[list[bytes]], file_name: str) -> dict[str, object]:
        """Keys: out (bytes, kept documents as JSON lines), line_lengths, consumed (rows taken per
        attribute set), docs, kept, removed_include, removed_exclude (per exclude rule: the
        documents it removed, as the first exclude rule that matched), matched_include and
        matched_exclude (per rule: the documents it matched, every rule evaluated on every
        document), failed_include and failed_exclude (per rule: documents it failed on where it
        did not decide, counted as no match), removed_short, spans_replaced, bytes_in, bad
        ([(index, kind, message)]), ids (every good document's id), texts and keys
        (kept documents' texts and xxh3 id hashes, with ``collect``), matches (per good document:
        the rules it matched, include i as bit i, exclude j as bit includes + j, the first 64
        rules), error (None or (kind,
        doc index, set, row, message), kind "mismatch", "ended", "bad_row" or "rule")."""

# -- MinHash (rust_bloom/src/minhash/); use dolma_pipe.minhash ---------------------------------

@final
class MinHasher:
    """Shingling settings plus ``num_perm`` seeded hash functions (see dolma_pipe.minhash)."""

    def __new__(cls, num_perm: int = 128, *, ngram: int = 5, lowercase: bool = True, words: str = "word", seed: int = 1) -> MinHasher: ...
    @property
    def num_perm(self) -> int: ...
    @property
    def ngram(self) -> int: ...
    @property
    def lowercase(self) -> bool: ...
    @property
    def words(self) -> str: ...
    @property
    def seed(self) -> int: ...
    def words_of(self, text: str) -> list[str]: ...
    def shingles(self, text: str) -> list[int]: ...
    def shingle_set(self, text: str) -> list[int]: ...
    def jaccard(self, a: str, b: str) -> float: ...
    def signature(self, text: str) -> list[int]: ...
    def signatures(self, texts: list[str]) -> list[list[int]]: ...

def optimal_bands(threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5) -> tuple[int, int]: ...
def candidate_probability(j: float, bands: int, rows: int) -> float: ...
def band_hashes(signature: list[int], bands: int, rows: int, seed: int) -> list[int]: ...
def jaccard(a: list[int], b: list[int]) -> float: ...

# -- dedup kernels (rust_bloom/src/dedup/); used by dolma_pipe.stages.dedup --------------------
# Records cross the boundary as bytes in the formats of rust_bloom/src/dedup/records.rs.

def key_path_steps(path: str) -> list[str | int]:
    """The steps of a dedupe key's JSONPath ($.a.b, $['a'], $.a[0]); ValueError if unsupported."""

@final
class DecontamSet:
    @staticmethod
    def from_bytes(data: bytes) -> DecontamSet: ...
    def __len__(self) -> int: ...
    @property
    def texts(self) -> int: ...

@final
class DecontamBuilder:
    def __new__(
        cls,
        mode: str,
        *,
        separator: str = "\n",
        min_words: int = 13,
        ngram: int = 13,
        lowercase: bool = True,
        words: str = "word",
        seed: int = 1,
    ) -> DecontamBuilder: ...
    def add_texts(self, texts: list[str]) -> None: ...
    def __len__(self) -> int: ...
    @property
    def texts(self) -> int: ...
    def to_bytes(self) -> bytes: ...

@final
class ScanPlan:
    def __new__(
        cls,
        *,
        min_length: int = 0,
        min_words: int = 0,
        skip_empty: bool = False,
        document_key: str | None = None,
        document_buckets: int = 1,
        paragraph_separator: str | None = None,
        ngram_length: int = 0,
        ngram_stride: int = 0,
        skip_short_paragraphs: bool = False,
        paragraph_buckets: int = 1,
        minhash: dict[str, object] | None = None,
        decontamination: DecontamSet | None = None,
    ) -> ScanPlan: ...

class _ScanCounts(TypedDict):
    lines: int
    blank_lines: int
    documents: int
    python_lines: int
    document_keys: int
    documents_without_key: int
    documents_key_skipped: int
    paragraphs: int
    paragraph_keys: int
    paragraphs_skipped: int
    minhash_documents: int
    documents_without_shingles: int
    decontaminated_paragraphs: int

class _ScanOutput(TypedDict):
    meta: bytes
    documents: bytes | None
    paragraphs: bytes | None
    bands: bytes | None
    signatures: bytes | None
    sets: bytes | None
    last_line: int
    counts: _ScanCounts

@final
class DedupScanner:
    """One input file's scan: push bytes, drain lines (a line the fast path leaves to Python comes
    back as (line number, raw line)), add the documents Python read, finish."""

    def __new__(cls, plan: ScanPlan) -> DedupScanner: ...
    def push(self, data: bytes) -> None: ...
    def push_gzip(self, data: bytes) -> None:
        """ValueError on corrupt gzip data (what came before it is kept)."""
    @property
    def gzip_truncated(self) -> bool: ...
    def drain(self) -> tuple[int, bytes] | None: ...
    def end_of_input(self) -> tuple[int, bytes] | None: ...
    def add_document(self, line: int, id: str, text: str, key: object = None) -> None: ...
    @property
    def last_line(self) -> int: ...
    def finish(self) -> _ScanOutput: ...

@final
class FirstOccurrence:
    """First occurrences of one hash range's keys, fed file by file in the global order."""

    def __new__(cls, record_size: int, files: int) -> FirstOccurrence: ...
    def add(self, file: int, records: bytes, removed: list[int] = ...) -> None: ...
    def finish(self) -> tuple[bytes, int, int, int]:
        """(DUP records bucketed by file, duplicates, records considered, distinct keys)."""

def band_candidates(slices: list[tuple[int, bytes]], files: int, max_group: int) -> tuple[bytes, int]: ...
def verify_pairs(
    groups: list[tuple[int, list[bytes]]], nodes: list[int], values: list[bytes], mode: str, threshold: float
) -> list[tuple[bytes, int, int]]:
    """Per later file (its index, its PAIR buffers): (VERIFIED records, distinct pairs, kept)."""

DEDUP_BUCKET_MAGIC: Final[bytes]
DEDUP_META_MAGIC: Final[bytes]
DEDUP_SETS_MAGIC: Final[bytes]
DEDUP_RECORD_SIZES: Final[dict[str, int]]
DEDUP_WHOLE_DOCUMENT: Final[int]

def bucketed_file(records: bytes, record_size: int) -> bytes:
    """A bucketed work file of one bucket holding ``records``."""

def cluster_pairs(slices: list[tuple[int, bytes]], record_size: int, files: int) -> tuple[bytes, bytes]: ...

@final
class BloomSetter:
    """Bloom mode's test-and-set in the global order (a filter loaded from ``path``, or new)."""

    def __new__(cls, path: str | None, num_bits: int, num_hashes: int, seed: int) -> BloomSetter: ...
    def insert(self, records: bytes, record_size: int, skip: list[int]) -> tuple[bytes, int]:
        """(DUP records of the keys already present, keys inserted) for one file's key records."""
    def save(self, path: str) -> None: ...
    def current_fp_rate(self) -> float: ...
    @property
    def num_bits(self) -> int: ...
    @property
    def num_hashes(self) -> int: ...

def render_attributes(
    meta: bytes,
    *,
    documents: str | None = None,
    paragraphs: str | None = None,
    by_ngram: bool = False,
    threshold: float = 1.0,
    minhash: str | None = None,
    decontamination: str | None = None,
    substrings: str | None = None,
    doc_dups: bytes = ...,  # empty
    para_dups: bytes = ...,  # empty
    members: bytes = ...,  # empty
    substring_spans: bytes = ...,  # empty
) -> tuple[bytes, dict[str, int]]:
    """One file's attribute rows as JSON lines, and the marks written (documents, paragraphs,
    near_duplicates, contaminated, substrings)."""

def bucketed_by_first_u32(records: bytes, record_size: int, buckets: int) -> bytes:
    """A bucketed work file, each record in the bucket its first u32 names."""

# ---- workfile: the checksum trailer of every work file (rust_bloom/src/workfile/) -------------

WORKFILE_MAGIC: Final[bytes]
WORKFILE_FOOTER_LEN: Final[int]
WORKFILE_VERSION: Final[int]
WORKFILE_BLOCK: Final[int]

@final
class WorkFileSealer:
    """Digests a work file's content as it is written; ``finish()`` gives the trailer."""

    def __new__(cls, block: int = ...) -> WorkFileSealer: ...
    def update(self, data: bytes) -> None: ...
    @property
    def length(self) -> int: ...
    def finish(self) -> bytes: ...

def workfile_footer(footer: bytes, file_len: int) -> tuple[int, int, int]:
    """(content length, block size, digest table length) from a file's last WORKFILE_FOOTER_LEN
    bytes, checked against the file's length; ValueError(problem, message) if they do not agree."""

@final
class WorkFileTable:
    """A file's digest table, checked against its footer (ValueError(problem, message) if not)."""

    def __new__(cls, footer: bytes, table: bytes) -> WorkFileTable: ...
    @property
    def content_len(self) -> int: ...
    @property
    def block(self) -> int: ...
    def blocks_for(self, start: int, length: int) -> tuple[int, int]: ...
    def check(self, first: int, data: bytes) -> None:
        """ValueError(problem, message) unless ``data`` (whole blocks from block ``first``) matches."""

def workfile_seal(content: bytes, block: int = ...) -> bytes: ...

# ---- suffix: suffix arrays (rust_bloom/src/suffix/) -------------------------------------------

SUFFIX_KEYS: Final[int]
SUFFIX_SEPARATOR: Final[int]
SUFFIX_SYMBOL_BYTES: Final[dict[str, int]]
# Each record handed to or taken from Python, as (field, numpy type) pairs (suffix/records.rs).
SUFFIX_RECORDS: Final[dict[str, list[tuple[str, str]]]]

def build_suffix_array(
    text: _StrPath, symbol: str, out: _StrPath, *, offset: int = 0, length: int | None = None, seal: bool = False
) -> tuple[int, int, int]:
    """Writes the packed suffix array of a text region; (symbols, bytes per position, xxh3-64 of the positions written)."""

@final
class SuffixIndex:
    """A text region and its packed suffix array, read in place; a position past the text (a
    damaged array) is a ValueError wherever it is read."""

    def __new__(
        cls, text: _StrPath, symbol: str, sa: _StrPath, width: int, *, offset: int = 0, length: int | None = None, sa_offset: int = 0
    ) -> SuffixIndex: ...
    def __len__(self) -> int: ...
    def range(self, pattern: bytes | list[int]) -> tuple[int, int]: ...
    def count(self, pattern: bytes | list[int]) -> int: ...
    def positions(self, lo: int, hi: int, limit: int | None = None) -> list[int]: ...
    def longest_matches(self, query: bytes | list[int], cap: int = ...) -> list[tuple[int, int, int]]: ...
    def match_lengths(self, query: bytes | list[int], cap: int = ...) -> bytes: ...
    def symbols(self, start: int, end: int) -> bytes | list[int]: ...

_ShardSpec = tuple[str, int, int, str, int]

def suffix_repeated_windows(
    shards: list[_ShardSpec], length: int, key_lo: int, key_hi: int, keep_first: bool, separator: int | None = None
) -> bytes: ...
def suffix_repeated_ranges(
    shards: list[_ShardSpec], length: int, key_lo: int, key_hi: int, keep_first: bool, separator: int | None = None
) -> bytes: ...
def suffix_char_ranges(text: str, offset: int, length: int, doc_starts: list[int], ranges: bytes) -> bytes: ...
def suffix_key_bounds(shard: _ShardSpec, parts: int) -> list[int]: ...
def file_xxh3(path: _StrPath) -> int: ...
def bytes_xxh3(data: bytes) -> int: ...

@final
class DocumentColumns:
    """The report's per-document pass (rust_bloom/src/report/): lines in, columns out."""

    def __new__(cls, sample_bytes: int) -> DocumentColumns: ...
    def add(self, docs: list[bytes], attrs: list[list[bytes]]) -> list[str]:
        """The batch's ids; ValueError naming what this pass does not read (the file then takes the Python pass)."""
    @property
    def docs(self) -> int: ...
    @property
    def sources(self) -> list[str]: ...
    @property
    def keys(self) -> list[str]: ...
    def documents(self) -> dict[str, bytes]: ...
    def column(self, k: int) -> dict[str, bytes]: ...
    def present_from(self, name: str, start: int) -> list[int]: ...
    @property
    def sample_texts(self) -> list[list[str]]: ...

# ---- extract: HTML main content by rs-trafilatura (rust_bloom/src/extract/) -------------------

def rs_trafilatura_extract(html: str, url: str | None = None) -> tuple[str, float, str]:
    """(text, quality estimate 0-1, page type) of one page; ValueError when the crate fails on it,
    RuntimeError when it panics (caught)."""

HTML_FLAT_ELEMENTS: Final[list[str]]

def html_nested_deeper(html: bytes, limit: int) -> bool:
    """Whether the page (its UTF-8 bytes) nests elements deeper than ``limit``: the tags of
    ``<(/?)([A-Za-z][A-Za-z0-9]*)[^>]*>`` in order, each opening one deeper, each closing one
    shallower (never below 0), those of ``HTML_FLAT_ELEMENTS`` (void elements and elements HTML
    closes by itself) neither; False without a scan when it has no more ``<`` than ``limit``."""

def html_tag_counts(html: str) -> tuple[int, int, int, int, int, bool, bool, bool]:
    """(tags, links, paragraphs, cells, list_items, article, main, article_body): the counts of
    ``<``, ``<a ``, ``<p``, ``<td``, ``<li`` in ``html`` and whether it holds ``<article``, ``<main``
    and ``"articleBody"`` (case-sensitive, as ``str.count`` and ``in`` would answer)."""

# ---- line_filter: resiliparse_refined's line features and trees (rust_bloom/src/line_filter/) ----

LINE_FEATURES: Final[list[str]]

def line_features(full: str, full_lower: str, main: str, outside: str, titles: list[str]) -> tuple[list[str], list[str], list[bool], bytes]:
    """(lines, raws, blanks, x) of a page: its non-empty lines of ``full`` stripped and
    right-stripped, whether an empty line comes before each, and their features (float64 rows of
    ``LINE_FEATURES`` as bytes). ``full_lower`` is ``full.lower()``; ValueError when its lines
    do not match ``full``'s."""

@final
class LineFilter:
    """The line model's complete trees of ``depth`` levels (one row a tree: splits breadth-first,
    then leaves), its log-odds ``threshold`` and ``fallback_share``; ValueError when malformed."""

    def __new__(
        cls,
        depth: int,
        base: float,
        split_feature: list[list[int]],
        split_threshold: list[list[float]],
        leaf: list[list[float]],
        threshold: float,
        fallback_share: float,
    ) -> LineFilter: ...
    def log_odds(self, x: bytes) -> bytes:
        """Each row's log-odds (float64 bytes) for ``x``, float64 rows of ``LINE_FEATURES``."""
    def extract(self, full: str, full_lower: str, main: str, outside: str, titles: list[str]) -> str:
        """The page's kept lines (blocks apart by an empty line), or ``main`` when they hold fewer
        words than ``fallback_share`` of it; empty for a page without lines."""
