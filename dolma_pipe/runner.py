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
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import heapq
import os
import platform
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TextIO

import orjson
from pydantic import ValidationError

from dolma_pipe import __version__, storage
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.executors import Executor, make_executor
from dolma_pipe.manifest import MANIFEST, ExecutorInfo, Manifest, PhaseRecord, TaskRecord
from dolma_pipe.paths import PathError
from dolma_pipe.progress import progress
from dolma_pipe.quarantine import FILE_KINDS, Quarantine
from dolma_pipe.stage import Phase, RunContext, Stage, Task


class RunFailed(DolmaPipeError, RuntimeError):
    """The run ended without finishing every task; the message says why."""


def _phase_dir(phases: list[Phase], index: int) -> str:
    # A single-phase stage keeps its markers and errors directly under _done/ and _errors/.
    return "" if len(phases) == 1 else phases[index].name


def marker_path(root: str, key: str, phase_dir: str = "") -> str:
    return storage.join(root, "_done", *([phase_dir] if phase_dir else []), key + ".done")


def ids_name(key: str, phase_dir: str = "") -> str:
    """Where a task's id hashes go, relative to the output root (markers must not name the root)."""
    return "/".join(["_ids", *([phase_dir] if phase_dir else []), key + ".ids"])


def errors_path(root: str, key: str, phase_dir: str = "") -> str:
    return storage.join(root, "_errors", *([phase_dir] if phase_dir else []), key + ".jsonl")


def clear_stale_temporaries(final_paths: list[str]) -> int:
    """Remove temporaries a killed run left next to these outputs (local paths only).

    They are hidden (``.name.tmp-*``) so they are never mistaken for outputs, but
    without this they would pile up, one per kill.
    """
    removed = 0
    for final in final_paths:
        if storage.is_remote(final):
            continue  # an unfinished S3 upload leaves no object
        local = storage.local_path(final)
        pattern = os.path.join(glob.escape(os.path.dirname(local) or "."), "." + glob.escape(os.path.basename(local)) + ".tmp-*")
        for stale in glob.glob(pattern):
            with contextlib.suppress(OSError):
                os.unlink(stale)
                removed += 1
    return removed


def _check_visible(root: str, task: Task) -> None:
    """A worker that cannot see the driver's local paths says so (a cluster without a shared filesystem)."""
    hint = "a cluster without a shared filesystem needs remote paths (s3://...) for inputs and destination"
    if not storage.is_remote(root) and not os.path.exists(os.path.join(storage.local_path(root), MANIFEST)):
        raise PathError(f"worker {socket.gethostname()} cannot see the output directory {root} that the driver created; {hint}")
    for f in task.inputs:
        if not storage.is_remote(f.path) and not os.path.exists(storage.local_path(f.path)):
            raise PathError(f"worker {socket.gethostname()} cannot see input {f.path} that the driver listed; {hint}")


_ID_SIZE = 16  # a blake2b-128 of the id (Quarantine.saw_document)
# Above this many ids numpy sorts them (~0.3 us an id against Python's ~1.3 us), worth its import
# (~0.1 CPU-s, and np.unique imports numpy.ma besides); below it Python's sort is quicker overall.
_NUMPY_IDS = 100_000


def _write_unique_ids(path: str, hashes: list[bytes]) -> int:
    """Write the sorted unique id hashes of one task; return how many ids repeated within it."""
    if len(hashes) > _NUMPY_IDS:
        import numpy as np

        unique = np.unique(np.frombuffer(b"".join(hashes), dtype=f"V{_ID_SIZE}")).tobytes()
    else:
        unique = b"".join(sorted(set(hashes)))  # bytes order is numpy's void order: the same file
    storage.write_bytes(path, unique)
    return len(hashes) - len(unique) // _ID_SIZE


def _duplicate_ids_across(root: str, records: list[TaskRecord]) -> int:
    """Documents whose id appears in another task's files too (each task's ids are unique already).

    Merges the tasks' sorted files, holding them (16 bytes per document of the phase) in the
    driver; ``duplicate_ids: ignore`` skips it.
    """
    parts = [storage.read_bytes(storage.join(root, r.ids_file)) for r in records if r.ids_file]
    if len(parts) < 2:
        return 0
    repeated = 0
    previous = None
    for h in heapq.merge(*(_records(part) for part in parts)):
        if h == previous:
            repeated += 1
        previous = h
    return repeated


def _records(data: bytes) -> Iterator[bytes]:
    return (data[i : i + _ID_SIZE] for i in range(0, len(data), _ID_SIZE))


