"""Runs a stage's phases: skips finished tasks, executes the rest, records everything.

Per task the worker writes the stage's outputs, then the task's quarantined
records to ``<root>/_errors/<key>.jsonl``, then a completion marker
``<root>/_done/<key>.done`` holding its :class:`TaskRecord` (a stage with
several phases keeps each phase's files under ``_errors/<phase>/`` and
``_done/<phase>/``).  The marker is written last, so a task without one is
redone by a rerun and a task with one is skipped, unless ``force``, its input
files changed size or mtime, its params changed, or its fingerprint differs.

The fingerprint of a phase's tasks chains the stage's fingerprint (settings,
and the input set for stages whose outputs depend on it) with the records of
every earlier phase: when an earlier phase's results change, every later task
is redone; when they are the same, a rerun resumes in the phase and at the task
where the last run stopped.  Phases run in order on one executor (local pool or
Ray); a phase's driver-side step runs once all its tasks are done, from the
records, so a resumed run computes it exactly as an uninterrupted one.

The run writes ``<root>/_manifest.json`` when it starts (status ``running``),
as each phase starts and ends, and when it ends (``complete`` or ``failed``).

Files a task wrote are recorded with their sizes in its record. A rerun redoes a finished task
whose files are missing or changed size, and a task or step that finds a work file missing,
cut short or damaged (:class:`dolma_pipe.workdir.WorkFileError`) makes the run redo the task
that wrote it, then go on from there; each is said in one line and kept in the manifest's
``redone``. A task is redone at most once a run: a file damaged again fails the run with the
file and the command that starts over.

A run holds a lock on its output root and work directory (:mod:`dolma_pipe.lock`) from before
it writes anything until it ends, so a second run into the same place is refused at once; when
a run completes, its work directory is removed unless the config's ``keep_work`` is set.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TextIO

from dolma_pipe import __version__, storage, workdir
from dolma_pipe.destinations import check_destination
from dolma_pipe.duplicate_ids import duplicate_ids_across as _duplicate_ids_across
from dolma_pipe.duplicate_ids import write_unique_ids
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.executors import Executor, make_executor, refuse_local_paths
from dolma_pipe.lock import RunLock
from dolma_pipe.manifest import (
    ExecutorInfo,
    Manifest,
    ManifestError,
    PhaseRecord,
    TaskRecord,
    read_manifest,
)
from dolma_pipe.markers import chain as _chain
from dolma_pipe.markers import done_markers as _done_markers
from dolma_pipe.markers import finished as _finished
from dolma_pipe.markers import marker_path
from dolma_pipe.markers import phase_dir as _phase_dir
from dolma_pipe.paths import PathError
from dolma_pipe.progress import progress
from dolma_pipe.quarantine import FILE_KINDS
from dolma_pipe.redo import TasksToRedo as _Redo
from dolma_pipe.redo import changed_outputs as _changed_outputs
from dolma_pipe.run_summary import RunFailed, RunSummary
from dolma_pipe.run_summary import finalise as _finalise
from dolma_pipe.run_summary import refresh_totals as _refresh_totals
from dolma_pipe.stage import Phase, RunContext, Stage
from dolma_pipe.workdir import WorkFileError
from dolma_pipe.worker import execute_task

__all__ = ["RunFailed", "RunSummary", "execute_task", "run_stage"]
_write_unique_ids = write_unique_ids  # tests reach it here, from before it had a module


def _all_unreadable(records: list[TaskRecord]) -> str | None:
    """A message when every input file of a phase was unreadable: such a run did nothing and must fail."""
    readers = [r for r in records if r.inputs]
    unreadable = FILE_KINDS - {"empty_file"}
    if readers and all(r.docs_in == 0 and unreadable & set(r.errors) for r in readers):
        return (
            f"none of the {len(readers)} input file(s) could be read (e.g. {readers[0].inputs[0].path}); "
            "see _errors/ for each file's reason"
        )
    return None


class _ErrorLimit:
    def __init__(self, limit: int | None):
        self.limit = limit
        self.count = 0

    def add(self, n: int) -> None:
        self.count += n

    @property
    def hit(self) -> bool:
        return self.limit is not None and self.count > self.limit


def _check_output_root(root: str) -> None:
    """A local output directory, or one of its parents, that is an existing file: one clear line."""
    if storage.is_remote(root):
        return
    path = os.path.abspath(storage.local_path(root))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    if os.path.isfile(path):
        what = "is" if path == os.path.abspath(storage.local_path(root)) else f"is inside {path}, which is"
        raise PathError(f"{root}: the output directory {what} an existing file")


def _previous(root: str) -> Manifest | None:
    """The manifest an earlier run left in ``root`` (None if there is none or it is unreadable)."""
    try:
        return read_manifest(root)
    except (ManifestError, storage.StorageError):
        return None


def run_stage(stage: Stage, executor: Executor | None = None, stream: TextIO | None = None) -> RunSummary:
    """Run ``stage``'s phases in order and return the summary; raises :class:`RunFailed` on failure."""
    stream = sys.stderr if stream is None else stream  # looked up per call: pytest and others swap it
    root = stage.output_root
    _check_output_root(root)
    check_destination(stage.name, root, stage.destination_key)
    work = stage.work
    folders = [root] if work is None or work.root.startswith(root.rstrip("/") + "/") else [root, work.root]
    with RunLock(folders, stage.name, stream):
        return _run_locked(stage, executor, stream)


