"""What a worker does for one task: run it, then write its errors, its id hashes and its marker.

:func:`execute_task` is what the runner hands the executor (it pickles with the stage, for Ray).
The marker is written last (:mod:`dolma_pipe.markers`), so a task without one is redone by a
rerun; the record in it lists the files the task wrote with their sizes, so a rerun can tell that
one is gone or damaged (:mod:`dolma_pipe.redo`).
"""

from __future__ import annotations

import os
import socket
import time

from dolma_pipe import storage
from dolma_pipe.duplicate_ids import write_unique_ids
from dolma_pipe.manifest import MANIFEST, TaskRecord
from dolma_pipe.markers import clear_stale_temporaries, errors_path, ids_name, marker_path, phase_dir
from dolma_pipe.paths import PathError
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.redo import written_sizes
from dolma_pipe.stage import RunContext, Stage, Task


def execute_task(stage: Stage, phase_index: int, ctx: RunContext, fingerprint: str, task: Task) -> TaskRecord:
    """Worker side: run one task of the stage's phase ``phase_index`` (of its round ``ctx.round``,
    when the phase repeats), then write its errors and its marker (in that order)."""
    phases = stage.phases()
    phase = phases[phase_index].at(ctx.round)
    sub = phase_dir(phases, phase.name)
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
        within = write_unique_ids(storage.join(root, ids_file), quarantine.id_hashes)
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
        outputs=written_sizes(root, list(dict.fromkeys([*outputs, *out.files]))),
        seconds=time.perf_counter() - start,
        fingerprint=fingerprint,
    )
    storage.write_bytes(done_path, record.marker_bytes())
    return record


def _check_visible(root: str, task: Task) -> None:
    """A worker that cannot see the driver's local paths says so (a cluster without a shared filesystem)."""
    hint = "a cluster without a shared filesystem needs remote paths (s3://...) for inputs and destination"
    if not storage.is_remote(root) and not os.path.exists(os.path.join(storage.local_path(root), MANIFEST)):
        raise PathError(f"worker {socket.gethostname()} cannot see the output directory {root} that the driver created; {hint}")
    for f in task.inputs:
        if not storage.is_remote(f.path) and not os.path.exists(storage.local_path(f.path)):
            raise PathError(f"worker {socket.gethostname()} cannot see input {f.path} that the driver listed; {hint}")