def execute_task(stage: Stage, phase_index: int, ctx: RunContext, fingerprint: str, task: Task) -> TaskRecord:
    """Worker side: run one task, then write its errors and its marker (in that order)."""
    phases = stage.phases()
    phase = phases[phase_index]
    sub = _phase_dir(phases, phase_index)
    root = stage.output_root
    err_path = errors_path(root, task.key, sub)
    done_path = marker_path(root, task.key, sub)
    outputs = phase.outputs(task) if phase.outputs is not None else []
    _check_visible(root, task)
    clear_stale_temporaries([*outputs, err_path, done_path])
    quarantine = Quarantine()
    start = time.perf_counter()
    out = phase.run(task, quarantine, ctx)
    if quarantine.total:
        with storage.open_write_atomic(err_path) as fh:
            quarantine.write_to(fh)
    else:
        storage.remove(err_path)
    warnings = dict(quarantine.notes)
    ids_file = None
    if quarantine.id_hashes and stage.config.duplicate_ids != "ignore":
        ids_file = ids_name(task.key, sub)
        within = _write_unique_ids(storage.join(root, ids_file), quarantine.id_hashes)
        if within:
            warnings["duplicate_ids"] = within
    quarantine.close()
    record = TaskRecord(
        phase=phase.name,
        key=task.key,
        inputs=list(task.inputs),
        params=task.params,
        docs_in=out.docs_in,
        counts=dict(out.counts),
        errors=dict(quarantine.counts),
        warnings=warnings,
        ids_file=ids_file,
        data=out.data,
        seconds=time.perf_counter() - start,
        fingerprint=fingerprint,
    )
    storage.write_bytes(done_path, record.marker_bytes())
    return record


def _same_inputs(record: TaskRecord, task: Task) -> bool:
    if len(record.inputs) != len(task.inputs):
        return False
    return all(a.path == b.path and a.size == b.size and abs(a.mtime - b.mtime) <= 1e-3 for a, b in zip(record.inputs, task.inputs))


def _finished(path: str, task: Task, fingerprint: str) -> TaskRecord | None:
    """The task's record if its marker shows it done under the same inputs, params and fingerprint."""
    try:
        record = TaskRecord.model_validate_json(storage.read_bytes(path))
    except (storage.StorageError, FileNotFoundError, ValidationError):
        return None  # unreadable, or written by another version: redo
    if record.fingerprint != fingerprint or record.key != task.key or not _same_inputs(record, task):
        return None
    if orjson.dumps(record.params, option=orjson.OPT_SORT_KEYS) != orjson.dumps(task.params, option=orjson.OPT_SORT_KEYS):
        return None
    record.skipped = True
    return record


