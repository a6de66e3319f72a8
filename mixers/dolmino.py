"""Dolmino-style mixes: how many tokens each source gives, and which documents carry them.

**Sizes** (OLMo-core's composable mixing): a source asks for ``ratio * target_tokens`` or
``tokens``. Its repetition is requested / available (available: its tokens after filters). A
repetition above ``max_repetition`` is an error naming the source and the fix; it is never
rebalanced silently, so the ratios of a plan that runs are the ratios written.

**Documents** are whole: a source's documents are taken ``floor(repetition)`` times each (whole
repeats), then a seeded subset gives the rest. The subset is the documents of smallest rank,
``rank = splitmix64(xxh3(id) ^ salt(seed, source))``: a rule of each document's id alone, so it
does not depend on file order, sharding or which worker read what, and two seeds pick close to
independent subsets. The subset stops at the rank where its tokens come closest to what is
left to take, so each source's tokens are within one document of its request. The cut is found
in two passes over the counts (a histogram of rank prefixes, then the one bucket that crosses),
so the driver never holds every document's count at once.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dolma_pipe import storage, workdir
from dolma_pipe.config import ConfigError
from dolma_pipe.errors import DolmaPipeError
from mixers.config import MixConfig

ALL = 1 << 64  # a threshold that keeps every document (ranks are < 2**64)
BUCKET_BITS = 16
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


class MixPlanError(DolmaPipeError, ValueError):
    """A Dolmino mix that cannot be made as written; the message names the source and the fix."""


def requested_tokens(cfg: MixConfig) -> dict[str, int]:
    """Tokens each source asks for; ConfigError when ratios and the target do not add up."""
    ratio_sources = [s for s in cfg.sources if s.ratio is not None]
    if ratio_sources and cfg.target_tokens is None:
        i = cfg.sources.index(ratio_sources[0])
        raise ConfigError(f"config key 'target_tokens' is required: sources.{i} ({ratio_sources[0].name!r}) gives a ratio")
    out: dict[str, int] = {}
    for s in cfg.sources:
        if s.tokens is not None:
            out[s.name] = s.tokens
        else:
            assert cfg.target_tokens is not None and s.ratio is not None
            out[s.name] = round(s.ratio * cfg.target_tokens)
    if cfg.target_tokens is not None:
        total_ratio = sum(s.ratio or 0 for s in cfg.sources) + sum(s.tokens or 0 for s in cfg.sources) / cfg.target_tokens
        if abs(total_ratio - 1) > 1e-6:
            raise ConfigError(
                f"config key 'sources': the sources' ratios (and tokens / target_tokens) add up to {total_ratio:.6g}, "
                f"not 1: make them describe all of target_tokens {cfg.target_tokens:,}"
            )
    return out


def _salt(seed: int, source: str) -> np.uint64:
    return np.uint64(int.from_bytes(hashlib.blake2b(f"{seed}\0{source}".encode(), digest_size=8).digest(), "little"))


def seeded_ranks(keys: np.ndarray, seed: int, source: str) -> np.ndarray:
    """Each document's rank for ``seed`` (splitmix64's finaliser of its id hash xor a seed salt)."""
    with np.errstate(over="ignore"):
        x = keys.astype(np.uint64) ^ _salt(seed, source)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def selected(ranks: np.ndarray, threshold: int) -> np.ndarray:
    if threshold >= ALL:
        return np.ones(len(ranks), dtype=bool)
    return ranks < np.uint64(threshold)


@dataclass
class SeedPick:
    threshold: int  # documents with rank < threshold are in the subset
    subset_tokens: int
    subset_docs: int
    tokens: int  # whole repeats + subset
    docs: int


@dataclass
class SourcePlan:
    name: str
    docs: int
    available: int
    requested: int
    max_repetition: float
    whole_repeats: int
    remainder: int
    seeds: dict[int, SeedPick] = field(default_factory=dict)
    # A source with quality buckets: its QualityPlan as JSON (mixers.quality); its seeds' picks
    # are the sums of its buckets'.
    quality: dict | None = None

    @property
    def repetition(self) -> float:
        return self.requested / self.available if self.available else float("inf")

    def as_json(self) -> dict:
        d = asdict(self)
        d["repetition"] = round(self.repetition, 6)
        # Thresholds can be 2**64 (every document): JSON numbers that large lose precision elsewhere.
        d["seeds"] = {str(s): {**asdict(p), "threshold": str(p.threshold)} for s, p in self.seeds.items()}
        return d

    @staticmethod
    def from_json(d: dict) -> SourcePlan:
        seeds = {int(s): SeedPick(**{**p, "threshold": int(p["threshold"])}) for s, p in d["seeds"].items()}
        return SourcePlan(**{k: v for k, v in d.items() if k not in ("seeds", "repetition")}, seeds=seeds)


def size_source(index: int, name: str, docs: int, available: int, requested: int, max_repetition: float, how: str) -> SourcePlan:
    """Whole repeats and remainder of one source; MixPlanError when it cannot give ``requested``."""
    key = f"sources.{index}"
    if available == 0:
        raise MixPlanError(
            f"source {name!r} ({key}) has no tokens left after its filters ({docs:,} documents): loosen {key}.filter or remove the source"
        )
    repetition = requested / available
    if repetition > max_repetition + 1e-12:
        most = int(available * max_repetition)
        raise MixPlanError(
            f"source {name!r} ({key}) cannot give {requested:,} tokens ({how}): it has {available:,} tokens after filters "
            f"({docs:,} documents), so it would repeat {repetition:.3f}x, above {key}.max_repetition {max_repetition:g}. "
            f"Fix: raise {key}.max_repetition to at least {repetition:.3f}, or ask for at most {most:,} tokens from it "
            f"(a lower ratio, tokens or target_tokens), or add documents"
        )
    whole = requested // available
    return SourcePlan(name, docs, available, requested, max_repetition, whole, requested - whole * available)


Counts = Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]]


def pick_subsets(name: str, files: Counts, remainders: dict[int, int]) -> dict[int, tuple[int, int, int]]:
    """Per seed, (threshold, tokens, docs) of the subset whose tokens come closest to its remainder.

    ``files()`` yields each file's (id hashes, token counts); it is called twice.
    """
    shift = np.uint64(64 - BUCKET_BITS)
    n_buckets = 1 << BUCKET_BITS
    hists = {s: np.zeros(n_buckets, dtype=np.int64) for s in remainders}
    doc_hists = {s: np.zeros(n_buckets, dtype=np.int64) for s in remainders}
    for keys, tokens in files():
        for s in remainders:
            buckets = (seeded_ranks(keys, s, name) >> shift).astype(np.int64)
            hists[s] += np.bincount(buckets, weights=tokens, minlength=n_buckets).astype(np.int64)
            doc_hists[s] += np.bincount(buckets, minlength=n_buckets)
    crossing: dict[int, tuple[int, int, int]] = {}
    for s, want in remainders.items():
        if want <= 0:
            continue
        cum = np.cumsum(hists[s])
        b = int(np.searchsorted(cum, want, side="left"))
        b = min(b, n_buckets - 1)
        crossing[s] = (b, int(cum[b - 1]) if b > 0 else 0, int(doc_hists[s][:b].sum()))
    inside: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {s: [] for s in crossing}
    if crossing:
        for keys, tokens in files():
            for s, (b, _, _) in crossing.items():
                ranks = seeded_ranks(keys, s, name)
                mask = (ranks >> shift) == np.uint64(b)
                inside[s].append((ranks[mask], tokens[mask]))
    out: dict[int, tuple[int, int, int]] = {}
    for s, want in remainders.items():
        if s not in crossing:
            out[s] = (0, 0, 0)
            continue
        b, before, docs_before = crossing[s]
        ranks = np.concatenate([r for r, _ in inside[s]]) if inside[s] else np.zeros(0, dtype=np.uint64)
        toks = np.concatenate([t for _, t in inside[s]]).astype(np.int64) if inside[s] else np.zeros(0, dtype=np.int64)
        order = np.argsort(ranks, kind="stable")
        ranks, toks = ranks[order], toks[order]
        cands = np.concatenate([[before], before + np.cumsum(toks)])
        n = int(np.argmin(np.abs(cands - want)))
        threshold = int(ranks[n]) if n < len(ranks) else (b + 1) << (64 - BUCKET_BITS)
        # The subset is every document of lower buckets plus those of this bucket below the threshold
        # (equal ranks, from equal ids, fall on one side together).
        keep = ranks < np.uint64(threshold) if threshold < ALL else np.ones(len(ranks), dtype=bool)
        out[s] = (threshold, before + int(toks[keep].sum()), docs_before + int(keep.sum()))
    return out


def load_counts(directory: str) -> tuple[np.ndarray, np.ndarray]:
    """(id hashes, token counts) cached for one file by the count phase."""
    data = load_scored_counts(directory)
    return data["keys"], data["tokens"]


def load_scored_counts(directory: str) -> dict[str, np.ndarray]:
    """Everything cached for one file: keys and tokens, and for a source with quality buckets
    (:mod:`mixers.quality`) scores (NaN: none), topic labels and each document's topic index."""
    with np.load(io.BytesIO(workdir.read(storage.join(directory, "counts.npz")))) as data:
        return {name: data[name] for name in data.files}


