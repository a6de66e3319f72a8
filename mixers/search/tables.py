"""What a search prints after its steps: the swarm's fit and proposal, the microanneal's table, and
the confirmation runs' comparison. Each is rendered from the summary the step writes to
``search.json`` (:mod:`.swarm`, :mod:`.microanneal`), so the table and the file say the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixers.search import regression
from mixers.search.noise import Verdict
from mixers.search.target import Target


def fit(s: dict[str, Any], measured: np.ndarray, results: list[dict[str, Any]], target: Target) -> str:
    """The swarm's proposal beside the prior and uniform mixtures: weights, caps, predicted losses,
    and what says how far to trust it (distance from the runs, held-out Spearman)."""
    names, domains = s["sources"], s["domains"]
    width = max(len(n) for n in [*names, "objective", *domains, "source"])
    t = s["target"]
    lines = [f"swarm: {len(results)} proxy runs; regression {s['fit']['regression']} ({s['fit']['folds']}-fold cross-validation)"]
    lines.append(f"  {'source':<{width}}  {'prior':>8}  {'uniform':>8}  {'proposal':>8}  {'cap':>8}")
    for n in names:
        cap = f"{t['caps'][n]:8.4f}" + (" binding" if n in t["binding"] else "")
        lines.append(f"  {n:<{width}}  {s['prior'][n]:8.4f}  {s['uniform'][n]:8.4f}  {s['proposal'][n]:8.4f}  {cap}")
    lines.append(
        f"  predicted loss ({'feasible' if s['feasible_at_target']['proposal'] else 'INFEASIBLE'} at {s['target_tokens']:,} tokens):"
    )
    for d in [*domains, "objective"]:
        p = s["predicted"]
        lines.append(f"  {d:<{width}}  {p['prior'][d]:8.4f}  {p['uniform'][d]:8.4f}  {p['proposal'][d]:8.4f}")
    lines += _target_lines(names, t["binding"], target)
    lines += _trust_lines(s, len(results))
    secs = [r["seconds"] for r in results if "seconds" in r]
    speeds = [r["tokens_per_s"] for r in results if "tokens_per_s" in r]
    if secs:
        lines.append(
            f"  a proxy run: {float(np.median(secs)):.1f} s (median, evaluation included)"
            + (f", {float(np.median(speeds)):,.0f} tokens/s training" if speeds else "")
        )
    lines.append(
        f"  best proxy run: {s['best_run']} (objective {measured.min():.4f}); measured range {measured.min():.4f}..{measured.max():.4f}"
    )
    lines.append("  written: " + ", ".join(s["written"]))
    return "\n".join(lines)


def _target_lines(names: list[str], binding_names: list[str], target: Target) -> list[str]:
    """What the caps are for (the mix's size) and which of them the proposal is held by."""
    lines = [
        f"  cap: a source's largest weight in a mix of {target.tokens:,} tokens ({target.source}) within its max_repetition, "
        f"from the {target.counted}"
    ]
    if target.source == "proxy.tokens":
        lines.append(
            "  (no mix named: the caps hold at the proxies' size only; set fit.spec or fit.target_tokens to the mix you will make)"
        )
    binding = [names.index(n) for n in binding_names]
    if binding:
        lines.append(
            "  binding (the fit wants more of it than its cap allows): "
            + "; ".join(f"{names[i]} (raise {target.cap_keys[i]} for more)" for i in binding)
        )
    else:
        lines.append("  binding: none (no source is at its cap)")
    return lines


def _trust_lines(s: dict[str, Any], runs: int) -> list[str]:
    """How far the proposal is from where the runs were, and whether the fit ranks held-out runs."""
    kl, runs_kl = s["kl_from_prior"]["proposal"], s["kl_runs_max"]
    lines = [f"  KL from the prior: proposal {kl:.3f}, uniform {s['kl_from_prior']['uniform']:.3f}, runs up to {runs_kl:.3f} nats"]
    if kl > runs_kl + 1e-9:
        lines.append(
            f"  WARNING: the proposal is {kl:.3f} nats from the prior, farther than every run ({runs_kl:.3f}): the fit "
            f"extrapolates there. fit.max_kl keeps the proposal within that KL divergence of the prior "
            f"(max_kl: {max(runs_kl, 1e-3):.3g} keeps it where the runs were); or sample wider runs (a lower swarm.concentration)"
        )
    sp = s["fit"]["spearman"]
    fmt = {k: ("n/a" if v is None else f"{v:.3f}") for k, v in sp.items()}
    lines.append("  held-out Spearman (cross-validated): " + ", ".join(f"{k} {v}" for k, v in fmt.items()))
    return lines + cv_warning(sp["objective"], s["fit"]["spearman_p"], runs)


def cv_warning(rho: float | None, p: float, runs: int) -> list[str]:
    """A warning when the objective's cross-validated Spearman could be chance (p >= 0.05)."""
    if p < regression.SIGNIFICANT:
        return []
    shown = "n/a" if rho is None else f"{rho:.3f}"
    best = regression.best_p(runs)
    why = (
        f"with {runs} runs even a perfect ranking (1.000) happens by chance with p = {best:.3f}"
        if best >= regression.SIGNIFICANT
        else f"one-sided p = {p:.2f}: an unrelated ranking does as well that often"
    )
    return [
        f"  WARNING: the cross-validated Spearman of the objective ({shown} over {runs} runs) says nothing ({why}): "
        "the proposal is not backed by the fit; train more runs (swarm.runs; 8 runs or more can show a real fit)"
    ]


def microanneal(s: dict[str, Any], verdict: Verdict, tokens: int) -> str:
    """Each anneal's mean loss per domain and its change from the baseline's, and the verdict."""
    rows, deltas = s["losses"], s["delta_vs_baseline"]
    order = list(rows)
    width = max(len(k) for k in order)
    cols = [*s["domains"], "objective"]
    head = f"  {'anneal':<{width}}  " + "  ".join(f"{c:>16}" for c in cols)
    steps = s["runs"][0]["steps"]  # the baseline's first seed: every anneal runs as many
    seeds = ", ".join(map(str, s["seeds"]))
    lines = [
        f"microanneal from {s['checkpoint']}: {steps} steps ({tokens:,} tokens) each, seeds {seeds}; "
        "loss, the mean over seeds (change vs baseline)",
        head,
    ]
    for k in order:
        cells = [f"{rows[k][c]:8.4f}" + ("" if k == "baseline" else f" ({deltas[k][c]:+.4f})") for c in cols]
        lines.append(f"  {k:<{width}}  " + "  ".join(f"{c:>16}" for c in cells))
    if verdict.spread is not None:
        lines.append(
            f"  noise: the objective's standard deviation between seeds is {verdict.spread:.4f} (pooled over {len(order)} anneals); "
            f"a change within {verdict.noise:.4f} of another anneal's is noise"
        )
    lines.append(verdict.line())
    return "\n".join(lines)


def confirm(table: dict[str, dict[str, float]], wins: dict[str, bool], seeds: list[int], domains: list[str]) -> str:
    """The measured loss of the proposal, the uniform mixture and the prior, and who wins."""
    width = max(len(d) for d in [*domains, "objective"])
    lines = [f"confirmation runs (mean of seeds {', '.join(map(str, seeds))}): measured loss"]
    lines.append(f"  {'domain':<{width}}  {'prior':>8}  {'uniform':>8}  {'proposal':>8}")
    for d in [*domains, "objective"]:
        lines.append(f"  {d:<{width}}  {table['prior'][d]:8.4f}  {table['uniform'][d]:8.4f}  {table['proposal'][d]:8.4f}")
    lines.append(
        f"  the proposal {'beats' if wins['uniform'] else 'does NOT beat'} the uniform mixture and "
        f"{'beats' if wins['prior'] else 'does NOT beat'} the prior on the objective"
    )
    return "\n".join(lines)
