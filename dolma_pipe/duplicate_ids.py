"""Documents whose id repeats: within a task (its sorted unique id file) and across a phase's tasks.

A task's worker hashes every document id (:meth:`dolma_pipe.quarantine.Quarantine.saw_document`)
and writes the sorted unique hashes to its ids file (:func:`write_unique_ids`), counting the ids
that repeated within it; once the phase's tasks are done, the driver merges those files
(:func:`duplicate_ids_across`). ``duplicate_ids: ignore`` skips both.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from dolma_pipe import storage, workdir
from dolma_pipe.manifest import TaskRecord

_ID_SIZE = 16  # a blake2b-128 of the id (Quarantine.saw_document)
# Above this many ids numpy sorts them (~0.3 us an id against Python's ~1.3 us), worth its import
# (~0.1 CPU-s, and np.unique imports numpy.ma besides); below it Python's sort is quicker overall.
_NUMPY_IDS = 100_000


def write_unique_ids(path: str, hashes: list[bytes]) -> int:
    """Write the sorted unique id hashes of one task; return how many ids repeated within it."""
    if len(hashes) > _NUMPY_IDS:
        import numpy as np

        unique = np.unique(np.frombuffer(b"".join(hashes), dtype=f"V{_ID_SIZE}")).tobytes()
    else:
        unique = b"".join(sorted(set(hashes)))  # bytes order is numpy's void order: the same file
    workdir.write(path, unique)
    return len(hashes) - len(unique) // _ID_SIZE


def duplicate_ids_across(root: str, records: list[TaskRecord]) -> int:
    """Documents whose id appears in another task's files too (each task's ids are unique already).

    Merges the tasks' sorted files, holding them (16 bytes per document of the phase) in the
    driver; ``duplicate_ids: ignore`` skips it.
    """
    parts = [workdir.read(storage.join(root, r.ids_file)) for r in records if r.ids_file]
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
