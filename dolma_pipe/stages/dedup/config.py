"""The ``dedup`` config: Dolma's dedupe schema, unchanged, plus dolma-pipe's own sections.

Dolma's keys (``documents``, ``work_dir``, ``dedupe``, ``bloom_filter``, ``processes`` and the
rest of its ``DeduperConfig``) mean what they mean in Dolma 1.2.1, without its bugs:

* ``dedupe.min_length``, ``dedupe.min_words`` and ``dedupe.skip_empty`` all filter (Dolma skips
  the other two checks, and all deduplication, once ``min_words`` is above 0); lengths are
  characters, words are Dolma's (Unicode word boundaries, whitespace dropped);
* spans are character offsets and a paragraph's span includes its whole separator;
* a ``bloom_filter`` file's hash seed is fixed and stored in the file, so a filter is
  reproducible.

Dolma keys that change what is computed and that dolma-pipe does not support are refused by name
(``num_partitions`` above 1, ``file_partition``, ``compression``, ``dryrun``, ``is_s3_volume``),
never ignored. ``work_dir.output`` holds this run's intermediate files (default
``<output root>/_work``); ``work_dir.input`` is accepted and unused: Dolma caches remote inputs
there, dolma-pipe streams them.

dolma-pipe's own keys: ``destination`` (write ``<destination>/<name>/...`` instead of
``X/attributes/<name>/...``), ``buckets`` (how many hash ranges the cross-file phases split keys
into), ``minhash`` (near-duplicates), ``decontamination`` (evaluation-set overlap) and
``substrings`` (repeated substrings, by suffix arrays).

What a run resolves from its config and inputs, once (hash ranges, MinHash bands x rows, the
Bloom filter it starts from), is a :class:`DedupResolved`: the manifest's ``resolved``.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from dolma_pipe.bloom import MAX_BITS, MAX_HASHES
from dolma_pipe.config import ConfigError, PathStr, RunOptions, StrictModel
from dolma_pipe.stage import Resolved

MIB = 1 << 20
# Auto bucket count: one hash range per this many bytes of (compressed) input, so that a
# bucket task's memory stays about constant as the corpus grows.
BUCKET_INPUT_BYTES = 256 * MIB
# The MinHash signature kernel's limit on hash functions (rust_bloom/src/minhash/signature.rs).
MAX_PERMUTATIONS = 4096


def _refuse(what: str, why: str) -> ValueError:
    return ValueError(f"{what} is not supported by dolma-pipe dedup: {why}")


class WorkDirConfig(StrictModel):
    input: PathStr | None = Field(None, description="accepted for Dolma compatibility; unused (inputs are streamed, not cached)")
    output: PathStr | None = Field(None, description="where this run's intermediate files go (default <output root>/_work)")


class CompressionConfig(StrictModel):
    input: str | None = Field(None, description="Dolma's input compression override (not supported: inferred from file names)")
    output: str | None = Field(None, description="Dolma's output compression override (not supported: same as the input)")

    @field_validator("input", "output")
    @classmethod
    def _unsupported(cls, v: str | None) -> str | None:
        if v is not None:
            raise _refuse("a compression override", "compression is inferred from each file name")
        return v


class DocumentsDedupe(StrictModel):
    attribute_name: str = Field(..., min_length=1, description="attribute set on later copies of a document: [[0, len(text), 1]]")
    key: str = Field(..., description="JSONPath of the value compared, e.g. $.text or $.metadata.url")

    @field_validator("key")
    @classmethod
    def _key_path(cls, v: str) -> str:
        from dolma_pipe._rust import key_path_steps

        key_path_steps(v)  # ValueError naming what is unsupported
        return v


class NgramDedupe(StrictModel):
    ngram_length: int = Field(0, ge=0, description="words per n-gram (0: compare whole paragraphs)")
    stride: int = Field(0, ge=0, description="words between the starts of compared n-grams (0 or 1: every n-gram)")
    overlap_threshold: float = Field(1.0, ge=0.0, le=1.0, description="mark a paragraph when this fraction of its n-grams were seen before")
    skip_short_paragraphs: bool = Field(False, description="ignore paragraphs with fewer than two n-grams instead of comparing them whole")


class ParagraphsDedupe(StrictModel):
    attribute_name: str = Field(..., min_length=1, description="attribute listing duplicate paragraphs: [[start, end, score], ...]")
    by_ngram: NgramDedupe | None = Field(None, description="compare paragraphs by their word n-grams instead of whole")
    paragraph_separator: str = Field("\n", min_length=1, description="string separating paragraphs")


class DedupeSection(StrictModel):
    name: str | None = Field(None, description="attribute set name: outputs go to attributes/<name>/ (default: the attribute name)")
    documents: DocumentsDedupe | None = Field(None, description="document deduplication by a key")
    paragraphs: ParagraphsDedupe | None = Field(None, description="paragraph deduplication")
    skip_empty: bool | None = Field(False, description="skip keys and paragraphs that are empty once whitespace is trimmed")
    min_length: int | None = Field(0, ge=0, description="skip keys and paragraphs shorter than this many characters")
    min_words: int | None = Field(0, ge=0, description="skip keys and paragraphs with fewer words than this")
    num_partitions: int | None = Field(1, description="Dolma's manual partitioning (only 1: dolma-pipe partitions the work itself)")
    partition_index: int | None = Field(0, description="Dolma's manual partitioning (only 0)")
    file_partition: bool | None = Field(False, description="Dolma's manual partitioning (only false)")
    document_dir: str | None = Field("documents", description="the path component replaced by attributes/<name> for outputs")

    @field_validator("num_partitions")
    @classmethod
    def _partitions(cls, v: int | None) -> int | None:
        if v not in (None, 1):
            raise _refuse("num_partitions above 1", "dolma-pipe splits keys into hash ranges itself; run once with every input")
        return v

    @field_validator("partition_index")
    @classmethod
    def _partition_index(cls, v: int | None) -> int | None:
        if v not in (None, 0):
            raise _refuse("partition_index other than 0", "dolma-pipe splits keys into hash ranges itself")
        return v

    @field_validator("file_partition")
    @classmethod
    def _file_partition(cls, v: bool | None) -> bool | None:
        if v:
            raise _refuse("file_partition", "dolma-pipe splits keys into hash ranges itself")
        return v

    @field_validator("document_dir")
    @classmethod
    def _document_dir(cls, v: str | None) -> str | None:
        if v is not None and (not v or "/" in v):
            raise ValueError("document_dir must be one path component (e.g. documents)")
        return v


class BloomFilterSection(StrictModel):
    file: PathStr = Field(..., description="the filter file: created if missing, extended unless read_only")
    read_only: bool = Field(False, description="only look keys up (e.g. decontamination against a filter made from evaluation sets)")
    size_in_bytes: int = Field(0, ge=0, description="bit array size (with estimated_doc_count for the number of hashes)")
    estimated_doc_count: int = Field(0, ge=0, description="keys expected in the filter")
    desired_false_positive_rate: float = Field(0.0, ge=0.0, lt=1.0, description="false-positive rate at estimated_doc_count keys")


class MinhashSection(StrictModel):
    attribute_name: str = Field(
        "minhash_duplicate", min_length=1, description="attribute set on near-duplicates to drop: [[0, len(text), 1]]"
    )
    threshold: float = Field(0.8, gt=0.0, lt=1.0, description="Jaccard similarity from which two documents are near-duplicates")
    num_perm: int | None = Field(
        None,
        ge=1,
        le=MAX_PERMUTATIONS,
        description="hash functions available when bands x rows are chosen from the threshold (default 64 with verify, 128 without)",
    )
    bands: int | None = Field(None, ge=1, description="LSH bands (with rows; default: chosen from threshold and num_perm)")
    rows: int | None = Field(None, ge=1, description="signature values per band (with bands)")
    ngram: int = Field(5, ge=1, le=64, description="words per shingle")
    lowercase: bool = Field(True, description="lower-case words before shingling")
    words: Literal["word", "whitespace"] = Field("word", description="word: runs of letters/digits/_; whitespace: whitespace-separated")
    seed: int = Field(1, ge=0, lt=2**64, description="seed of the hash functions")
    verify: Literal["jaccard", "signature", "none"] = Field(
        "jaccard", description="check candidate pairs by their real Jaccard (jaccard), by their signatures (signature), or not (none)"
    )
    max_group: int = Field(64, ge=2, description="band buckets larger than this are joined as a chain instead of all their pairs")
    cluster_memory: int = Field(
        4 << 30,
        ge=1,
        description="bytes the clustering may use in one task; past it (about 2 KiB per kept pair), clusters are found by "
        "rounds of hash-range tasks, each within it",
    )


class SubstringsSection(StrictModel):
    attribute_name: str = Field(
        "substring_duplicate", min_length=1, description="attribute listing repeated substrings to remove: [[start, end, 1], ...]"
    )
    min_length: int = Field(500, ge=10, description="shortest repeat, in bytes of UTF-8 (Dolma 3: 500)")
    keep: Literal["first", "none"] = Field(
        "first", description="first: keep the first occurrence in the global order; none: mark every one (deduplicate-text-datasets)"
    )
    memory_per_task: int = Field(
        4 << 30, ge=1 << 20, description="bytes a task may use to build a file's suffix array (a larger file is split, about 5 per byte)"
    )


class DecontaminationSection(StrictModel):
    attribute_name: str = Field(
        "contaminated_paragraphs", min_length=1, description="attribute listing training paragraphs found in the evaluation texts"
    )
    evaluation: list[PathStr] = Field(..., min_length=1, description="evaluation documents (Dolma format files or globs)")
    mode: Literal["paragraphs", "ngrams"] = Field(
        "paragraphs", description="paragraphs: exact paragraphs (Dolma's way); ngrams: shared word n-grams"
    )
    min_words: int = Field(13, ge=0, description="paragraphs mode: only paragraphs of at least this many words count")
    ngram_length: int = Field(13, ge=1, le=64, description="ngrams mode: words per n-gram")
    paragraph_separator: str = Field("\n", min_length=1, description="string separating paragraphs")
    lowercase: bool = Field(True, description="ngrams mode: lower-case words")
    words: Literal["word", "whitespace"] = Field("word", description="ngrams mode: how words are delimited")


class DedupConfig(RunOptions):
    # Paths only the driver reads (work_dir.input is unused; evaluation files are read while
    # planning): on a cluster of nodes that share no disk they may stay local.
    driver_paths: ClassVar[frozenset[str]] = frozenset({"work_dir.input", "decontamination.evaluation"})

    documents: list[PathStr] = Field(..., min_length=1, description="input document files or globs (local or s3://)")
    work_dir: WorkDirConfig | None = Field(None, description="Dolma's work directories (output: intermediate files)")
    dedupe: DedupeSection = Field(..., description="what to deduplicate (Dolma's section)")
    bloom_filter: BloomFilterSection | None = Field(
        None, description="use a Bloom filter file (Dolma's mode) instead of exact hash partitions"
    )
    minhash: MinhashSection | None = Field(None, description="near-duplicate documents by MinHash LSH (dolma-pipe)")
    decontamination: DecontaminationSection | None = Field(None, description="flag paragraphs that occur in evaluation texts (dolma-pipe)")
    substrings: SubstringsSection | None = Field(
        None, description="repeated substrings of min_length bytes or more, by suffix arrays (dolma-pipe; Lee et al. 2022, Dolma 3)"
    )
    destination: PathStr | None = Field(None, description="write to <destination>/<name>/ instead of X/attributes/<name>/")
    buckets: int | None = Field(
        None,
        ge=1,
        le=65536,
        description="hash ranges of the cross-file phases (default: one per 256 MiB of input; substrings: one key range per 8 MiB of text)",
    )
    keep_work: bool = Field(False, description="keep the work directory (keys, buckets, pairs) after a complete run")
    compression: CompressionConfig | None = Field(None, description="Dolma's compression overrides (not supported)")
    dryrun: bool = Field(False, description="Dolma's dry run (not supported)")
    is_s3_volume: bool = Field(False, description="Dolma's S3 FUSE mode (not supported: use s3:// paths)")

    @field_validator("dryrun")
    @classmethod
    def _dryrun(cls, v: bool) -> bool:
        if v:
            raise _refuse("dryrun", "`dolma-pipe dedup` runs; inspect a config with `--help` and the manifest")
        return v

    @field_validator("is_s3_volume")
    @classmethod
    def _s3_volume(cls, v: bool) -> bool:
        if v:
            raise _refuse("is_s3_volume", "give s3:// paths instead of a mounted bucket")
        return v


def check(config: DedupConfig) -> None:
    """Checks across keys (one ConfigError naming the keys), after each key's own checks."""
    d = config.dedupe
    sections = (d.documents, d.paragraphs, config.minhash, config.decontamination, config.substrings)
    if all(s is None for s in sections):
        raise ConfigError(
            "dedupe: give dedupe.documents or dedupe.paragraphs (or minhash / decontamination / substrings): there is nothing to do"
        )
    if attribute_set_name(config) is None:
        raise ConfigError("dedupe.name is required (it names the attribute set: attributes/<name>/)")
    names = [s.attribute_name for s in sections if s is not None]
    if len(set(names)) != len(names):
        raise ConfigError(f"attribute names must differ between passes (got {names})")
    bf = config.bloom_filter
    if bf is not None:
        if d.documents is not None and d.paragraphs is not None:
            raise ConfigError(
                "bloom_filter: a filter file holds one kind of key; give dedupe.documents or dedupe.paragraphs, not both "
                "(run two configs, or drop bloom_filter for exact mode, which does both in one run)"
            )
        if d.documents is None and d.paragraphs is None:
            raise ConfigError(
                "bloom_filter: it needs dedupe.documents or dedupe.paragraphs (minhash, decontamination and substrings do not use it)"
            )
        if not bf.read_only:
            if bf.size_in_bytes > 0 and bf.estimated_doc_count <= 0:
                raise ConfigError("bloom_filter.estimated_doc_count: needed with size_in_bytes to choose the number of hash functions")
            if bf.size_in_bytes <= 0 and (bf.estimated_doc_count <= 0 or bf.desired_false_positive_rate <= 0):
                raise ConfigError(
                    "bloom_filter: give size_in_bytes and estimated_doc_count, or estimated_doc_count and desired_false_positive_rate"
                )
            _check_bloom_size(bf)
    m = config.minhash
    if m is not None and (m.bands is None) != (m.rows is None):
        raise ConfigError("minhash.bands and minhash.rows go together (or give neither: they are chosen from minhash.threshold)")
    if m is not None and m.bands is not None and m.rows is not None and m.bands * m.rows > MAX_PERMUTATIONS:
        raise ConfigError(
            f"minhash.bands x minhash.rows: {m.bands} x {m.rows} = {m.bands * m.rows:,} hash functions; at most {MAX_PERMUTATIONS:,}"
        )


