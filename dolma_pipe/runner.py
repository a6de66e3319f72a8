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

A repeated phase (:class:`dolma_pipe.stage.Repeat`: dedup's star steps) runs round after round
while it asks for another, at most its limit: each round is a phase of the run named
``<phase>-NN``, with its own markers (``_done/<phase>-NN/``), record in the manifest (which lists
the rounds that ran, the first from the start, each next one as it starts) and link in the
fingerprint chain, so a run killed in the loop resumes at the round and task where it stopped.

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

This module holds the run's steps (start, the phases in order, the end); the parts live beside it:
the worker's side of a task in :mod:`dolma_pipe.worker`, one phase's tasks in
:mod:`dolma_pipe.phase_tasks`, markers and the fingerprint chain in :mod:`dolma_pipe.markers`, the
redo in :mod:`dolma_pipe.redo`, the duplicate-id merge in :mod:`dolma_pipe.duplicate_ids`, and the
summary, the manifest's last write and :class:`RunFailed` in :mod:`dolma_pipe.run_summary`.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TextIO

from dolma_pipe import __version__, storage
from dolma_pipe.destinations import check_destination
from dolma_pipe.duplicate_ids import duplicate_ids_across, write_unique_ids
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.executors import Executor
from dolma_pipe.lock import RunLock
from dolma_pipe.manifest import Manifest, ManifestError, PhaseRecord, TaskRecord, read_manifest
from dolma_pipe.markers import chain
from dolma_pipe.paths import PathError
from dolma_pipe.phase_tasks import ErrorLimit, PhaseCall, RunExecutor, Slot, StartedRun, failures_log, run_tasks
from dolma_pipe.quarantine import FILE_KINDS
from dolma_pipe.redo import TasksToRedo
from dolma_pipe.run_summary import RunFailed, RunSummary, finalise, refresh_totals
from dolma_pipe.stage import RunContext, Stage, StepResult
from dolma_pipe.workdir import WorkFileError
from dolma_pipe.worker import execute_task

# What others import from the runner: the run, its summary and error, and the worker's side of a
# task; tests reach the id files' writer and merge here too, from before they had a module.
__all__ = ["RunFailed", "RunSummary", "execute_task", "run_stage"]
_write_unique_ids = write_unique_ids
_duplicate_ids_across = duplicate_ids_across


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
    """The run's steps, under its lock: start, the phases, the work directory's removal, the end."""
    run = _start(stage, RunExecutor(executor, stage.config), stream)
    try:
        table = _run_phases(run)
        work = stage.work
        if work is not None and all(p.status == "complete" for p in run.manifest.phases) and not getattr(stage.config, "keep_work", False):
            work.remove(keep=stage.keeps_work_file)
            run.manifest.work_removed = True
    except BaseException as exc:
        _record_stop(run, exc)
        raise
    finally:
        run.executor.close()
    return _finish(run, table)


def _start(stage: Stage, executor: RunExecutor, stream: TextIO) -> StartedRun:
    """Plans the inputs and the fingerprint, and writes the manifest of a run that starts."""
    cfg = stage.config
    started = time.perf_counter()
    root = stage.output_root
    inputs = stage.plan_inputs()
    # Resolved first: a stage builds its phases from its resolved run (config, resolved values, layout).
    fingerprint = stage.prepare(inputs)
    phases = stage.phases()
    slots = Slot.first(phases)
    ctx = RunContext(inputs=inputs)
    previous = _previous(root)
    manifest = Manifest(
        stage=stage.name,
        status="running",
        version=__version__,
        python=platform.python_version(),
        started=datetime.now(timezone.utc).isoformat(),
        config=cfg.model_dump(mode="json"),
        # The caller's executor or the one the config asks for, started (Ray takes seconds) only if there is work.
        executor=executor.info(),
        fingerprint=fingerprint,
        resolved=stage.resolved.as_json(),
        inputs=inputs,
        phases=[PhaseRecord(name=s.phase.name) for s in slots],
    )
    save = not stage.dry_run  # a dry run writes nothing: not even its manifest over a finished run's
    if save:
        manifest.write(root)
        storage.remove(failures_log(root))  # an earlier run's: this run logs its own
    return StartedRun(
        stage=stage,
        phases=phases,
        slots=slots,
        ctx=ctx,
        manifest=manifest,
        fingerprint=fingerprint,
        executor=executor,
        errors=ErrorLimit(cfg.max_errors),
        redo=TasksToRedo(stage, phases, manifest, root, stream),
        stream=stream,
        removed_work=stage.work if previous is not None and previous.work_removed else None,
        save=save,
        started=started,
    )


@dataclass(frozen=True)
class _PhaseEnd:
    """How a phase ended: the run stops, goes back to redo a damaged file's writer, or goes on."""

    stop: bool = False
    restart: int | None = None  # the phase to go on from
    step: StepResult | None = None  # the phase's driver-side step, when it has one


def _run_phases(run: StartedRun) -> str | None:
    """Runs the phases in order, a repeated one round after round, going back when a damaged
    file's writer is redone; the table of the last driver-side step that ran."""
    table: str | None = None
    starts: dict[int, str] = {}  # the fingerprint each slot starts from (the stage's, chained through earlier ones)
    fingerprint = run.fingerprint
    index = 0
    while index < len(run.slots):
        slot, record = run.slots[index], run.manifest.phases[index]
        record.status = "running"
        if index and run.save:
            run.manifest.write(run.root)
        starts[index] = fingerprint
        run.ctx.round = slot.round
        call = PhaseCall(run, index, chain(fingerprint, slot.phase.name))
        phase_started = time.perf_counter()
        damaged = run_tasks(call)
        record.seconds = time.perf_counter() - phase_started
        records = [record.tasks[k] for k in sorted(record.tasks)]
        end = _end_phase(call, damaged, records)
        if end.stop:
            break
        if end.restart is not None:
            _go_back(run, end.restart)
            fingerprint, index = starts[end.restart], end.restart
            continue
        if end.step is not None:
            table = end.step.table
        record.status = "complete"
        fingerprint = chain(call.fingerprint, slot.phase.name, records)
        exhausted = _next_round(run, index)
        refresh_totals(run.manifest)
        if run.save:
            run.manifest.write(run.root)
        if exhausted:
            break
        index += 1
    return table


def _next_round(run: StartedRun, index: int) -> bool:
    """After a round of a repeated phase: the next round joins the run (a slot and a record after
    this one) when the phase asks for it; True when it asks for one past its limit (the run stops)."""
    slot = run.slots[index]
    repeat = run.phases[slot.declared].repeat
    if repeat is None or not repeat.again(run.ctx, slot.round):
        return False
    if slot.round >= repeat.limit:
        run.manifest.stopped = repeat.exhausted
        return True
    following = Slot.of(run.phases, slot.declared, slot.round + 1)
    run.slots.insert(index + 1, following)
    run.manifest.phases.insert(index + 1, PhaseRecord(name=following.phase.name))
    return False


def _go_back(run: StartedRun, restart: int) -> None:
    """Back to slot ``restart``, whose task is redone: the records from there start anew (later
    phases' finished tasks are kept when its records come out the same: the fingerprints chain
    them), and rounds after it leave the run until their phase asks for them again."""
    for s in run.slots[restart:]:
        run.ctx.steps.pop(s.phase.name, None)
    run.slots[restart + 1 :] = [s for s in run.slots[restart + 1 :] if s.round <= 1]
    run.manifest.phases[restart:] = [PhaseRecord(name=s.phase.name) for s in run.slots[restart:]]


def _end_phase(call: PhaseCall, damaged: list[WorkFileError], records: list[TaskRecord]) -> _PhaseEnd:
    """After a phase's tasks ran: redo the writers of damaged files, stop the run (failed tasks,
    too many bad records, nothing readable, repeated ids under ``duplicate_ids: fail``), or run
    the phase's driver-side step."""
    run, phase, record = call.run, call.phase, call.record
    if damaged and not run.errors.hit:
        return _PhaseEnd(restart=run.redo.plan(call.index, damaged))
    if record.failures or run.errors.hit:
        record.status = "failed"
        return _PhaseEnd(stop=True)
    unreadable = _all_unreadable(records)
    if unreadable:
        record.status = "failed"
        run.manifest.stopped = unreadable
        return _PhaseEnd(stop=True)
    try:
        if run.config.duplicate_ids != "ignore":
            record.duplicate_ids_across_tasks = duplicate_ids_across(run.root, records)
        repeated = record.warnings().get("duplicate_ids", 0)
        if repeated and run.config.duplicate_ids == "fail":
            record.status = "failed"
            run.manifest.stopped = (
                f"{repeated:,} document(s) repeat an earlier document's id in phase {phase.name!r} "
                f"(duplicate_ids: fail); the manifest's task records say which files"
            )
            return _PhaseEnd(stop=True)
        if phase.after is None:
            return _PhaseEnd()
        step = phase.after(records, run.ctx)
        run.ctx.steps[phase.name] = step
        record.step = step.data
        return _PhaseEnd(step=step)
    except WorkFileError as exc:
        return _PhaseEnd(restart=run.redo.plan(call.index, [exc]))


def _record_stop(run: StartedRun, exc: BaseException) -> None:
    """Interrupted (Ctrl-C, SIGTERM) or a user error mid-run: the manifest must not stay "running"."""
    run.manifest.stopped = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    for p in run.manifest.phases:
        if p.status == "running":
            p.status = "failed"
    try:
        finalise(run.manifest, time.perf_counter() - run.started, run.root, run.save)
    except DolmaPipeError as also:
        # The manifest cannot be written either (a full disk): the first error is the one to tell.
        print(f"dolma-pipe {run.stage.name}: the manifest could not be updated either ({also})", file=run.stream)


def _finish(run: StartedRun, table: str | None) -> RunSummary:
    """The manifest's last write and the summary; :class:`RunFailed` if the run did not finish."""
    manifest, root, errors = run.manifest, run.root, run.errors
    seconds = time.perf_counter() - run.started
    finalise(manifest, seconds, root, run.save)
    summary = RunSummary(manifest, root, seconds, table if manifest.status == "complete" else None)
    print(summary.render(), file=run.stream)
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
