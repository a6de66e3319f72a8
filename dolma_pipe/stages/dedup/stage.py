"""The ``dedup`` stage: its phases, chosen by the config, in order.

=============  ==============  ==========================================================
phase          tasks           what
=============  ==============  ==========================================================
scan           input files     keys, paragraph keys, MinHash bands, decontamination hits
documents      hash ranges     first copy of each document key (exact mode)
bands          hash ranges     MinHash candidate pairs
verify         input files     candidate pairs checked (``minhash.verify``)
clusters       one             connected components, survivors, ``_clusters.jsonl.gz``
graph ...      hash ranges     the same, in bounded memory, past ``minhash.cluster_memory``
                               (:mod:`.scaleout`: star steps, labels, numbers, names)
removed        input files     documents removed whole (when paragraphs are deduplicated too)
paragraphs     hash ranges     first copy of each paragraph key (exact mode)
bloom          one             Bloom mode's test-and-set in the global order, then publish
suffix         input files     each file's text and its suffix array (``substrings``)
substrings     key ranges      repeated substrings, by merging the files' suffix arrays
attributes     input files     Dolma attribute files
=============  ==============  ==========================================================

Every decision follows one global order (input files by relative name, then line, then
paragraph), never which worker ran first, so outputs are the same bytes for any number of
processes, on Ray, and across reruns; each phase has its own completion markers, so a killed
run resumes in the phase (and at the task) where it stopped.
"""

from __future__ import annotations

import functools
import io
from typing import Any

from dolma_pipe import paths, storage
from dolma_pipe.bloom import BloomFilter
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Stage, StepResult, Task, TaskOutput
from dolma_pipe.workdir import WorkDir

from . import attributes, bloommode, decontam, exact, minhash, scaleout, scan, substrings
from .config import BloomResolved, BloomStart, DedupConfig, DedupResolved, attribute_set_name, check, resolved
from .workfiles import Layout, documents_in

_READ_ONLY_FILTERS: dict[str, BloomFilter] = {}


def _read_only_filter(path: str) -> BloomFilter:
    """A read-only filter, mapped once per worker process (verified on the driver)."""
    f = _READ_ONLY_FILTERS.get(path)
    if f is None:
        f = _READ_ONLY_FILTERS[path] = BloomFilter.open_shared(bloommode.local_copy(path), readonly=True, verify=False)
    return f


