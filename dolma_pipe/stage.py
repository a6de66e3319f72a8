"""What a stage is: ordered phases, each a plan of tasks that run on the executor.

A :class:`Stage` names its output root and declares its :class:`Phase` list.
Each phase plans :class:`Task` objects (a key plus the input files it reads: one
input file, a band, a bucket range, a shard group), runs each task on a worker,
and may end with a cheap driver-side step whose result later phases read from
the :class:`RunContext`.  A task returns one :class:`TaskOutput`.  Everything
around that (executors, completion markers, quarantine files, manifests,
progress, summaries, resuming) is the runner's job.

Most stages are one phase of one task per input file: they implement
:meth:`Stage.process` (and optionally :meth:`Stage.finish`) and nothing else.
"""

from __future__ import annotations

import hashlib
import os
import re
from abc import ABC
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict

from dolma_pipe import paths, storage
from dolma_pipe.config import RunOptions
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.workdir import WorkDir


@dataclass(frozen=True)
class Task:
    """One unit of work of a phase: a key unique in the phase, the files it reads, its parameters.

    ``params`` must be JSON-serialisable: it is stored in the task's completion
    marker, and a planned task whose params differ from its marker's is redone.
    """

    key: str
    inputs: tuple[InputFile, ...] = ()
    params: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def input(self) -> InputFile:
        """The one input file of a per-file task."""
        if len(self.inputs) != 1:
            raise ValueError(f"task {self.key!r} reads {len(self.inputs)} files, not one")
        return self.inputs[0]

    # Per-file tasks: the input's fields, so ``process(task, ...)`` reads like a file.
    @property
    def path(self) -> str:
        return self.input.path

    @property
    def rel(self) -> str:
        return self.input.rel

    @property
    def size(self) -> int:
        return self.input.size

    @property
    def mtime(self) -> float:
        return self.input.mtime


def remove_stale(folder: str, pattern: re.Pattern[str], keep: Collection[str]) -> list[str]:
    """Remove the files directly in ``folder`` whose name ``pattern`` fully matches but ``keep`` lacks.

    For a stage's last step: an earlier run with other settings may have written more numbered
    shards than this one, and a later stage must not read them as this run's.  Only the stage's
    own shard names (``pattern``) are touched; any other file stays.  Returns the removed paths.
    """
    if storage.is_remote(folder):
        names = [p.rsplit("/", 1)[-1] for p in storage.glob(storage.join(folder, "*"))]
    else:
        local = storage.local_path(folder)
        names = sorted(n for n in os.listdir(local) if os.path.isfile(os.path.join(local, n))) if os.path.isdir(local) else []
    removed = []
    for name in names:
        if name not in keep and pattern.fullmatch(name):
            path = storage.join(folder, name)
            storage.remove(path)
            removed.append(path)
    return removed


def file_task(info: InputFile) -> Task:
    """The task of a per-file phase for one input file (keyed by its relative name)."""
    return Task(key=info.rel, inputs=(info,))


@dataclass
class TaskOutput:
    """What one task returns to the runner.

    ``docs_in`` is the number of documents the task read (progress and docs/s);
    ``counts`` are the task's other integer counts (summed into the run's totals,
    so each phase of a multi-phase stage names its counts distinctly); ``data``
    is anything else JSON-serialisable the stage wants kept with the task (in its
    marker and the manifest) for its driver-side steps.
    """

    docs_in: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    # Files the task wrote beyond its phase's declared outputs (a number known only once it ran):
    # recorded with the others, so a rerun redoes the task when one is gone.
    files: list[str] = field(default_factory=list)


@dataclass
class StepResult:
    """What a driver-side step returns: data recorded in the manifest, and an optional table to print."""

    data: dict[str, Any] = field(default_factory=dict)
    table: str | None = None


@dataclass
class RunContext:
    """What a phase can know of the run: the input files in global order and earlier phases' steps."""

    inputs: list[InputFile]
    steps: dict[str, StepResult] = field(default_factory=dict)
    # The round of the repeated phase being planned or run (1, 2, ...: :class:`Repeat`); 0 in any
    # other phase. Set by the runner, and seen by the phase's tasks on the workers.
    round: int = 0
    # Bad records a phase's planning quarantined on the driver (by kind; e.g. dedup's evaluation
    # texts): the runner records them with the phase and counts them toward --max-errors.
    planning_errors: dict[str, int] = field(default_factory=dict)


def round_name(phase: str, round: int) -> str:
    """What round ``round`` of repeated phase ``phase`` is called (``star-01``): the name its
    markers, errors, manifest record and step go by."""
    return f"{phase}-{round:02d}"


