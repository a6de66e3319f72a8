"""The records a run leaves behind: task records (in markers) and the run's manifest.

Every task's completion marker holds a :class:`TaskRecord`; every run writes
``<output>/_manifest.json`` as a :class:`Manifest` (status ``running`` at the
start, ``complete`` or ``failed`` at the end), with the resolved config, the
version, the inputs, each phase's task records and driver-side step results,
totals and timings.  Later stages (and ``report``) read manifests back with
:func:`read_manifest`, typed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field, ValidationError

from dolma_pipe import storage
from dolma_pipe.errors import DolmaPipeError

MANIFEST = "_manifest.json"

RunStatus = Literal["running", "complete", "failed"]


class ManifestError(DolmaPipeError, ValueError):
    """A manifest cannot be read or is not one; the message names the file."""


class InputFile(BaseModel, frozen=True):
    """One file a task reads: where it is, its name relative to its glob, and what it was."""

    path: str
    rel: str
    size: int
    mtime: float


def relative_to_root(root: str, path: str) -> str:
    """``path`` as task records keep it: relative to the output root where it is under it (records
    stay valid if the root moves), else as it is."""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def under_root(root: str, rel: str) -> str:
    """A path a task record keeps (:func:`relative_to_root`) as a full path again."""
    return rel if rel.startswith("/") or "://" in rel else storage.join(root, rel)


class TaskRecord(BaseModel):
    """One finished task: what it read, what it counted, what it quarantined, how long it took.

    ``fingerprint`` ties it to the settings (and earlier phases) it was made
    under; ``skipped`` is true in a run that found it already done.
    """

    phase: str
    key: str
    inputs: list[InputFile] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)
    docs_in: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    errors: dict[str, int] = Field(default_factory=dict)
    # Not errors, but worth knowing: blank lines, duplicate document ids within the task's files.
    warnings: dict[str, int] = Field(default_factory=dict)
    # Where (relative to the output root) the task's sorted unique 128-bit id hashes are, for the run's
    # duplicate-id check.
    ids_file: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    # Every file the task wrote and its size (paths relative to the output root where under it):
    # a rerun that finds one missing or of another size redoes the task, and a damaged work file
    # is traced back to the task that wrote it.
    outputs: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0
    fingerprint: str = ""
    skipped: bool = False

    @property
    def error_total(self) -> int:
        return sum(self.errors.values())

    def marker_bytes(self) -> bytes:
        return orjson.dumps(self.model_dump(mode="json", exclude={"skipped"}))

    def digest_view(self) -> dict[str, Any]:
        """What later phases depend on: everything but timings and how this run found it."""
        return self.model_dump(mode="json", exclude={"seconds", "skipped", "fingerprint", "outputs"})


class Redo(BaseModel):
    """A finished task redone because a file it wrote was missing, cut short or damaged."""

    phase: str
    key: str
    path: str
    problem: str


class ExecutorInfo(BaseModel):
    name: Literal["local", "ray"]
    workers: int


class PhaseRecord(BaseModel):
    name: str
    status: Literal["pending", "running", "complete", "failed"] = "pending"
    tasks: dict[str, TaskRecord] = Field(default_factory=dict)
    failures: dict[str, str] = Field(default_factory=dict)
    # Tasks never started because the run stopped first (--max-errors, an interruption).
    not_run: list[str] = Field(default_factory=list)
    # Documents whose id an earlier document of another task's files already had.
    duplicate_ids_across_tasks: int = 0
    # The driver-side step's result (e.g. summed token counts), recorded as it was used.
    step: dict[str, Any] = Field(default_factory=dict)
    # Bad records quarantined while the phase was planned (e.g. dedup's evaluation texts).
    planning_errors: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0

    def totals(self) -> Counter:
        total: Counter = Counter()
        for r in self.tasks.values():
            total["docs_in"] += r.docs_in
            total.update(r.counts)
        if not total["docs_in"]:
            del total["docs_in"]
        return total

    def errors(self) -> Counter:
        total: Counter = Counter(self.planning_errors)
        for r in self.tasks.values():
            total.update(r.errors)
        return total

    def warnings(self) -> Counter:
        total: Counter = Counter()
        for r in self.tasks.values():
            total.update(r.warnings)
        if self.duplicate_ids_across_tasks:
            total["duplicate_ids"] += self.duplicate_ids_across_tasks
        return total


class Manifest(BaseModel):
    stage: str
    status: RunStatus
    version: str
    python: str
    started: str
    finished: str | None = None
    config: dict[str, Any]
    executor: ExecutorInfo
    fingerprint: str
    # What the run resolved from its config once (dedup's hash ranges, a tokenizer's digest...).
    resolved: dict[str, Any] = Field(default_factory=dict)
    inputs: list[InputFile]
    phases: list[PhaseRecord]
    # Sums over every phase: documents and counts, quarantined records by kind, failed tasks.
    totals: dict[str, int] = Field(default_factory=dict)
    errors: dict[str, int] = Field(default_factory=dict)
    warnings: dict[str, int] = Field(default_factory=dict)
    failures: dict[str, str] = Field(default_factory=dict)
    # Why a failed run stopped (error limit, interruption, unreadable inputs), when not a task failure.
    stopped: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    # Finished tasks this run redid because a file they wrote was missing, truncated or damaged.
    redone: list[Redo] = Field(default_factory=list)
    # The run's work directory was removed when it completed (its tasks' work files are gone on purpose).
    work_removed: bool = False
    # The last phase's step result (the stage's own report, e.g. stats' totals).
    results: dict[str, Any] = Field(default_factory=dict)

    def phase(self, name: str) -> PhaseRecord:
        for p in self.phases:
            if p.name == name:
                return p
        raise KeyError(f"stage {self.stage!r} has no phase {name!r} (phases: {[p.name for p in self.phases]})")

    def write(self, root: str) -> None:
        storage.write_bytes(storage.join(root, MANIFEST), orjson.dumps(self.model_dump(mode="json"), option=orjson.OPT_INDENT_2))


def read_manifest(root: str) -> Manifest:
    """The manifest a run wrote under ``root`` (an output directory or the manifest file itself)."""
    path = root if root.endswith(MANIFEST) else storage.join(root, MANIFEST)
    try:
        data = orjson.loads(storage.read_bytes(path))
    except (FileNotFoundError, storage.StorageError) as exc:
        raise ManifestError(f"{path}: no manifest there ({exc})") from None
    except orjson.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not JSON ({exc})") from None
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ManifestError(f"{path}: not a dolma-pipe manifest ({where}: {first['msg']})") from None


def run_beside(folder: str, stage: str) -> tuple[str, Manifest] | None:
    """The finished ``stage`` run whose files are in ``folder``: its manifest (one with results) in
    that folder or the one above, where a run with sub-folders keeps it (``tokenize``'s beside its
    ``train/`` and ``val/``), and the folder holding it; None when neither holds one. A manifest
    there that cannot be read is a :class:`ManifestError` naming it."""
    folder = folder.rstrip("/")
    above = folder.rsplit("/", 1)[0] if "/" in folder else folder
    for up in dict.fromkeys((folder, above)):
        if storage.exists(storage.join(up, MANIFEST)):
            m = read_manifest(up)
            if m.stage == stage and m.results:
                return up, m
    return None
