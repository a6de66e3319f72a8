"""What every dedup phase reads of its run, fixed once the run is resolved, and what the phases share.

:class:`DedupRun` is the frozen run value: the config, the values the run resolved
(:class:`.config.DedupResolved`), the work files' layout, where the attributes go and, in Bloom
mode, the filter the run starts from. A phase family (:mod:`.phases`, :mod:`.clustering`,
:mod:`.summary`) is a :class:`Family` built from it: its methods are the phases' ``plan``,
``run``, ``outputs`` and ``after``.

Which phases a run has depends on the config alone (:func:`exact_mode`, :func:`needs_removed`...);
the stage builds one :class:`DedupRun` and each family once from it when it is asked for its phases
(after the run is resolved: on the driver, and on each worker from the pickled stage).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dolma_pipe import paths, storage
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.stage import RunContext, StepResult, Task, TaskOutput

from . import exact, scaleout
from .bloommode import FilterState
from .config import DedupConfig, DedupResolved, MinhashSection
from .minhash import CLUSTERS_FILE
from .workfiles import Layout

# ---- which phases a run has (its config alone decides) ---------------------------------------


def always(config: DedupConfig) -> bool:
    return True


def exact_mode(config: DedupConfig) -> bool:
    """Exact hash partitions decide first copies (no ``bloom_filter``)."""
    return config.bloom_filter is None


def read_only_filter(config: DedupConfig) -> bool:
    return config.bloom_filter is not None and config.bloom_filter.read_only


def writes_filter(config: DedupConfig) -> bool:
    """Bloom mode that tests-and-sets (and publishes) the filter, in the global order."""
    return config.bloom_filter is not None and not config.bloom_filter.read_only


def needs_removed(config: DedupConfig) -> bool:
    """Paragraphs and substrings leave out the documents removed whole (so a removed copy is
    never the first one of a paragraph or a string that then loses every copy)."""
    d = config.dedupe
    later = d.paragraphs is not None or config.substrings is not None
    whole = (d.documents is not None and exact_mode(config)) or config.minhash is not None
    return later and whole and not read_only_filter(config)


def exact_documents(config: DedupConfig) -> bool:
    return config.dedupe.documents is not None and exact_mode(config)


def exact_paragraphs(config: DedupConfig) -> bool:
    return config.dedupe.paragraphs is not None and exact_mode(config)


def with_minhash(config: DedupConfig) -> bool:
    return config.minhash is not None


def verifies(config: DedupConfig) -> bool:
    """MinHash candidate pairs are checked (``minhash.verify``) before they are clustered."""
    return config.minhash is not None and config.minhash.verify != "none"


def with_substrings(config: DedupConfig) -> bool:
    return config.substrings is not None


@dataclass(frozen=True)
class DedupRun:
    """One resolved dedup run: what its phases read (it pickles to the workers with the stage)."""

    config: DedupConfig
    resolved: DedupResolved
    layout: Layout
    output_root: str
    set_name: str
    # Bloom mode: the filter the run starts from (publishing records the file it replaced it with).
    filter: FilterState | None = None

    @property
    def buckets(self) -> int:
        return self.resolved.buckets

    @property
    def minhash(self) -> MinhashSection:
        m = self.config.minhash
        assert m is not None, "a MinHash phase in a run without minhash"
        return m

    @property
    def verified(self) -> bool:
        return self.minhash.verify != "none"

    @property
    def needs_removed(self) -> bool:
        return needs_removed(self.config)

    @property
    def clusters_file(self) -> str:
        return storage.join(self.output_root, CLUSTERS_FILE)

    def scaled(self, ctx: RunContext) -> scaleout.Plan | None:
        """The split of the scaled-out clustering, or None when one task clusters (decided from
        the kept pairs, the same on the driver and every worker); None without MinHash."""
        if self.config.minhash is None:
            return None
        return scaleout.plan(ctx, self.verified, self.buckets, self.minhash.cluster_memory)

    def attribute_path(self, rel: str) -> str:
        """The attribute file of input ``rel``."""
        return storage.join(self.output_root, paths.attribute_file_name(rel))


class Family:
    """Phases built from one :class:`DedupRun`: what the phases of a family have in common."""

    def __init__(self, run: DedupRun):
        self.run = run
        self.config = run.config
        self.layout = run.layout

    # ---- planning -------------------------------------------------------------------------

    def plan_buckets(self, ctx: RunContext) -> list[Task]:
        """One task per hash range."""
        return exact.bucket_tasks(self.run.buckets)

    def plan_one(self, ctx: RunContext) -> list[Task]:
        return [Task(key="all", params={"files": len(ctx.inputs), "buckets": self.run.buckets})]

    def plan_file_groups(self, ctx: RunContext) -> list[Task]:
        """The light per-file phases (verify, removed, attributes): one task per group of
        consecutive files, as many groups as buckets (a small corpus is one task, run without
        starting workers; a large one is split like the hash ranges)."""
        buckets = self.run.buckets
        groups: list[list[int]] = []
        total = sum(f.size for f in ctx.inputs) or 1
        done = 0
        for i, f in enumerate(ctx.inputs):
            if not groups or (done * buckets // total > len(groups) - 1 and len(groups) < buckets):
                groups.append([])
            groups[-1].append(i)
            done += f.size
        tasks = []
        for g in groups:
            first = ctx.inputs[g[0]].rel
            key = first if len(g) == 1 else f"{first}+{len(g) - 1}"
            tasks.append(Task(key=key, inputs=tuple(ctx.inputs[i] for i in g), params={"files": g, "buckets": buckets}))
        return tasks

    # ---- outputs (for clearing a killed task's temporaries) -------------------------------

    def bucket_outputs(self, task: Task, *, phase: str) -> list[str]:
        return [self.layout.bucket(phase, task.params["bucket"])]

    def file_outputs(self, task: Task, *, phase: str) -> list[str]:
        return [self.layout.per_file(phase, f.rel) for f in task.inputs]

    # ---- the driver's step ----------------------------------------------------------------

    def total(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """The tasks' counts, summed."""
        return StepResult(data={"counts": summed(records)})


def summed(records: list[TaskRecord]) -> dict[str, int]:
    total: dict[str, int] = {}
    for r in records:
        for k, v in r.counts.items():
            total[k] = total.get(k, 0) + v
    return total


def each_file(task: Task, run: Callable[[int, str], TaskOutput]) -> TaskOutput:
    """Runs ``run(file index, relative name)`` for each file of a group task; sums the counts."""
    total = TaskOutput()
    for i, f in zip(task.params["files"], task.inputs):
        for k, v in run(i, f.rel).counts.items():
            total.counts[k] = total.counts.get(k, 0) + v
    return total


def hex_checksum(checksum: int | None) -> str | None:
    return None if checksum is None else f"{checksum:016x}"