def _check_bloom_size(bf: BloomFilterSection) -> None:
    """The bit array the section asks for fits the filter format (MAX_BITS), before any work."""
    bits, _ = shape(bf)
    size = bits // 8
    if bits > MAX_BITS:
        key = "size_in_bytes" if bf.size_in_bytes else "estimated_doc_count and desired_false_positive_rate"
        raise ConfigError(f"bloom_filter.{key}: a filter of {size:,} bytes; at most {MAX_BITS // 8:,} ({MAX_BITS // 8 >> 30:,} GiB)")


def _dolma_hashes(size_in_bytes: int, expected: int) -> int:
    """Dolma's ``optimal_number_of_hashers``: ceil(m / n * ln 2)."""
    return math.ceil(size_in_bytes * 8 / expected * math.log(2))


def _dolma_fp(size_in_bytes: int, expected: int, hashes: int) -> float:
    """Dolma's ``prob_of_false_positive``: (1 - (1 - 1/m)^(k n))^k."""
    m = size_in_bytes * 8
    return (1.0 - math.exp(hashes * expected * math.log1p(-1.0 / m))) ** hashes


def dolma_size_in_bytes(expected: int, fp_rate: float) -> int:
    """Dolma's ``suggest_size_in_bytes``: 1 MiB, doubled until the false-positive rate is met."""
    size = 1 << 20
    while size < (1 << 62) and _dolma_fp(size, expected, _dolma_hashes(size, expected)) > fp_rate:
        size *= 2
    return size


