"""Dolma's streams as phases: filter each input, assign members to shards, join them.

1. ``filter``, one task per input file: documents and their attribute rows through the stream's
   rules (:mod:`mixers.reading`, :mod:`dolma_pipe.filters`); the kept documents go to a work file
   of compressed members (:mod:`mixers.output`);
2. a driver step packs every stream's members, in input order, into size-bounded shards
   (:mod:`mixers.sharding`): a rule of sizes and order alone;
3. ``shard``, one task per output shard (:mod:`mixers.layout`): ``<output.path>/<name>-NNNN.jsonl.gz``;
   then the stream's shards an earlier run left past this run's last (and no other file) are
   removed, and a summary per stream is printed (documents in, kept, what each rule matched and
   removed, spans replaced, stale shards removed).

With ``shuffle: false`` (Dolma's meaning) the ``filter`` phase writes each input's output
directly to ``<output.path>/documents/<its name>``, and that is all. The output holds the
documents Dolma's mixer writes for the same inputs and spec, in the same order (input files in
path order, then line order); only the grouping into shards differs (see :mod:`mixers.sharding`).
"""

from __future__ import annotations

from typing import Any

from dolma_pipe import storage
from dolma_pipe.compression import Codec
from dolma_pipe.filters import BatchResult, MixCounts
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, StepResult, Task, TaskOutput
from mixers.layout import MixLayout, shard_tasks
from mixers.output import MemberWriter
from mixers.reading import mix_file
from mixers.sharding import Piece, member_bytes, pack
from mixers.summary import group_summary, render
from mixers.verdicts import VerdictRecorder, verdict_path


def totals(layout: MixLayout, records: list[TaskRecord]) -> dict[str, MixCounts]:
    """Each group's counts, summed over its files' task records."""
    out = {g.name: MixCounts() for g in layout.groups}
    for r in records:
        out[layout.group(r).name].add(MixCounts.from_dict(r.data["counts"]))
    return out


def summaries(layout: MixLayout, records: list[TaskRecord]) -> dict[str, dict[str, Any]]:
    return {name: group_summary(c, layout.by_name[name].rules) for name, c in totals(layout, records).items()}


