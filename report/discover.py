"""What a report reads: the runs below the folders it is given, and the files they point to.

Every ``_manifest.json`` below a folder is a run (convert, stats, tag, dedup, mix, tokenize,
index...); a folder holding ``metrics.jsonl`` is a training run; a JSON file that
``python -m train.evaluate --output`` wrote is an evaluation table. From the manifests come
the corpus's document files (what tag, dedup, stats and mix runs read), which attribute sets
each has (the tag and dedup runs that read it), the mix rules that apply to it, the
near-duplicate clusters files, and the token shards' metadata files.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import orjson

from dolma_pipe import lock, storage
from dolma_pipe.config import ConfigError
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.manifest import MANIFEST, InputFile, Manifest, ManifestError, read_manifest
from mixers import report as mix_report
from mixers.rules import StreamRules

# Stages whose inputs are the corpus's documents (their outputs are attributes or counts).
CORPUS_READERS = ("tag", "dedup", "stats", "mix")


@dataclass
class Run:
    """One run: the folder its manifest is in, a short name for the page, and the manifest.

    ``gone``: why a run whose manifest still says ``running`` is not running any more (its lock's
    holder is gone, or it left no lock), else None; such a run is ``killed``."""

    root: str
    name: str
    manifest: Manifest
    gone: str | None = None

    @property
    def stage(self) -> str:
        return self.manifest.stage

    @property
    def status(self) -> str:
        """``complete``, ``failed``, ``running``, or ``killed`` (its manifest says running, its process is gone)."""
        return "killed" if self.gone else self.manifest.status

    @property
    def finished(self) -> str | None:
        """When the run ended (None for a run that is running or was killed: it never wrote an end)."""
        return self.manifest.finished if self.manifest.status != "running" else None

    @property
    def complete(self) -> bool:
        return self.manifest.status == "complete"


def holder_gone(root: str) -> str | None:
    """For a run whose manifest says ``running``: why its process is gone, or None while it runs.

    A run holds ``<root>/_lock.json`` while it runs and removes it however it ends, so a manifest
    that says ``running`` beside no lock was left by a process that was killed (SIGKILL, the OOM
    killer, a lost node); a lock is judged by the lock's own rule (:mod:`dolma_pipe.lock`: its pid
    gone on this host, or a heartbeat too old from another host)."""
    path = storage.join(root, lock.LOCK)
    try:
        current = orjson.loads(storage.read_bytes(path))
    except (storage.StorageError, FileNotFoundError):
        return "it left no lock: its process ended without finishing its manifest"
    except orjson.JSONDecodeError:
        return f"its lock {path} is cut short"
    why = lock.holder_gone(current if isinstance(current, dict) else {})
    return None if why is None else why.replace("its run", "its process", 1)


@dataclass(frozen=True)
class RunVerdicts:
    """A mix run's verdicts on one of its files: the ones its task kept, else its rules evaluated
    again (:func:`mixers.report.verdicts`)."""

    stored: dict[str, str]  # input path -> its verdicts file

    def __call__(self, rules: StreamRules, path: str) -> tuple[dict[int, int], dict[str, int]]:
        return mix_report.verdicts(rules, path, self.stored.get(path))


@dataclass
class MixGroup:
    """One stream or source of a mix run, with the rules the report evaluates on its files."""

    run: str  # the run's name
    index: int  # its position in the run's groups
    name: str
    kind: str  # "stream" or "source"
    rules: StreamRules  # compiled as the mix compiled them
    files: list[str]
    verdicts: RunVerdicts  # (rules, path) -> (match mask per document line, documents per mask)
    # Per file: documents the rules kept that min_text_length then dropped (after span replacement),
    # as the mix's task counted them; the mix keeps the count per file, not which documents.
    short: dict[str, int] = field(default_factory=dict)


@dataclass
class RunSet:
    runs: list[Run] = field(default_factory=list)
    train_runs: list[str] = field(default_factory=list)  # folders holding metrics.jsonl
    evaluations: list[str] = field(default_factory=list)  # train.evaluate JSON files
    problems: list[str] = field(default_factory=list)  # what could not be read, for the page
    unreadable: list[str] = field(default_factory=list)  # manifests that are not one (also in problems)
    groups: list[MixGroup] = field(default_factory=list)

    folders: list[str] = field(default_factory=list)

    def name_of(self, path: str) -> str:
        """A path as the page names it: relative to the folder it was found below."""
        return _name(path, self.folders)

    def of(self, *stages: str, complete: bool = True) -> list[Run]:
        return [r for r in self.runs if r.stage in stages and (r.complete or not complete)]


def _name(root: str, bases: list[str]) -> str:
    for base in bases:
        base = base.rstrip("/")
        if root == base:
            return base.rsplit("/", 1)[-1] or base
        if root.startswith(base + "/"):
            return root[len(base) + 1 :]
    return root


def _is_loss(v: Any) -> bool:
    return isinstance(v, dict) and isinstance(v.get("loss"), (int, float))


def evaluation_table(data: Any) -> dict[str, dict[str, Any]] | None:
    """A ``train.evaluate --output`` table as ``{checkpoint: {"loss", "ppl", ["domains"]}}``, or None.

    ``--val-paths`` writes that shape; ``--domain`` writes ``{checkpoint: {domain: {"loss", ...}}}``,
    read here with the token-weighted loss over its domains as the checkpoint's loss."""
    if not isinstance(data, dict) or not data:
        return None
    if all(_is_loss(v) for v in data.values()):
        return data
    if not all(isinstance(row, dict) and row and all(_is_loss(r) for r in row.values()) for row in data.values()):
        return None
    out = {}
    for name, row in data.items():
        tokens = sum(r.get("tokens") or 0 for r in row.values())
        loss = sum(r["loss"] * (r.get("tokens") or 0) for r in row.values()) / tokens if tokens else math.nan
        out[name] = {"loss": loss, "ppl": math.exp(loss) if tokens else math.nan, "domains": row}
    return out