def shape(bf: BloomFilterSection) -> tuple[int, int]:
    """(bits, hashes) the config asks for: Dolma's sizes (so its configs make filters of the same
    size), with the number of hash functions capped at ``MAX_HASHES`` (Dolma's uncapped count
    reaches thousands for small counts and buys nothing past ~30)."""
    size = bf.size_in_bytes or dolma_size_in_bytes(bf.estimated_doc_count, bf.desired_false_positive_rate)
    return size * 8, max(1, min(MAX_HASHES, _dolma_hashes(size, bf.estimated_doc_count)))


def attribute_set_name(config: DedupConfig) -> str | None:
    """``dedupe.name``, else (as Dolma) the documents' or paragraphs' attribute name."""
    d = config.dedupe
    if d.name:
        return d.name
    for section in (d.documents, d.paragraphs, config.minhash):
        if section is not None:
            return section.attribute_name
    return None


def minhash_shape(m: MinhashSection) -> tuple[int, int]:
    """(bands, rows): as given, or chosen from the threshold.

    Without verification every candidate pair is a near-duplicate, so false positives and
    false negatives weigh the same (datasketch's rule, 128 hash functions). With verification a
    false candidate costs only its check, so a missed pair above the threshold weighs 19 times
    more than a candidate below it, and 64 hash functions suffice (at threshold 0.8: 10 bands of
    6 rows, which find a pair of Jaccard 0.8 with probability 0.95 and of 0.9 with 0.9998).
    """
    if m.bands is not None and m.rows is not None:
        return m.bands, m.rows
    if m.verify == "none":
        return _optimal_bands(m.threshold, m.num_perm or 128, 0.5, 0.5)
    return _optimal_bands(m.threshold, m.num_perm or 64, 0.05, 0.95)


