"""A search's phases, built from its :class:`~mixers.search.run.SearchRun`.

1. ``pools``, one task per source: its shards' documents as token counts (:mod:`.pools`), a work
   file; the step after checks every source has tokens;
2. ``runs``, one task per proxy run (:mod:`.proxy`): the swarm's sampled mixtures, or the
   microanneal's baseline and anneals, each trained once per seed (:mod:`.mixtures`). The step after
   fits the swarm's regression and writes the proposal (:mod:`.swarm`), or tabulates the
   microanneal (:mod:`.microanneal`);
3. ``confirm`` (swarm, with a ``confirm:`` section): the proposal, the uniform mixture and the prior
   trained once more as proxies, compared on the objective.
"""

from __future__ import annotations

from dolma_pipe import paths
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, StepResult, Task, TaskOutput
from mixers.search import microanneal, mixtures, swarm
from mixers.search.pools import PoolError, load_pool, read_pool, save_pool
from mixers.search.proxy import ProxyRun, run_proxy
from mixers.search.run import SearchRun, proxy_task, results


class SearchPhases:
    """The phases of one search."""

    def __init__(self, run: SearchRun):
        self.run = run
        self.config = run.config

    def phases(self) -> list[Phase]:
        phases = [
            Phase("pools", plan=self.plan_pools, run=self.pool, outputs=self.pool_outputs, after=self.pools_done, unit="source"),
            Phase("runs", plan=self.plan_runs, run=self.train, outputs=self.run_outputs, after=self.runs_done, unit="run"),
        ]
        if self.config.method == "swarm" and self.config.confirm is not None:
            phases.append(
                Phase("confirm", plan=self.plan_confirm, run=self.train, outputs=self.run_outputs, after=self.confirm_done, unit="run")
            )
        return phases

    # ---- pools --------------------------------------------------------------------------------

    def plan_pools(self, ctx: RunContext) -> list[Task]:
        return [
            Task(key=s.name, inputs=tuple(f for f in ctx.inputs if f.rel.startswith(s.name + "/")), params={"source": i})
            for i, s in enumerate(self.config.sources)
        ]

    def pool_outputs(self, task: Task) -> list[str]:
        return [self.run.pool_path(task.key)]

    def pool(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        try:
            pool = read_pool(task.key, [f.path for f in task.inputs])
        except PoolError as e:
            raise paths.PathError(f"config key 'sources.{task.params['source']}.paths': {e}") from None
        save_pool(self.run.pool_path(task.key), pool)
        return TaskOutput(
            docs_in=len(pool.keys),
            counts={"documents": len(pool.keys), "tokens": pool.available},
            data={"available": pool.available, "documents": len(pool.keys)},
        )

    def pools_done(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        names = self.run.names
        by = {r.key: r.data for r in records}
        available = {n: int(by[n]["available"]) for n in names}
        for i, n in enumerate(names):
            if available[n] == 0:
                raise ConfigError(f"config key 'sources.{i}.paths': source {n!r} has no tokens")
        lines = ["sources:"] + [f"  {n}: {by[n]['documents']:,} documents, {available[n]:,} tokens" for n in names]
        return StepResult(data={"available": available}, table="\n".join(lines))

    # ---- proxy runs: the search's, and the confirmation's ---------------------------------------

    def plan_runs(self, ctx: RunContext) -> list[Task]:
        tokens = self.config.proxy.tokens
        if self.config.method == "swarm":
            sw = self.config.swarm
            drawn = mixtures.swarm(sw, self.run.names, self.run.available(ctx), self.run.proxy_cap(ctx, tokens))
            return [proxy_task(f"run-{i:03d}", w, tokens, sw.seed) for i, w in enumerate(drawn)]
        ma = self.config.microanneal
        assert ma is not None
        tasks = []
        for key, w in mixtures.microanneal(ma, self.run.names).items():
            self.run.check_feasible(ctx, f"microanneal ({key})", w, tokens)
            tasks += [proxy_task(f"{key}-seed{s}", w, tokens, s, ma.checkpoint) for s in ma.seeds]
        return tasks

    def plan_confirm(self, ctx: RunContext) -> list[Task]:
        fit = ctx.steps["runs"].data
        assert self.config.confirm is not None
        tokens = self.config.confirm.tokens or self.config.proxy.tokens
        tasks = []
        for seed in self.config.confirm.seeds:
            for name in swarm.COMPARED:
                w = fit[name]
                self.run.check_feasible(ctx, f"confirm ({name})", w, tokens)
                tasks.append(proxy_task(f"confirm-{name}-seed{seed}", w, tokens, seed))
        return tasks

    def run_outputs(self, task: Task) -> list[str]:
        return self.run.record_files(task.key)

    def train(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = task.params
        run, cfg = self.run, self.config
        pools = [load_pool(run.pool_path(n), n) for n in run.names]
        result = run_proxy(
            ProxyRun(task.key, p["weights"], p["tokens"], p["seed"], p["init_from"]),
            pools,
            run.settings,
            cfg.domain_paths,
            nproc=cfg.proxy.nproc,
            threads=cfg.proxy.threads,
            max_instances=cfg.eval.max_instances,
            tokenizer=cfg.eval.tokenizer,
            scratch_root=cfg.proxy.scratch,
            record_dir=run.record_dir(task.key),
        )
        return TaskOutput(counts={"runs": 1, "tokens_trained": result["steps"] * run.settings.tokens_per_step}, data=result)

    def runs_done(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        if self.config.method == "microanneal":
            return microanneal.summarise(self.run, results(records))
        return swarm.fit(self.run, results(records), self.run.available(ctx))

    def confirm_done(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        return swarm.confirm(self.run, results(records), ctx.steps["runs"].table)