def _run_locked(stage: Stage, executor: Executor | None, stream: TextIO) -> RunSummary:
    cfg = stage.config
    started_at = time.perf_counter()
    root = stage.output_root
    inputs = stage.plan_inputs()
    phases = stage.phases()
    ctx = RunContext(inputs=inputs)
    fingerprint = stage.prepare(inputs)
    previous = _previous(root)
    # A work directory that the last run removed as it completed is not looked for: a task
    # that needs a file from it finds it missing and has its writer redone then.
    removed_work = stage.work if previous is not None and previous.work_removed else None
    # Record the executor the config asks for; start it (Ray takes seconds) only if there is work.
    if executor is not None:
        info = ExecutorInfo(name=executor.name, workers=executor.workers)  # type: ignore[arg-type]
    else:
        info = ExecutorInfo(name="ray" if cfg.ray or cfg.ray_address else "local", workers=cfg.processes)
    manifest = Manifest(
        stage=stage.name,
        status="running",
        version=__version__,
        python=platform.python_version(),
        started=datetime.now(timezone.utc).isoformat(),
        config=cfg.model_dump(mode="json"),
        executor=info,
        fingerprint=fingerprint,
        resolved=stage.resolved.as_json(),
        inputs=inputs,
        phases=[PhaseRecord(name=p.name) for p in phases],
    )
    # A dry run writes nothing: not even its manifest over a finished run's.
    save = not stage.dry_run
    if save:
        manifest.write(root)
        storage.remove(failures_log(root))  # an earlier run's: this run logs its own
    errors = _ErrorLimit(cfg.max_errors)
    own_executor = executor is None
    table: str | None = None
    redo = _Redo(stage, phases, manifest, root, stream)
    # The fingerprint each phase starts from (the stage's, chained through earlier phases).
    starts: dict[int, str] = {}
    phase_fp = fingerprint
    index = 0
    try:
        while index < len(phases):
            phase = phases[index]
            record = manifest.phases[index]
            record.status = "running"
            if index and save:
                manifest.write(root)
            starts[index] = phase_fp
            phase_fp = _chain(phase_fp, phase.name)
            phase_started = time.perf_counter()
            outcome = _run_phase(stage, phases, index, ctx, phase_fp, record, executor, errors, stream, redo, removed_work)
            executor = outcome.executor
            record.seconds = time.perf_counter() - phase_started
            restart: int | None = None
            if outcome.damaged and not errors.hit:
                restart = redo.plan(index, outcome.damaged)
            else:
                if record.failures or errors.hit:
                    record.status = "failed"
                    break
                records = [record.tasks[k] for k in sorted(record.tasks)]
                unreadable = _all_unreadable(records)
                if unreadable:
                    record.status = "failed"
                    manifest.stopped = unreadable
                    break
                try:
                    if cfg.duplicate_ids != "ignore":
                        record.duplicate_ids_across_tasks = _duplicate_ids_across(root, records)
                    repeated = record.warnings().get("duplicate_ids", 0)
                    if repeated and cfg.duplicate_ids == "fail":
                        record.status = "failed"
                        manifest.stopped = (
                            f"{repeated:,} document(s) repeat an earlier document's id in phase {phase.name!r} "
                            f"(duplicate_ids: fail); the manifest's task records say which files"
                        )
                        break
                    if phase.after is not None:
                        step = phase.after(records, ctx)
                        ctx.steps[phase.name] = step
                        record.step = step.data
                        table = step.table
                except WorkFileError as exc:
                    restart = redo.plan(index, [exc])
            if restart is not None:
                # Go on from the phase of the task being redone: later phases' finished tasks are
                # kept when its records come out the same (the fingerprints chain them).
                for j in range(restart, len(phases)):
                    manifest.phases[j] = PhaseRecord(name=phases[j].name)
                    ctx.steps.pop(phases[j].name, None)
                phase_fp = starts[restart]
                index = restart
                continue
            record.status = "complete"
            phase_fp = _chain(phase_fp, phase.name, records)
            _refresh_totals(manifest)
            if save:
                manifest.write(root)
            index += 1
        work = stage.work
        if work is not None and all(p.status == "complete" for p in manifest.phases) and not getattr(cfg, "keep_work", False):
            work.remove(keep=stage.keeps_work_file)
            manifest.work_removed = True
    except BaseException as exc:
        # Interrupted (Ctrl-C, SIGTERM) or a user error mid-run: the manifest must not stay "running".
        manifest.stopped = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        for p in manifest.phases:
            if p.status == "running":
                p.status = "failed"
        try:
            _finalise(manifest, time.perf_counter() - started_at, root, save)
        except DolmaPipeError as also:
            # The manifest cannot be written either (a full disk): the first error is the one to tell.
            print(f"dolma-pipe {stage.name}: the manifest could not be updated either ({also})", file=stream)
        raise
    finally:
        if own_executor and executor is not None:
            executor.close()
    seconds = time.perf_counter() - started_at
    _finalise(manifest, seconds, root, save)
    summary = RunSummary(manifest, root, seconds, table if manifest.status == "complete" else None)
    print(summary.render(), file=stream)
    if manifest.stopped:
        raise RunFailed(manifest.stopped)
    if errors.hit:
        raise RunFailed(
            f"{errors.count:,} bad records exceed --max-errors {errors.limit}; see {storage.join(root, '_errors')}/ "
            "(finished files are kept: fix the inputs, or raise --max-errors and rerun to go on)"
        )
    if manifest.failures:
        first = next(iter(sorted(manifest.failures.items())))
        raise RunFailed(
            f"{len(manifest.failures)} task(s) failed, e.g. {first[0]}: {first[1]} (finished tasks are kept: fix the cause and rerun "
            f"to go on; tracebacks in {failures_log(root)})"
        )
    return summary