def _is_evaluation(path: str) -> bool:
    try:
        data = orjson.loads(storage.read_bytes(path))
    except (orjson.JSONDecodeError, storage.StorageError, OSError):
        return False
    return evaluation_table(data) is not None


def discover(folders: list[str], exclude: str) -> RunSet:
    """Every run, training run and evaluation file below ``folders`` (``exclude``: the report's own)."""
    found = RunSet(folders=list(folders))
    seen: set[str] = set()
    for folder in folders:
        if not storage.is_remote(folder) and not os.path.exists(storage.local_path(folder)):
            raise ConfigError(f"config key 'runs': {folder} does not exist")
        if not storage.glob(storage.join(folder, "**", "*")):
            where = "no objects under that prefix" if storage.is_remote(folder) else "an empty folder"
            raise ConfigError(f"config key 'runs': {folder} holds no files ({where}); give the folders your runs wrote")
        before = (len(found.runs), len(found.problems), len(found.train_runs), len(found.evaluations))
        for path in storage.glob(storage.join(folder, "**", MANIFEST)):
            root = path[: -len(MANIFEST) - 1]
            if root in seen or root == exclude or root.startswith(exclude.rstrip("/") + "/"):
                continue
            seen.add(root)
            try:
                manifest = read_manifest(root)
            except ManifestError as exc:
                found.unreadable.append(path)
                found.problems.append(f"{exc}; left out")
                continue
            found.runs.append(Run(root, _name(root, folders), manifest))
        for path in storage.glob(storage.join(folder, "**", "metrics.jsonl")):
            run = path.rsplit("/", 1)[0]
            if run not in found.train_runs:
                found.train_runs.append(run)
        for path in storage.glob(storage.join(folder, "**", "*.json")):
            if path.rsplit("/", 1)[-1] != MANIFEST and "evaluat" in path.rsplit("/", 1)[-1] and _is_evaluation(path):
                found.evaluations.append(path)
        if (len(found.runs), len(found.problems), len(found.train_runs), len(found.evaluations)) == before:
            raise ConfigError(
                f"config key 'runs': no runs below {folder} (no {MANIFEST} of a stage, no metrics.jsonl of a training run, "
                "no train.evaluate table); give the folders your runs wrote"
            )
    found.runs.sort(key=lambda r: r.root)
    for r in found.runs:
        if r.manifest.status == "running":
            r.gone = holder_gone(r.root)
        if r.gone:
            found.problems.append(f"{r.root}: {r.stage} run was killed ({r.gone}); its numbers are left out (rerun it to finish)")
        elif not r.complete:
            found.problems.append(f"{r.root}: {r.stage} run is {r.manifest.status}; its numbers are left out")
    found.groups = _mix_groups(found)
    return found