def _chain(fingerprint: str, phase: str, records: list[TaskRecord] | None = None) -> str:
    """The next phase's fingerprint: this one, the phase's name and (after it ran) its records."""
    h = hashlib.sha256(fingerprint.encode())
    h.update(b"\0" + phase.encode())
    for r in records or []:
        h.update(orjson.dumps(r.digest_view(), option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()[:16]


@dataclass
class RunSummary:
    """The end of a run: its manifest, and the table the stage asked to print."""

    manifest: Manifest
    root: str
    seconds: float
    table: str | None = None

    @property
    def stage(self) -> str:
        return self.manifest.stage

    @property
    def status(self) -> str:
        return self.manifest.status

    @property
    def results(self) -> list[TaskRecord]:
        return [r for p in self.manifest.phases for r in p.tasks.values()]

    @property
    def totals(self) -> dict[str, int]:
        return self.manifest.totals

    @property
    def errors(self) -> dict[str, int]:
        return self.manifest.errors

    def render(self) -> str:
        m = self.manifest
        rows: list[tuple[str, str]] = []
        single = len(m.phases) == 1
        for p in m.phases:
            done = sum(1 for r in p.tasks.values() if not r.skipped)
            skipped = len(p.tasks) - done
            label = "files" if single and p.name == "files" else f"{p.name} tasks"
            not_run = f", {len(p.not_run):,} not run" if p.not_run else ""
            total = len(p.tasks) + len(p.failures) + len(p.not_run)
            rows.append((label, f"{total:,} ({done:,} processed, {skipped:,} already done, {len(p.failures):,} failed{not_run})"))
        for key in sorted(m.totals):
            rows.append((key.replace("_", " "), f"{m.totals[key]:,}"))
        err_total = sum(m.errors.values())
        if err_total:
            kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(m.errors.items(), key=lambda kv: (-kv[1], kv[0])))
            rows.append(("bad records", f"{err_total:,} ({kinds}); see {storage.join(self.root, '_errors')}/"))
        else:
            rows.append(("bad records", "0"))
        if m.warnings:
            noted = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in sorted(m.warnings.items()))
            rows.append(("warnings", f"{noted} (not errors; see the manifest's task records)"))
        docs = sum(r.docs_in for r in m.phases[0].tasks.values() if not r.skipped) if m.phases else 0
        rate = docs / self.seconds if self.seconds > 0 else 0.0
        rows.append(("time", f"{self.seconds:,.2f} s ({rate:,.0f} docs/s)"))
        width = max(len(k) for k, _ in rows)
        lines = [f"dolma-pipe {m.stage}: {m.status} -> {self.root}"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
        for key, msg in sorted(m.failures.items()):
            lines.append(f"  FAILED {key}: {msg}")
        return "\n".join(lines)


def _refresh_totals(manifest: Manifest) -> None:
    totals: dict[str, int] = {}
    errors: dict[str, int] = {}
    warnings: dict[str, int] = {}
    failures: dict[str, str] = {}
    single = len(manifest.phases) == 1
    for p in manifest.phases:
        for k, v in p.totals().items():
            totals[k] = totals.get(k, 0) + v
        for k, v in p.errors().items():
            errors[k] = errors.get(k, 0) + v
        for k, v in p.warnings().items():
            warnings[k] = warnings.get(k, 0) + v
        for key, msg in p.failures.items():
            failures[key if single else f"{p.name}:{key}"] = msg
    manifest.totals, manifest.errors, manifest.warnings, manifest.failures = totals, errors, warnings, failures


def _done_markers(root: str, sub: str, force: bool) -> set[str]:
    """Every marker of a phase, from one listing (instead of a failed read per unfinished task, a request each on S3)."""
    if force:
        return set()
    pattern = storage.join(root, "_done", *([sub] if sub else []), "**", "*.done")
    return {storage.local_path(f.path) for f in storage.glob_info(pattern)}


def _finalise(manifest: Manifest, seconds: float, root: str) -> None:
    """Totals, status, timings; then the manifest's last write."""
    _refresh_totals(manifest)
    manifest.status = "complete" if all(p.status == "complete" for p in manifest.phases) else "failed"
    manifest.finished = datetime.now(timezone.utc).isoformat()
    manifest.results = manifest.phases[-1].step if manifest.phases else {}
    manifest.timings = {
        "wall_seconds": round(seconds, 3),
        "task_seconds": round(sum(r.seconds for p in manifest.phases for r in p.tasks.values() if not r.skipped), 3),
        **{f"{p.name}_seconds": round(p.seconds, 3) for p in manifest.phases if len(manifest.phases) > 1},
    }
    manifest.write(root)


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


def run_stage(stage: Stage, executor: Executor | None = None, stream: TextIO | None = None) -> RunSummary:
    """Run ``stage``'s phases in order and return the summary; raises :class:`RunFailed` on failure."""
    stream = sys.stderr if stream is None else stream  # looked up per call: pytest and others swap it
    cfg = stage.config
    started_at = time.perf_counter()
    root = stage.output_root
    _check_output_root(root)
    inputs = stage.plan_inputs()
    phases = stage.phases()
    ctx = RunContext(inputs=inputs)
    fingerprint = stage.fingerprint(inputs)
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
        inputs=inputs,
        phases=[PhaseRecord(name=p.name) for p in phases],
    )
    manifest.write(root)
    errors = _ErrorLimit(cfg.max_errors)
    own_executor = executor is None
    table: str | None = None
    phase_fp = fingerprint
    try:
        for index, phase in enumerate(phases):
            record = manifest.phases[index]
            record.status = "running"
            if index:
                manifest.write(root)
            phase_fp = _chain(phase_fp, phase.name)
            phase_started = time.perf_counter()
            executor = _run_phase(stage, phases, index, ctx, phase_fp, record, executor, errors, stream)
            record.seconds = time.perf_counter() - phase_started
            if record.failures or errors.hit:
                record.status = "failed"
                break
            records = [record.tasks[k] for k in sorted(record.tasks)]
            unreadable = _all_unreadable(records)
            if unreadable:
                record.status = "failed"
                manifest.stopped = unreadable
                break
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
            record.status = "complete"
            phase_fp = _chain(phase_fp, phase.name, records)
            _refresh_totals(manifest)
            manifest.write(root)
    except BaseException as exc:
        # Interrupted (Ctrl-C, SIGTERM) or a user error mid-run: the manifest must not stay "running".
        manifest.stopped = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        for p in manifest.phases:
            if p.status == "running":
                p.status = "failed"
        _finalise(manifest, time.perf_counter() - started_at, root)
        raise
    finally:
        if own_executor and executor is not None:
            executor.close()
    seconds = time.perf_counter() - started_at
    _finalise(manifest, seconds, root)
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
            f"{len(manifest.failures)} task(s) failed, e.g. {first[0]}: {first[1]} (finished tasks are kept: fix the cause and rerun to go on)"
        )
    return summary


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
) -> Executor | None:
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
    todo: list[Task] = []
    for task in tasks:
        path = marker_path(root, task.key, sub)
        done = _finished(path, task, fingerprint) if storage.local_path(path) in markers else None
        if done is None:
            todo.append(task)
        else:
            record.tasks[task.key] = done
            errors.add(done.error_total)
    name = stage.name if len(phases) == 1 else f"{stage.name} {phase.name}"
    bar = progress(name, len(tasks), cfg.progress, stream, phase.unit)
    bar.update(len(record.tasks))
    if not todo or errors.hit:
        bar.close()
        record.not_run = [t.key for t in todo]
        return executor
    if executor is None:
        executor = make_executor(cfg.processes, cfg.ray, cfg.ray_address)
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
                continue
            record.tasks[task.key] = result
            docs += result.docs_in
            elapsed = time.perf_counter() - started
            bar.set_postfix(docs=f"{docs:,}", docs_s=f"{docs / max(elapsed, 1e-9):,.0f}", refresh=False)
            errors.add(result.error_total)
    finally:
        bar.close()
        record.not_run = [t.key for t in todo if t.key not in record.tasks and t.key not in record.failures]
    return executor
