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

import numpy as np

UNIT_BINS = 20
PER_OCTAVE = 4


# Integer codes of the bins (vectorised): 0-19 the unit bins, then the octave bins either side.
_P, _N, _NAN, _PINF, _NINF = 1 << 32, 2 << 32, 3 << 32, 4 << 32, 5 << 32
_OFFSET = 1 << 20  # quarter-octave indexes of doubles lie well within +-2^20


def value_codes(v: np.ndarray) -> np.ndarray:
    """The bin code of every value of ``v`` (float64)."""
    v = np.asarray(v, dtype=np.float64)
    codes = np.empty(v.shape, dtype=np.int64)
    unit = (v >= 0.0) & (v <= 1.0)
    codes[unit] = np.minimum((v[unit] * UNIT_BINS).astype(np.int64), UNIT_BINS - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = (v > 1.0) & np.isfinite(v)
        codes[pos] = _P + _OFFSET + np.floor(np.log2(v[pos]) * PER_OCTAVE).astype(np.int64)
        neg = (v < 0.0) & np.isfinite(v)
        codes[neg] = _N + _OFFSET + np.floor(np.log2(-v[neg]) * PER_OCTAVE).astype(np.int64)
    codes[np.isnan(v)] = _NAN
    codes[v == np.inf] = _PINF
    codes[v == -np.inf] = _NINF
    return codes


def code_key(code: int) -> str:
    """The key of a bin code (``u3``, ``p5``, ``n-4``, ``nan``, ``pinf``, ``ninf``)."""
    special = {_NAN: "nan", _PINF: "pinf", _NINF: "ninf"}
    if code in special:
        return special[code]
    if code < UNIT_BINS:
        return f"u{code}"
    kind = "p" if code < _N else "n"
    return f"{kind}{code - (_P if kind == 'p' else _N) - _OFFSET}"


def value_bin(v: float) -> str:
    """The key of the bin holding ``v``."""
    return code_key(int(value_codes(np.array([v]))[0]))


def length_codes(n: np.ndarray) -> np.ndarray:
    """Half-octave bin codes of lengths (``-1`` for zero): ``floor(2 log2 n)``."""
    n = np.asarray(n, dtype=np.float64)
    out = np.full(n.shape, -1, dtype=np.int64)
    pos = n > 0
    out[pos] = np.floor(np.log2(n[pos]) * 2).astype(np.int64)
    return out


# Cells of (group, code) counted densely by weighted_bins; more are sorted instead.
DENSE_CELLS = 1 << 20


def weighted_bins(codes: np.ndarray, groups: np.ndarray, weights: list[np.ndarray]) -> list[tuple[int, int, list[int]]]:
    """(group, code, summed weights) for every (group, code) present: the bins of several groups at once."""
    if len(codes) == 0:
        return []
    lo, span = int(codes.min()), int(codes.max()) - int(codes.min()) + 1
    n_groups = int(groups.max()) + 1
    if span * n_groups <= DENSE_CELLS:
        # Few (group, code) cells (the usual case: bins of a few sources): counted in place, no sort.
        cell = groups.astype(np.int64) * span + (codes.astype(np.int64) - lo)
        seen = np.flatnonzero(np.bincount(cell, minlength=span * n_groups))
        dense = [np.bincount(cell, weights=w, minlength=span * n_groups) for w in weights]
        return [(int(j // span), int(j % span) + lo, [int(s[j]) for s in dense]) for j in seen]
    # One int64 per pair (codes stay below 2^36 and above -2, groups are few): a 1-d unique is a plain sort.
    joined = (groups.astype(np.int64) << 40) + (codes + 2)
    uniq, inverse = np.unique(joined, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = [np.bincount(inverse, weights=w, minlength=len(uniq)) for w in weights]
    return [(int(u >> 40), int((u & ((1 << 40) - 1)) - 2), [int(s[j]) for s in sums]) for j, u in enumerate(uniq)]


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


def length_key(code: int) -> str:
    return "0" if code < 0 else str(code)


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
