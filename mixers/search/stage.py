"""``dolma-pipe mix-search``: the search as phases on the runner (local or Ray: one proxy per task).

1. ``pools``, one task per source: its shards' documents as token counts (:mod:`.pools`), a work file;
2. ``runs``, one task per proxy run (:mod:`.proxy`): the swarm's sampled mixtures, or the
   microanneal's baseline and candidates. Each run is its own task with its own completion marker,
   so a killed search reruns only the runs it had not finished. The step after fits the swarm's
   regression and writes the proposal (:mod:`.regression`), or tabulates the microanneal;
3. ``confirm`` (swarm, with a ``confirm:`` section): the proposal, the uniform mixture and the prior
   trained once more as proxies, compared on the objective.

Outputs under ``output``: ``runs/<key>/{result.json,config.yaml,train.log}``, ``search.json`` (every
run, the fit, the proposal and its predicted losses), ``proposal.olmix.yaml`` and, with
``fit.spec``, ``proposal.mix.yaml``. The ``fit`` and ``confirm`` sections change no run: a rerun
with another regression refits without training anything again.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import yaml

from dolma_pipe import paths, storage
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Stage, StepResult, Task, TaskOutput
from dolma_pipe.workdir import WorkDir
from mixers import olmix
from mixers.search import mixtures, noise, regression, tokenizers
from mixers.search.config import MixSearchConfig
from mixers.search.pools import PoolError, load_pool, read_pool, save_pool
from mixers.search.proxy import ProxyRun, run_proxy, train_settings
from mixers.search.target import SpecMix, Target
from train.shards import ShardError, find_shards


class MixSearchStage(Stage[MixSearchConfig]):
    name = "mix-search"
    description = "choose a mixture by proxy training runs: a swarm with a regression, or microanneals"
    config_model = MixSearchConfig
    depends_on_input_set = True
    # Neither changes a run: a rerun with another fit refits, one with confirmation runs adds them.
    run_keys = frozenset({"fit", "confirm", "keep_work"})

    def __init__(self, config: MixSearchConfig):
        super().__init__(config)
        self.settings = train_settings(config.proxy.config, config.proxy.set)
        # Every source and domain tokenized alike, and as the proxy reads them: refused now, not at training.
        keys = config.domain_keys
        tokenizers.check(
            [(f"sources.{i}.paths", s.paths) for i, s in enumerate(config.sources)]
            + [(keys[d], p) for d, p in config.domain_paths.items()],
            vocab_size=self.settings.vocab_size,
            eos_id=self.settings.eos_id,
            proxy=f"proxy.config {config.proxy.config}",
            eval_tokenizer=config.eval.tokenizer,
        )
        self.names = [s.name for s in config.sources]
        # The mix the proposal is written as, checked by mix itself now rather than after the runs.
        self.spec = SpecMix(config.fit.spec, self.names) if config.fit.spec is not None else None
        self._work = WorkDir(storage.join(config.output, "_work"))
        if config.microanneal is not None and not storage.exists(storage.join(config.microanneal.checkpoint, "trainer_state.json")):
            raise ConfigError(
                f"config key 'microanneal.checkpoint': {config.microanneal.checkpoint} is not a checkpoint (no trainer_state.json)"
            )

    @property
    def output_root(self) -> str:
        return self.config.output

    @property
    def work(self) -> WorkDir:
        return self._work

    # ---- inputs and what a run resolves ---------------------------------------------------------

    def _shards(self, key: str, shard_paths: list[str]) -> list[tuple[str, str]]:
        try:
            return [(str(p), rel) for p, rel in find_shards(shard_paths)]
        except ShardError as e:
            raise paths.PathError(f"config key '{key}': {e}") from None

    def plan_inputs(self) -> list[InputFile]:
        """Every source's shards (``<source>/<name>``), then every domain's (``eval/<domain>/<name>``)."""
        found: list[tuple[str, str]] = []
        for i, s in enumerate(self.config.sources):
            found += [(p, f"{s.name}/{rel}") for p, rel in self._shards(f"sources.{i}.paths", s.paths)]
        keys = self.config.domain_keys
        for d, shard_paths in self.config.domain_paths.items():
            found += [(p, f"eval/{d}/{rel}") for p, rel in self._shards(keys[d], shard_paths)]
        out = []
        for p, rel in found:
            info = storage.stat(p)
            out.append(InputFile(path=p, rel=rel, size=info.size, mtime=info.mtime))
        return out

    def resolve(self, inputs: list[InputFile]) -> dict[str, Any]:
        """The proxy's training config as the trainer reads it, and the checkpoint anneals start from."""
        out: dict[str, Any] = {"proxy": self.settings.raw}
        if self.config.microanneal is not None:
            state = storage.stat(storage.join(self.config.microanneal.checkpoint, "trainer_state.json"))
            out["checkpoint"] = [self.config.microanneal.checkpoint, state.size, state.mtime]
        return out

    def phases(self) -> list[Phase]:
        phases = [
            Phase("pools", plan=self._plan_pools, run=self._pool, outputs=self._pool_outputs, after=self._pools_done, unit="source"),
            Phase("runs", plan=self._plan_runs, run=self._run, outputs=self._run_outputs, after=self._runs_done, unit="run"),
        ]
        if self.config.method == "swarm" and self.config.confirm is not None:
            phases.append(
                Phase("confirm", plan=self._plan_confirm, run=self._run, outputs=self._run_outputs, after=self._confirm_done, unit="run")
            )
        return phases

    # ---- pools --------------------------------------------------------------------------------

    def _pool_path(self, name: str) -> str:
        return self.work.path("pools", f"{name}.npz")

    def _plan_pools(self, ctx: RunContext) -> list[Task]:
        return [
            Task(key=s.name, inputs=tuple(f for f in ctx.inputs if f.rel.startswith(s.name + "/")), params={"source": i})
            for i, s in enumerate(self.config.sources)
        ]

    def _pool_outputs(self, task: Task) -> list[str]:
        return [self._pool_path(task.key)]

    def _pool(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        try:
            pool = read_pool(task.key, [f.path for f in task.inputs])
        except PoolError as e:
            raise paths.PathError(f"config key 'sources.{task.params['source']}.paths': {e}") from None
        save_pool(self._pool_path(task.key), pool)
        return TaskOutput(
            docs_in=len(pool.keys),
            counts={"documents": len(pool.keys), "tokens": pool.available},
            data={"available": pool.available, "documents": len(pool.keys)},
        )

    def _pools_done(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        by = {r.key: r.data for r in records}
        available = {n: int(by[n]["available"]) for n in self.names}
        for i, n in enumerate(self.names):
            if available[n] == 0:
                raise ConfigError(f"config key 'sources.{i}.paths': source {n!r} has no tokens")
        lines = ["sources:"] + [f"  {n}: {by[n]['documents']:,} documents, {available[n]:,} tokens" for n in self.names]
        return StepResult(data={"available": available}, table="\n".join(lines))

    # ---- runs ---------------------------------------------------------------------------------

    def _available(self, ctx: RunContext) -> np.ndarray:
        return np.array([ctx.steps["pools"].data["available"][n] for n in self.names], dtype=np.float64)

    def _max_repetition(self) -> np.ndarray:
        return np.array([s.max_repetition for s in self.config.sources], dtype=np.float64)

    def _proxy_cap(self, ctx: RunContext, tokens: int) -> np.ndarray:
        return mixtures.caps(self._available(ctx), self._max_repetition(), tokens)

    def _task(self, key: str, weights: dict[str, float], tokens: int, seed: int, init_from: str | None = None) -> Task:
        return Task(key=key, params={"weights": weights, "tokens": tokens, "seed": seed, "init_from": init_from})

    def swarm_mixtures(self, ctx: RunContext) -> list[dict[str, float]]:
        """The swarm's K mixtures: a rule of ``swarm.seed``, the prior and the sources' sizes."""
        sw = self.config.swarm
        center = mixtures.prior(sw.prior, self.names, self._available(ctx))
        rng = np.random.default_rng([sw.seed, 1])
        drawn = mixtures.sample(rng, center, sw.concentration, sw.runs, self._proxy_cap(ctx, self.config.proxy.tokens), "swarm")
        return [mixtures.as_dict(w, self.names) for w in drawn]

    def microanneal_mixtures(self) -> dict[str, dict[str, float]]:
        """``baseline``, then one anneal per candidate: the baseline with ``share`` of the candidate."""
        ma = self.config.microanneal
        assert ma is not None
        base = mixtures.normalise(ma.baseline, self.names)
        out = {"baseline": mixtures.as_dict(base, self.names)}
        if isinstance(ma.candidates, dict):
            cands = {k: mixtures.normalise(v, self.names) for k, v in ma.candidates.items()}
        else:
            chosen = ma.candidates or [n for n in self.names if ma.baseline.get(n, 0) == 0]
            cands = {n: mixtures.normalise({n: 1.0}, self.names) for n in chosen}
        for k, c in cands.items():
            out[f"with-{k}"] = mixtures.as_dict((1 - ma.share) * base + ma.share * c, self.names)
        return out

    def _check_feasible(self, ctx: RunContext, key: str, weights: dict[str, float], tokens: int) -> None:
        w = mixtures.normalise(weights, self.names)
        cap = self._proxy_cap(ctx, tokens)
        over = [n for n, x, c in zip(self.names, w, cap) if x > c + 1e-9]
        if over:
            i = self.names.index(over[0])
            raise ConfigError(
                f"{key}: source {over[0]!r} cannot give {w[i]:.3f} of {tokens:,} tokens within sources.{i}.max_repetition "
                f"{self.config.sources[i].max_repetition:g}: raise it or lower proxy.tokens"
            )

    def _plan_runs(self, ctx: RunContext) -> list[Task]:
        tokens = self.config.proxy.tokens
        if self.config.method == "swarm":
            seed = self.config.swarm.seed
            return [self._task(f"run-{i:03d}", w, tokens, seed) for i, w in enumerate(self.swarm_mixtures(ctx))]
        ma = self.config.microanneal
        assert ma is not None
        tasks = []
        for key, w in self.microanneal_mixtures().items():
            self._check_feasible(ctx, f"microanneal ({key})", w, tokens)
            tasks += [self._task(f"{key}-seed{s}", w, tokens, s, ma.checkpoint) for s in ma.seeds]
        return tasks

    def _record_dir(self, key: str) -> str:
        return storage.join(self.output_root, "runs", key)

    def _run_outputs(self, task: Task) -> list[str]:
        return [storage.join(self._record_dir(task.key), f) for f in ("result.json", "config.yaml", "train.log")]

    def _run(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = task.params
        pools = [load_pool(self._pool_path(n), n) for n in self.names]
        result = run_proxy(
            ProxyRun(task.key, p["weights"], p["tokens"], p["seed"], p["init_from"]),
            pools,
            self.settings,
            self.config.domain_paths,
            nproc=self.config.proxy.nproc,
            threads=self.config.proxy.threads,
            max_instances=self.config.eval.max_instances,
            tokenizer=self.config.eval.tokenizer,
            scratch_root=self.config.proxy.scratch,
            record_dir=self._record_dir(task.key),
        )
        return TaskOutput(counts={"runs": 1, "tokens_trained": result["steps"] * self.settings.tokens_per_step}, data=result)

    # ---- after the runs: the fit and the proposal, or the microanneal table -------------------

    def _results(self, records: list[TaskRecord]) -> list[dict[str, Any]]:
        return [r.data for r in sorted(records, key=lambda r: r.key)]

    def _losses(self, results: list[dict[str, Any]], domains: list[str]) -> np.ndarray:
        return np.array([[r["domains"][d]["loss"] for d in domains] for r in results], dtype=np.float64)

    def _runs_done(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        if self.config.method == "microanneal":
            return self._microanneal_table(self._results(records))
        return self._fit(self._results(records), ctx)

    def _target(self, ctx: RunContext) -> Target:
        """The size, caps and tokens the proposal must be feasible at (:mod:`.target`)."""
        cfg = self.config
        reps = self._max_repetition()
        keys = [f"sources.{i}.max_repetition" for i in range(len(self.names))]
        if self.spec is None:
            tokens, where = (cfg.fit.target_tokens, "fit.target_tokens") if cfg.fit.target_tokens else (cfg.proxy.tokens, "proxy.tokens")
            return Target(tokens, where, "tokens of the search's shards", self._available(ctx), reps, keys)
        spec = self.spec
        counted = spec.count(storage.join(self.output_root, "spec-counts.json"))
        spec_reps = np.array([spec.max_repetition(n) for n in self.names])
        for i, n in enumerate(self.names):  # the cap that holds: the lower of the two (both, when equal)
            spec_key = f"fit.spec's sources.{spec.index[n]}.max_repetition"
            keys[i] = spec_key if spec_reps[i] < reps[i] else keys[i] if reps[i] < spec_reps[i] else f"{keys[i]} and {spec_key}"
        tokens, where = (cfg.fit.target_tokens, "fit.target_tokens") if cfg.fit.target_tokens else (spec.target_tokens, "fit.spec")
        return Target(
            tokens,
            where,
            f"tokens of fit.spec's sources after its filters ({spec.config.tokenizer})",
            np.array([counted[n] for n in self.names], dtype=np.float64),
            np.minimum(reps, spec_reps),
            keys,
        )

    def _fit(self, results: list[dict[str, Any]], ctx: RunContext) -> StepResult:
        cfg, fc = self.config, self.config.fit
        domains = list(cfg.domain_paths)
        objective = np.array([cfg.objective.get(d, 0.0) for d in domains])
        x = np.array([mixtures.normalise(r["weights"], self.names) for r in results])
        y = self._losses(results, domains)
        f = regression.fit(fc.regression, x, y, domains, objective, fc.folds, cfg.swarm.seed)
        target = self._target(ctx)
        cap = target.caps()
        available = self._available(ctx)
        prior = mixtures.prior(cfg.swarm.prior, self.names, available)
        uniform = np.full(len(self.names), 1.0 / len(self.names))
        key = "fit.target_tokens" if target.source == "proxy.tokens" else target.source
        if cap.sum() < 1.0:
            most = ", ".join(f"{n} {c:.3f} ({k})" for n, c, k in zip(self.names, cap, target.cap_keys))
            raise ConfigError(
                f"config key '{key}': no mixture of {target.tokens:,} tokens keeps every source within its max_repetition: "
                f"their largest weights add up to {cap.sum():.3f}: {most}; raise those caps or lower the target"
            )
        try:
            best = regression.propose(f, objective, prior, cap, fc.candidates, fc.top_k, cfg.swarm.seed, fc.max_kl)
        except ValueError as e:
            key = "fit.max_kl" if "max_kl" in str(e) else key
            raise ConfigError(f"config key '{key}': {e} at {target.tokens:,} tokens") from None
        # What the fit would take without the caps: the sources it wants more of than they allow.
        unconstrained = regression.propose(
            f, objective, prior, np.ones(len(self.names)), fc.candidates, fc.top_k, cfg.swarm.seed, fc.max_kl
        )
        binding = target.binding(unconstrained)
        proposal = mixtures.as_dict(best, self.names)
        named = {"proposal": mixtures.normalise(proposal, self.names), "uniform": uniform, "prior": prior}
        predicted = {}
        for k, w in named.items():
            losses = f.predict(w)[0]
            predicted[k] = {**dict(zip(domains, map(float, losses))), "objective": float(losses @ objective)}
        feasible = {k: bool(mixtures.feasible(w, cap)) for k, w in named.items()}
        best_run = int(np.argmin(y @ objective))
        summary = {
            "method": "swarm",
            "sources": self.names,
            "domains": domains,
            "objective": cfg.objective,
            "available_tokens": dict(zip(self.names, map(int, available))),
            "target_tokens": target.tokens,
            "max_repetition": dict(zip(self.names, map(float, target.max_repetition))),
            "target": target.as_json(self.names, binding),
            "runs": [{k: r[k] for k in ("key", "weights", "tokens", "steps", "domains")} for r in results],
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
            "uniform": mixtures.as_dict(uniform, self.names),
            "prior": mixtures.as_dict(prior, self.names),
            "predicted": predicted,
            "feasible_at_target": feasible,
            "kl_from_prior": {k: float(regression.kl(w, prior)) for k, w in named.items()},
            # Where the fit was measured: the farthest run from the prior.
            "kl_runs_max": float(regression.kl(x, prior).max()),
            "best_run": results[best_run]["key"],
        }
        written = self._write_proposal(summary, target)
        summary["written"] = written
        storage.write_bytes(storage.join(self.output_root, "search.json"), json.dumps(summary, indent=1).encode())
        return StepResult(data=summary, table=self._fit_table(summary, y @ objective, results, target))

    def _write_proposal(self, summary: dict[str, Any], target: Target) -> list[str]:
        """``proposal.olmix.yaml`` (with ``target_tokens`` when the search knows the mix's size) and,
        with ``fit.spec``, ``proposal.mix.yaml``: both checked by mix's own planning rules first."""
        reps = summary["max_repetition"]
        domains = {olmix.source_to_domain(n): (w, reps[n]) for n, w in summary["proposal"].items() if w > 0}
        mix = olmix.OlmixMix(target_tokens=None if target.source == "proxy.tokens" else target.tokens, domains=domains)
        olmix_path = storage.join(self.output_root, "proposal.olmix.yaml")
        spec_path = storage.join(self.output_root, "proposal.mix.yaml")
        raw = None
        if self.spec is not None:
            available = {n: int(a) for n, a in zip(self.names, target.available)}
            raw = self.spec.proposal(summary["proposal"], target.tokens, storage.join(self.output_root, "mix"))
            self.spec.check("the proposal", raw, available)
            self.spec.check("the proposal's olmix file", olmix.to_mix_sources(mix, self.spec.config), available)
        olmix.write_olmix(olmix_path, mix)
        written = [olmix_path]
        if raw is None:
            if storage.exists(spec_path):  # an earlier run's, for a fit.spec this one has not
                storage.remove(spec_path)
        else:
            header = f"# written by dolma-pipe mix-search from {self.config.fit.spec}: the sources' ratios are the proposed mixture\n"
            storage.write_bytes(spec_path, (header + yaml.safe_dump(raw, sort_keys=False)).encode())
            written.append(spec_path)
        return written

    def _fit_table(self, s: dict[str, Any], measured: np.ndarray, results: list[dict[str, Any]], target: Target) -> str:
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
        lines.append(
            f"  cap: a source's largest weight in a mix of {target.tokens:,} tokens ({target.source}) within its max_repetition, "
            f"from the {target.counted}"
        )
        if target.source == "proxy.tokens":
            lines.append(
                "  (no mix named: the caps hold at the proxies' size only; set fit.spec or fit.target_tokens to the mix you will make)"
            )
        binding = [names.index(n) for n in t["binding"]]
        if binding:
            lines.append(
                "  binding (the fit wants more of it than its cap allows): "
                + "; ".join(f"{names[i]} (raise {target.cap_keys[i]} for more)" for i in binding)
            )
        else:
            lines.append("  binding: none (no source is at its cap)")
        kl, runs_kl = s["kl_from_prior"]["proposal"], s["kl_runs_max"]
        lines.append(f"  KL from the prior: proposal {kl:.3f}, uniform {s['kl_from_prior']['uniform']:.3f}, runs up to {runs_kl:.3f} nats")
        if kl > runs_kl + 1e-9:
            lines.append(
                f"  WARNING: the proposal is {kl:.3f} nats from the prior, farther than every run ({runs_kl:.3f}): the fit "
                f"extrapolates there. fit.max_kl keeps the proposal within that KL divergence of the prior "
                f"(max_kl: {max(runs_kl, 1e-3):.3g} keeps it where the runs were); or sample wider runs (a lower swarm.concentration)"
            )
        sp = s["fit"]["spearman"]
        fmt = {k: ("n/a" if v is None else f"{v:.3f}") for k, v in sp.items()}
        lines.append("  held-out Spearman (cross-validated): " + ", ".join(f"{k} {v}" for k, v in fmt.items()))
        lines += self._cv_warning(sp["objective"], s["fit"]["spearman_p"], len(results))
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

    @staticmethod
    def _cv_warning(rho: float | None, p: float, runs: int) -> list[str]:
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

    def _microanneal_table(self, results: list[dict[str, Any]]) -> StepResult:
        """Each anneal's loss per domain (the mean over its seeds) beside the baseline's, and the
        best on the objective only where its margin is above the noise between seeds (:mod:`.noise`)."""
        cfg = self.config
        ma = cfg.microanneal
        assert ma is not None
        domains = list(cfg.domain_paths)
        by = {r["key"]: r for r in results}
        names = list(self.microanneal_mixtures())
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
            "runs": [{k: r[k] for k in ("key", "weights", "tokens", "steps", "domains")} for key in order for r in seeded[key]],
            "losses": rows,
            "delta_vs_baseline": deltas,
            "objective_per_seed": {k: [obj(r) for r in runs] for k, runs in seeded.items()},
            "verdict": v.as_json(),
            "best": v.best if v.clear else None,
        }
        storage.write_bytes(storage.join(self.output_root, "search.json"), json.dumps(summary, indent=1).encode())
        width = max(len(k) for k in order)
        cols = [*domains, "objective"]
        head = f"  {'anneal':<{width}}  " + "  ".join(f"{c:>16}" for c in cols)
        steps = seeded["baseline"][0]["steps"]
        seeds = ", ".join(map(str, ma.seeds))
        lines = [
            f"microanneal from {ma.checkpoint}: {steps} steps ({cfg.proxy.tokens:,} tokens) each, seeds {seeds}; "
            "loss, the mean over seeds (change vs baseline)",
            head,
        ]
        for k in order:
            cells = [f"{rows[k][c]:8.4f}" + ("" if k == "baseline" else f" ({deltas[k][c]:+.4f})") for c in cols]
            lines.append(f"  {k:<{width}}  " + "  ".join(f"{c:>16}" for c in cells))
        if v.spread is not None:
            lines.append(
                f"  noise: the objective's standard deviation between seeds is {v.spread:.4f} (pooled over {len(order)} anneals); "
                f"a change within {v.noise:.4f} of another anneal's is noise"
            )
        lines.append(v.line())
        return StepResult(data=summary, table="\n".join(lines))

    # ---- confirmation runs ----------------------------------------------------------------------

    def _plan_confirm(self, ctx: RunContext) -> list[Task]:
        fit = ctx.steps["runs"].data
        assert self.config.confirm is not None
        tokens = self.config.confirm.tokens or self.config.proxy.tokens
        tasks = []
        for seed in self.config.confirm.seeds:
            for name in ("proposal", "uniform", "prior"):
                w = fit[name]
                self._check_feasible(ctx, f"confirm ({name})", w, tokens)
                tasks.append(self._task(f"confirm-{name}-seed{seed}", w, tokens, seed))
        return tasks

    def _confirm_done(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        cfg = self.config
        assert cfg.confirm is not None
        domains = list(cfg.domain_paths)
        results = {r["key"]: r for r in self._results(records)}
        table: dict[str, dict[str, float]] = {}
        for name in ("proposal", "uniform", "prior"):
            runs = [results[f"confirm-{name}-seed{s}"] for s in cfg.confirm.seeds]
            row = {d: float(np.mean([r["domains"][d]["loss"] for r in runs])) for d in domains}
            row["objective"] = sum(w * row[d] for d, w in cfg.objective.items())
            table[name] = row
        wins = {k: table["proposal"]["objective"] < table[k]["objective"] for k in ("uniform", "prior")}
        data = {"confirm": table, "proposal_beats": wins, "seeds": cfg.confirm.seeds}
        search = storage.join(self.output_root, "search.json")
        summary = json.loads(storage.read_bytes(search))
        summary.update(data)
        storage.write_bytes(search, json.dumps(summary, indent=1).encode())
        width = max(len(d) for d in [*domains, "objective"])
        lines = [f"confirmation runs (mean of seeds {', '.join(map(str, cfg.confirm.seeds))}): measured loss"]
        lines.append(f"  {'domain':<{width}}  {'prior':>8}  {'uniform':>8}  {'proposal':>8}")
        for d in [*domains, "objective"]:
            lines.append(f"  {d:<{width}}  {table['prior'][d]:8.4f}  {table['uniform'][d]:8.4f}  {table['proposal'][d]:8.4f}")
        lines.append(
            f"  the proposal {'beats' if wins['uniform'] else 'does NOT beat'} the uniform mixture and "
            f"{'beats' if wins['prior'] else 'does NOT beat'} the prior on the objective"
        )
        # A run prints its last step's table only: the fit's comes first.
        return StepResult(data=data, table=(ctx.steps["runs"].table or "") + "\n" + "\n".join(lines))
