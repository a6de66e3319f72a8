"""Quality buckets of a Dolmino source (our extension, after Dolma 3's quality vigintiles).

A source with a ``quality`` section is sampled bucket by bucket instead of as one pool:

**Scores.** A document's score is its ``quality.attribute``, read from the source's attribute
sets (a later set overrides an earlier one, as the mixer merges them), its spans' scores reduced
by ``quality.reduce``: ``first`` (the first span's: Dolma's document-level attributes have one
span over the whole text), ``max``, ``min`` or ``mean``. A document without the attribute (or with
no span) has no score: ``missing: error`` (the default) fails the plan with their count,
``drop`` leaves them out of every bucket (counted in the plan), a number gives them that score.
The count phase reads the scores of the documents the source's filter keeps and caches them
beside their (id hash, tokens) in ``counts.npz``.

**Buckets.** Per topic (``quality.key``: the documents' ``source`` field, or the label of the
highest-scoring attribute under an attribute prefix; one topic without a key), the driver takes
every kept document's score (exactly, from the cached scores: nothing is sketched) and puts a
document in bucket ``floor(N * w(< score) / w)``: ``N`` times the share of the weight strictly
below its score (weight: 1 per document, ``by: documents``, Dolma 3's vigintiles; or its tokens,
``by: tokens``). Documents of equal score always share a bucket (the lower one, where the first of
them falls), so a score held by more than ``1/N`` of the weight leaves the bucket above it empty;
the rule is one of the scores alone, never of file or worker order. The plan keeps it as edges:
edge ``b`` is the lowest score with at least ``b/N`` of the weight below it, and bucket ``b``
holds the scores in ``[edge_b, edge_b+1)``.

**Sizes.** ``quality.repetition`` gives each bucket a relative factor ``f_b`` (a list, lowest
bucket first), or ``quality.curve`` in short (``{drop_below, bottom, top, shape}``). The source's requested tokens
``R`` (its ``ratio`` or ``tokens``) are shared as ``R * f_b * avail_b / sum(f * avail)``, so each
bucket repeats ``f_b`` times a common scale. A bucket whose repetition exceeds the source's
``max_repetition`` fails the plan naming both keys (nothing is clipped silently). Each bucket is
then sampled as a source is (:mod:`mixers.dolmino`): whole repeats, then the seeded subset of
smallest rank, with a salt of (seed, source, topic, bucket), so buckets pick independently and
each comes within one document of its request.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import orjson

from dolma_pipe import paths, storage
from dolma_pipe.config import ConfigError
from dolma_pipe.filters import BatchResult
from dolma_pipe.lineblocks import read_lines
from mixers import dolmino
from mixers.attribute_keys import AttributeKeys
from mixers.config import MixConfig, QualityConfig, SourceConfig
from mixers.shorthand import Name, ShorthandError, resolver

SOURCE_KEY = "source"  # quality.key naming the documents' own field, not an attribute prefix
NO_TOPIC = ""


# ---- the spec, resolved when the mix loads ----------------------------------------------------


@dataclass(frozen=True)
class QualitySpec:
    """What the count phase reads of one source (picklable): the resolved attribute and topic."""

    attribute: str  # the whole attribute key
    reduce: str
    key: str | None  # None, SOURCE_KEY, or the whole attribute prefix of the topic labels

    def ident(self) -> dict[str, Any]:
        """What the cached scores depend on (for the count cache's name)."""
        return asdict(self)


def _source_files(source: SourceConfig) -> list[str]:
    return [f for p in source.documents for f in storage.glob(storage.local_path(p))]


def resolve(index: int, source: SourceConfig) -> QualitySpec:
    """Check ``sources.<index>.quality`` against the source's attribute files; ConfigError naming the key."""
    q = source.quality
    assert q is not None
    key = f"sources.{index}.quality"
    if not source.attributes:
        raise ConfigError(
            f"config key '{key}.attribute': the source has no attribute sets: name the set that holds it in sources.{index}.attributes"
        )
    for field_name in ("id", *((SOURCE_KEY,) if q.key == SOURCE_KEY else ())):
        if field_name in source.discard_fields:
            raise ConfigError(
                f"config key 'sources.{index}.discard_fields': quality buckets read the documents' {field_name!r}; do not discard it"
            )
    keys = AttributeKeys(_source_files(source), source.attributes)
    while True:
        try:
            attribute = resolver(keys.keys(), keys.where)(Name(q.attribute, 1))
            break
        except ShorthandError as exc:
            if not keys.read_more():
                raise ConfigError(f"config key '{key}.attribute': {exc.message}") from None
    topic: str | None = None
    if q.key == SOURCE_KEY:
        topic = SOURCE_KEY
    elif q.key is not None:
        topic = _topic_prefix(f"{key}.key", q.key, keys)
    return QualitySpec(attribute, q.reduce, topic)


def _topic_prefix(config_key: str, prefix: str, keys: AttributeKeys) -> str:
    """The whole attribute prefix ``prefix`` stands for: keys starting with it, or with ``<set>__<prefix>``."""
    while True:
        # ("__" + k).find("__" + prefix) is where the prefix starts in k, at a "__" boundary.
        whole = sorted({k[:pos] + prefix for k in keys.keys() if (pos := ("__" + k).find("__" + prefix)) >= 0})
        if whole or not keys.read_more():
            break
    if len(whole) > 1:
        raise ConfigError(
            f"config key '{config_key}': attribute prefix {prefix!r} is ambiguous: {', '.join(whole)}; write the whole prefix"
        )
    if not whole:
        known = ", ".join(sorted(keys.keys())[:12])
        raise ConfigError(
            f"config key '{config_key}': no attribute key starts with {prefix!r}; {keys.where} hold: {known or 'no attributes'}"
        )
    return whole[0]


def resolve_all(cfg: MixConfig) -> dict[int, QualitySpec]:
    """Each source with a ``quality`` section, by its index."""
    return {i: resolve(i, s) for i, s in enumerate(cfg.sources) if s.quality is not None}


# ---- the count phase: each kept document's score and topic ------------------------------------


def reduce_spans(value: object, how: str) -> float:
    """A document's score from its attribute value (NaN when it has none)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, list):
        return math.nan
    scores = [float(s[2]) for s in value if isinstance(s, list) and len(s) == 3 and isinstance(s[2], (int, float))]
    if not scores:
        return math.nan
    if how == "first":
        return scores[0]
    if how == "max":
        return max(scores)
    if how == "min":
        return min(scores)
    return sum(scores) / len(scores)


class ScoreReader:
    """Scores and topics of one input file's kept documents, batch by batch beside the rule engine.

    The attribute files have one row per good document, in order (the engine checks their ids);
    a batch's kept documents are a subsequence of its good documents, found by their ids.
    """

    def __init__(self, spec: QualitySpec, doc_path: str, attribute_sets: tuple[str, ...], compression: str | None):
        self.spec = spec
        self.rows = [read_lines(paths.attribute_path(doc_path, name), compression) for name in attribute_sets]
        self.needle = orjson.dumps(spec.attribute)
        self.topic_needle = b'"' + orjson.dumps(spec.key)[1:-1] if spec.key not in (None, SOURCE_KEY) else None

    def _row_values(self) -> tuple[float, str]:
        """The next row of every set: the score and attribute topic of one good document."""
        value: object = None
        labels: dict[str, float] = {}
        for rows in self.rows:
            _, line = next(rows, (0, b""))
            if self.needle not in line and (self.topic_needle is None or self.topic_needle not in line):
                continue
            attrs = orjson.loads(line).get("attributes") or {}
            if self.spec.attribute in attrs:
                value = attrs[self.spec.attribute]
            if self.topic_needle is not None:
                assert self.spec.key is not None
                for k, v in attrs.items():
                    if k.startswith(self.spec.key):
                        labels[k[len(self.spec.key) :]] = reduce_spans(v, self.spec.reduce)
        topic = NO_TOPIC
        scored = [(s, label) for label, s in labels.items() if not math.isnan(s)]
        if scored:  # the highest score's label; ties: the smallest label
            topic = min(scored, key=lambda x: (-x[0], x[1]))[1]
        return reduce_spans(value, self.spec.reduce), topic

    def batch(self, r: BatchResult) -> tuple[list[float], list[str]]:
        good = [self._row_values() for _ in r.ids]
        scores: list[float] = []
        topics: list[str] = []
        j = 0
        start = 0
        for length in r.line_lengths:
            doc = orjson.loads(r.out[start : start + length])
            start += length
            while r.ids[j] != doc["id"]:
                j += 1
            score, topic = good[j]
            j += 1
            scores.append(score)
            if self.spec.key == SOURCE_KEY:
                topic = str(doc.get("source") or NO_TOPIC)
            topics.append(topic)
        return scores, topics


def topic_arrays(topics: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(labels, each document's index into them) for the cache."""
    labels = sorted(set(topics))
    where = {t: i for i, t in enumerate(labels)}
    return np.array(labels, dtype=str), np.array([where[t] for t in topics], dtype=np.int32)


# ---- the plan: exact quantile edges, factors, sizes -------------------------------------------


def quantile_edges(scores: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """The ``n - 1`` inner edges: edge b is the lowest score with at least ``b/n`` of the total
    weight strictly below it (+inf when none has); integers, so exact, and independent of the
    documents' order (equal scores are one value)."""
    values, inverse = np.unique(scores, return_inverse=True)
    per_value = np.zeros(len(values), dtype=np.int64)
    np.add.at(per_value, inverse.ravel(), weights.astype(np.int64))
    below = (np.cumsum(per_value) - per_value) * n
    total = int(per_value.sum())
    at = np.searchsorted(below, np.arange(1, n, dtype=np.int64) * total, side="left")
    return np.concatenate([values, [np.inf]])[at].astype(np.float64)


def edges_json(edges: np.ndarray) -> list[float | None]:
    """Edges as the plan keeps them (JSON): None for +inf (no score reaches the bucket)."""
    return [None if math.isinf(e) else float(e) for e in edges]


def edges_array(edges: list[float | None]) -> np.ndarray:
    return np.array([math.inf if e is None else e for e in edges], dtype=np.float64)


def bucket_of(scores: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Each score's bucket: the number of edges at or below it, i.e. ``floor(n * share of the
    weight strictly below the score)`` (equal scores, one bucket)."""
    return np.searchsorted(edges, scores, side="right").astype(np.int64)


def factors(q: QualityConfig) -> list[float]:
    """Each bucket's relative factor, lowest bucket first."""
    if q.repetition is not None:
        return [float(f) for f in q.repetition]
    rep, n = q.curve, q.buckets
    assert rep is not None
    dropped = int(rep.drop_below * n + 1e-9)  # buckets wholly below the quantile
    kept = n - dropped
    out = [0.0] * dropped
    for k in range(kept):
        t = k / (kept - 1) if kept > 1 else 1.0
        if rep.shape == "linear":
            out.append(rep.bottom + (rep.top - rep.bottom) * t)
        else:
            out.append(rep.bottom * (rep.top / rep.bottom) ** t)
    return out


def salt_name(source: str, topic: str, bucket: int) -> str:
    """The name seeded ranks are salted with: one independent order per (source, topic, bucket)."""
    return f"{source}\0{topic}\0q{bucket}"


@dataclass
class BucketPlan:
    topic: str
    bucket: int
    # The bucket holds low <= score < high; None: unbounded (-inf below bucket 0, else +inf: an
    # edge no score reaches, above an empty bucket).
    low: float | None
    high: float | None
    docs: int
    available: int
    factor: float
    requested: int
    whole_repeats: int
    remainder: int
    seeds: dict[int, dolmino.SeedPick] = field(default_factory=dict)

    @property
    def repetition(self) -> float:
        return self.requested / self.available if self.available else 0.0


@dataclass
class QualityPlan:
    attribute: str
    reduce: str
    by: str
    buckets: int
    key: str | None
    missing: str  # the rule, as written
    missing_docs: int
    missing_tokens: int
    topics: list[str]
    edges: dict[str, list[float | None]]
    cells: list[BucketPlan]  # topic-major, bucket-minor

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["cells"] = [
            {
                **{k: v for k, v in asdict(c).items() if k != "seeds"},
                "repetition": round(c.repetition, 6),
                "seeds": {str(s): {**asdict(p), "threshold": str(p.threshold)} for s, p in c.seeds.items()},
            }
            for c in self.cells
        ]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> QualityPlan:
        cells = [
            BucketPlan(
                **{k: v for k, v in c.items() if k not in ("seeds", "repetition")},
                seeds={int(s): dolmino.SeedPick(**{**p, "threshold": int(p["threshold"])}) for s, p in c["seeds"].items()},
            )
            for c in d["cells"]
        ]
        return QualityPlan(**{**d, "cells": cells})


@dataclass
class FileScores:
    """One input file's cached counts with scores (topics as indices into the plan's topics)."""

    keys: np.ndarray
    tokens: np.ndarray
    scores: np.ndarray
    topics: np.ndarray


def _file_scores(raw: dict[str, np.ndarray], topics: list[str]) -> FileScores:
    """One file's cache with its topics as indices into ``topics`` (the plan's)."""
    where = {t: i for i, t in enumerate(topics)}
    mapping = np.array([where[str(t)] for t in raw["labels"]], dtype=np.int64)
    return FileScores(raw["keys"], raw["tokens"], raw["scores"], mapping[raw["topics"]] if len(mapping) else np.zeros(0, dtype=np.int64))


def load_files(caches: list[str]) -> tuple[list[str], list[FileScores]]:
    """Every file's cached counts and scores, topics mapped onto their sorted union."""
    raw = [dolmino.load_scored_counts(c) for c in caches]
    topics = sorted({str(t) for r in raw for t in r["labels"]})
    return topics, [_file_scores(r, topics) for r in raw]


def fill_missing(scores: np.ndarray, missing: str | float) -> np.ndarray:
    """Scores with the ``missing`` rule applied: a number fills them; otherwise they stay NaN (dropped)."""
    if isinstance(missing, str):
        return scores
    return np.where(np.isnan(scores), float(missing), scores)


def cells_of(f: FileScores, edges: dict[str, list[float | None]], topics: list[str], n: int, missing: str | float) -> np.ndarray:
    """Each document's cell (topic index * n + bucket), -1 for a document without a score."""
    scores = fill_missing(f.scores, missing)
    out = np.full(len(scores), -1, dtype=np.int64)
    for t, topic in enumerate(topics):
        m = (f.topics == t) & ~np.isnan(scores)
        out[m] = t * n + bucket_of(scores[m], edges_array(edges[topic]))
    return out


def plan_source(index: int, source: SourceConfig, spec: QualitySpec, requested: int, caches: list[str], seeds: list[int]) -> QualityPlan:
    """The buckets of one source, sized and sampled per seed; MixPlanError naming the key and the fix."""
    q = source.quality
    assert q is not None
    key = f"sources.{index}"
    n = q.buckets
    topics, files = load_files(caches)
    spec_missing = q.missing if isinstance(q.missing, str) else f"{q.missing:g}"
    lacking = [np.isnan(f.scores) for f in files]
    missing_docs = int(sum(m.sum() for m in lacking))
    missing_tokens = int(sum(f.tokens[m].astype(np.int64).sum() for f, m in zip(files, lacking)))
    if missing_docs and q.missing == "error":
        raise dolmino.MixPlanError(
            f"source {source.name!r} ({key}): {missing_docs:,} kept documents ({missing_tokens:,} tokens) have no "
            f"{spec.attribute!r} score. Fix: set {key}.quality.missing to drop (leave them out) or to a score they get, "
            f"or filter them out in {key}.filter"
        )
    edges: dict[str, list[float | None]] = {}
    parts = [(fill_missing(f.scores, q.missing), f) for f in files]
    for t, topic in enumerate(topics):
        sel = [(s[(f.topics == t) & ~np.isnan(s)], f.tokens[(f.topics == t) & ~np.isnan(s)]) for s, f in parts]
        scores = np.concatenate([s for s, _ in sel]) if sel else np.zeros(0)
        weights = np.ones(len(scores), dtype=np.int64) if q.by == "documents" else np.concatenate([w for _, w in sel]).astype(np.int64)
        edges[topic] = edges_json(quantile_edges(scores, weights, n))
    cell_ids = [cells_of(f, edges, topics, n, q.missing) for f in files]
    n_cells = len(topics) * n
    docs = np.zeros(n_cells, dtype=np.int64)
    avail = np.zeros(n_cells, dtype=np.int64)
    for f, cid in zip(files, cell_ids):
        m = cid >= 0
        docs += np.bincount(cid[m], minlength=n_cells)
        avail += np.bincount(cid[m], weights=f.tokens[m], minlength=n_cells).astype(np.int64)
    fs = factors(q)
    weight = sum(fs[c % n] * int(avail[c]) for c in range(n_cells))
    if weight == 0:
        raise dolmino.MixPlanError(
            f"source {source.name!r} ({key}) has no tokens in the buckets its quality curve keeps "
            f"({int(avail.sum()):,} tokens in all): keep more buckets, or loosen {key}.filter"
        )
    scale = requested / weight
    worst = max((scale * fs[c % n] for c in range(n_cells) if avail[c]), default=0.0)
    if worst > source.max_repetition + 1e-12:
        c = max((c for c in range(n_cells) if avail[c]), key=lambda c: scale * fs[c % n])
        topic = f" of topic {topics[c // n]!r}" if q.key is not None else ""
        most = int(requested * source.max_repetition / worst)
        raise dolmino.MixPlanError(
            f"source {source.name!r} ({key}): bucket {c % n}{topic} would repeat {worst:.3f}x (factor {fs[c % n]:g} of "
            f"{key}.quality.{'repetition' if q.repetition is not None else 'curve'}, {requested:,} tokens requested), above {key}.max_repetition {source.max_repetition:g}. "
            f"Fix: raise {key}.max_repetition to at least {worst:.3f}, or flatten the curve, "
            f"or ask for at most {most:,} tokens from it"
        )
    cells = []
    for c in range(n_cells):
        topic, b = topics[c // n], c % n
        e = edges[topic]
        want = round(scale * fs[b] * int(avail[c]))
        whole = want // int(avail[c]) if avail[c] else 0
        cell = BucketPlan(
            topic,
            b,
            e[b - 1] if b > 0 else None,
            e[b] if b < n - 1 else None,
            int(docs[c]),
            int(avail[c]),
            fs[b],
            want,
            whole,
            want - whole * int(avail[c]),
        )
        masks = [ids == c for ids in cell_ids]

        def in_cell(masks: list[np.ndarray] = masks) -> Iterator[tuple[np.ndarray, np.ndarray]]:
            return ((f.keys[m], f.tokens[m]) for f, m in zip(files, masks))

        picks = dolmino.pick_subsets(salt_name(source.name, topic, b), in_cell, {s: cell.remainder for s in seeds})
        for s in seeds:
            threshold, sub_tokens, sub_docs = picks[s]
            cell.seeds[s] = dolmino.SeedPick(
                threshold, sub_tokens, sub_docs, whole * cell.available + sub_tokens, whole * cell.docs + sub_docs
            )
        cells.append(cell)
    return QualityPlan(spec.attribute, q.reduce, q.by, n, spec.key, spec_missing, missing_docs, missing_tokens, topics, edges, cells)


def seed_totals(plan: QualityPlan, seed: int) -> tuple[int, int]:
    """(tokens, documents) a seed takes from every bucket."""
    return sum(c.seeds[seed].tokens for c in plan.cells), sum(c.seeds[seed].docs for c in plan.cells)


# ---- the sample phase: how many copies of each document ----------------------------------------


def sample_params(plan: QualityPlan, config: QualityConfig, seeds: list[int]) -> dict[str, Any]:
    """What a sample task needs to place its documents (JSON: task params)."""
    return {
        "topics": plan.topics,
        "edges": plan.edges,
        "buckets": plan.buckets,
        "missing": config.missing,
        "whole": [c.whole_repeats for c in plan.cells],
        "thresholds": {str(s): [str(c.seeds[s].threshold) for c in plan.cells] for s in seeds},
    }


def copies(source: str, cache: str, params: dict[str, Any], seed: int) -> np.ndarray:
    """How many times each cached document of one file is taken for ``seed``."""
    topics: list[str] = params["topics"]
    f = _file_scores(dolmino.load_scored_counts(cache), topics)
    n = params["buckets"]
    cell = cells_of(f, params["edges"], topics, n, params["missing"])
    out = np.zeros(len(f.keys), dtype=np.int64)
    whole = params["whole"]
    thresholds = params["thresholds"][str(seed)]
    for c in np.unique(cell[cell >= 0]):
        m = cell == c
        name = salt_name(source, topics[c // n], int(c % n))
        chosen = dolmino.selected(dolmino.seeded_ranks(f.keys[m], seed, name), int(thresholds[c]))
        out[m] = whole[c] + chosen.astype(np.int64)
    return out