@dataclass(frozen=True)
class Repeat:
    """A phase that runs round after round, for as many rounds as the data needs (dedup's star steps).

    Round ``n`` is the phase under the name :func:`round_name` gives it, its plan and tasks seeing
    ``ctx.round == n``; the runner records it as a phase of its own, its step in ``ctx.steps``
    under that name. Once round ``n`` ended, ``again(ctx, n)`` says whether round ``n + 1`` runs.
    At most ``limit`` rounds run: a run whose last one still asks for another stops with
    ``exhausted`` (the phases after the loop would read an unfinished result).
    """

    limit: int
    again: Callable[[RunContext, int], bool]
    exhausted: str = "a repeated phase did not settle in its rounds"


@dataclass(frozen=True)
class Phase:
    """One phase: ``plan`` its tasks, ``run`` each on a worker, then ``after`` once on the driver.

    The callables are bound methods of the stage, or of a value the stage built them from (they
    pickle with it). ``outputs`` names the final paths a task writes, so that hidden temporaries
    a killed run left there are cleared before the task is redone. A phase with ``repeat`` runs
    in rounds (:class:`Repeat`), each a phase of the run as :meth:`at` names it.
    """

    name: str
    plan: Callable[[RunContext], list[Task]]
    run: Callable[[Task, Quarantine, RunContext], TaskOutput]
    outputs: Callable[[Task], list[str]] | None = None
    after: Callable[[list[TaskRecord], RunContext], StepResult] | None = None
    # Unit shown by the progress bar (files for per-file phases).
    unit: str = "task"
    repeat: Repeat | None = None

    def at(self, round: int) -> Phase:
        """The phase as round ``round`` runs it: a repeated phase under the round's name; any other
        phase (``round`` 0) as it is."""
        if self.repeat is None:
            return self
        if not 1 <= round <= self.repeat.limit:
            raise ValueError(f"phase {self.name!r} has rounds 1 to {self.repeat.limit}, not {round}")
        return replace(self, name=round_name(self.name, round))

    def runs_as(self, name: str) -> bool:
        """Whether ``name`` is this phase's, or one of its rounds' (a wrapper picking a phase by name)."""
        if self.repeat is None:
            return name == self.name
        prefix, _, number = name.rpartition("-")
        return prefix == self.name and number.isdigit() and name == round_name(self.name, int(number))


C = TypeVar("C", bound=RunOptions)


