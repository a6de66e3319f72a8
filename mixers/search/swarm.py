"""The swarm's steps after its runs: the regression's fit and the proposal, then the confirmation.

After ``runs``: a regression from the runs' weights to each domain's loss (:mod:`.regression`),
the mixture it predicts best within the caps of the mix the proposal is for (:mod:`.target`), and
``search.json`` with every run, the fit, the proposal and its predicted losses; the proposal is
written as ``proposal.olmix.yaml`` and, with ``fit.spec``, ``proposal.mix.yaml``, both checked by
mix's own planning rules first. After ``confirm``: the proposal, the uniform mixture and the prior
as measured by their confirmation runs, added to ``search.json``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import yaml

from dolma_pipe import storage
from dolma_pipe.config import ConfigError
from dolma_pipe.stage import StepResult
from mixers import olmix
from mixers.search import mixtures, regression, tables
from mixers.search.run import RUN_KEYS, SearchRun
from mixers.search.target import Target, search_target

# The mixtures the fit predicts and the confirmation runs measure.
COMPARED = ("proposal", "uniform", "prior")


def fit(run: SearchRun, results: list[dict[str, Any]], available: np.ndarray) -> StepResult:
    """The fit and the proposal from the runs' ``results``; ``available``: the sources' tokens."""
    cfg, fc, names = run.config, run.config.fit, run.names
    domains = run.domains
    objective = np.array([cfg.objective.get(d, 0.0) for d in domains])
    x = np.array([mixtures.normalise(r["weights"], names) for r in results])
    y = np.array([[r["domains"][d]["loss"] for d in domains] for r in results], dtype=np.float64)
    f = regression.fit(fc.regression, x, y, domains, objective, fc.folds, cfg.swarm.seed)
    target = search_target(cfg, run.spec, available, run.path("spec-counts.json"))
    cap = target.caps()
    prior = mixtures.prior(cfg.swarm.prior, names, available)
    uniform = np.full(len(names), 1.0 / len(names))
    best, binding = _propose(run, f, objective, prior, target)
    proposal = mixtures.as_dict(best, names)
    named = {"proposal": mixtures.normalise(proposal, names), "uniform": uniform, "prior": prior}
    predicted = {}
    for k, w in named.items():
        losses = f.predict(w)[0]
        predicted[k] = {**dict(zip(domains, map(float, losses))), "objective": float(losses @ objective)}
    summary = {
        "method": "swarm",
        "sources": names,
        "domains": domains,
        "objective": cfg.objective,
        "available_tokens": dict(zip(names, map(int, available))),
        "target_tokens": target.tokens,
        "max_repetition": dict(zip(names, map(float, target.max_repetition))),
        "target": target.as_json(names, binding),
        "runs": [{k: r[k] for k in RUN_KEYS} for r in results],
        "fit": {
            "regression": fc.regression,
            "folds": min(fc.folds, len(results)),
            "spearman": f.spearman,
            "mae": f.mae,
            # One-sided p-value of the objective's Spearman: above regression.SIGNIFICANT it could be chance.
            "spearman_p": f.p_objective,
            "cv_predictions": {r["key"]: dict(zip(domains, map(float, row))) for r, row in zip(results, f.cv_predictions)},
        },
        "proposal": proposal,
        "uniform": mixtures.as_dict(uniform, names),
        "prior": mixtures.as_dict(prior, names),
        "predicted": predicted,
        "feasible_at_target": {k: bool(mixtures.feasible(w, cap)) for k, w in named.items()},
        "kl_from_prior": {k: float(regression.kl(w, prior)) for k, w in named.items()},
        # Where the fit was measured: the farthest run from the prior.
        "kl_runs_max": float(regression.kl(x, prior).max()),
        "best_run": results[int(np.argmin(y @ objective))]["key"],
    }
    summary["written"] = write_proposal(run, summary, target)
    run.write_search(summary)
    return StepResult(data=summary, table=tables.fit(summary, y @ objective, results, target))


def _propose(run: SearchRun, f: regression.Fit, objective: np.ndarray, prior: np.ndarray, target: Target) -> tuple[np.ndarray, list[int]]:
    """The proposal within the target's caps, and the sources whose cap held it back (those the
    fit would take more of without the caps). A ConfigError naming the key when none is feasible."""
    fc, seed = run.config.fit, run.config.swarm.seed
    cap = target.caps()
    key = "fit.target_tokens" if target.source == "proxy.tokens" else target.source
    if cap.sum() < 1.0:
        most = ", ".join(f"{n} {c:.3f} ({k})" for n, c, k in zip(run.names, cap, target.cap_keys))
        raise ConfigError(
            f"config key '{key}': no mixture of {target.tokens:,} tokens keeps every source within its max_repetition: "
            f"their largest weights add up to {cap.sum():.3f}: {most}; raise those caps or lower the target"
        )
    try:
        best = regression.propose(f, objective, prior, cap, fc.candidates, fc.top_k, seed, fc.max_kl)
    except ValueError as e:
        key = "fit.max_kl" if "max_kl" in str(e) else key
        raise ConfigError(f"config key '{key}': {e} at {target.tokens:,} tokens") from None
    unconstrained = regression.propose(f, objective, prior, np.ones(len(run.names)), fc.candidates, fc.top_k, seed, fc.max_kl)
    return best, target.binding(unconstrained)


def write_proposal(run: SearchRun, summary: dict[str, Any], target: Target) -> list[str]:
    """``proposal.olmix.yaml`` (with ``target_tokens`` when the search knows the mix's size) and,
    with ``fit.spec``, ``proposal.mix.yaml``: both checked by mix's own planning rules first."""
    reps = summary["max_repetition"]
    domains = {olmix.source_to_domain(n): (w, reps[n]) for n, w in summary["proposal"].items() if w > 0}
    mix = olmix.OlmixMix(target_tokens=None if target.source == "proxy.tokens" else target.tokens, domains=domains)
    olmix_path = run.path("proposal.olmix.yaml")
    spec_path = run.path("proposal.mix.yaml")
    raw = None
    if run.spec is not None:
        available = {n: int(a) for n, a in zip(run.names, target.available)}
        raw = run.spec.proposal(summary["proposal"], target.tokens, run.path("mix"))
        run.spec.check("the proposal", raw, available)
        run.spec.check("the proposal's olmix file", olmix.to_mix_sources(mix, run.spec.config), available)
    olmix.write_olmix(olmix_path, mix)
    written = [olmix_path]
    if raw is None:
        if storage.exists(spec_path):  # an earlier run's, for a fit.spec this one has not
            storage.remove(spec_path)
    else:
        header = f"# written by dolma-pipe mix-search from {run.config.fit.spec}: the sources' ratios are the proposed mixture\n"
        storage.write_bytes(spec_path, (header + yaml.safe_dump(raw, sort_keys=False)).encode())
        written.append(spec_path)
    return written


def confirm(run: SearchRun, results: list[dict[str, Any]], fit_table: str | None) -> StepResult:
    """The confirmation runs' mean loss per mixture, whether the proposal beats the others on the
    objective, added to ``search.json``; printed after the fit's table (a run prints its last step's)."""
    cfg = run.config
    assert cfg.confirm is not None
    domains = run.domains
    by = {r["key"]: r for r in results}
    table: dict[str, dict[str, float]] = {}
    for name in COMPARED:
        runs = [by[f"confirm-{name}-seed{s}"] for s in cfg.confirm.seeds]
        row = {d: float(np.mean([r["domains"][d]["loss"] for r in runs])) for d in domains}
        row["objective"] = sum(w * row[d] for d, w in cfg.objective.items())
        table[name] = row
    wins = {k: table["proposal"]["objective"] < table[k]["objective"] for k in ("uniform", "prior")}
    data = {"confirm": table, "proposal_beats": wins, "seeds": cfg.confirm.seeds}
    summary = json.loads(storage.read_bytes(run.path("search.json")))
    summary.update(data)
    run.write_search(summary)
    return StepResult(data=data, table=(fit_table or "") + "\n" + tables.confirm(table, wins, cfg.confirm.seeds, domains))