class Streams:
    """The phases of a mix of Dolma streams."""

    def __init__(self, layout: MixLayout):
        self.layout = layout
        self.config = layout.config

    def phases(self) -> list[Phase]:
        if not self.config.shuffle:
            return [
                Phase(
                    "filter", plan=self.plan_files, run=self.filter, outputs=self.filter_outputs, after=self.finish_unsharded, unit="file"
                )
            ]
        return [
            Phase("filter", plan=self.plan_files, run=self.filter, outputs=self.filter_outputs, after=self.assign_shards, unit="file"),
            Phase(
                "shard", plan=self.plan_shards, run=self.layout.shard, outputs=self.layout.shard_outputs, after=self.finish, unit="shard"
            ),
        ]

    def plan_files(self, ctx: RunContext) -> list[Task]:
        return [Task(key=f.rel, inputs=(f,), params={"group": self.layout.group_of(f).index}) for f in ctx.inputs]

    # ---- filter ---------------------------------------------------------------------------------

    def _unsharded_path(self, task: Task) -> str:
        g = self.layout.group(task)
        # Dolma: <output.path>/documents/<the input's path below its documents/ folder>
        suffix = task.path.split("/documents/")[-1] if "/documents/" in task.path else task.rel.split("/", 1)[1]
        return storage.join(g.output, "documents", suffix)

    def _filter_path(self, task: Task) -> str:
        if not self.config.shuffle:
            return self._unsharded_path(task)
        return self.layout.work.path("filter", task.key + ".members" + self.layout.group(task).out_compression.extension)

    def filter_outputs(self, task: Task) -> list[str]:
        return [self._filter_path(task), verdict_path(self.layout.root, task.key)]

    def filter(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        g = self.layout.group(task)
        out = self._filter_path(task)
        shuffle = self.config.shuffle
        compression = g.out_compression if shuffle else Codec.of_path(out)
        level = self.config.compression_level
        verdicts = VerdictRecorder()

        def sink(r: BatchResult) -> None:
            writer.write(r.out, r.line_lengths)
            verdicts.add(r)

        with MemberWriter(out, compression, member_bytes(g.max_bytes), level, empty_member=not shuffle, work_file=shuffle) as writer:
            counts = mix_file(g.rules, task.path, quarantine, sink, batch_size=self.config.batch_size, compression=g.compression_in)
        verdicts.save(verdict_path(self.layout.root, task.key))
        return TaskOutput(
            docs_in=counts.docs,
            counts={"docs_kept": counts.kept, "docs_removed": counts.docs - counts.kept, "spans_replaced": counts.spans_replaced},
            data={
                "counts": counts.as_dict(),
                "path": self.layout.rel(out),
                "members": [m.as_list() for m in writer.members],
                "verdicts": self.layout.rel(verdict_path(self.layout.root, task.key)),
            },
        )

    # ---- assign, shard, finish ------------------------------------------------------------------

    def assign_shards(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        pieces: dict[str, list[Piece]] = {g.name: [] for g in self.layout.groups}
        for r in self.layout.in_input_order(records, ctx):
            pieces[self.layout.group(r).name].extend(Piece(r.data["path"], m[0], m[1], m[2]) for m in r.data["members"])
        shards = {g.name: [[p.as_list() for p in shard] for shard in pack(pieces[g.name], g.max_bytes)] for g in self.layout.groups}
        return StepResult(data={"shards": shards, "totals": summaries(self.layout, records)})

    def plan_shards(self, ctx: RunContext) -> list[Task]:
        return shard_tasks(self.layout, ctx.steps["filter"].data["shards"])

    def finish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        groups = ctx.steps["filter"].data["totals"]
        planned = ctx.steps["filter"].data["shards"]
        stale = {g.name: self.layout.remove_stale(g.output, g, len(planned[g.name])) for g in self.layout.groups}
        lines = self.layout.shard_lines(records)
        outputs = {g.name: f"{g.output}/{g.name}-NNNN.jsonl{g.out_compression.extension}" for g in self.layout.groups}
        for name in groups:
            lines.setdefault(name, "written: no documents kept, no shards")
            lines[name] += f" -> {outputs[name]}"
            if stale[name]:
                lines[name] += f"; removed {stale[name]:,} stale shard(s) an earlier run left there"
        data = {"streams": groups, "stale_shards_removed": sum(stale.values())}
        return StepResult(data=data, table=render("streams", groups, lines))

    def finish_unsharded(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        groups = summaries(self.layout, records)
        where = {g.name: f"written: one file per input under {g.output}/documents/" for g in self.layout.groups}
        return StepResult(data={"streams": groups}, table=render("streams, shuffle: false", groups, where))


def dry_run(layout: MixLayout) -> list[Phase]:
    """``dryrun: true``: nothing read or written (not even the manifest); the inputs and rules listed."""

    def listing(records: list[TaskRecord], ctx: RunContext) -> StepResult:
        lines = ["mix dry run (nothing written):"]
        data: dict[str, Any] = {}
        for g in layout.groups:
            files = [f for f in ctx.inputs if layout.group_of(f) is g]
            size = sum(f.size for f in files)
            lines.append(f"  {g.name}: {len(files):,} input files ({size / 1e6:,.1f} MB), attribute sets {list(g.rules.attribute_sets)}")
            for kind, rules in (("include", g.rules.include), ("exclude", g.rules.exclude)):
                for rule in rules:
                    lines.append(f"    {kind} ({g.rules.filter_syntax}): {rule}")
            data[g.name] = {"files": len(files), "bytes": size, "include": list(g.rules.include), "exclude": list(g.rules.exclude)}
        return StepResult(data={"dryrun": data}, table="\n".join(lines))

    return [Phase("dryrun", plan=_no_tasks, run=_no_run, after=listing)]


def _no_tasks(ctx: RunContext) -> list[Task]:
    return []


def _no_run(task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
    raise AssertionError("a dry run plans no task")
