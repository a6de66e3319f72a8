"""From mixture weights to each domain's loss: the regression, its cross-validation, and the search.

One model per evaluation domain (scikit-learn), of one of four kinds:

- ``linear``: ridge regression of the loss on the weights;
- ``loglinear``: the same of the log of the loss (olmix's default form: effects multiply);
- ``quadratic``: ridge on the weights and their pairwise products (interactions between sources);
- ``gbm``: gradient-boosted trees (RegMix used LightGBM; scikit-learn's here), for many runs.

Cross-validation is K-fold over the runs (seeded): every run's loss is predicted by a model that
never saw it, and the report is the Spearman correlation of those predictions with the measured
losses (per domain and for the objective), the number that says whether the regression ranks
mixtures it was not fit on. The search scores ``candidates`` seeded Dirichlet mixtures (half
uniform over mixtures, half around the prior), keeps the feasible ones and proposes the mean of the
``top_k`` best by predicted objective (RegMix's averaging: steadier than the single best, and
still feasible, since the caps are linear). A linear model's best is a corner of the simplex;
``max_kl`` keeps the proposal within a KL divergence of the prior, where a fit on a few runs was
measured.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata, spearmanr
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

from mixers.search import mixtures


class Model:
    """A fitted regression of one domain's loss; ``predict(weights)`` takes rows of weights."""

    def __init__(self, kind: str, seed: int):
        self.kind = kind
        if kind in ("linear", "loglinear"):
            self.est = Ridge(alpha=1e-3)
        elif kind == "quadratic":
            self.est = make_pipeline(PolynomialFeatures(degree=2, include_bias=False), Ridge(alpha=1e-2))
        elif kind == "gbm":
            self.est = GradientBoostingRegressor(n_estimators=200, max_depth=2, learning_rate=0.05, subsample=1.0, random_state=seed)
        else:
            raise ValueError(f"unknown regression {kind!r}")

    def fit(self, x: np.ndarray, y: np.ndarray) -> Model:
        self.est.fit(x, np.log(y) if self.kind == "loglinear" else y)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        p = self.est.predict(np.atleast_2d(x))
        return np.exp(p) if self.kind == "loglinear" else p


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(spearmanr(a, b).statistic)


# Up to this many runs the p-value of a Spearman correlation is exact (every permutation: 8! = 40,320).
EXACT_UP_TO = 8
# A cross-validation is trusted when its Spearman could hardly be chance: below this p-value.
SIGNIFICANT = 0.05


def spearman_p(predicted: np.ndarray, measured: np.ndarray) -> float:
    """One-sided p-value of the Spearman correlation of ``predicted`` with ``measured``: the chance
    that a ranking unrelated to the measured one agrees with it at least as well. Exact (every
    permutation) up to ``EXACT_UP_TO`` runs, the t approximation above. 1.0 where there is no
    correlation to test (fewer than 3 runs, or constant values)."""
    n = len(predicted)
    if n < 3 or np.ptp(predicted) == 0 or np.ptp(measured) == 0:
        return 1.0
    if n > EXACT_UP_TO:
        return float(spearmanr(predicted, measured, alternative="greater").pvalue)
    a = rankdata(predicted) - (n + 1) / 2
    b = rankdata(measured) - (n + 1) / 2
    perms = np.array(list(itertools.permutations(range(n))))
    scores = b[perms] @ a  # the covariance of the ranks, up to a constant factor, per permutation
    return float(np.mean(scores >= b @ a - 1e-9))


def best_p(n: int) -> float:
    """The smallest one-sided p-value a Spearman over ``n`` runs can have (a perfect ranking)."""
    return 1.0 / math.factorial(n) if n <= 20 else 0.0


@dataclass
class Fit:
    domains: list[str]
    models: dict[str, Model]
    cv_predictions: np.ndarray  # runs x domains, each from a model that did not see the run
    spearman: dict[str, float | None]  # per domain, and "objective"
    mae: dict[str, float]
    p_objective: float  # spearman_p of the objective's cross-validated predictions

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Rows of weights -> rows of predicted losses, one column per domain."""
        return np.stack([self.models[d].predict(x) for d in self.domains], axis=-1)


def fit(kind: str, x: np.ndarray, y: np.ndarray, domains: list[str], objective: np.ndarray, folds: int, seed: int) -> Fit:
    """Models of each domain's loss (columns of ``y``) from weights ``x``, and their cross-validation."""
    k = min(folds, len(x))
    cv = np.zeros_like(y)
    for train_idx, test_idx in KFold(n_splits=k, shuffle=True, random_state=seed).split(x):
        for j in range(len(domains)):
            cv[test_idx, j] = Model(kind, seed).fit(x[train_idx], y[train_idx, j]).predict(x[test_idx])
    spearman: dict[str, float | None] = {d: _spearman(cv[:, j], y[:, j]) for j, d in enumerate(domains)}
    spearman["objective"] = _spearman(cv @ objective, y @ objective)
    mae = {d: float(np.mean(np.abs(cv[:, j] - y[:, j]))) for j, d in enumerate(domains)}
    models = {d: Model(kind, seed).fit(x, y[:, j]) for j, d in enumerate(domains)}
    return Fit(domains, models, cv, spearman, mae, spearman_p(cv @ objective, y @ objective))


def kl(w: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """KL(w || prior) in nats, per row of ``w`` (0 log 0 = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(w > 0, w * np.log(w / prior), 0.0)
    return terms.sum(axis=-1)


def propose(
    f: Fit,
    objective: np.ndarray,
    prior: np.ndarray,
    cap: np.ndarray,
    candidates: int,
    top_k: int,
    seed: int,
    max_kl: float | None = None,
) -> np.ndarray:
    """The mean of the ``top_k`` feasible candidates of lowest predicted objective (within
    ``max_kl`` of the prior when given: the mean stays inside, KL being convex)."""
    rng = np.random.default_rng([seed, 7])
    n = len(prior)
    pool = np.concatenate(
        [
            rng.dirichlet(np.ones(n), size=candidates // 2),
            rng.dirichlet(np.maximum(prior * n, 1e-3), size=candidates - candidates // 2),
            np.eye(n),
        ]
    )
    pool = pool[mixtures.feasible(pool, cap)]
    if not len(pool):
        raise ValueError("no candidate mixture keeps every source within its max_repetition")
    if max_kl is not None:
        pool = pool[kl(pool, prior) <= max_kl]
        if not len(pool):
            raise ValueError(f"no feasible candidate mixture is within max_kl {max_kl:g} of the prior")
    scores = f.predict(pool) @ objective
    best = np.argsort(scores, kind="stable")[:top_k]
    return pool[best].mean(axis=0)
