"""One phase's tasks: plan them, keep the finished ones, run the rest on the run's executor.

The runner (:mod:`dolma_pipe.runner`) builds one :class:`StartedRun` when a run starts and, for
each phase it runs (each round of a repeated one: a :class:`Slot`), a :class:`PhaseCall` (that
run, the slot's index and the fingerprint), the one value :func:`run_tasks` takes. A task whose marker shows it done under the same fingerprint is kept
(:mod:`dolma_pipe.markers`) unless its files are gone or damaged (:mod:`dolma_pipe.redo`); the
others run on the executor, started only when a phase has work (Ray takes seconds). A failed task's
one line goes to the phase's record, its traceback to ``<root>/_failures.log``.
"""

from __future__ import annotations

import functools
import os
import re
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TextIO

from dolma_pipe import storage, workdir
from dolma_pipe.config import RunOptions
from dolma_pipe.executors import Executor, make_executor, refuse_local_paths
from dolma_pipe.manifest import ExecutorInfo, Manifest, PhaseRecord
from dolma_pipe.markers import done_markers, finished, marker_path, phase_dir
from dolma_pipe.progress import progress
from dolma_pipe.redo import TasksToRedo, changed_outputs
from dolma_pipe.run_summary import RunFailed
from dolma_pipe.stage import Phase, RunContext, Stage, Task
from dolma_pipe.workdir import WorkFileError
from dolma_pipe.worker import execute_task


class ErrorLimit:
    """The bad records a run quarantined so far, against ``--max-errors``."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.count = 0

    def add(self, n: int) -> None:
        self.count += n

    @property
    def hit(self) -> bool:
        return self.limit is not None and self.count > self.limit


class RunExecutor:
    """The executor of a run: the caller's, or one this run starts when a phase first has work
    (Ray takes seconds) and closes when the run ends."""

    def __init__(self, given: Executor | None, config: RunOptions):
        self.executor, self.config, self.own = given, config, given is None

    def info(self) -> ExecutorInfo:
        """The executor the manifest records: the caller's, or the one the config asks for."""
        if self.executor is not None:
            return ExecutorInfo(name=self.executor.name, workers=self.executor.workers)  # type: ignore[arg-type]
        return ExecutorInfo(name="ray" if self.config.ray or self.config.ray_address else "local", workers=self.config.processes)

    def start(self) -> Executor:
        if self.executor is None:
            self.executor = make_executor(self.config.processes, self.config.ray, self.config.ray_address)
        return self.executor

    def close(self) -> None:
        if self.own and self.executor is not None:
            self.executor.close()


@dataclass(frozen=True)
class Slot:
    """A phase as the run goes through it, and as the manifest records it: one of the stage's
    phases, or one round of a repeated one."""

    declared: int  # the phase's index in the stage's phases
    round: int  # the round (1, 2, ...) of a repeated phase; 0 for a phase run once
    phase: Phase  # under the round's name

    @classmethod
    def of(cls, phases: list[Phase], declared: int, round: int = 0) -> Slot:
        return cls(declared, round, phases[declared].at(round))

    @classmethod
    def first(cls, phases: list[Phase]) -> list[Slot]:
        """The slots of a run that starts: each phase once, a repeated one as its first round."""
        return [cls.of(phases, i, 1 if p.repeat is not None else 0) for i, p in enumerate(phases)]


@dataclass(frozen=True)
class StartedRun:
    """What every step of a started run reads, fixed when it starts (the manifest, the context,
    the slots, the error count and the redo fill in as it goes)."""

    stage: Stage[Any]
    phases: list[Phase]  # the stage's
    slots: list[Slot]  # the phases as they run, one per record of the manifest: rounds join as they start
    ctx: RunContext
    manifest: Manifest
    fingerprint: str  # the stage's: the first phase's tasks chain from it
    executor: RunExecutor
    errors: ErrorLimit
    redo: TasksToRedo
    stream: TextIO
    # A work directory the last run removed as it completed: its files are not looked for (a task
    # that needs one finds it missing and has its writer redone then).
    removed_work: workdir.WorkDir | None
    save: bool  # False for a dry run, which writes nothing, not even its manifest
    started: float  # time.perf_counter() when the run started

    @property
    def root(self) -> str:
        return self.stage.output_root

    @property
    def config(self) -> RunOptions:
        return self.stage.config


@dataclass(frozen=True)
class PhaseCall:
    """One phase (or round) of a started run, under the fingerprint its tasks carry."""

    run: StartedRun
    index: int  # of its slot, and of its record in the manifest
    fingerprint: str

    @property
    def slot(self) -> Slot:
        return self.run.slots[self.index]

    @property
    def phase(self) -> Phase:
        return self.slot.phase

    @property
    def record(self) -> PhaseRecord:
        return self.run.manifest.phases[self.index]

    @property
    def sub(self) -> str:
        return phase_dir(self.run.phases, self.phase.name)


