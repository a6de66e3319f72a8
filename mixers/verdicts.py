"""What a mix's rules decided for each document of one input file, kept beside the run's manifest.

``<run root>/_verdicts/<task key>.verdicts`` holds two arrays of one length, written by the task that
read the file (the streams' ``filter`` task, the sources' ``count`` task): ``lines``, the line
number of every good document (bad lines are quarantined and have no verdict), and ``masks``,
the rules it matched (include ``i`` as bit ``i``, exclude ``j`` as bit ``includes + j``; the
engine's own match mask, every rule evaluated on every document).

``dolma-pipe report`` reads them instead of running the rules over the file again (which cost it
as much CPU as the mix's own filtering); a run from before these files existed, or a file that
cannot be read, is evaluated again (:mod:`mixers.report`). The format: ``DPVERD1\n``, the count
(8 bytes, little-endian), then zlib of the line numbers' differences and the masks (little-endian
64-bit each): byte for byte the same on every run (a zip, as ``numpy.savez`` writes it, holds the
time), and about one byte per document. It is a task output, so a file lost since the run makes a
rerun redo its task. Writing needs no numpy (a mix of streams then never imports it: about 0.1
CPU-second a process); reading gives numpy arrays, for the report.
"""

from __future__ import annotations

import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from operator import sub
from typing import TYPE_CHECKING

from dolma_pipe import storage
from dolma_pipe.filters import BatchResult

if TYPE_CHECKING:
    import numpy as np

FOLDER = "_verdicts"
SUFFIX = ".verdicts"
MAGIC = b"DPVERD1\n"


def verdict_path(root: str, task_key: str) -> str:
    """Where the verdicts of the input file read by task ``task_key`` of the run at ``root`` go."""
    return storage.join(root, FOLDER, task_key + SUFFIX)


class VerdictRecorder:
    """Collects the verdicts of one file's batches (a mix_file sink adds each batch)."""

    def __init__(self) -> None:
        self.lines: list[int] = []
        self.masks: list[int] = []

    def add(self, result: BatchResult) -> None:
        self.lines.extend(result.lines)
        self.masks.extend(result.matches)

    def save(self, path: str) -> None:
        storage.write_bytes(path, encode(self.lines, self.masks))


def _u64_le(values: Iterable[int]) -> bytes:
    packed = array("Q", values)  # array's own loop: no Python step per value
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def encode(lines: Sequence[int], masks: Sequence[int]) -> bytes:
    """The file's bytes for increasing line numbers ``lines`` and their ``masks`` (one each)."""
    gaps = map(sub, lines, [0, *lines[:-1]])
    body = zlib.compress(_u64_le(gaps) + _u64_le(masks), 6)
    return MAGIC + len(lines).to_bytes(8, "little") + body


def load(path: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(lines, masks) of a verdicts file; None when there is none or it cannot be read as one."""
    import numpy as np

    try:
        data = storage.read_bytes(path)
    except storage.StorageError:
        return None
    head = len(MAGIC) + 8
    if not data.startswith(MAGIC) or len(data) < head:
        return None
    n = int.from_bytes(data[len(MAGIC) : head], "little")
    try:
        body = zlib.decompress(data[head:])
    except zlib.error:
        return None
    if len(body) != 16 * n:
        return None
    lines = np.cumsum(np.frombuffer(body[: 8 * n], dtype="<u8"), dtype=np.uint64)
    return lines, np.frombuffer(body[8 * n :], dtype="<u8").astype(np.uint64)
