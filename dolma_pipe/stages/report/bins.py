"""Histogram bins that merge: every file bins its values the same way, whatever their range.

A value in [0, 1] (probabilities, fractions, 0/1 verdicts) falls in one of 20 equal bins;
a larger one in a bin of a quarter power of two (2^(k/4) to 2^((k+1)/4)), a negative one in the
mirror of that. Bins are keyed by short strings, so per-file summaries are plain JSON counters
that add up to the corpus's histogram in any order, and a page's size does not grow with the
corpus (a few dozen bins per attribute).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

UNIT_BINS = 20
PER_OCTAVE = 4


def value_bin(v: float) -> str:
    """The key of the bin holding ``v``."""
    if v != v:  # NaN
        return "nan"
    if 0.0 <= v <= 1.0:
        return f"u{min(int(v * UNIT_BINS), UNIT_BINS - 1)}"
    if v > 1.0:
        return "p" + str(math.floor(math.log2(v) * PER_OCTAVE)) if v != math.inf else "pinf"
    return "n" + str(math.floor(math.log2(-v) * PER_OCTAVE)) if v != -math.inf else "ninf"


def bin_edges(key: str) -> tuple[float, float]:
    """The [low, high) range of a bin key (for the page's axis and the data files)."""
    kind, rest = key[0], key[1:]
    if key == "nan":
        return (math.nan, math.nan)
    if rest == "inf":
        return (math.inf, math.inf) if kind == "p" else (-math.inf, -math.inf)
    k = int(rest)
    if kind == "u":
        return (k / UNIT_BINS, (k + 1) / UNIT_BINS)
    low, high = 2 ** (k / PER_OCTAVE), 2 ** ((k + 1) / PER_OCTAVE)
    return (max(low, 1.0), high) if kind == "p" else (-high, -low)


def length_bin(n: int) -> str:
    """Half-octave bins for lengths (characters, tokens, span lengths): ``"0"`` for zero."""
    return "0" if n <= 0 else str(math.floor(math.log2(n) * 2))


def length_edges(key: str) -> tuple[float, float]:
    if key == "0":
        return (0.0, 1.0)
    k = int(key)
    return (2 ** (k / 2), 2 ** ((k + 1) / 2))


def sorted_bins(counts: Mapping[str, Any], edges=bin_edges) -> list[tuple[str, float, float]]:
    """The keys of ``counts`` with their edges, in the order of their low edge (NaN last)."""
    rows = [(k, *edges(k)) for k in counts]
    return sorted(rows, key=lambda r: (math.isnan(r[1]), r[1] if not math.isnan(r[1]) else 0.0))


def add_nested(into: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """Adds ``other`` into ``into``: numbers and lists of numbers sum, dicts recurse, anything else
    is replaced (a per-file summary merged into the run's)."""
    for k, v in other.items():
        if isinstance(v, Mapping):
            add_nested(into.setdefault(k, {}), v)
        elif isinstance(v, list) and all(isinstance(x, (int, float)) for x in v):
            cur = into.setdefault(k, [0] * len(v))
            cur.extend([0] * (len(v) - len(cur)))
            for i, x in enumerate(v):
                cur[i] += x
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            into[k] = into.get(k, 0) + v
        else:
            into[k] = v
    return into