def run_tasks(call: PhaseCall) -> list[WorkFileError]:
    """Run one phase's unfinished tasks, filling its record; the errors of the tasks that failed
    because a file an earlier task wrote is missing or damaged (their writers are to be redone)."""
    run, phase, record = call.run, call.phase, call.record
    try:
        tasks = _plan(call)
    except WorkFileError as exc:
        # Planning read a file an earlier task wrote (plans should read records, but one may need
        # more): gone with the work directory a complete run removed, or damaged. Its writer is redone.
        return [exc]
    _keep_finished(call, tasks)
    todo = [t for t in tasks if t.key not in record.tasks]
    for done in record.tasks.values():
        run.errors.add(done.error_total)
    name = f"{run.stage.name} {phase.name}" if call.sub else run.stage.name
    bar = progress(name, len(tasks), run.config.progress, run.stream, phase.unit)
    bar.update(len(record.tasks))
    if not todo or run.errors.hit:
        bar.close()
        record.not_run = [t.key for t in todo]
        return []
    executor = run.executor.start()
    # A joined cluster of several nodes shares no disk: a local path that tasks use is refused
    # before one runs (docs/cluster.md).
    work = run.stage.work
    refuse_local_paths(
        executor, run.config, [("the output root", run.root), *([("the work directory", work.root)] if work is not None else [])]
    )
    try:
        return _execute(call, executor, todo, bar)
    finally:
        bar.close()
        record.not_run = [t.key for t in todo if t.key not in record.tasks and t.key not in record.failures]


def _plan(call: PhaseCall) -> list[Task]:
    """The phase's tasks; bad records its planning quarantined count toward ``--max-errors``."""
    run, record = call.run, call.record
    run.ctx.planning_errors = {}
    tasks = call.phase.plan(run.ctx)
    record.planning_errors = dict(run.ctx.planning_errors)
    run.errors.add(sum(record.planning_errors.values()))
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise RunFailed(f"stage {run.stage.name!r} phase {call.phase.name!r} planned task {dup!r} twice (a bug in the stage)")
    return tasks


def _keep_finished(call: PhaseCall, tasks: list[Task]) -> None:
    """Records the tasks whose markers show them done, less those whose files are gone or damaged."""
    run, phase, record = call.run, call.phase, call.record
    markers = done_markers(run.root, call.sub, run.config.force)
    for task in tasks:
        path = marker_path(run.root, task.key, call.sub)
        done = finished(path, task, call.fingerprint) if storage.local_path(path) in markers else None
        if done is not None:
            record.tasks[task.key] = done
    # A finished task whose files are gone or changed since is redone.
    for key, (path, problem) in changed_outputs(run.root, list(record.tasks.values()), run.removed_work).items():
        run.redo.forget(phase.name, record.tasks.pop(key), path, problem)
    # Damage a size cannot show (a flipped bit): the stage checks its own outputs where it can.
    for key, (path, problem) in run.stage.damaged_outputs(phase.name, list(record.tasks.values())).items():
        run.redo.forget(phase.name, record.tasks.pop(key), path, problem)


def _execute(call: PhaseCall, executor: Executor, todo: list[Task], bar: Any) -> list[WorkFileError]:
    run, record = call.run, call.record
    started = time.perf_counter()
    docs = 0
    damaged: list[WorkFileError] = []
    # The worker finds the phase among the stage's, and its round in the context.
    fn = functools.partial(execute_task, run.stage, call.slot.declared, run.ctx, call.fingerprint)
    # At the error limit no more tasks start, but those in flight finish and are recorded:
    # the summary of a stopped run counts everything that was written.
    for task, result, exc in executor.run(fn, todo, stop=lambda: run.errors.hit):
        bar.update(1)
        if exc is not None:
            record.failures[task.key] = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, WorkFileError):
                damaged.append(exc)  # its writer is redone (the manifest's ``redone``)
            else:
                _log_failure(run.root, call.phase.name, task.key, exc)
            continue
        record.tasks[task.key] = result
        docs += result.docs_in
        elapsed = time.perf_counter() - started
        bar.set_postfix(docs=f"{docs:,}", docs_s=f"{docs / max(elapsed, 1e-9):,.0f}", refresh=False)
        run.errors.add(result.error_total)
    return damaged


def failures_log(root: str) -> str:
    return storage.join(root, "_failures.log")


def _log_failure(root: str, phase: str, key: str, exc: BaseException) -> None:
    """A failed task's whole traceback goes to ``<root>/_failures.log`` (the summary shows one line);
    each run starts the log anew."""
    text = "".join(traceback.format_exception(exc))
    remote = getattr(exc, "remote_traceback", None)
    if remote:
        text += "\nin the worker:\n" + re.sub(r"\x1b\[[0-9;]*m", "", remote)  # without Ray's terminal colours
    entry = f"== {datetime.now(timezone.utc).isoformat(timespec='seconds')} {phase} {key}\n{text}\n"
    path = failures_log(root)
    try:
        if storage.is_remote(path):
            old = storage.read_bytes(path) if storage.exists(path) else b""
            storage.write_bytes(path, old + entry.encode())
        else:
            os.makedirs(os.path.dirname(storage.local_path(path)), exist_ok=True)
            with open(storage.local_path(path), "a", encoding="utf-8") as fh:
                fh.write(entry)
    except OSError:
        pass  # the log is for reading later; the failure itself is in the manifest