@dataclass
class _PhaseOutcome:
    executor: Executor | None
    # Tasks that failed because a file an earlier task wrote is missing or damaged.
    damaged: list[WorkFileError] = field(default_factory=list)


def _run_phase(
    stage: Stage,
    phases: list[Phase],
    index: int,
    ctx: RunContext,
    fingerprint: str,
    record: PhaseRecord,
    executor: Executor | None,
    errors: _ErrorLimit,
    stream: TextIO,
    redo: _Redo,
    removed_work: workdir.WorkDir | None,
) -> _PhaseOutcome:
    """Run one phase's unfinished tasks; fills ``record``; returns the executor (started if needed)."""
    cfg = stage.config
    phase = phases[index]
    sub = _phase_dir(phases, index)
    root = stage.output_root
    ctx.planning_errors = {}
    tasks = phase.plan(ctx)
    record.planning_errors = dict(ctx.planning_errors)
    errors.add(sum(record.planning_errors.values()))
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise RunFailed(f"stage {stage.name!r} phase {phase.name!r} planned task {dup!r} twice (a bug in the stage)")
    markers = _done_markers(root, sub, cfg.force)
    for task in tasks:
        path = marker_path(root, task.key, sub)
        done = _finished(path, task, fingerprint) if storage.local_path(path) in markers else None
        if done is not None:
            record.tasks[task.key] = done
    # A finished task whose files are gone or changed since is redone.
    for key, (path, problem) in _changed_outputs(root, list(record.tasks.values()), removed_work).items():
        redo.forget(phase.name, record.tasks.pop(key), path, problem)
    # Damage a size cannot show (a flipped bit): the stage checks its own outputs where it can.
    for key, (path, problem) in stage.damaged_outputs(phase.name, list(record.tasks.values())).items():
        redo.forget(phase.name, record.tasks.pop(key), path, problem)
    todo = [t for t in tasks if t.key not in record.tasks]
    for done in record.tasks.values():
        errors.add(done.error_total)
    name = stage.name if len(phases) == 1 else f"{stage.name} {phase.name}"
    bar = progress(name, len(tasks), cfg.progress, stream, phase.unit)
    bar.update(len(record.tasks))
    outcome = _PhaseOutcome(executor)
    if not todo or errors.hit:
        bar.close()
        record.not_run = [t.key for t in todo]
        return outcome
    if executor is None:
        executor = outcome.executor = make_executor(cfg.processes, cfg.ray, cfg.ray_address)
    # A joined cluster of several nodes shares no disk: a local path that tasks use is refused
    # before one runs (docs/cluster.md).
    work = stage.work
    refuse_local_paths(executor, cfg, [("the output root", root), *([("the work directory", work.root)] if work is not None else [])])
    started = time.perf_counter()
    docs = 0
    fn = functools.partial(execute_task, stage, index, ctx, fingerprint)
    try:
        # At the error limit no more tasks start, but those in flight finish and are recorded:
        # the summary of a stopped run counts everything that was written.
        for task, result, exc in executor.run(fn, todo, stop=lambda: errors.hit):
            bar.update(1)
            if exc is not None:
                record.failures[task.key] = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, WorkFileError):
                    outcome.damaged.append(exc)  # its writer is redone (the manifest's ``redone``)
                else:
                    _log_failure(root, phase.name, task.key, exc)
                continue
            record.tasks[task.key] = result
            docs += result.docs_in
            elapsed = time.perf_counter() - started
            bar.set_postfix(docs=f"{docs:,}", docs_s=f"{docs / max(elapsed, 1e-9):,.0f}", refresh=False)
            errors.add(result.error_total)
    finally:
        bar.close()
        record.not_run = [t.key for t in todo if t.key not in record.tasks and t.key not in record.failures]
    return outcome


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
