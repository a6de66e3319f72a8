"""The scaled-out clustering's phases (:mod:`.scaleout` does the work), built from the run.

Declared on every MinHash run (phases are fixed before the data is seen), they plan no task when
the single ``clusters`` task fits ``minhash.cluster_memory``. Otherwise: ``graph`` (the kept pairs
as edges, by hash range), the star steps (phase ``star``, repeated: rounds ``star-01``,
``star-02``... while the last one left unsettled nodes, at most :data:`.scaleout.MAX_STEPS`),
``labels`` (from the last step), ``numbers`` and ``names`` (per file group) and ``clusters-file``.
"""

from __future__ import annotations

from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Repeat, RunContext, StepResult, Task, TaskOutput

from . import minhash, scaleout
from .run import Family


class ScaleOut(Family):
    """The clustering past one task's memory: every method plans, runs or sums one of its phases."""

    def _plan(self, ctx: RunContext) -> scaleout.Plan:
        p = self.run.scaled(ctx)
        assert p is not None, "a scaled-out clustering task in a run that clusters in one task"
        return p

    # ---- planning (driver) ----------------------------------------------------------------

    def plan_graph(self, ctx: RunContext) -> list[Task]:
        p = self.run.scaled(ctx)
        if p is None:
            return []
        return [Task(key=f"source-{s:05d}", params={"source": s, "parts": p.parts}) for s in range(p.sources)]

    def plan_step(self, ctx: RunContext) -> list[Task]:
        """The star step ``ctx.round``: a task per hash range (none when one task clusters)."""
        p = self.run.scaled(ctx)
        if p is None:
            return []
        return [Task(key=f"part-{r:05d}", params={"step": ctx.round, "part": r, "parts": p.parts}) for r in range(p.parts)]

    def steps(self) -> Repeat:
        """The star steps' rounds: another while the last one left unsettled nodes."""
        exhausted = (
            f"MinHash clusters: {scaleout.MAX_STEPS} star steps did not settle every document (a chain of near-duplicates "
            "far longer than any seen); raise minhash.cluster_memory to cluster in one task"
        )
        return Repeat(scaleout.MAX_STEPS, _unsettled, exhausted)

    def plan_labels(self, ctx: RunContext) -> list[Task]:
        p = self.run.scaled(ctx)
        if p is None:
            return []
        last = _last_step(ctx)
        return [Task(key=f"part-{r:05d}", params={"part": r, "parts": p.parts, "step": last}) for r in range(p.parts)]

    def plan_groups(self, ctx: RunContext) -> list[Task]:
        p = self.run.scaled(ctx)
        if p is None:
            return []
        return [Task(key=f"group-{g:05d}", params={"group": g, "groups": p.groups, "parts": p.parts}) for g in range(len(p.groups))]

    def plan_clusters_file(self, ctx: RunContext) -> list[Task]:
        p = self.run.scaled(ctx)
        return [] if p is None else [Task(key="all", params={"groups": p.groups, "parts": p.parts})]

    # ---- running (workers) ----------------------------------------------------------------

    def graph(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return scaleout.run_graph(self.layout, task, ctx, self._plan(ctx), self.run.verified)

    def step(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return scaleout.run_step(self.layout, task, self._plan(ctx))

    def labels(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return scaleout.run_labels(self.layout, task, self._plan(ctx), task.params["step"])

    def numbers(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return scaleout.run_numbers(self.layout, task, self._plan(ctx))

    def names(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return scaleout.run_names(self.layout, task, ctx, self._plan(ctx), ctx.steps["numbers"].data["offsets"])

    def clusters_file(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return scaleout.run_clusters_file(self.layout, self.run.output_root, self._plan(ctx), minhash.CLUSTERS_FILE)

    # ---- outputs ----------------------------------------------------------------------------

    def part_outputs(self, task: Task, *, phase: str, param: str) -> list[str]:
        return [scaleout.part_path(self.layout, phase, task.params[param])]

    def step_outputs(self, task: Task) -> list[str]:
        return [scaleout.part_path(self.layout, scaleout.step_name(task.params["step"]), task.params["part"])]

    def names_outputs(self, task: Task) -> list[str]:
        # Its files' members are reported by the task (the files of its group).
        return [scaleout.rows_path(self.layout, task.params["group"])]

    def clusters_file_outputs(self, task: Task) -> list[str]:
        return [self.run.clusters_file]

    # ---- the driver's steps ---------------------------------------------------------------

    def after_step(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        step = self.total(records, ctx)
        counts = step.data["counts"]
        step.data.update(ran=bool(records), unsettled=counts.get("unsettled_nodes", 0), edges=counts.get("star_edges", 0))
        return step

    def after_numbers(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        step = self.total(records, ctx)
        step.data["offsets"] = scaleout.number_offsets(records)
        return step


def _unsettled(ctx: RunContext, step: int) -> bool:
    """Whether star step ``step`` ran and found unsettled nodes (so the next one must run)."""
    data = ctx.steps[scaleout.step_name(step)].data
    return bool(data.get("ran")) and data["unsettled"] > 0


def _last_step(ctx: RunContext) -> int:
    """The last star step: its input was already stars (its output is the same). Every step the
    run asked for ran (the runner stops a run whose last allowed step left unsettled nodes)."""
    return max(s for s in range(1, scaleout.MAX_STEPS + 1) if scaleout.step_name(s) in ctx.steps)
