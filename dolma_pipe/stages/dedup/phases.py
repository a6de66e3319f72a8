"""The dedup phases before the attributes, one family each, built from the run (:class:`.run.DedupRun`).

* :class:`Scan`: every file's keys (:mod:`.scan`), the evaluation set built first;
* :class:`Exact`: exact mode's first copies of document and paragraph keys, and the documents
  removed whole (:mod:`.exact`);
* :class:`NearDuplicates`: MinHash bands, verification and the single-task clustering
  (:mod:`.minhash`; past its memory, :mod:`.clustering`);
* :class:`BloomMode`: the filter's test-and-set in the global order, then its publication (:mod:`.bloommode`);
* :class:`Substrings`: each file's suffix arrays, then the repeats found by merging them (:mod:`.substrings`).

Each method is one phase's ``plan`` (driver), ``run`` (worker), ``outputs`` or ``after`` (driver);
the stage's phase table (:mod:`.stage`) says which method is which.
"""

from __future__ import annotations

from typing import Any

from dolma_pipe.bloom import BloomFilter
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import RunContext, StepResult, Task, TaskOutput

from . import bloommode, decontam, exact, minhash, scan
from .run import Family, each_file, exact_documents, hex_checksum, summed
from .workfiles import DOC, PARA, documents_in

_READ_ONLY_FILTERS: dict[str, BloomFilter] = {}


def _read_only_filter(path: str) -> BloomFilter:
    """A read-only filter, mapped once per worker process (verified on the driver)."""
    f = _READ_ONLY_FILTERS.get(path)
    if f is None:
        f = _READ_ONLY_FILTERS[path] = BloomFilter.open_shared(bloommode.local_copy(path), readonly=True, verify=False)
    return f


class Scan(Family):
    """Phase ``scan``: one task per input file."""

    def plan(self, ctx: RunContext) -> list[Task]:
        params: dict[str, Any] = {"buckets": self.run.buckets}
        if self.config.decontamination is not None:
            path, stats = decontam.ensure_set(self.config.decontamination, self.layout, self.run.output_root)
            params["decontamination"] = path
            ctx.steps["evaluation"] = StepResult(data=stats)
            ctx.planning_errors = {f"evaluation_{k}": v for k, v in stats.get("evaluation_bad_kinds", {}).items()}
        return [Task(key=f.rel, inputs=(f,), params=params) for f in ctx.inputs]

    def scan(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        bf = self.config.bloom_filter
        filt = _read_only_filter(bf.file) if bf is not None and bf.read_only else None
        return scan.run_scan(self.config, self.layout, task, quarantine, self.run.resolved, task.params.get("decontamination"), filt)

    def outputs(self, task: Task) -> list[str]:
        return scan.scan_outputs(self.config, self.layout, task.rel)

    def after(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        step = self.total(records, ctx)
        step.data["documents"] = sum(r.docs_in for r in records)
        step.data["parameters"] = self.run.resolved.parameters()
        if "evaluation" in ctx.steps:
            step.data["evaluation"] = ctx.steps["evaluation"].data
        if self.run.filter is not None:
            step.data["filter_start"] = {"file": self.run.filter.path, "checksum": hex_checksum(self.run.filter.initial)}
        return step


class Exact(Family):
    """Phases ``documents`` and ``paragraphs`` (one task per hash range) and ``removed`` (per file group)."""

    def documents(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return exact.first_occurrences(self.layout, "documents", "docs", DOC, task.params["bucket"], ctx, False)

    def paragraphs(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return exact.first_occurrences(self.layout, "paragraphs", "paras", PARA, task.params["bucket"], ctx, self.run.needs_removed)

    def removed(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        docs = exact_documents(self.config)
        near = self.config.minhash is not None
        scaled = self.run.scaled(ctx) is not None
        buckets = task.params["buckets"]
        return each_file(task, lambda i, rel: exact.run_removed(self.layout, i, rel, buckets, docs, near, scaled))


class NearDuplicates(Family):
    """Phases ``bands`` (per hash range), ``verify`` (per file group) and ``clusters`` (one task,
    unless the pairs need more memory than one task may take)."""

    def bands(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return minhash.run_bands(self.layout, task, ctx, self.run.minhash.max_group)

    def verify(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return minhash.run_verify(self.layout, task.params["files"], ctx, task.params["buckets"], self.run.minhash)

    def plan_clusters(self, ctx: RunContext) -> list[Task]:
        return [] if self.run.scaled(ctx) else self.plan_one(ctx)

    def clusters(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return minhash.run_clusters(self.layout, self.run.output_root, task, ctx, task.params["buckets"], self.run.verified)

    def clusters_outputs(self, task: Task) -> list[str]:
        return [self.layout.single("minhash/members.bkt"), self.run.clusters_file]


class BloomMode(Family):
    """Phase ``bloom`` (one task), then the filter published."""

    def bloom(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        assert self.run.filter is not None
        return bloommode.run_bloom(self.config, self.layout, self.run.filter, task, ctx, self.run.needs_removed)

    def outputs(self, task: Task) -> list[str]:
        return [self.layout.single("bloom/filter.bloom")]

    def publish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        assert self.run.filter is not None
        step = bloommode.publish(self.config, self.layout, self.run.filter, self.run.output_root)
        step.data["counts"] = summed(records)
        return step


class Substrings(Family):
    """Phases ``suffix`` (one task per input file) and ``substrings`` (one task per key range)."""

    def plan_files(self, ctx: RunContext) -> list[Task]:
        return [Task(key=f.rel, inputs=(f,), params={"file": i}) for i, f in enumerate(ctx.inputs)]

    def suffix(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        from . import substrings  # numpy (suffix arrays): imported by the runs that need it

        removed = exact.removed_documents(self.layout, task.rel) if self.run.needs_removed else []
        return substrings.run_suffix(self.config, self.layout, task, removed, documents_in(self.layout.scan(task.rel, "meta")))

    def suffix_outputs(self, task: Task) -> list[str]:
        # Its parts' files are reported by the task (how many depends on the file's size).
        return []

    def parts(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Every file's parts, in the global order, each with its file's index."""
        order = {f.rel: i for i, f in enumerate(ctx.inputs)}
        parts = [{**p, "file": order[r.key]} for r in sorted(records, key=lambda r: order[r.key]) for p in r.data["parts"]]
        step = self.total(records, ctx)
        step.data["parts"] = parts
        return step

    def plan_key_ranges(self, ctx: RunContext) -> list[Task]:
        """One task per key range; each task finds its range's bounds in the suffix arrays it merges."""
        from . import substrings

        count = substrings.key_range_count(self.config, ctx.steps["suffix"].data["parts"])
        return [Task(key=f"bucket-{b:05d}", params={"bucket": b, "buckets": count}) for b in range(count)]

    def substrings(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        from . import substrings

        return substrings.run_substrings(self.config, self.layout, task, ctx.steps["suffix"].data["parts"])
