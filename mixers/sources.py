"""Dolmino-style sources as phases: count, plan, sample, shard (our extension of Dolma's mixer).

1. ``count``, one task per input file: the source's rules, then each kept document's tokens
   (:mod:`mixers.tokens`); kept documents and their (id hash, tokens) are cached under
   ``<output>/_cache/`` by the input's identity, the rules and the tokenizer, so a changed ratio,
   target or seed list counts nothing again. A source with quality buckets (:mod:`mixers.quality`)
   caches each kept document's score and topic there too. The cache's files are work files
   (:mod:`dolma_pipe.workdir`): one found damaged makes the runner redo the count task;
2. a driver step plans every source (:mod:`mixers.dolmino`): available, requested and taken
   tokens and the repetition, per seed (per quality bucket for a source with ``quality``); prints the plan before any output is written, stores it
   in the manifest, and stops with an error naming the source and the fix when a request cannot
   be met;
3. ``sample``, one task per input file: whole repeats plus the seeded subset, per seed (per
   bucket: each document's copies from its bucket's whole repeats and subset);
4. ``shard``, one task per (seed, source, shard) (:mod:`mixers.layout`):
   ``<output>/seed-<n>/documents/<source>-NNNN.jsonl.gz``; then, as for streams, each source's
   shards an earlier run left past this run's are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import zstandard

from dolma_pipe import paths, storage, workdir
from dolma_pipe import tokenizer as toks
from dolma_pipe.filters import BatchResult
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, StepResult, Task, TaskOutput
from dolma_pipe.workdir import WorkFileError
from mixers import dolmino, quality, tokens
from mixers.layout import MixLayout, shard_tasks
from mixers.output import MemberWriter
from mixers.reading import mix_file
from mixers.sharding import Piece, member_bytes, pack
from mixers.streams import totals as group_totals
from mixers.summary import group_summary, render
from mixers.verdicts import SUFFIX, VerdictRecorder

# 3: the cache's files are sealed work files (dolma_pipe.workdir).
CACHE_FORMAT = 3
# Raw bytes per member of the cached (zstd) documents of a count task.
CACHE_MEMBER_BYTES = 64 << 20
CACHE_READ = 8 << 20
# A count task's cache: kept documents, their (id hash, tokens), ids read, what its rules decided
# for each document (mixers.verdicts), and what it counted.
VERDICTS = "verdicts" + SUFFIX
CACHE_FILES = ("docs.jsonl.zst", "counts.npz", "ids.bin", VERDICTS, "meta.json")


class Sources:
    """The phases of a Dolmino-style mix of sources."""

    def __init__(
        self,
        layout: MixLayout,
        tokenizer_path: str,
        tokenizer_sha: str,
        requested: dict[str, int],
        scoring: dict[int, quality.QualitySpec] | None = None,
    ):
        self.layout = layout
        self.config = layout.config
        self.tokenizer_path = tokenizer_path
        self.tokenizer_sha = tokenizer_sha
        self.tokenizer_id = tokenizer_sha[:16]
        self.requested = requested
        # Sources with quality buckets, by index: what their count tasks score documents by.
        self.scoring = scoring or {}

    def phases(self) -> list[Phase]:
        return [
            Phase("count", plan=self.plan_files, run=self.count, outputs=self.count_outputs, after=self.plan_mix, unit="file"),
            Phase("sample", plan=self.plan_sample, run=self.sample, outputs=self.sample_outputs, after=self.assign_shards, unit="file"),
            Phase(
                "shard", plan=self.plan_shards, run=self.layout.shard, outputs=self.layout.shard_outputs, after=self.finish, unit="shard"
            ),
        ]

    def plan_files(self, ctx: RunContext) -> list[Task]:
        return [Task(key=f.rel, inputs=(f,), params={"group": self.layout.group_of(f).index}) for f in ctx.inputs]

    # ---- count ----------------------------------------------------------------------------------

    def cache_dir(self, task: Task) -> str:
        g = self.layout.group(task)
        ident = {
            "format": CACHE_FORMAT,
            "input": [task.path, task.size, task.mtime],
            "attributes": [
                [p, (i := storage.stat(p)).size, i.mtime] for p in (paths.attribute_path(task.path, a) for a in g.rules.attribute_sets)
            ],
            "rules": g.rules.digest(),
            "compression_in": g.compression_in,
            "tokenizer": self.tokenizer_id,
        }
        if g.index in self.scoring:  # the cached scores (other sources' caches keep their names)
            ident["quality"] = self.scoring[g.index].ident()
        digest = hashlib.sha256(orjson.dumps(ident, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
        return storage.join(self.layout.root, "_cache", task.key, digest)

    def count_outputs(self, task: Task) -> list[str]:
        # The cache's files are content-addressed (a later run with the same input and rules reads
        # them instead of counting again) and written meta.json last.
        cache = self.cache_dir(task)
        return [storage.join(cache, name) for name in CACHE_FILES]

    def count(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        cache = self.cache_dir(task)
        meta_path = storage.join(cache, "meta.json")
        if not self.config.force and storage.exists(meta_path):
            meta = orjson.loads(workdir.read(meta_path))
            # What reading the file told the run, told again: bad records, notes, the ids read.
            for bad in meta["errors"]:
                quarantine.add(bad["file"], bad["line"], bad["kind"], bad["message"], bad.get("raw"))
            quarantine.notes.update(meta["notes"])
            ids = workdir.read(storage.join(cache, "ids.bin"))
            quarantine.id_hashes.extend(ids[i : i + 16] for i in range(0, len(ids), 16))
        else:
            meta = self._count_into(task, cache, quarantine)
            workdir.write(meta_path, orjson.dumps(meta))
        c = meta["counts"]
        return TaskOutput(
            docs_in=c["docs"],
            counts={"docs_kept": c["kept"], "docs_removed": c["docs"] - c["kept"], "tokens_kept": c["tokens"]},
            data={"counts": c, "cache": self.layout.rel(cache), "verdicts": self.layout.rel(storage.join(cache, VERDICTS))},
        )

    def _count_into(self, task: Task, cache: str, quarantine: Quarantine) -> dict[str, Any]:
        g = self.layout.group(task)
        keys: list[int] = []
        counts_per_doc: list[int] = []
        tokenizer = toks.local_copy(self.layout.work, self.tokenizer_path, self.tokenizer_sha)
        spec = self.scoring.get(g.index)
        scorer = quality.ScoreReader(spec, task.path, g.rules.attribute_sets, g.compression_in) if spec else None
        scores: list[float] = []
        topics: list[str] = []
        verdicts = VerdictRecorder()

        with MemberWriter(storage.join(cache, "docs.jsonl.zst"), "zst", CACHE_MEMBER_BYTES, 3, work_file=True) as writer:

            def sink(r: BatchResult) -> None:
                writer.write(r.out, r.line_lengths)
                verdicts.add(r)
                keys.extend(r.keys)
                counts_per_doc.extend(tokens.count(tokenizer, r.texts))
                if scorer is not None:
                    s, t = scorer.batch(r)
                    scores.extend(s)
                    topics.extend(t)

            counts = mix_file(
                g.rules, task.path, quarantine, sink, batch_size=self.config.batch_size, compression=g.compression_in, collect=True
            )
        counts.tokens = int(sum(counts_per_doc))
        verdicts.save(storage.join(cache, VERDICTS))
        dolmino.save_counts(
            cache,
            np.array(keys, dtype=np.uint64),
            np.array(counts_per_doc, dtype=np.uint32),
            np.array(scores, dtype=np.float64) if scorer else None,
            quality.topic_arrays(topics) if scorer else None,
        )
        workdir.write(storage.join(cache, "ids.bin"), b"".join(quarantine.id_hashes))
        return {
            "counts": counts.as_dict(),
            "errors": [orjson.loads(line) for line in quarantine.iter_jsonl() if line],
            "notes": dict(quarantine.notes),
        }

    # ---- plan -----------------------------------------------------------------------------------

    def plan_mix(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        cfg = self.config
        records = self.layout.in_input_order(records, ctx)
        totals = group_totals(self.layout, records)
        plans = []
        for g in self.layout.groups:
            source = cfg.sources[g.index]
            t = totals[g.name]
            how = (
                f"tokens {source.tokens:,}"
                if source.tokens is not None
                else f"ratio {source.ratio:g} of target_tokens {cfg.target_tokens:,}"
            )
            caches = [self.layout.abs(r.data["cache"]) for r in records if r.params["group"] == g.index]
            if source.quality is not None:
                # Each bucket is sized and capped (mixers.quality); the source is their sum.
                qplan = quality.plan_source(g.index, source, self.scoring[g.index], self.requested[g.name], caches, cfg.seeds)
                plan = dolmino.SourcePlan(g.name, t.kept, t.tokens, self.requested[g.name], source.max_repetition, 0, 0)
                for s in cfg.seeds:
                    taken, docs = quality.seed_totals(qplan, s)
                    plan.seeds[s] = dolmino.SeedPick(0, taken, docs, taken, docs)
                plan.quality = qplan.as_json()
                plans.append(plan)
                continue
            plan = dolmino.size_source(g.index, g.name, t.kept, t.tokens, self.requested[g.name], source.max_repetition, how)

            def files(caches: list[str] = caches) -> Iterator[tuple[np.ndarray, np.ndarray]]:
                return (dolmino.load_counts(c) for c in caches)

            picks = dolmino.pick_subsets(g.name, files, {s: plan.remainder for s in cfg.seeds})
            for s in cfg.seeds:
                threshold, sub_tokens, sub_docs = picks[s]
                plan.seeds[s] = dolmino.SeedPick(
                    threshold,
                    sub_tokens,
                    sub_docs,
                    plan.whole_repeats * plan.available + sub_tokens,
                    plan.whole_repeats * plan.docs + sub_docs,
                )
            plans.append(plan)
        table = dolmino.render_plan(cfg, plans)
        # Printed before any output is written (the sample phase writes the mix).
        print(table, file=sys.stderr, flush=True)
        return StepResult(
            data={
                "plan": [p.as_json() for p in plans],
                "caches": {r.key: r.data["cache"] for r in records},
                "totals": {name: group_summary(t, self.layout.by_name[name].rules) for name, t in totals.items()},
            }
        )

    # ---- sample ---------------------------------------------------------------------------------

    def plan_sample(self, ctx: RunContext) -> list[Task]:
        step = ctx.steps["count"].data
        plans = {p["name"]: p for p in step["plan"]}
        tasks = []
        for f in ctx.inputs:
            g = self.layout.group_of(f)
            p = plans[g.name]
            thresholds = {str(s): p["seeds"][str(s)]["threshold"] for s in self.config.seeds}
            params = {"group": g.index, "cache": step["caches"][f.rel], "whole": p["whole_repeats"], "thresholds": thresholds}
            source = self.config.sources[g.index]
            if source.quality is not None:
                qplan = quality.QualityPlan.from_json(p["quality"])
                params["quality"] = quality.sample_params(qplan, source.quality, self.config.seeds)
            tasks.append(Task(key=f.rel, inputs=(f,), params=params))
        return tasks

    def _sample_path(self, task: Task, seed: int) -> str:
        g = self.layout.group(task)
        return self.layout.work.path("sample", f"seed-{seed}", task.key + ".members" + g.out_compression.extension)

    def sample_outputs(self, task: Task) -> list[str]:
        return [self._sample_path(task, s) for s in self.config.seeds]

    def _cached_lines(self, cache: str) -> Iterator[list[bytes]]:
        """The cached kept documents' lines, in batches (the cache is checked as it is read)."""
        batch: list[bytes] = []
        rest = b""
        with workdir.open_read(storage.join(cache, "docs.jsonl.zst")) as r:
            with zstandard.ZstdDecompressor().stream_reader(r.stream(), read_across_frames=True) as z:
                while chunk := z.read(CACHE_READ):
                    *lines, rest = (rest + chunk).split(b"\n")
                    batch.extend(line for line in lines if line)
                    if len(batch) >= 4096:
                        yield batch
                        batch = []
        if rest:
            batch.append(rest)
        if batch:
            yield batch

    def sample(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        g = self.layout.group(task)
        cache, whole = self.layout.abs(task.params["cache"]), task.params["whole"]
        keys, toks = dolmino.load_counts(cache)
        seeds = self.config.seeds
        # Per seed, each document's copies past the whole repeats: the seeded subset's 0 or 1, or
        # a quality bucket's whole repeats plus its subset's.
        if "quality" in task.params:
            extra = {s: quality.copies(g.name, cache, task.params["quality"], s) for s in seeds}
        else:
            extra = {
                s: dolmino.selected(dolmino.seeded_ranks(keys, s, g.name), int(task.params["thresholds"][str(s)])).astype(np.int64)
                for s in seeds
            }
        passes = max((int(e.max()) for e in extra.values() if len(e)), default=0)
        level = self.config.compression_level
        with contextlib.ExitStack() as stack:
            writers = {
                s: stack.enter_context(
                    MemberWriter(self._sample_path(task, s), g.out_compression, member_bytes(g.max_bytes), level, work_file=True)
                )
                for s in seeds
            }
            for _ in range(whole):  # whole repeats: every document, in order, once per repeat
                for lines in self._cached_lines(cache):
                    joined = b"\n".join(lines) + b"\n"
                    lengths = [len(x) + 1 for x in lines]
                    for w in writers.values():
                        w.write(joined, lengths)
            for r in range(max(passes, 1)):  # pass r: the documents with more than r copies still to write
                start = 0
                for lines in self._cached_lines(cache):
                    for s, w in writers.items():
                        chosen = [lines[i] for i in np.flatnonzero(extra[s][start : start + len(lines)] > r)]
                        if chosen:
                            w.write(b"\n".join(chosen) + b"\n", [len(x) + 1 for x in chosen])
                    start += len(lines)
                if start != len(keys):
                    # Each checks out alone but they disagree: the count task that wrote them is redone.
                    detail = f"damaged (it holds {start} documents, the cached counts {len(keys)})"
                    raise WorkFileError(storage.join(cache, "docs.jsonl.zst"), "damaged", detail)
        total = int(toks.sum())
        data = {
            str(s): {
                "path": self.layout.rel(writers[s].path),
                "members": [m.as_list() for m in writers[s].members],
                "docs": whole * len(keys) + int(extra[s].sum()),
                "tokens": whole * total + int((extra[s] * toks).sum()),
            }
            for s in seeds
        }
        return TaskOutput(counts={"docs_sampled": sum(d["docs"] for d in data.values())}, data=data)

    # ---- assign, shard, finish ------------------------------------------------------------------

    def assign_shards(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        records = self.layout.in_input_order(records, ctx)
        shards: dict[str, dict[str, list]] = {}
        taken: dict[str, dict[str, list[int]]] = {}
        for s in self.config.seeds:
            shards[str(s)] = {}
            taken[str(s)] = {}
            for g in self.layout.groups:
                mine = [r for r in records if r.params["group"] == g.index]
                pieces = [Piece(r.data[str(s)]["path"], m[0], m[1], m[2]) for r in mine for m in r.data[str(s)]["members"]]
                shards[str(s)][g.name] = [[p.as_list() for p in shard] for shard in pack(pieces, g.max_bytes)]
                taken[str(s)][g.name] = [sum(r.data[str(s)]["docs"] for r in mine), sum(r.data[str(s)]["tokens"] for r in mine)]
        plan = {p["name"]: p for p in ctx.steps["count"].data["plan"]}
        for seed, per in taken.items():
            for name, (docs, n_tokens) in per.items():
                want = plan[name]["seeds"][seed]
                if (docs, n_tokens) != (want["docs"], want["tokens"]):
                    raise dolmino.MixPlanError(
                        f"seed {seed}, source {name!r}: sampled {docs:,} documents / {n_tokens:,} tokens, planned {want['docs']:,} / {want['tokens']:,}"
                    )
        return StepResult(data={"shards": shards, "taken": taken})

    def plan_shards(self, ctx: RunContext) -> list[Task]:
        shards = ctx.steps["sample"].data["shards"]
        return [task for s in self.config.seeds for task in shard_tasks(self.layout, shards[str(s)], s)]

    def finish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        root = self.layout.root
        planned = ctx.steps["sample"].data["shards"]
        stale = sum(
            self.layout.remove_stale(storage.join(root, f"seed-{s}", "documents"), g, len(planned[str(s)][g.name]))
            for s in self.config.seeds
            for g in self.layout.groups
        )
        totals = ctx.steps["count"].data["totals"]
        taken = ctx.steps["sample"].data["taken"]
        plan = {p["name"]: p for p in ctx.steps["count"].data["plan"]}
        extra = {}
        for name in totals:
            per_seed = ", ".join(
                f"seed {s}: {taken[str(s)][name][1]:,} tokens / {taken[str(s)][name][0]:,} docs" for s in self.config.seeds
            )
            extra[name] = f"requested {plan[name]['requested']:,} tokens ({plan[name]['repetition']:.3f}x); taken {per_seed}"
        seeds = ", ".join(f"{storage.join(root, f'seed-{s}', 'documents')}/" for s in self.config.seeds)
        table = render("sources", totals, extra) + f"\n  written to {seeds}"
        if stale:
            table += f"\n  removed {stale:,} stale shard(s) an earlier run left there"
        return StepResult(data={"sources": totals, "taken": taken, "stale_shards_removed": stale}, table=table)
