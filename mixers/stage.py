"""``mix``: Dolma's mixer (streams) and Dolmino-style token-target mixes (sources), as phases.

**Streams** (Dolma's schema and semantics):

1. ``filter``, one task per input file: documents and their attribute rows through the stream's
   rules (:mod:`mixers.reading`, :mod:`dolma_pipe.filters`); the kept documents go to an
   intermediate file of compressed members (:mod:`mixers.output`);
2. a driver step packs every stream's members, in input order, into size-bounded shards
   (:mod:`mixers.sharding`): a rule of sizes and order alone;
3. ``shard``, one task per output shard: its members' bytes joined into
   ``<output.path>/<name>-NNNN.jsonl.gz``; then the intermediates are removed, so are the stream's
   shards an earlier run left past this run's last (and no other file), and a summary per stream
   is printed (documents in, kept, removed by each rule, spans replaced, stale shards removed).

With ``shuffle: false`` (Dolma's meaning) the ``filter`` phase writes each input's output
directly to ``<output.path>/documents/<its name>``. The output holds the documents Dolma's
mixer writes for the same inputs and spec, in the same order (input files in path order, then
line order); only the grouping into shards differs (see :mod:`mixers.sharding`).

**Sources** (Dolmino-style, our extension):

1. ``count``, one task per input file: the source's rules, then each kept document's tokens
   (:mod:`mixers.tokens`); kept documents and their (id hash, tokens) are cached under
   ``<output>/_cache/`` by the input's identity, the rules and the tokenizer, so a changed ratio,
   target or seed list counts nothing again;
2. a driver step plans every source (:mod:`mixers.dolmino`): available, requested and taken
   tokens and the repetition, per seed; prints the plan before any output is written, stores it
   in the manifest, and stops with an error naming the source and the fix when a request cannot
   be met;
3. ``sample``, one task per input file: whole repeats plus the seeded subset, per seed;
4. ``shard``, one task per (seed, source, shard): ``<output>/seed-<n>/documents/<source>-NNNN.jsonl.gz``;
   then, as for streams, each source's shards an earlier run left past this run's are removed.

Every task's outputs depend on its inputs alone, so outputs are byte-identical for any process
count and executor and across reruns, and a killed run resumes in the phase where it stopped.
Every output document has ``metadata.provenance = "<input file name>:<line>"``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import zstandard

from dolma_pipe import paths, storage, workdir
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Stage, StepResult, Task, TaskOutput, remove_stale
from dolma_pipe.workdir import WorkDir, WorkFileError
from mixers import dolmino, tokens
from mixers.config import MixConfig
from mixers.output import Compression, MemberWriter, compression_for, concatenate, extension
from mixers.reading import mix_file
from mixers.rules import StreamRules, compile_rules
from mixers.sharding import Piece, member_bytes, pack, shard_name, shard_pattern
from mixers.summary import GroupTotals, render

# 3: the cache's files are sealed work files (dolma_pipe.workdir).
CACHE_FORMAT = 3
# Raw bytes per member of the cached (zstd) documents of a count task.
CACHE_MEMBER_BYTES = 64 << 20
CACHE_READ = 8 << 20
# A count task's cache: kept documents, their (id hash, tokens), ids read, and what it counted.
CACHE_FILES = ("docs.jsonl.zst", "counts.npz", "ids.bin", "meta.json")


@dataclass(frozen=True)
class Group:
    """One stream or source: its inputs, rules and outputs."""

    index: int
    key: str  # its config key, e.g. streams.0
    name: str
    patterns: tuple[str, ...]
    rules: StreamRules
    compression_in: str | None
    out_compression: Compression
    output: str  # streams: output.path (sources: unused)
    max_bytes: int


def _common_root(outputs: list[str]) -> str:
    """The deepest folder (or prefix) holding every output path."""
    if all(not storage.is_remote(o) for o in outputs):
        return os.path.commonpath([os.path.abspath(storage.local_path(o)) for o in outputs])
    split = [o.rstrip("/").split("/") for o in outputs]
    common = []
    for parts in zip(*split):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    root = "/".join(common)
    if not root or root.endswith(":/") or root.count("/") < 3:
        raise ConfigError("config key 'destination' is required: the streams' outputs share no folder to hold the run's manifest")
    return root


def check_spec(cfg: MixConfig) -> None:
    """Whole-spec checks the field types cannot express; ConfigError naming the key."""
    if bool(cfg.streams) == bool(cfg.sources):
        raise ConfigError("the mix spec needs either 'streams' (Dolma's mixer) or 'sources' (a Dolmino-style mix), not both or neither")
    names = [g.name for g in (cfg.streams or cfg.sources)]
    kind = cfg.kind
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise ConfigError(f"config key '{kind}.{i}.name': name {name!r} is used twice")
    if cfg.sources:
        for key in ("output", "tokenizer"):
            if getattr(cfg, key) is None:
                raise ConfigError(f"config key '{key}' is required for a mix of sources")
        dolmino.requested_tokens(cfg)
    else:
        for key in ("output", "tokenizer", "target_tokens"):
            if getattr(cfg, key) is not None:
                raise ConfigError(f"config key '{key}' belongs to a mix of sources; streams set their output under streams.N.output")


class MixStage(Stage[MixConfig]):
    name = "mix"
    description = "mix sources into a corpus from a YAML spec (Dolma and Dolmino style)"
    config_model = MixConfig
    depends_on_input_set = True
    # Dolma's work_dir is accepted and unused; the others say how a run goes, not what it writes.
    run_keys = frozenset({"batch_size", "dryrun", "work_dir", "keep_work"})

    def __init__(self, config: MixConfig):
        super().__init__(config)
        check_spec(config)
        if config.sources:
            assert config.tokenizer is not None
            # The file the name stands for (workers read it); the spec keeps the name as written.
            self.tokenizer_path = tokens.resolve(config.tokenizer)
            self.tokenizer_id = tokens.fingerprint(self.tokenizer_path)
            self.requested = dolmino.requested_tokens(config)
        else:
            self.tokenizer_path = self.tokenizer_id = ""
            self.requested = {}
        self._root = self._find_root()
        self.groups = self._make_groups()
        self._by_name = {g.name: g for g in self.groups}

    # ---- spec -------------------------------------------------------------------------------

    def _find_root(self) -> str:
        cfg = self.config
        if cfg.sources:
            assert cfg.output is not None
            return cfg.output
        if cfg.destination:
            return cfg.destination
        return _common_root([s.output.path for s in cfg.streams])

    def _make_groups(self) -> list[Group]:
        cfg = self.config
        groups = []
        for i, stream in enumerate(cfg.streams):
            key = f"streams.{i}"
            out = stream.compression.output
            compression: Compression = "gz" if out is None else "zst" if out in ("zst", "zstd") else ""
            o = stream.output
            rules = compile_rules(
                key,
                stream.filter,
                stream.span_replacement,
                stream.attributes,
                o.discard_fields,
                o.min_text_length,
                self._glob(key, stream.documents),
            )
            groups.append(
                Group(
                    i, key, stream.name, tuple(stream.documents), rules, stream.compression.input, compression, o.path, o.max_size_in_bytes
                )
            )
        for i, source in enumerate(cfg.sources):
            key = f"sources.{i}"
            files = self._glob(key, source.documents)
            rules = compile_rules(
                key, source.filter, source.span_replacement, source.attributes, source.discard_fields, source.min_text_length, files
            )
            groups.append(
                Group(
                    i,
                    key,
                    source.name,
                    tuple(source.documents),
                    rules,
                    source.compression.input,
                    cfg.compression,
                    "",
                    cfg.max_size_in_bytes,
                )
            )
        return groups

    def _glob(self, key: str, patterns: list[str]) -> list[str]:
        out = []
        for j, pattern in enumerate(patterns):
            found = storage.glob(storage.local_path(pattern))
            if not found:
                raise ConfigError(f"config key '{key}.documents.{j}': no input files match {pattern!r}")
            out.extend(found)
        return out

    @property
    def output_root(self) -> str:
        return self._root

    def resolve(self, inputs: list[InputFile]) -> dict[str, Any]:
        """Sources: the tokenizer that counts (its file's digest) and each source's requested tokens."""
        if not self.config.sources:
            return {}
        return {"tokenizer": self.tokenizer_id, "requested_tokens": self.requested}

    def plan_inputs(self) -> list[InputFile]:
        """Every group's inputs (named ``<group>/<relative name>``), each with its attribute files."""
        inputs = []
        attributes = []
        for g in self.groups:
            for path, rel, info in paths.expand(list(g.patterns), exclude_under=self.output_root):
                for j, name in enumerate(g.rules.attribute_sets):
                    attr = paths.attribute_path(path, name)
                    if not storage.exists(attr):
                        raise ConfigError(f"config key '{g.key}.attributes.{j}': attribute set {name!r} has no file {attr} for {path}")
                    attributes.append(attr)
                inputs.append(InputFile(path=path, rel=f"{g.name}/{rel}", size=info.size, mtime=info.mtime))
        # Attribute files of a killed tag or dedup run look whole too.
        paths.refuse_unfinished(attributes)
        return inputs

    def _group_of(self, info: InputFile) -> Group:
        return self._by_name[info.rel.split("/", 1)[0]]

    @property
    def work(self) -> WorkDir:
        return WorkDir(storage.join(self.output_root, "_work"))

    def _work(self, *parts: str) -> str:
        return self.work.path(*parts)

    # Task data and params name the run's own files relative to its root, so records (and the
    # phases' fingerprints) are the same wherever the run is.
    def _rel(self, path: str) -> str:
        root = self.output_root.rstrip("/") + "/"
        return path[len(root) :] if path.startswith(root) else path  # outside the root (a destination elsewhere): as is

    def _abs(self, rel: str) -> str:
        return rel if rel.startswith("/") or "://" in rel else storage.join(self.output_root, rel)

    def _level(self) -> int | None:
        return self.config.compression_level

    # ---- phases -------------------------------------------------------------------------------

    def phases(self) -> list[Phase]:
        if self.config.dryrun:
            return [Phase("dryrun", plan=lambda ctx: [], run=self._filter, after=self._dryrun)]
        if self.config.sources:
            return [
                Phase("count", plan=self._plan_files, run=self._count, outputs=self._count_outputs, after=self._plan_mix, unit="file"),
                Phase(
                    "sample",
                    plan=self._plan_sample,
                    run=self._sample,
                    outputs=self._sample_outputs,
                    after=self._assign_seed_shards,
                    unit="file",
                ),
                Phase(
                    "shard",
                    plan=self._plan_seed_shards,
                    run=self._shard,
                    outputs=self._shard_outputs,
                    after=self._finish_sources,
                    unit="shard",
                ),
            ]
        if not self.config.shuffle:
            return [
                Phase(
                    "filter",
                    plan=self._plan_files,
                    run=self._filter,
                    outputs=self._filter_outputs,
                    after=self._finish_unsharded,
                    unit="file",
                )
            ]
        return [
            Phase("filter", plan=self._plan_files, run=self._filter, outputs=self._filter_outputs, after=self._assign_shards, unit="file"),
            Phase("shard", plan=self._plan_shards, run=self._shard, outputs=self._shard_outputs, after=self._finish_streams, unit="shard"),
        ]

    def _plan_files(self, ctx: RunContext) -> list[Task]:
        return [Task(key=f.rel, inputs=(f,), params={"group": self._group_of(f).index}) for f in ctx.inputs]

    # ---- streams: filter, assign, shard ----------------------------------------------------

    def _unsharded_path(self, task: Task) -> str:
        g = self.groups[task.params["group"]]
        # Dolma: <output.path>/documents/<the input's path below its documents/ folder>
        suffix = task.path.split("/documents/")[-1] if "/documents/" in task.path else task.rel.split("/", 1)[1]
        return storage.join(g.output, "documents", suffix)

    def _filter_path(self, task: Task) -> str:
        if not self.config.shuffle:
            return self._unsharded_path(task)
        g = self.groups[task.params["group"]]
        return self._work("filter", task.key + ".members" + extension(g.out_compression))

    def _filter_outputs(self, task: Task) -> list[str]:
        return [self._filter_path(task)]

    def _filter(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        g = self.groups[task.params["group"]]
        out = self._filter_path(task)
        compression = compression_for(out) if not self.config.shuffle else g.out_compression
        shuffle = self.config.shuffle
        with MemberWriter(
            out, compression, member_bytes(g.max_bytes), self._level(), empty_member=not shuffle, work_file=shuffle
        ) as writer:
            counts = mix_file(
                g.rules,
                task.path,
                quarantine,
                lambda r: writer.write(r.out, r.line_lengths),
                batch_size=self.config.batch_size,
                compression=g.compression_in,
            )
        return TaskOutput(
            docs_in=counts.docs,
            counts={"docs_kept": counts.kept, "docs_removed": counts.docs - counts.kept, "spans_replaced": counts.spans_replaced},
            data={"counts": counts.as_dict(), "path": self._rel(out), "members": [m.as_list() for m in writer.members]},
        )

    def _totals(self, records: list[TaskRecord]) -> dict[str, GroupTotals]:
        totals = {g.name: GroupTotals() for g in self.groups}
        for r in records:
            totals[self.groups[r.params["group"]].name].add(r.data["counts"])
        return totals

    def _in_input_order(self, records: list[TaskRecord], ctx: RunContext) -> list[TaskRecord]:
        order = {f.rel: i for i, f in enumerate(ctx.inputs)}
        return sorted(records, key=lambda r: order[r.key])

    def _assign_shards(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        shards: dict[str, list[list[list[Any]]]] = {g.name: [] for g in self.groups}
        pieces: dict[str, list[Piece]] = {g.name: [] for g in self.groups}
        for r in self._in_input_order(records, ctx):
            g = self.groups[r.params["group"]]
            pieces[g.name].extend(Piece(r.data["path"], m[0], m[1], m[2]) for m in r.data["members"])
        for g in self.groups:
            shards[g.name] = [[p.as_list() for p in shard] for shard in pack(pieces[g.name], g.max_bytes)]
        totals = {name: t.as_dict(self._by_name[name].rules) for name, t in self._totals(records).items()}
        return StepResult(data={"shards": shards, "totals": totals})

    def _plan_shards(self, ctx: RunContext) -> list[Task]:
        shards = ctx.steps["filter"].data["shards"]
        return [
            Task(key=f"{g.name}/{shard_name(g.name, j, '')}", params={"group": g.index, "index": j, "pieces": pieces})
            for g in self.groups
            for j, pieces in enumerate(shards[g.name])
        ]

    def _shard_path(self, task: Task) -> str:
        g = self.groups[task.params["group"]]
        name = shard_name(g.name, task.params["index"], extension(g.out_compression))
        if "seed" in task.params:
            return storage.join(self.output_root, f"seed-{task.params['seed']}", "documents", name)
        return storage.join(g.output, name)

    def _shard_outputs(self, task: Task) -> list[str]:
        return [self._shard_path(task)]

    def _shard(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        pieces = [Piece.from_list(p) for p in task.params["pieces"]]
        written = concatenate([(self._abs(p.path), p.offset, p.length) for p in pieces], self._shard_path(task))
        docs = sum(p.docs for p in pieces)
        return TaskOutput(counts={"shards": 1, "docs_out": docs}, data={"bytes": written, "docs": docs})

    def _shard_lines(self, records: list[TaskRecord]) -> dict[str, str]:
        per: dict[str, list[int]] = {}
        for r in records:
            g = self.groups[r.params["group"]]
            n = per.setdefault(g.name, [0, 0, 0])
            n[0] += 1
            n[1] += r.data["docs"]
            n[2] += r.data["bytes"]
        return {name: f"written: {n[1]:,} documents in {n[0]:,} shards ({n[2] / 1e6:,.1f} MB)" for name, n in per.items()}

    def _remove_stale(self, folder: str, g: Group, count: int) -> int:
        """Remove ``g``'s shards in ``folder`` past the ``count`` this run wrote (an earlier run's); how many."""
        keep = {shard_name(g.name, j, extension(g.out_compression)) for j in range(count)}
        return len(remove_stale(folder, shard_pattern(g.name), keep))

    def _finish_streams(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        totals = ctx.steps["filter"].data["totals"]
        planned = ctx.steps["filter"].data["shards"]
        stale = {g.name: self._remove_stale(g.output, g, len(planned[g.name])) for g in self.groups}
        shards = self._shard_lines(records)
        outputs = {g.name: f"{g.output}/{g.name}-NNNN.jsonl{extension(g.out_compression)}" for g in self.groups}
        for name in totals:
            shards.setdefault(name, "written: no documents kept, no shards")
            shards[name] += f" -> {outputs[name]}"
            if stale[name]:
                shards[name] += f"; removed {stale[name]:,} stale shard(s) an earlier run left there"
        return StepResult(data={"streams": totals, "stale_shards_removed": sum(stale.values())}, table=render("streams", totals, shards))

    def _finish_unsharded(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        totals = {name: t.as_dict(self._by_name[name].rules) for name, t in self._totals(records).items()}
        where = {g.name: f"written: one file per input under {g.output}/documents/" for g in self.groups}
        return StepResult(data={"streams": totals}, table=render("streams, shuffle: false", totals, where))

    def _dryrun(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        lines = ["mix dry run (nothing written but the manifest):"]
        data: dict[str, Any] = {}
        for g in self.groups:
            files = [f for f in ctx.inputs if self._group_of(f) is g]
            size = sum(f.size for f in files)
            lines.append(f"  {g.name}: {len(files):,} input files ({size / 1e6:,.1f} MB), attribute sets {list(g.rules.attribute_sets)}")
            for kind, rules in (("include", g.rules.include), ("exclude", g.rules.exclude)):
                for rule in rules:
                    lines.append(f"    {kind} ({g.rules.filter_syntax}): {rule}")
            data[g.name] = {"files": len(files), "bytes": size, "include": list(g.rules.include), "exclude": list(g.rules.exclude)}
        return StepResult(data={"dryrun": data}, table="\n".join(lines))

    # ---- sources: count, plan, sample, shard ----------------------------------------------------

    def _cache_dir(self, task: Task) -> str:
        g = self.groups[task.params["group"]]
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
        digest = hashlib.sha256(orjson.dumps(ident, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
        return storage.join(self.output_root, "_cache", task.key, digest)

    def _count_outputs(self, task: Task) -> list[str]:
        # The cache's files are content-addressed (a later run with the same input and rules reads
        # them instead of counting again) and written meta.json last.
        cache = self._cache_dir(task)
        return [storage.join(cache, name) for name in CACHE_FILES]

    def _count(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        g = self.groups[task.params["group"]]
        cache = self._cache_dir(task)
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
            keys: list[int] = []
            counts_per_doc: list[int] = []
            name = self.tokenizer_path

            def sink(r: Any) -> None:
                writer.write(r.out, r.line_lengths)
                keys.extend(r.keys)
                counts_per_doc.extend(tokens.count(name, r.texts))

            with MemberWriter(storage.join(cache, "docs.jsonl.zst"), "zst", CACHE_MEMBER_BYTES, 3, work_file=True) as writer:
                counts = mix_file(
                    g.rules, task.path, quarantine, sink, batch_size=self.config.batch_size, compression=g.compression_in, collect=True
                )
            dolmino.save_counts(cache, np.array(keys, dtype=np.uint64), np.array(counts_per_doc, dtype=np.uint32))
            workdir.write(storage.join(cache, "ids.bin"), b"".join(quarantine.id_hashes))
            meta = {
                "counts": {**counts.as_dict(), "tokens": int(sum(counts_per_doc))},
                "errors": [orjson.loads(line) for line in quarantine.iter_jsonl() if line],
                "notes": dict(quarantine.notes),
            }
            workdir.write(meta_path, orjson.dumps(meta))
        c = meta["counts"]
        return TaskOutput(
            docs_in=c["docs"],
            counts={"docs_kept": c["kept"], "docs_removed": c["docs"] - c["kept"], "tokens_kept": c["tokens"]},
            data={"counts": c, "cache": self._rel(cache)},
        )

    def _plan_mix(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        cfg = self.config
        records = self._in_input_order(records, ctx)
        totals = self._totals(records)
        plans = []
        for g in self.groups:
            source = cfg.sources[g.index]
            t = totals[g.name]
            how = (
                f"tokens {source.tokens:,}"
                if source.tokens is not None
                else f"ratio {source.ratio:g} of target_tokens {cfg.target_tokens:,}"
            )
            plan = dolmino.size_source(g.index, g.name, t.kept, t.tokens, self.requested[g.name], source.max_repetition, how)
            caches = [self._abs(r.data["cache"]) for r in records if r.params["group"] == g.index]

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
                "totals": {name: t.as_dict(self._by_name[name].rules) for name, t in totals.items()},
            }
        )

    def _plan_sample(self, ctx: RunContext) -> list[Task]:
        step = ctx.steps["count"].data
        plans = {p["name"]: p for p in step["plan"]}
        tasks = []
        for f in ctx.inputs:
            g = self._group_of(f)
            p = plans[g.name]
            thresholds = {str(s): p["seeds"][str(s)]["threshold"] for s in self.config.seeds}
            params = {"group": g.index, "cache": step["caches"][f.rel], "whole": p["whole_repeats"], "thresholds": thresholds}
            tasks.append(Task(key=f.rel, inputs=(f,), params=params))
        return tasks

    def _sample_path(self, task: Task, seed: int) -> str:
        g = self.groups[task.params["group"]]
        return self._work("sample", f"seed-{seed}", task.key + ".members" + extension(g.out_compression))

    def _sample_outputs(self, task: Task) -> list[str]:
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

    def _sample(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        g = self.groups[task.params["group"]]
        cache, whole = self._abs(task.params["cache"]), task.params["whole"]
        keys, toks = dolmino.load_counts(cache)
        seeds = self.config.seeds
        masks = {s: dolmino.selected(dolmino.seeded_ranks(keys, s, g.name), int(task.params["thresholds"][str(s)])) for s in seeds}
        writers = {
            s: MemberWriter(self._sample_path(task, s), g.out_compression, member_bytes(g.max_bytes), self._level(), work_file=True)
            for s in seeds
        }
        for w in writers.values():
            w.__enter__()
        try:
            for _ in range(whole):  # whole repeats: every document, in order, once per repeat
                for lines in self._cached_lines(cache):
                    joined = b"\n".join(lines) + b"\n"
                    lengths = [len(x) + 1 for x in lines]
                    for w in writers.values():
                        w.write(joined, lengths)
            start = 0
            for lines in self._cached_lines(cache):  # the seeded subset
                for s, w in writers.items():
                    chosen = [lines[i] for i in np.flatnonzero(masks[s][start : start + len(lines)])]
                    if chosen:
                        w.write(b"\n".join(chosen) + b"\n", [len(x) + 1 for x in chosen])
                start += len(lines)
            if start != len(keys):
                # Each checks out alone but they disagree: the count task that wrote them is redone.
                detail = f"damaged (it holds {start} documents, the cached counts {len(keys)})"
                raise WorkFileError(storage.join(cache, "docs.jsonl.zst"), "damaged", detail)
        except BaseException as exc:
            for w in writers.values():
                w.__exit__(type(exc), exc, exc.__traceback__)
            raise
        for w in writers.values():
            w.__exit__(None, None, None)
        total = int(toks.sum())
        data = {
            str(s): {
                "path": self._rel(writers[s].path),
                "members": [m.as_list() for m in writers[s].members],
                "docs": whole * len(keys) + int(masks[s].sum()),
                "tokens": whole * total + int(toks[masks[s]].sum()),
            }
            for s in seeds
        }
        return TaskOutput(counts={"docs_sampled": sum(d["docs"] for d in data.values())}, data=data)

    def _assign_seed_shards(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        records = self._in_input_order(records, ctx)
        shards: dict[str, dict[str, list]] = {}
        taken: dict[str, dict[str, list[int]]] = {}
        for s in self.config.seeds:
            shards[str(s)] = {}
            taken[str(s)] = {}
            for g in self.groups:
                mine = [r for r in records if r.params["group"] == g.index]
                pieces = [Piece(r.data[str(s)]["path"], m[0], m[1], m[2]) for r in mine for m in r.data[str(s)]["members"]]
                shards[str(s)][g.name] = [[p.as_list() for p in shard] for shard in pack(pieces, g.max_bytes)]
                taken[str(s)][g.name] = [sum(r.data[str(s)]["docs"] for r in mine), sum(r.data[str(s)]["tokens"] for r in mine)]
        plan = {p["name"]: p for p in ctx.steps["count"].data["plan"]}
        for seed, per in taken.items():
            for name, (docs, toks) in per.items():
                want = plan[name]["seeds"][seed]
                if (docs, toks) != (want["docs"], want["tokens"]):
                    raise dolmino.MixPlanError(
                        f"seed {seed}, source {name!r}: sampled {docs:,} documents / {toks:,} tokens, planned {want['docs']:,} / {want['tokens']:,}"
                    )
        return StepResult(data={"shards": shards, "taken": taken})

    def _plan_seed_shards(self, ctx: RunContext) -> list[Task]:
        shards = ctx.steps["sample"].data["shards"]
        return [
            Task(
                key=f"seed-{s}/{g.name}/{shard_name(g.name, j, '')}",
                params={"seed": s, "group": g.index, "index": j, "pieces": pieces},
            )
            for s in self.config.seeds
            for g in self.groups
            for j, pieces in enumerate(shards[str(s)][g.name])
        ]

    def _finish_sources(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        planned = ctx.steps["sample"].data["shards"]
        stale = sum(
            self._remove_stale(storage.join(self.output_root, f"seed-{s}", "documents"), g, len(planned[str(s)][g.name]))
            for s in self.config.seeds
            for g in self.groups
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
        seeds = ", ".join(f"{storage.join(self.output_root, f'seed-{s}', 'documents')}/" for s in self.config.seeds)
        table = render("sources", totals, extra) + f"\n  written to {seeds}"
        if stale:
            table += f"\n  removed {stale:,} stale shard(s) an earlier run left there"
        return StepResult(data={"sources": totals, "taken": taken, "stale_shards_removed": stale}, table=table)