class DedupStage(Stage[DedupConfig]):
    name = "dedup"
    description = "exact, paragraph (Bloom filter) and near-duplicate (MinHash LSH) deduplication, and decontamination"
    config_model = DedupConfig
    depends_on_input_set = True
    run_keys = frozenset({"keep_work"})

    def __init__(self, config: DedupConfig):
        check(config)
        super().__init__(config)
        self.set_name = attribute_set_name(config) or ""
        self.document_dir = config.dedupe.document_dir or paths.DOCUMENTS
        self._root = self._output_root()
        # Under Dolma's work_dir.output, a folder per attribute set: configs often share one work_dir.
        work_out = config.work_dir.output if config.work_dir is not None else None
        work = storage.join(work_out, self.set_name) if work_out else storage.join(self._root, "_work")
        if config.substrings is not None and storage.is_remote(work):
            # Its suffix arrays are built and merged over memory-mapped work files: refused now,
            # not after the whole scan phase has run.
            found = f"{work_out} is on S3" if work_out else f"without work_dir.output it would be {work}, on S3"
            raise ConfigError(
                f"config key 'work_dir.output': substring dedup needs a local work directory, and {found}; "
                "give work_dir.output a local folder (the documents and attributes may stay on S3)"
            )
        self.layout = Layout(WorkDir(work))
        self._filter: bloommode.FilterState | None = None

    # ---- where things go ----------------------------------------------------------------

    def _output_root(self) -> str:
        return paths.attribute_output_root(self.config.documents, self.set_name, self.config.destination, self.document_dir)

    @property
    def output_root(self) -> str:
        return self._root

    @property
    def destination_key(self) -> str:
        return "dedupe.name"

    @property
    def work(self) -> WorkDir:
        return self.layout.work

    def keeps_work_file(self, path: str) -> bool:
        # Bloom mode's record of what it published and the filter it started from: a rerun after
        # publishing (or with --force) needs them to know where the run started.
        return path.endswith(("/bloom/published.json", "/bloom/initial.bloom"))

    def output_name(self, rel: str) -> str:
        return paths.attribute_file_name(rel)

    def plan_inputs(self) -> list[InputFile]:
        inputs = super().plan_inputs()
        if self.document_dir == paths.DOCUMENTS:
            return inputs
        # Relative names below the custom documents folder, as Dolma's path rule has them.
        out = []
        for f in inputs:
            rel = paths.relative_below(f.path, self.document_dir) or f.rel
            out.append(InputFile(path=f.path, rel=rel, size=f.size, mtime=f.mtime))
        if len({f.rel for f in out}) != len(out):
            raise paths.PathError(f"two inputs have the same name below '{self.document_dir}/'; rename one")
        return sorted(out, key=lambda f: f.rel)

    def resolve(self, inputs: list[InputFile]) -> DedupResolved:
        """Hash ranges, MinHash bands x rows, Bloom sizes and the filter the run starts from, and the
        evaluation files decontamination reads."""
        c = self.config
        evaluation = decontam.identity(c.decontamination) if c.decontamination is not None else None
        bloom = None
        if c.bloom_filter is not None:
            state = self._filter = bloommode.FilterState(c, self.layout, self.output_root)
            sized = {} if c.bloom_filter.read_only else {"bits": state.bits, "hashes": state.hashes}
            bloom = BloomResolved(start=BloomStart(**state.identity()), **sized)
        return resolved(c, sum(f.size for f in inputs), evaluation, bloom)

    # ---- phases -------------------------------------------------------------------------

    def _buckets(self, ctx: RunContext) -> int:
        return self.resolved.buckets

    @property
    def _exact(self) -> bool:
        return self.config.bloom_filter is None

    @property
    def _read_only(self) -> bool:
        return self.config.bloom_filter is not None and self.config.bloom_filter.read_only

    @property
    def _needs_removed(self) -> bool:
        """Paragraphs and substrings leave out the documents removed whole (so a removed copy is
        never the first one of a paragraph or a string that then loses every copy)."""
        d = self.config.dedupe
        later = d.paragraphs is not None or self.config.substrings is not None
        return later and ((d.documents is not None and self._exact) or self.config.minhash is not None) and not self._read_only

    def phases(self) -> list[Phase]:
        d = self.config.dedupe
        out = [Phase("scan", plan=self._plan_scan, run=self._scan, outputs=self._scan_outputs, after=self._after_scan, unit="file")]
        if d.documents is not None and self._exact:
            out.append(
                Phase("documents", plan=self._plan_buckets, run=self._documents, outputs=self._bucket_out("documents"), after=self._sum)
            )
        m = self.config.minhash
        if m is not None:
            out.append(Phase("bands", plan=self._plan_buckets, run=self._bands, outputs=self._bucket_out("pairs"), after=self._sum))
            if m.verify != "none":
                out.append(
                    Phase(
                        "verify", plan=self._plan_files, run=self._verify, outputs=self._file_out("verified"), after=self._sum, unit="file"
                    )
                )
            out.append(Phase("clusters", plan=self._plan_clusters, run=self._clusters, outputs=self._clusters_outputs, after=self._sum))
            out.extend(self._scaleout_phases())
        if self._needs_removed:
            out.append(
                Phase("removed", plan=self._plan_files, run=self._removed, outputs=self._file_out("removed"), after=self._sum, unit="file")
            )
        if d.paragraphs is not None and self._exact:
            out.append(
                Phase("paragraphs", plan=self._plan_buckets, run=self._paragraphs, outputs=self._bucket_out("paragraphs"), after=self._sum)
            )
        if self.config.bloom_filter is not None and not self._read_only:
            out.append(Phase("bloom", plan=self._plan_one, run=self._bloom, outputs=self._bloom_outputs, after=self._publish))
        if self.config.substrings is not None:
            out.append(
                Phase("suffix", plan=self._plan_each_file, run=self._suffix, outputs=self._suffix_outputs, after=self._parts, unit="file")
            )
            out.append(
                Phase(
                    "substrings", plan=self._plan_key_ranges, run=self._substrings, outputs=self._bucket_out("substrings"), after=self._sum
                )
            )
        out.append(
            Phase(
                "attributes", plan=self._plan_files, run=self._attributes, outputs=self._attribute_outputs, after=self._summary, unit="file"
            )
        )
        return out

    def _scaleout_phases(self) -> list[Phase]:
        """The clustering past one task's memory (:mod:`.scaleout`): declared on every MinHash run
        (phases are fixed before the data is seen), they plan no task when the single one fits."""
        so = scaleout
        out = [Phase("graph", plan=self._plan_graph, run=self._graph, outputs=self._part_out("graph", "source"), after=self._sum)]
        for step in range(1, so.MAX_STEPS + 1):
            name = so.step_name(step)
            plan = functools.partial(self._plan_step, step)
            out.append(Phase(name, plan=plan, run=self._step, outputs=self._part_out(name, "part"), after=self._after_step))
        out += [
            Phase("labels", plan=self._plan_labels, run=self._labels, outputs=self._part_out("labels", "part"), after=self._sum),
            Phase(
                "numbers", plan=self._plan_groups, run=self._numbers, outputs=self._part_out("numbers", "group"), after=self._after_numbers
            ),
            Phase("names", plan=self._plan_groups, run=self._names, outputs=self._names_outputs, after=self._sum),
            Phase(
                "clusters-file",
                plan=self._plan_clusters_file,
                run=self._clusters_file,
                outputs=self._clusters_file_outputs,
                after=self._sum,
            ),
        ]
        return out

    def _scaled(self, ctx: RunContext) -> scaleout.Plan | None:
        """The split of the scaled-out clustering, or None when one task clusters (decided from
        the kept pairs, the same on the driver and every worker)."""
        m = self.config.minhash
        assert m is not None
        return scaleout.plan(ctx, m.verify != "none", self._buckets(ctx), m.cluster_memory)

    # planning (driver)

    def _plan_clusters(self, ctx: RunContext) -> list[Task]:
        return [] if self._scaled(ctx) else self._plan_one(ctx)

    def _plan_graph(self, ctx: RunContext) -> list[Task]:
        p = self._scaled(ctx)
        if p is None:
            return []
        return [Task(key=f"source-{s:05d}", params={"source": s, "parts": p.parts}) for s in range(p.sources)]

    def _plan_step(self, step: int, ctx: RunContext) -> list[Task]:
        p = self._scaled(ctx)
        if p is None or (step > 1 and not self._unsettled(ctx, step - 1)):
            return []
        return [Task(key=f"part-{r:05d}", params={"step": step, "part": r, "parts": p.parts}) for r in range(p.parts)]

    @staticmethod
    def _unsettled(ctx: RunContext, step: int) -> bool:
        """Whether step ``step`` ran and found unsettled nodes (so the next one must run)."""
        data = ctx.steps[scaleout.step_name(step)].data
        return bool(data.get("ran")) and data["unsettled"] > 0

    def _last_step(self, ctx: RunContext) -> int:
        """The last star step that ran: its input was already stars (its output is the same)."""
        ran = [s for s in range(1, scaleout.MAX_STEPS + 1) if ctx.steps[scaleout.step_name(s)].data.get("ran")]
        if ran and self._unsettled(ctx, ran[-1]):
            raise RuntimeError(
                f"MinHash clusters: {scaleout.MAX_STEPS} star steps did not settle every document (a chain of near-duplicates "
                "far longer than any seen); raise minhash.cluster_memory to cluster in one task"
            )
        return ran[-1]

    def _plan_labels(self, ctx: RunContext) -> list[Task]:
        p = self._scaled(ctx)
        if p is None:
            return []
        last = self._last_step(ctx)
        return [Task(key=f"part-{r:05d}", params={"part": r, "parts": p.parts, "step": last}) for r in range(p.parts)]

    def _plan_groups(self, ctx: RunContext) -> list[Task]:
        p = self._scaled(ctx)
        if p is None:
            return []
        return [Task(key=f"group-{g:05d}", params={"group": g, "groups": p.groups, "parts": p.parts}) for g in range(len(p.groups))]

    def _plan_clusters_file(self, ctx: RunContext) -> list[Task]:
        p = self._scaled(ctx)
        return [] if p is None else [Task(key="all", params={"groups": p.groups, "parts": p.parts})]

    def _plan_files(self, ctx: RunContext) -> list[Task]:
        """The light per-file phases (verify, removed, attributes): one task per group of
        consecutive files, as many groups as buckets (a small corpus is one task, run without
        starting workers; a large one is split like the hash ranges)."""
        buckets = self._buckets(ctx)
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

    def _plan_each_file(self, ctx: RunContext) -> list[Task]:
        return [Task(key=f.rel, inputs=(f,), params={"file": i}) for i, f in enumerate(ctx.inputs)]

    def _plan_key_ranges(self, ctx: RunContext) -> list[Task]:
        parts = ctx.steps["suffix"].data["parts"]
        count = self.config.buckets or substrings.key_range_count(parts)
        ranges = substrings.plan_key_ranges(self.layout, parts, count)
        return [Task(key=f"bucket-{b:05d}", params={"bucket": b, "key_lo": lo, "key_hi": hi}) for b, (lo, hi) in enumerate(ranges)]

    def _plan_buckets(self, ctx: RunContext) -> list[Task]:
        return exact.bucket_tasks(self._buckets(ctx))

    def _plan_one(self, ctx: RunContext) -> list[Task]:
        return [Task(key="all", params={"files": len(ctx.inputs), "buckets": self._buckets(ctx)})]

    def _plan_scan(self, ctx: RunContext) -> list[Task]:
        params: dict[str, Any] = {"buckets": self._buckets(ctx)}
        if self.config.decontamination is not None:
            path, stats = decontam.ensure_set(self.config.decontamination, self.layout, self.output_root)
            params["decontamination"] = path
            ctx.steps["evaluation"] = StepResult(data=stats)
            ctx.planning_errors = {f"evaluation_{k}": v for k, v in stats.get("evaluation_bad_kinds", {}).items()}
        return [Task(key=f.rel, inputs=(f,), params=params) for f in ctx.inputs]

    # running (workers)

    def _scan(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        filt = _read_only_filter(self.config.bloom_filter.file) if self._read_only and self.config.bloom_filter else None
        return scan.run_scan(self.config, self.layout, task, quarantine, self.resolved, task.params.get("decontamination"), filt)

    def _documents(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return exact.run_documents(self.layout, task, ctx)

    def _bands(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        assert self.config.minhash is not None
        return minhash.run_bands(self.layout, task, ctx, self.config.minhash.max_group)

    def _each_file(self, task: Task, run: Any) -> TaskOutput:
        """Runs ``run(file index, relative name)`` for each file of a group task; sums the counts."""
        total = TaskOutput()
        for i in task.params["files"]:
            out = run(i, ctx_rel(task, i))
            for k, v in out.counts.items():
                total.counts[k] = total.counts.get(k, 0) + v
        return total

    def _verify(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        m = self.config.minhash
        assert m is not None
        return minhash.run_verify(self.layout, task.params["files"], ctx, task.params["buckets"], m)

    def _clusters(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        assert self.config.minhash is not None
        return minhash.run_clusters(self.layout, self.output_root, task, ctx, task.params["buckets"], self.config.minhash.verify != "none")

    def _graph(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        m = self.config.minhash
        p = self._scaled(ctx)
        assert m is not None and p is not None
        return scaleout.run_graph(self.layout, task, ctx, p, m.verify != "none")

    def _step(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = self._scaled(ctx)
        assert p is not None
        return scaleout.run_step(self.layout, task, p)

    def _labels(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = self._scaled(ctx)
        assert p is not None
        return scaleout.run_labels(self.layout, task, p, task.params["step"])

    def _numbers(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = self._scaled(ctx)
        assert p is not None
        return scaleout.run_numbers(self.layout, task, p)

    def _names(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = self._scaled(ctx)
        assert p is not None
        return scaleout.run_names(self.layout, task, ctx, p, ctx.steps["numbers"].data["offsets"])

    def _clusters_file(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        p = self._scaled(ctx)
        assert p is not None
        return scaleout.run_clusters_file(self.layout, self.output_root, p, minhash.CLUSTERS_FILE)

    def _removed(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        docs = self.config.dedupe.documents is not None and self._exact
        near = self.config.minhash is not None
        scaled = near and self._scaled(ctx) is not None
        return self._each_file(task, lambda i, rel: exact.run_removed(self.layout, i, rel, task.params["buckets"], docs, near, scaled))

    def _paragraphs(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return exact.run_paragraphs(self.layout, task, ctx, self._needs_removed)

    def _bloom(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        assert self._filter is not None
        return bloommode.run_bloom(self.config, self.layout, self._filter, task, ctx, self._needs_removed)

    def _suffix(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        removed = exact.removed_documents(self.layout, task.rel) if self._needs_removed else []
        return substrings.run_suffix(self.config, self.layout, task, removed, documents_in(self.layout.scan(task.rel, "meta")))

    def _suffix_outputs(self, task: Task) -> list[str]:
        # Its parts' files are reported by the task (how many depends on the file's size).
        return []

    def _parts(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """Every file's parts, in the global order, each with its file's index."""
        order = {f.rel: i for i, f in enumerate(ctx.inputs)}
        parts = [{**p, "file": order[r.key]} for r in sorted(records, key=lambda r: order[r.key]) for p in r.data["parts"]]
        step = self._sum(records, ctx)
        step.data["parts"] = parts
        return step

    def _substrings(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return substrings.run_substrings(self.config, self.layout, task, ctx.steps["suffix"].data["parts"])

    def _attributes(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        parts = ctx.steps["suffix"].data["parts"] if "suffix" in ctx.steps else []
        subs_buckets = len(self._plan_key_ranges(ctx)) if parts else 0

        def one(i: int, rel: str) -> TaskOutput:
            out = self.output_path(rel)
            assert out is not None
            spans = b""
            if parts:
                spans = substrings.char_spans(self.layout, parts, [j for j, p in enumerate(parts) if p["file"] == i], subs_buckets)
            return attributes.run_attributes(self.config, self.layout, out, i, rel, task.params["buckets"], spans, scaled)

        scaled = self.config.minhash is not None and self._scaled(ctx) is not None

        return self._each_file(task, one)

    # outputs (for clearing a killed task's temporaries)

    def _scan_outputs(self, task: Task) -> list[str]:
        return scan.scan_outputs(self.config, self.layout, task.rel)

    def _bucket_out(self, phase: str):
        return lambda task: [self.layout.bucket(phase, task.params["bucket"])]

    def _file_out(self, phase: str):
        return lambda task: [self.layout.per_file(phase, f.rel) for f in task.inputs]

    def _part_out(self, phase: str, param: str):
        return lambda task: [scaleout.part_path(self.layout, phase, task.params[param])]

    def _names_outputs(self, task: Task) -> list[str]:
        # Its files' members are reported by the task (the files of its group).
        return [scaleout.rows_path(self.layout, task.params["group"])]

    def _clusters_file_outputs(self, task: Task) -> list[str]:
        return [storage.join(self.output_root, minhash.CLUSTERS_FILE)]

    def _clusters_outputs(self, task: Task) -> list[str]:
        return [self.layout.single("minhash/members.bkt"), storage.join(self.output_root, minhash.CLUSTERS_FILE)]

    def _bloom_outputs(self, task: Task) -> list[str]:
        return [self.layout.single("bloom/filter.bloom")]

    def _attribute_outputs(self, task: Task) -> list[str]:
        return [p for f in task.inputs if (p := self.output_path(f.rel)) is not None]

    # driver-side steps

    def _sum(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        total: dict[str, int] = {}
        for r in records:
            for k, v in r.counts.items():
                total[k] = total.get(k, 0) + v
        return StepResult(data={"counts": total})

    def _after_scan(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        step = self._sum(records, ctx)
        step.data["documents"] = sum(r.docs_in for r in records)
        step.data["parameters"] = self.resolved.parameters()
        if "evaluation" in ctx.steps:
            step.data["evaluation"] = ctx.steps["evaluation"].data
        if self._filter is not None:
            step.data["filter_start"] = {"file": self._filter.path, "checksum": _hex(self._filter.initial)}
        return step

    def _after_step(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        step = self._sum(records, ctx)
        counts = step.data["counts"]
        step.data.update(ran=bool(records), unsettled=counts.get("unsettled_nodes", 0), edges=counts.get("star_edges", 0))
        return step

    def _after_numbers(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        step = self._sum(records, ctx)
        step.data["offsets"] = scaleout.number_offsets(records)
        return step

    def _publish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        assert self._filter is not None
        step = bloommode.publish(self.config, self.layout, self._filter, self.output_root)
        step.data["counts"] = self._sum(records, ctx).data["counts"]
        return step

    def _summary(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        phases = {name: s.data for name, s in ctx.steps.items() if name != "evaluation"}
        phases["attributes"] = self._sum(records, ctx).data
        marked = phases["attributes"]["counts"]
        scan_step = ctx.steps["scan"].data
        data: dict[str, Any] = {
            "parameters": scan_step["parameters"],
            "documents": scan_step["documents"],
            "marked": marked,
            "phases": phases,
            # Rows carry a name only where it marks something (as in Dolma): the mixer's shorthand
            # learns here which names this set can hold.
            "attribute_names": self._attribute_names(),
        }
        if "bloom" in ctx.steps:
            data["filter"] = ctx.steps["bloom"].data["filter"]
        elif self._filter is not None:
            data["filter"] = {"file": self._filter.path, "checksum": _hex(self._filter.current), "read_only": True}
        if "clusters" in ctx.steps:
            scaled = ctx.steps.get("clusters-file")
            data["clusters"] = (scaled if scaled is not None and scaled.data.get("counts") else ctx.steps["clusters"]).data.get(
                "counts", {}
            )
            data["clusters_file"] = storage.join(self.output_root, minhash.CLUSTERS_FILE)
        return StepResult(data=data, table=self._table(data))

    def _attribute_names(self) -> list[str]:
        d, c = self.config.dedupe, self.config
        sections = (d.documents, d.paragraphs, c.minhash, c.decontamination, c.substrings)
        return sorted({s.attribute_name for s in sections if s is not None})

    def _table(self, data: dict[str, Any]) -> str:
        d = self.config.dedupe
        marked = data["marked"]
        rows: list[tuple[str, str]] = [("documents", f"{data['documents']:,}")]
        if d.documents is not None:
            rows.append((f"duplicate documents ({d.documents.attribute_name})", f"{marked.get('marked_documents', 0):,}"))
        if d.paragraphs is not None:
            rows.append((f"duplicate paragraphs ({d.paragraphs.attribute_name})", f"{marked.get('marked_paragraphs', 0):,}"))
        if self.config.minhash is not None:
            clusters = data["clusters"]
            rows.append(
                (
                    f"near-duplicate clusters ({self.config.minhash.attribute_name})",
                    f"{clusters.get('clusters', 0):,} clusters of {clusters.get('clustered_documents', 0):,} documents, "
                    f"{marked.get('marked_near_duplicates', 0):,} marked",
                )
            )
            rows.append(("clusters file", data["clusters_file"]))
        if self.config.decontamination is not None:
            rows.append(
                (f"contaminated paragraphs ({self.config.decontamination.attribute_name})", f"{marked.get('marked_contaminated', 0):,}")
            )
        if self.config.substrings is not None:
            rows.append(
                (
                    f"repeated substrings ({self.config.substrings.attribute_name})",
                    f"{marked.get('marked_substrings', 0):,} spans, {marked.get('marked_substring_chars', 0):,} characters: "
                    f"repeats of at least {self.config.substrings.min_length} bytes "
                    f"(keep {self.config.substrings.keep})",
                )
            )
        if "filter" in data:
            f = data["filter"]
            rows.append(("bloom filter", f"{f['file']} (checksum {f['checksum']})"))
        width = max(len(k) for k, _ in rows)
        buf = io.StringIO()
        buf.write(f"dedup {self.set_name}: attributes in {self.output_root}\n")
        for k, v in rows:
            buf.write(f"  {k.ljust(width)}  {v}\n")
        return buf.getvalue().rstrip("\n")


def ctx_rel(task: Task, file_index: int) -> str:
    """The relative name of file ``file_index`` of a group task."""
    return task.inputs[task.params["files"].index(file_index)].rel


def _hex(checksum: int | None) -> str | None:
    return None if checksum is None else f"{checksum:016x}"