def save_counts(
    directory: str,
    keys: np.ndarray,
    tokens: np.ndarray,
    scores: np.ndarray | None = None,
    topics: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    buf = io.BytesIO()
    extra: dict[str, Any] = {}
    if scores is not None and topics is not None:
        extra = {"scores": scores.astype(np.float64), "labels": topics[0], "topics": topics[1].astype(np.int32)}
    np.savez(buf, keys=keys.astype(np.uint64), tokens=tokens.astype(np.uint32), **extra)
    workdir.write(storage.join(directory, "counts.npz"), buf.getvalue())


def render_plan(cfg: MixConfig, plans: list[SourcePlan]) -> str:
    target = f"{cfg.target_tokens:,}" if cfg.target_tokens else f"{sum(p.requested for p in plans):,} (sum of sources)"
    lines = [f"Dolmino plan: target {target} tokens per seed; tokenizer {cfg.tokenizer}; seeds {', '.join(map(str, cfg.seeds))}"]
    head = ["source", "docs", "available", "requested", "share", "repetition", "max", *[f"taken seed {s}" for s in cfg.seeds]]
    total = sum(p.requested for p in plans) or 1
    rows = [head]
    for p in plans:
        rows.append(
            [
                p.name,
                f"{p.docs:,}",
                f"{p.available:,}",
                f"{p.requested:,}",
                f"{p.requested / total:.1%}",
                f"{p.repetition:.3f}x",
                f"{p.max_repetition:g}x",
                *[f"{p.seeds[s].tokens:,} ({(p.seeds[s].tokens - p.requested) / max(p.requested, 1):+.3%})" for s in cfg.seeds],
            ]
        )
    lines += _table(rows, "  ")
    lines.append("  (repetition: requested / available; whole repeats of every document, then a seeded subset)")
    for p in plans:
        if p.quality is not None:
            lines += _bucket_table(p, cfg.seeds)
    return "\n".join(lines)


def _table(rows: list[list[str]], indent: str) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]