class Resolved(BaseModel):
    """What a run resolved from its config, once, on the driver (:meth:`Stage.resolve`): fixed.

    A stage with values to resolve returns a subclass with typed fields (dedup's
    :class:`~dolma_pipe.stages.dedup.config.DedupResolved`...). What the manifest records and the
    fingerprint hashes is :meth:`as_json`: the JSON values, fields that are None left out (a
    subclass whose dict recorded a null overrides it, so that its fingerprints stay the same).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError("a run's resolved values are fixed when it starts")

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class Stage(ABC, Generic[C]):
    """One stage of the pipeline.

    A per-file stage sets ``name`` (and ``output_dir`` when it writes one file per
    input), implements :attr:`output_root` and :meth:`process`, and is done.  A
    cross-file stage overrides :meth:`phases` and sets ``depends_on_input_set``.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    config_model: ClassVar[type[RunOptions]]
    # Folder under the output root holding the per-input outputs named by ``output_name``.
    output_dir: ClassVar[str] = ""
    # True when a task's outputs depend on which other files are inputs (dedup, mixing,
    # sharding): the input set (paths, sizes, mtimes) then joins the fingerprint, and a
    # changed input set redoes the whole run instead of mixing stale and fresh outputs.
    depends_on_input_set: ClassVar[bool] = False
    # Config keys that change how a run goes, not what it writes (beside RunOptions'): left out of
    # the fingerprint, so a rerun that changes them keeps the finished work.
    run_keys: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, config: C):
        self.config: C = config
        self.resolved: Resolved = Resolved()

    @property
    def output_root(self) -> str:
        """Directory (or prefix) holding this run's outputs, markers, errors and manifest."""
        raise NotImplementedError

    @property
    def destination_key(self) -> str:
        """The config key that chose :attr:`output_root`, named when the runner refuses it
        (:mod:`dolma_pipe.destinations`)."""
        fields = type(self.config).model_fields
        return "destination" if "destination" in fields else "output"

    # ---- inputs -------------------------------------------------------------------------

    def input_patterns(self) -> list[str]:
        return list(self.config.documents)  # type: ignore[attr-defined]

    def output_name(self, rel: str) -> str | None:
        """The main output's relative name for input ``rel``, if the stage writes one per input."""
        return None

    def output_path(self, rel: str) -> str | None:
        """Where the main output of input ``rel`` goes (``output_root/output_dir/output_name``)."""
        name = self.output_name(rel)
        return None if name is None else storage.join(self.output_root, self.output_dir, name)

    def plan_inputs(self) -> list[InputFile]:
        """Every input file, in the global order (relative name), checked for colliding outputs."""
        inputs = []
        outputs: dict[str, str] = {}
        for path, rel, info in paths.expand(self.input_patterns(), exclude_under=self.output_root):
            out = self.output_name(rel)
            if out is not None:
                if out in outputs:
                    raise paths.PathError(
                        f"inputs {outputs[out]!r} and {path!r} would both be written to {out!r}; rename one or convert them separately"
                    )
                outputs[out] = path
            inputs.append(InputFile(path=path, rel=rel, size=info.size, mtime=info.mtime))
        return inputs

    # ---- what a run uses, resolved once, and its fingerprint -----------------------------

    def resolve(self, inputs: list[InputFile]) -> Resolved:
        """The values a run uses that its config only implies (dedup's hash ranges and Bloom sizes,
        a tokenizer's digest and special ids...), worked out once on the driver before anything is
        planned: phases read them from :attr:`resolved`, the manifest records them, and they are
        part of the fingerprint. A :class:`Resolved` model with typed fields."""
        return Resolved()

    def prepare(self, inputs: list[InputFile]) -> str:
        """Resolves the run (:meth:`resolve`, then :attr:`resolved` is fixed) and returns its fingerprint."""
        values = self.resolve(inputs)
        # Through JSON, as the manifest keeps them: a resumed run's values are the same objects.
        self.resolved = type(values).model_validate_json(orjson.dumps(values.as_json()))
        return self.fingerprint(inputs)

    def fingerprint(self, inputs: list[InputFile]) -> str:
        """Hash of what shapes outputs, by one rule for every stage: the config but for how it runs
        (``RunOptions`` and :attr:`run_keys`), the input set where it matters, and what the run
        resolved. Stored in each completion marker: a task finished under another fingerprint is
        redone. Stages do not override it (a subclass that does is refused)."""
        run_keys = set(RunOptions.model_fields) | self.run_keys
        shaping = {k: v for k, v in self.config.model_dump(mode="json").items() if k not in run_keys}
        shaping.pop("documents", None)
        if self.depends_on_input_set:
            shaping["__inputs__"] = [[f.path, f.size, f.mtime] for f in inputs]
        shaping["__resolved__"] = self.resolved.as_json()
        blob = orjson.dumps({"stage": self.name, **shaping}, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(blob).hexdigest()[:16]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "fingerprint" in cls.__dict__:
            raise TypeError(f"{cls.__name__} defines fingerprint(): declare run_keys and resolve() instead (one rule for every stage)")

    # ---- work files -----------------------------------------------------------------------

    @property
    def work(self) -> WorkDir | None:
        """Where the run's work files go (what a phase writes for a later one); None when it has none.

        The runner locks it with the output root, and removes it when the run completes unless
        the config's ``keep_work`` is set (keeping what :meth:`keeps_work_file` names).
        """
        return None

    @property
    def dry_run(self) -> bool:
        """A run that only checks and lists (mix's ``dryrun``): the runner writes nothing for it,
        not even a manifest, which would replace a finished run's."""
        return False

    def damaged_outputs(self, phase: str, records: list[TaskRecord]) -> dict[str, tuple[str, str]]:
        """Finished tasks of ``phase`` whose outputs are damaged in a way their recorded sizes do not
        show (a checksum the task recorded no longer matches): ``{key: (path, problem)}``. A rerun
        redoes them, as it does a task whose file is missing or changed size. By default none."""
        return {}

    def keeps_work_file(self, path: str) -> bool:
        """Whether a complete run keeps this work file when its work directory is removed."""
        return False

    # ---- phases -------------------------------------------------------------------------

    def phases(self) -> list[Phase]:
        """The ordered phases; by default one task per input file through :meth:`process`.

        Asked for after :meth:`prepare` (on the driver, and on a worker from the pickled stage), so
        a stage builds them from its resolved run: config, :attr:`resolved` and layout."""
        return [
            Phase(
                "files",
                plan=self._plan_files,
                run=self._run_file,
                outputs=self._file_outputs,
                after=self._finish,
                unit="file",
            )
        ]

    def process(self, task: Task, quarantine: Quarantine) -> TaskOutput:
        """Process one input file (per-file stages)."""
        raise NotImplementedError(f"stage {self.name!r} defines neither process() nor phases()")

    def finish(self, records: list[TaskRecord]) -> StepResult:
        """A driver-side step after every file is done (aggregation), per-file stages only."""
        return StepResult()

    def _plan_files(self, ctx: RunContext) -> list[Task]:
        return [file_task(f) for f in ctx.inputs]

    def _run_file(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return self.process(task, quarantine)

    def _file_outputs(self, task: Task) -> list[str]:
        out = self.output_path(task.rel)
        return [] if out is None else [out]

    def _finish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        return self.finish(records)
