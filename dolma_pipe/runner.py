"""Runs a stage's plan: skips finished files, executes the rest, records everything.

Per input file the worker writes the stage's outputs, then the file's
quarantined records to ``<root>/_errors/<rel>.jsonl``, then a completion
marker ``<root>/_done/<rel>.done`` holding the file's counts.  The marker is
written last, so a file without one is redone by a rerun and a file with one is
skipped (unless ``force``, or the input changed size or mtime since).  The run
writes ``<root>/_manifest.json`` when it starts (status ``running``) and when it
ends (``complete`` or ``failed``), with the resolved config, the version, every
input with its size and mtime, per-file counts and timings.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import platform
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

import orjson

from dolma_pipe import __version__, storage
from dolma_pipe.executors import Executor, make_executor
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import FileTask, Stage, TaskResult

MANIFEST = "_manifest.json"


class RunFailed(RuntimeError):
    """The run ended without finishing every file; the message says why."""


def marker_path(root: str, rel: str) -> str:
    return storage.join(root, "_done", rel + ".done")


def errors_path(root: str, rel: str) -> str:
    return storage.join(root, "_errors", rel + ".jsonl")


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


def execute_task(stage: Stage, task: FileTask) -> TaskResult:
    """Worker side: process one file, then write its errors and its marker (in that order)."""
    root = stage.output_root
    out_path = stage.output_path(task.rel)
    err_path = errors_path(root, task.rel)
    done_path = marker_path(root, task.rel)
    clear_stale_temporaries(([out_path] if out_path is not None else []) + [err_path, done_path])
    quarantine = Quarantine()
    start = time.perf_counter()
    out = stage.process(task, quarantine)
    counts, extra = out if isinstance(out, tuple) else (out, {})
    if quarantine.total:
        with storage.open_write_atomic(err_path) as fh:
            quarantine.write_to(fh)
    else:
        storage.remove(err_path)
    quarantine.close()
    result = TaskResult(
        rel=task.rel,
        path=task.path,
        counts=dict(counts),
        errors=dict(quarantine.counts),
        seconds=time.perf_counter() - start,
        size=task.size,
        mtime=task.mtime,
        extra=extra,
    )
    marker = result.to_json() | {"fingerprint": stage.fingerprint()}
    storage.write_bytes(done_path, orjson.dumps(marker))
    return result


def _finished(root: str, task: FileTask, fingerprint: str) -> TaskResult | None:
    path = marker_path(root, task.rel)
    try:
        data = orjson.loads(storage.read_bytes(path))
    except (storage.StorageError, orjson.JSONDecodeError, FileNotFoundError):
        return None
    if data.get("size") != task.size or abs(float(data.get("mtime", 0)) - task.mtime) > 1e-3:
        return None  # the input changed since it was processed
    if data.get("fingerprint") != fingerprint:
        return None  # processed under settings that shape outputs differently
    return TaskResult.from_json(data, skipped=True)


@dataclass
class RunSummary:
    stage: str
    root: str
    status: str
    results: list[TaskResult]
    failures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def totals(self) -> Counter:
        total: Counter = Counter()
        for r in self.results:
            total.update(r.counts)
        return total

    @property
    def errors(self) -> Counter:
        total: Counter = Counter()
        for r in self.results:
            total.update(r.errors)
        return total

    def render(self) -> str:
        processed = sum(1 for r in self.results if not r.skipped)
        skipped = len(self.results) - processed
        totals = self.totals
        errors = self.errors
        docs = sum(r.counts.get("docs_in", 0) for r in self.results if not r.skipped)
        rate = docs / self.seconds if self.seconds > 0 else 0.0
        rows = [
            ("files", f"{len(self.results) + len(self.failures):,} ({processed:,} processed, {skipped:,} already done, {len(self.failures):,} failed)"),
        ]
        for key in sorted(totals):
            rows.append((key.replace("_", " "), f"{totals[key]:,}"))
        err_total = sum(errors.values())
        if err_total:
            kinds = ", ".join(f"{k} {v:,}" for k, v in errors.most_common())
            rows.append(("bad records", f"{err_total:,} ({kinds}); see {storage.join(self.root, '_errors')}/"))
        else:
            rows.append(("bad records", "0"))
        rows.append(("time", f"{self.seconds:,.2f} s ({rate:,.0f} docs/s)"))
        width = max(len(k) for k, _ in rows)
        lines = [f"dolma-pipe {self.stage}: {self.status} -> {self.root}"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
        for rel, msg in sorted(self.failures.items()):
            lines.append(f"  FAILED {rel}: {msg}")
        return "\n".join(lines)


def _write_manifest(stage: Stage, executor: dict[str, Any], tasks: list[FileTask], summary: RunSummary, started: str) -> None:
    manifest = {
        "stage": stage.name,
        "status": summary.status,
        "version": __version__,
        "python": platform.python_version(),
        "started": started,
        "finished": datetime.now(timezone.utc).isoformat() if summary.status != "running" else None,
        "config": stage.config.model_dump(mode="json"),
        "executor": executor,
        "inputs": [{"path": t.path, "rel": t.rel, "size": t.size, "mtime": t.mtime} for t in tasks],
        "files": {r.rel: r.to_json() | {"skipped": r.skipped} for r in summary.results},
        "failures": summary.failures,
        "totals": dict(summary.totals),
        "errors": dict(summary.errors),
        "timings": {"wall_seconds": round(summary.seconds, 3), "task_seconds": round(sum(r.seconds for r in summary.results if not r.skipped), 3)},
        **({"results": summary.extra} if summary.extra else {}),
    }
    storage.write_bytes(storage.join(stage.output_root, MANIFEST), orjson.dumps(manifest, option=orjson.OPT_INDENT_2))


class _LogProgress:
    """Progress for logs (no terminal): one line every ``interval`` seconds, not a redrawn bar."""

    def __init__(self, name: str, total: int, stream: TextIO, interval: float = 30.0):
        self.name, self.total, self.stream, self.interval = name, total, stream, interval
        self.n = 0
        self.postfix: dict[str, str] = {}
        self._last = time.perf_counter()

    def update(self, n: int) -> None:
        self.n += n
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            extra = ", ".join(f"{k.replace('_', '/')} {v}" for k, v in self.postfix.items())
            print(f"dolma-pipe {self.name}: {self.n:,}/{self.total:,} files{', ' + extra if extra else ''}", file=self.stream, flush=True)

    def set_postfix(self, refresh: bool = False, **kv: str) -> None:
        self.postfix = kv

    def close(self) -> None:
        pass


def _progress(name: str, total: int, enabled: bool, stream: TextIO):
    if enabled and not stream.isatty():
        return _LogProgress(name, total, stream)
    from tqdm import tqdm

    return tqdm(total=total, unit="file", disable=not enabled, file=stream, dynamic_ncols=True, desc=name)


def run_stage(stage: Stage, executor: Executor | None = None, stream: TextIO = sys.stderr) -> RunSummary:
    """Run ``stage`` over its plan and return the summary; raises :class:`RunFailed` on failure."""
    cfg = stage.config
    started_at = time.perf_counter()
    started = datetime.now(timezone.utc).isoformat()
    tasks = stage.plan()
    root = stage.output_root
    results: list[TaskResult] = []
    todo: list[FileTask] = []
    fingerprint = stage.fingerprint()
    # One listing of the markers instead of a failed read per unfinished file (a request each on S3).
    markers = set() if cfg.force else {storage.local_path(f.path) for f in storage.glob_info(storage.join(root, "_done", "**", "*.done"))}
    for task in tasks:
        marker = storage.local_path(marker_path(root, task.rel))
        done = _finished(root, task, fingerprint) if marker in markers else None
        if done is None:
            todo.append(task)
        else:
            results.append(done)
    # Record the executor the config asks for; start it (Ray takes seconds) only if there is work.
    if executor is not None:
        executor_info = {"name": executor.name, "workers": executor.workers}
    else:
        executor_info = {"name": "ray" if cfg.ray or cfg.ray_address else "local", "workers": cfg.processes}
    summary = RunSummary(stage.name, root, "running", results)
    _write_manifest(stage, executor_info, tasks, summary, started)
    bar = _progress(stage.name, len(tasks), cfg.progress, stream)
    bar.update(len(results))
    docs = 0
    errors = sum(r.error_total for r in results)
    limit = cfg.max_errors
    error_limit_hit = limit is not None and errors > limit
    own_executor = executor is None and todo and not error_limit_hit
    if own_executor:
        executor = make_executor(cfg.processes, cfg.ray, cfg.ray_address)
    try:
        outcomes = executor.run(functools.partial(execute_task, stage), todo) if todo and not error_limit_hit else ()
        for task, result, exc in outcomes:
            bar.update(1)
            if exc is not None:
                summary.failures[task.rel] = f"{type(exc).__name__}: {exc}"
                continue
            results.append(result)
            docs += result.counts.get("docs_in", 0)
            elapsed = time.perf_counter() - started_at
            bar.set_postfix(docs=f"{docs:,}", docs_s=f"{docs / max(elapsed, 1e-9):,.0f}", refresh=False)
            errors += result.error_total
            if limit is not None and errors > limit:
                error_limit_hit = True
                break
    finally:
        bar.close()
        if own_executor:
            executor.close()
    summary.seconds = time.perf_counter() - started_at
    results.sort(key=lambda r: r.rel)
    if not summary.failures and not error_limit_hit and len(results) == len(tasks):
        summary.extra = stage.finish(results) or {}
        summary.status = "complete"
    else:
        summary.status = "failed"
    _write_manifest(stage, executor_info, tasks, summary, started)
    print(summary.render(), file=stream)
    if error_limit_hit:
        raise RunFailed(
            f"{errors:,} bad records exceed --max-errors {limit}; see {storage.join(root, '_errors')}/ "
            "(finished files are kept: fix the inputs, or raise --max-errors and rerun to go on)"
        )
    if summary.failures:
        first = next(iter(sorted(summary.failures.items())))
        raise RunFailed(f"{len(summary.failures)} file(s) failed, e.g. {first[0]}: {first[1]} (rerun resumes)")
    return summary