def _edge(x: float | None, sign: str) -> str:
    return f"{sign}inf" if x is None else f"{x:.6g}"


def _bucket_table(p: SourcePlan, seeds: list[int]) -> list[str]:
    """A source's quality buckets: score range, documents, tokens available, requested and taken."""
    q = p.quality
    assert q is not None
    missing = f"{q['missing_docs']:,} documents without a score (missing: {q['missing']})" if q["missing_docs"] else "every document scored"
    lines = [
        f"  {p.name}: {q['buckets']} quality buckets of {q['attribute']} ({q['reduce']} span, quantiles by {q['by']}"
        + (f", within each {q['key']}" if q["key"] else "")
        + f"); {missing}"
    ]
    head = ["topic"] if q["key"] else []
    head += ["bucket", "scores", "docs", "available", "factor", "requested", "repetition"]
    rows = [head + [f"taken seed {s}" for s in seeds]]
    for c in q["cells"]:
        rows.append(
            [
                *([c["topic"] or "(none)"] if q["key"] else []),
                str(c["bucket"]),
                f"[{_edge(c['low'], '-' if c['bucket'] == 0 else '+')}, {_edge(c['high'], '+')})",
                f"{c['docs']:,}",
                f"{c['available']:,}",
                f"{c['factor']:g}",
                f"{c['requested']:,}",
                f"{c['repetition']:.3f}x",
                *[f"{c['seeds'][str(s)]['tokens']:,}" for s in seeds],
            ]
        )
    return lines + _table(rows, "    ")