@functools.lru_cache(maxsize=64)
def _optimal_bands(threshold: float, num_perm: int, fp_weight: float, fn_weight: float) -> tuple[int, int]:
    from dolma_pipe.minhash import optimal_bands

    return optimal_bands(threshold, num_perm, fp_weight, fn_weight)


def auto_buckets(config: DedupConfig, input_bytes: int) -> int:
    if config.buckets:
        return config.buckets
    return max(1, math.ceil(input_bytes / BUCKET_INPUT_BYTES))


class _Fixed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MinhashShape(_Fixed):
    """The LSH bands x rows the run uses (as given, or chosen from the threshold)."""

    bands: int
    rows: int
    hashes: int


class BloomStart(_Fixed):
    """The filter a Bloom-mode run starts from (:meth:`.bloommode.FilterState.identity`)."""

    file: str
    initial_checksum: int | None
    kind: dict[str, str | int]

    @model_serializer(mode="wrap")
    def _none_recorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A run that starts from no filter records ``initial_checksum: null`` (the manifest has
        # always said so), where the resolved values' other unset fields are left out.
        out = handler(self)
        return {"file": out["file"], "initial_checksum": self.initial_checksum, "kind": out["kind"]}


class BloomResolved(_Fixed):
    """Bloom mode: the starting filter, and the size of the filter a run makes or extends (a
    read-only filter is used at the size it has: none recorded)."""

    start: BloomStart
    bits: int | None = None
    hashes: int | None = None


class DedupResolved(Resolved):
    """What a dedup run resolved from its config and inputs (the manifest's ``resolved``)."""

    name: str
    buckets: int
    mode: Literal["exact", "bloom"]
    minhash: MinhashShape | None = None
    # The evaluation files' identity (decontamination): the section and the files as they are now.
    evaluation: str | None = None
    bloom: BloomResolved | None = None

    def parameters(self) -> dict[str, Any]:
        """The values the scan phase's step records as the run's parameters."""
        return self.model_dump(mode="json", include={"name", "buckets", "mode", "minhash"}, exclude_none=True)


def resolved(config: DedupConfig, input_bytes: int, evaluation: str | None = None, bloom: BloomResolved | None = None) -> DedupResolved:
    """The parameters a run actually uses (recorded in the manifest)."""
    name = attribute_set_name(config)
    assert name is not None  # check() refused a config without one
    near = None
    if config.minhash is not None:
        bands, rows = minhash_shape(config.minhash)
        near = MinhashShape(bands=bands, rows=rows, hashes=bands * rows)
    mode: Literal["exact", "bloom"] = "bloom" if config.bloom_filter is not None else "exact"
    return DedupResolved(name=name, buckets=auto_buckets(config, input_bytes), mode=mode, minhash=near, evaluation=evaluation, bloom=bloom)
