"""What the two kinds of mix share: their groups (streams or sources), where a run's files go,
and the ``shard`` phase that joins members into output shards.

A :class:`Group` is one stream or source: its inputs, compiled rules and output settings. A
:class:`MixLayout` is the run's value that every phase reads: the groups, the output root, the
work directory, and the rule naming the run's own files relative to the root (task records say
``_work/filter/...``, not an absolute path, so they are the same wherever the run is).

The ``shard`` phase is one task per output shard: its members' bytes (gzip members or zstd
frames of work files, :mod:`mixers.output`) copied one after another into
``<name>-NNNN.jsonl.gz``, so no document is decompressed or compressed twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from dolma_pipe import storage
from dolma_pipe.compression import Codec
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import InputFile, TaskRecord, relative_to_root, under_root
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import RunContext, Task, TaskOutput, remove_stale
from dolma_pipe.workdir import WorkDir
from mixers.config import MixConfig
from mixers.output import concatenate
from mixers.rules import StreamRules, compile_rules
from mixers.sharding import Piece, shard_name, shard_pattern


@dataclass(frozen=True)
class Group:
    """One stream or source: its inputs, rules and outputs."""

    index: int
    key: str  # its config key, e.g. streams.0
    name: str
    patterns: tuple[str, ...]
    rules: StreamRules
    compression_in: str | None
    out_compression: Codec
    output: str  # streams: output.path (sources: unused)
    max_bytes: int


def _glob(key: str, patterns: list[str]) -> list[str]:
    out = []
    for j, pattern in enumerate(patterns):
        found = storage.glob(storage.local_path(pattern))
        if not found:
            raise ConfigError(f"config key '{key}.documents.{j}': no input files match {pattern!r}")
        out.extend(found)
    return out


def make_groups(cfg: MixConfig) -> list[Group]:
    """The spec's streams or sources, their rules compiled and checked against their files."""
    groups = []
    for i, stream in enumerate(cfg.streams):
        key = f"streams.{i}"
        out = stream.compression.output
        compression = Codec.GZIP if out is None else Codec.named(out)
        o = stream.output
        files = _glob(key, stream.documents)
        rules = compile_rules(key, stream.filter, stream.span_replacement, stream.attributes, o.discard_fields, o.min_text_length, files)
        groups.append(
            Group(i, key, stream.name, tuple(stream.documents), rules, stream.compression.input, compression, o.path, o.max_size_in_bytes)
        )
    for i, source in enumerate(cfg.sources):
        key = f"sources.{i}"
        files = _glob(key, source.documents)
        rules = compile_rules(
            key, source.filter, source.span_replacement, source.attributes, source.discard_fields, source.min_text_length, files
        )
        out_codec = Codec.named(cfg.compression)
        groups.append(
            Group(i, key, source.name, tuple(source.documents), rules, source.compression.input, out_codec, "", cfg.max_size_in_bytes)
        )
    return groups


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


def output_root(cfg: MixConfig) -> str:
    """Sources: ``output``; streams: ``destination``, else the folder holding every stream's output."""
    if cfg.sources:
        assert cfg.output is not None
        return cfg.output
    if cfg.destination:
        return cfg.destination
    return _common_root([s.output.path for s in cfg.streams])


class MixLayout:
    """The groups and the paths of one mix run; the ``shard`` phase's tasks."""

    def __init__(self, cfg: MixConfig):
        self.config = cfg
        self.root = output_root(cfg)
        self.groups = make_groups(cfg)
        self.by_name = {g.name: g for g in self.groups}
        self.work = WorkDir(storage.join(self.root, "_work"))

    def group_of(self, info: InputFile) -> Group:
        return self.by_name[info.rel.split("/", 1)[0]]

    def group(self, task: Task | TaskRecord) -> Group:
        return self.groups[task.params["group"]]

    def rel(self, path: str) -> str:
        """A path as task records keep it: relative to the root when under it (else as it is)."""
        return relative_to_root(self.root, path)

    def abs(self, rel: str) -> str:
        return under_root(self.root, rel)

    def in_input_order(self, records: list[TaskRecord], ctx: RunContext) -> list[TaskRecord]:
        order = {f.rel: i for i, f in enumerate(ctx.inputs)}
        return sorted(records, key=lambda r: order[r.key])

    # ---- the shard phase ------------------------------------------------------------------------

    def shard_path(self, task: Task) -> str:
        g = self.group(task)
        name = shard_name(g.name, task.params["index"], g.out_compression.extension)
        if "seed" in task.params:
            return storage.join(self.root, f"seed-{task.params['seed']}", "documents", name)
        return storage.join(g.output, name)

    def shard_outputs(self, task: Task) -> list[str]:
        return [self.shard_path(task)]

    def shard(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        pieces = [Piece.from_list(p) for p in task.params["pieces"]]
        written = concatenate([(self.abs(p.path), p.offset, p.length) for p in pieces], self.shard_path(task))
        docs = sum(p.docs for p in pieces)
        return TaskOutput(counts={"shards": 1, "docs_out": docs}, data={"bytes": written, "docs": docs})

    def shard_lines(self, records: list[TaskRecord]) -> dict[str, str]:
        """Per group, what its shards hold (from the shard tasks' records)."""
        per: dict[str, list[int]] = {}
        for r in records:
            n = per.setdefault(self.group(r).name, [0, 0, 0])
            n[0] += 1
            n[1] += r.data["docs"]
            n[2] += r.data["bytes"]
        return {name: f"written: {n[1]:,} documents in {n[0]:,} shards ({n[2] / 1e6:,.1f} MB)" for name, n in per.items()}

    def remove_stale(self, folder: str, g: Group, count: int) -> int:
        """Remove ``g``'s shards in ``folder`` past the ``count`` this run wrote (an earlier run's); how many."""
        keep = {shard_name(g.name, j, g.out_compression.extension) for j in range(count)}
        return len(remove_stale(folder, shard_pattern(g.name), keep))


def shard_tasks(layout: MixLayout, planned: dict[str, list[Any]], seed: int | None = None) -> list[Task]:
    """The shard phase's tasks of the groups' planned shards (lists of pieces), for one seed or none."""
    prefix = "" if seed is None else f"seed-{seed}/"
    extra = {} if seed is None else {"seed": seed}
    return [
        Task(key=f"{prefix}{g.name}/{shard_name(g.name, j, '')}", params={**extra, "group": g.index, "index": j, "pieces": pieces})
        for g in layout.groups
        for j, pieces in enumerate(planned[g.name])
    ]
