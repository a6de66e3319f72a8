"""The microanneal's step after its runs: each anneal's loss per domain (the mean over its seeds)
beside the baseline's, and the best on the objective only where its margin is above the noise
between seeds (:mod:`.noise`). Written to ``search.json`` and printed (:func:`.tables.microanneal`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dolma_pipe.stage import StepResult
from mixers.search import mixtures, noise, tables
from mixers.search.run import RUN_KEYS, SearchRun


def summarise(run: SearchRun, results: list[dict[str, Any]]) -> StepResult:
    cfg = run.config
    ma = cfg.microanneal
    assert ma is not None
    domains = run.domains
    by = {r["key"]: r for r in results}
    names = list(mixtures.microanneal(ma, run.names))
    order = ["baseline"] + sorted(k for k in names if k != "baseline")

    def obj(r: dict[str, Any]) -> float:
        return sum(w * r["domains"][d]["loss"] for d, w in cfg.objective.items())

    seeded = {k: [by[f"{k}-seed{s}"] for s in ma.seeds] for k in order}
    rows = {
        k: {
            **{d: float(np.mean([r["domains"][d]["loss"] for r in runs])) for d in domains},
            "objective": float(np.mean([obj(r) for r in runs])),
        }
        for k, runs in seeded.items()
    }
    deltas = {k: {d: rows[k][d] - rows["baseline"][d] for d in rows[k]} for k in order}
    v = noise.verdict({k: [obj(r) for r in runs] for k, runs in seeded.items()})
    summary = {
        "method": "microanneal",
        "checkpoint": ma.checkpoint,
        "domains": domains,
        "objective": cfg.objective,
        "seeds": ma.seeds,
        "runs": [{k: r[k] for k in RUN_KEYS} for key in order for r in seeded[key]],
        "losses": rows,
        "delta_vs_baseline": deltas,
        "objective_per_seed": {k: [obj(r) for r in runs] for k, runs in seeded.items()},
        "verdict": v.as_json(),
        "best": v.best if v.clear else None,
    }
    run.write_search(summary)
    return StepResult(data=summary, table=tables.microanneal(summary, v, cfg.proxy.tokens))
