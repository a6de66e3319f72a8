"""Documents whose id repeats: within a task (its sorted unique id file) and across a phase's tasks.

A task's worker hashes every document id (:meth:`dolma_pipe.quarantine.Quarantine.saw_document`)
and writes the sorted unique hashes to its ids file (:func:`write_unique_ids`), counting the ids
that repeated within it; once the phase's tasks are done, the driver merges those files
(:func:`duplicate_ids_across`). ``duplicate_ids: ignore`` skips both.
"""

from __future__ import annotations

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

    Holds the tasks' files (16 bytes per document of the phase) in the driver, and the ids in a
    set (up to :data:`_NUMPY_IDS`) or a sorted numpy copy (above it: 16 bytes more per document);
    ``duplicate_ids: ignore`` skips it. No Python runs per id above the set's size: a merge of the
    files in Python was 4 us an id, a tenth of a 20,000-document paragraph dedup's CPU.
    """
    parts = [workdir.read(storage.join(root, r.ids_file)) for r in records if r.ids_file]
    if len(parts) < 2:
        return 0
    total = sum(len(p) for p in parts) // _ID_SIZE
    if total <= _NUMPY_IDS:
        return total - len({p[i : i + _ID_SIZE] for p in parts for i in range(0, len(p), _ID_SIZE)})
    import numpy as np

    # Two big-endian halves sort as the bytes do.
    ids = np.concatenate([np.frombuffer(p, dtype=[("hi", ">u8"), ("lo", ">u8")]) for p in parts])
    ids.sort(kind="stable")
    return int(np.count_nonzero(ids[1:] == ids[:-1]))
