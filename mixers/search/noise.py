"""Whether a microanneal's best is better than the others or only luckier: the noise between seeds.

Each anneal is trained once per seed of ``microanneal.seeds`` (the seed picks the documents taken
and their order; the starting checkpoint is the same), so the spread of one anneal's loss across
its seeds measures how much a loss moves for reasons other than the mixture. The spread is pooled
over the anneals (the root of the mean of their sample variances). Two anneals' means over ``m``
seeds differ by noise alone with a standard deviation of ``spread * sqrt(2 / m)``; a difference of
``t`` such standard deviations or more is called clear, ``t`` the two-sided 95% quantile of
Student's t with the pooled degrees of freedom (3.18 for three anneals of two seeds: a spread
measured on few seeds is itself uncertain, so it takes more of them than the normal 1.96). A
margin below it is reported as "no clear best": a tenth of a percent of loss between two short
anneals is usually the seed talking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

# The two-sided level at which a margin is called clear.
LEVEL = 0.95


@dataclass(frozen=True)
class Verdict:
    """The anneal of lowest mean objective, its margin over the next, and whether that is noise."""

    best: str
    runner_up: str | None
    margin: float  # the runner-up's mean objective minus the best's
    spread: float | None  # pooled standard deviation of one anneal's objective across seeds (None: one seed)
    factor: float | None  # Student's t quantile at LEVEL for the spread's degrees of freedom
    noise: float | None  # the smallest margin that is not noise: factor * spread * sqrt(2 / seeds)
    seeds: int

    @property
    def clear(self) -> bool:
        return self.noise is not None and self.margin >= self.noise

    def as_json(self) -> dict[str, object]:
        return {
            "best": self.best,
            "runner_up": self.runner_up,
            "margin": self.margin,
            "seed_spread": self.spread,
            "t": self.factor,
            "noise": self.noise,
            "seeds": self.seeds,
            "clear": self.clear,
        }

    def line(self) -> str:
        if self.runner_up is None:
            return f"  best on the objective: {self.best} (the only anneal)"
        if self.noise is None:
            return (
                f"  lowest on the objective: {self.best}, {self.margin:.4f} below {self.runner_up}; one seed per anneal, so no "
                "noise estimate: give microanneal.seeds two or more to tell a better mixture from a luckier one"
            )
        if self.clear:
            return (
                f"  best on the objective: {self.best}, {self.margin:.4f} below {self.runner_up} "
                f"({self.margin / self.noise * (self.factor or 0):.1f} standard deviations of the seed noise; below {self.noise:.4f} "
                "would be noise)"
            )
        return (
            f"  no clear best: {self.best} is {self.margin:.4f} below {self.runner_up}, less than the noise between seeds "
            f"({self.noise:.4f} = {self.factor:.2f} x {self.spread:.4f} x sqrt(2/{self.seeds})): train more seeds "
            "(microanneal.seeds) or longer anneals (proxy.tokens) to separate them"
        )


def verdict(objective: dict[str, list[float]]) -> Verdict:
    """``objective``: each anneal's objective, one value per seed (every anneal the same seeds)."""
    means = {k: float(np.mean(v)) for k, v in objective.items()}
    order = sorted(means, key=lambda k: (means[k], k))
    seeds = min(len(v) for v in objective.values())
    best = order[0]
    runner_up = order[1] if len(order) > 1 else None
    margin = means[runner_up] - means[best] if runner_up is not None else 0.0
    spread = factor = noise = None
    if seeds >= 2:
        spread = math.sqrt(float(np.mean([np.var(v, ddof=1) for v in objective.values()])))
        dof = sum(len(v) - 1 for v in objective.values())
        factor = float(student_t.ppf(0.5 + LEVEL / 2, dof))
        noise = factor * spread * math.sqrt(2.0 / seeds)
    return Verdict(best, runner_up, margin, spread, factor, noise, seeds)
