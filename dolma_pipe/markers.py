"""What says a task is finished: its completion marker, and the files beside it.

Per task the worker writes the stage's outputs, then the task's quarantined records to
``<root>/_errors/<key>.jsonl`` (:func:`errors_path`), its id hashes to ``<root>/_ids/<key>.ids``
(:func:`ids_name`), then the marker ``<root>/_done/<key>.done`` (:func:`marker_path`) holding its
:class:`~dolma_pipe.manifest.TaskRecord`. A stage with several phases keeps each phase's files
under ``<phase>/`` in those folders, a repeated phase each round's under the round's name
(:func:`phase_dir`).

A rerun lists a phase's markers once (:func:`done_markers`) and keeps a task whose marker shows
it done under the same inputs, params and fingerprint (:func:`finished`); the fingerprint of a
phase's tasks chains the stage's with the records of every earlier phase (:func:`chain`).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os

import orjson
from pydantic import ValidationError

from dolma_pipe import storage
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.stage import Phase, Task


def phase_dir(phases: list[Phase], name: str) -> str:
    """The folder of phase (or round) ``name``'s markers, errors and id files, for a stage of these
    phases: a stage of one phase run once keeps them directly under _done/, _errors/ and _ids/."""
    return "" if len(phases) == 1 and phases[0].repeat is None else name


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


def done_markers(root: str, sub: str, force: bool) -> set[str]:
    """Every marker of a phase, from one listing (instead of a failed read per unfinished task, a request each on S3)."""
    if force:
        return set()
    pattern = storage.join(root, "_done", *([sub] if sub else []), "**", "*.done")
    return {storage.local_path(f.path) for f in storage.glob_info(pattern)}


def _same_inputs(record: TaskRecord, task: Task) -> bool:
    if len(record.inputs) != len(task.inputs):
        return False
    return all(a.path == b.path and a.size == b.size and abs(a.mtime - b.mtime) <= 1e-3 for a, b in zip(record.inputs, task.inputs))


def finished(path: str, task: Task, fingerprint: str) -> TaskRecord | None:
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


def chain(fingerprint: str, phase: str, records: list[TaskRecord] | None = None) -> str:
    """The next phase's fingerprint: this one, the phase's name and (after it ran) its records."""
    h = hashlib.sha256(fingerprint.encode())
    h.update(b"\0" + phase.encode())
    for r in records or []:
        h.update(orjson.dumps(r.digest_view(), option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()[:16]
