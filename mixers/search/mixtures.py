"""Mixtures: weights per source that sum to 1, sampled around a prior and held to repetition caps.

A mixture is feasible for ``tokens`` when no source repeats past its cap:
``weight_i * tokens <= available_i * max_repetition_i``. The swarm's mixtures are drawn from a
seeded Dirichlet around the prior (``alpha_i = n * prior_i * concentration``, so concentration 1
around the uniform prior is the uniform distribution over mixtures) and an infeasible draw is
drawn again; everything here is a rule of the seed, so a rerun samples the same mixtures.

A search's mixtures: the swarm's (:func:`swarm`) and the microanneal's baseline and anneals
(:func:`microanneal`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dolma_pipe.config import ConfigError

if TYPE_CHECKING:
    from mixers.search.config import MicroannealSection, SwarmSection

# Weights below this are written as 0 (a source a mixture does not use).
EPS = 1e-6


def normalise(weights: dict[str, float], names: list[str]) -> np.ndarray:
    w = np.array([float(weights.get(n, 0.0)) for n in names], dtype=np.float64)
    return w / w.sum()


def caps(available: np.ndarray, max_repetition: np.ndarray, tokens: int) -> np.ndarray:
    """The largest weight each source can have in a mix of ``tokens`` tokens."""
    return np.minimum(1.0, available * max_repetition / float(tokens))


def feasible(weights: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Per row of ``weights`` (or for one mixture): whether every weight is within its cap."""
    return np.all(weights <= cap + 1e-9, axis=-1)


def prior(cfg_prior: dict[str, float], names: list[str], available: np.ndarray) -> np.ndarray:
    """The given prior, or each source's share of the tokens available."""
    return normalise(cfg_prior, names) if cfg_prior else available / available.sum()


def sample(rng: np.random.Generator, center: np.ndarray, concentration: float, n: int, cap: np.ndarray, key: str) -> np.ndarray:
    """``n`` feasible mixtures from a Dirichlet around ``center`` (drawn in blocks; deterministic by ``rng``)."""
    alpha = np.maximum(center * len(center) * concentration, 1e-3)
    out: list[np.ndarray] = []
    drawn = 0
    while sum(len(o) for o in out) < n:
        block = rng.dirichlet(alpha, size=max(64, 4 * n))
        drawn += len(block)
        out.append(block[feasible(block, cap)])
        if drawn > 10_000 * max(n, 1) and not sum(len(o) for o in out):
            raise ConfigError(
                f"{key}: no mixture drawn around the prior keeps every source within its max_repetition at this many tokens; "
                "raise sources.N.max_repetition, lower proxy.tokens / target_tokens, or move the prior toward the larger sources"
            )
    return np.concatenate(out)[:n]


def as_dict(weights: np.ndarray, names: list[str], digits: int = 6) -> dict[str, float]:
    """Weights rounded to ``digits`` (tiny ones to 0), still summing to 1 (the largest absorbs the rounding)."""
    w = np.where(weights < EPS, 0.0, weights)
    w = np.round(w / w.sum(), digits)
    w[int(np.argmax(w))] += round(1.0 - float(w.sum()), digits)
    return {n: float(round(x, digits)) for n, x in zip(names, w)}


def swarm(sw: SwarmSection, names: list[str], available: np.ndarray, cap: np.ndarray) -> list[dict[str, float]]:
    """The swarm's ``runs`` mixtures, within ``cap``: a rule of ``swarm.seed``, the prior and the sources' sizes."""
    center = prior(sw.prior, names, available)
    rng = np.random.default_rng([sw.seed, 1])
    drawn = sample(rng, center, sw.concentration, sw.runs, cap, "swarm")
    return [as_dict(w, names) for w in drawn]


def microanneal(ma: MicroannealSection, names: list[str]) -> dict[str, dict[str, float]]:
    """``baseline``, then one anneal per candidate: the baseline with ``share`` of the candidate."""
    base = normalise(ma.baseline, names)
    out = {"baseline": as_dict(base, names)}
    if isinstance(ma.candidates, dict):
        cands = {k: normalise(v, names) for k, v in ma.candidates.items()}
    else:
        chosen = ma.candidates or [n for n in names if ma.baseline.get(n, 0) == 0]
        cands = {n: normalise({n: 1.0}, names) for n in chosen}
    for k, c in cands.items():
        out[f"with-{k}"] = as_dict((1 - ma.share) * base + ma.share * c, names)
    return out