def _mix_groups(found: RunSet) -> list[MixGroup]:
    """The streams and sources of every complete mix run, their rules compiled as the mix did
    (:mod:`mixers.report`)."""
    groups = []
    for run in found.of("mix"):
        try:
            made = mix_report.rule_groups(run.manifest.config, {f.path for f in run.manifest.inputs})
        except (DolmaPipeError, ValueError) as exc:
            found.problems.append(f"{run.root}: the mix's rules cannot be evaluated again ({exc}); its per-rule samples are left out")
            continue
        verdicts = RunVerdicts(mix_report.stored_verdicts(run.root, run.manifest))
        for g in made:
            groups.append(MixGroup(run.name, g.index, g.name, g.kind, g.rules, g.files, verdicts, _short(run.manifest, g.index)))
    return groups


def _short(manifest: Manifest, group: int) -> dict[str, int]:
    """Per input file of a mix group: the documents ``min_text_length`` dropped, from the task
    records of the phase that read the file (``filter`` for streams, ``count`` for sources)."""
    out: dict[str, int] = {}
    for phase in manifest.phases:
        if phase.name not in ("filter", "count"):
            continue
        for record in phase.tasks.values():
            n = (record.data.get("counts") or {}).get("removed_short") or 0
            if n and record.params.get("group") == group and record.inputs:
                out[record.inputs[0].path] = int(n)
    return out


def task_key(path: str) -> str:
    """A document file's path as the report's task key and quarantine name: the key names the
    task's marker and errors file under the report's destination, so an ``s3://bucket/key`` path
    becomes ``s3/bucket/key`` (a folder name, not a URL inside a local path)."""
    scheme, sep, rest = path.partition("://")
    return f"{scheme}/{rest}" if sep else path


def corpus_files(found: RunSet) -> list[InputFile]:
    """The documents the corpus readers read, once each, in path order (files gone since are noted)."""
    files: dict[str, InputFile] = {}
    for run in found.of(*CORPUS_READERS):
        for f in run.manifest.inputs:
            files.setdefault(f.path, f)
    out = []
    for path in sorted(files):
        try:
            info = storage.stat(path)
        except storage.StorageError:
            found.problems.append(f"{path}: read by a run but gone since; left out")
            continue
        out.append(InputFile(path=path, rel=task_key(path), size=info.size, mtime=info.mtime))
    return out


def attribute_sets(found: RunSet) -> dict[str, list[str]]:
    """Per document file: the attribute sets tag and dedup runs wrote for it (by their folder's name)."""
    sets: dict[str, list[str]] = {}
    for run in found.of("tag", "dedup"):
        parent, _, name = run.root.rstrip("/").rpartition("/")
        if not parent.endswith("/attributes"):
            continue  # a destination of its own: Dolma's attribute paths cannot find it
        for f in run.manifest.inputs:
            if name not in sets.setdefault(f.path, []):
                sets[f.path].append(name)
    return sets


def token_metadata(found: RunSet) -> list[tuple[str, str, str]]:
    """(run name, split, metadata file) of every complete tokenize run's shards."""
    out = []
    for run in found.of("tokenize"):
        for split in ("train", "val"):
            for path in storage.glob(storage.join(run.root, split, "*.csv.gz")):
                out.append((run.name, split, path))
    return out


def warn(problems: list[str]) -> None:
    for p in problems:
        print(f"dolma-pipe report: {p}", file=sys.stderr)
