"""The goodput ledger: ``<save_dir>/goodput.jsonl``, an append-only record of every attempt of a
training run (when its process started, when its process group was ready, where it restored
from, its first step, heartbeats, checkpoints, stragglers, pre-flight verdicts, how it exited) and
of the launcher's attempts. ``train.goodput`` reads it back and says how much of the wall time
became model.

The file is never rewritten, by a resume or anything else: each record is one JSON object on one
line, ``event`` first, then ``time`` (unix seconds), ``host``, ``attempt`` (records of a training
process: unique per rank-0 process start, :func:`new_attempt_id`) and the event's own fields. A
line is written with one ``os.write`` on a descriptor opened ``O_APPEND``, so the lines of rank 0
and of the launcher never interleave within a line (on a local file system; NFS does not promise
``O_APPEND`` across clients), and it is in the kernel at once: a SIGKILL right after loses
nothing already written. A line cut off by a kill or a full disk is skipped by the reader (the
record after it, on the same line, is still read), never fatal.

A write that fails (disk full, ``save_dir`` read-only or gone) never stops training: the ledger
says so once on stderr and tries again at the next record.

Standard library only (no torch): the launcher and the report import it cheaply.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

LEDGER = "goodput.jsonl"
# Every record starts with this (``event`` is written first): how the reader finds a whole record
# behind a line that a kill cut off before its newline.
_HEAD = b'{"event":'
_IMPORTED = time.time()
_STARTED: float | None = None


def process_start_time() -> float:
    """Unix time at which the OS started this process: now, less the process's age (``/proc/self/stat``
    starttime against ``/proc/uptime``; ~10 ms resolution: ``/proc/stat``'s boot time is whole
    seconds, too coarse for a recovery's parts); where ``/proc`` cannot tell, the time this module
    was imported. Computed once per process (the wall clock may be stepped later)."""
    global _STARTED
    if _STARTED is None:
        try:
            stat = Path("/proc/self/stat").read_text()
            # The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
            ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks since boot
            uptime = float(Path("/proc/uptime").read_text().split()[0])
            _STARTED = time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
        except (OSError, ValueError, IndexError):
            _STARTED = _IMPORTED
    return _STARTED


def new_attempt_id(host: str | None = None) -> str:
    """``<host>-<pid>-<process start in ns>``: the same within a process, unique per process start."""
    return f"{host or socket.gethostname()}-{os.getpid()}-{int(process_start_time() * 1e9)}"


def _finite(value: Any) -> Any:
    """NaN and infinities as null, so that every line is strict JSON (a diverged loss must not make
    a record unreadable for stricter parsers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class Ledger:
    """Appends records to ``<save_dir>/goodput.jsonl``. Only one process per attempt writes
    (rank 0, and the launcher): every other rank builds it with ``enabled=False`` and its calls do
    nothing. ``attempt=None`` writes records without an ``attempt`` field (the launcher's)."""

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        *,
        enabled: bool = True,
        attempt: str | None = None,
        host: str | None = None,
        heartbeat_interval: float = 1.0,
    ) -> None:
        self.path = Path(save_dir) / LEDGER
        self.enabled = enabled
        self.attempt = attempt
        self.host = host or socket.gethostname()
        self.heartbeat_interval = heartbeat_interval
        self._last_beat: float | None = None  # time.monotonic() of the last heartbeat written
        self._warned = False
        self.failed_writes = 0  # records lost to write errors (tests and logs read it)

    def write(self, event: str, **fields: Any) -> None:
        """Append one record: ``event``, ``time``, ``host``, ``attempt`` (if any), then ``fields``."""
        if not self.enabled:
            return
        record: dict[str, Any] = {"event": event, "time": time.time(), "host": self.host}
        if self.attempt is not None:
            record["attempt"] = self.attempt
        record.update(fields)
        line = json.dumps(_finite(record), separators=(",", ":"), allow_nan=False, default=str).encode() + b"\n"
        try:
            self._append(line)
        except OSError as exc:
            self.failed_writes += 1
            if not self._warned:
                self._warned = True
                print(
                    f"goodput ledger: cannot write {self.path}: {exc}; training goes on, later records are tried again",
                    file=sys.stderr,
                    flush=True,
                )

    def _append(self, line: bytes) -> None:
        # Opened per record: a save_dir made, emptied or remounted meanwhile is found again, and
        # nothing is held open across a fork. One write: O_APPEND places it at the end atomically.
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            written = os.write(fd, line)
        finally:
            os.close(fd)
        if written != len(line):  # a full disk took part of it: the reader skips the cut line
            raise OSError(f"wrote {written} of {len(line)} bytes")

    def heartbeat(self, step: int, train_s: float, force: bool = False) -> None:
        """A ``heartbeat`` record (``step``, ``train_s``) unless one was written less than
        ``heartbeat_interval`` seconds ago (0: every call); ``force`` writes it regardless (at a
        checkpoint, at exit)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and self._last_beat is not None and now - self._last_beat < self.heartbeat_interval:
            return
        self._last_beat = now
        self.write("heartbeat", step=step, train_s=train_s)


class Records(list[dict[str, Any]]):
    """The ledger's records in file order; ``skipped`` counts the cut or invalid pieces left out."""

    skipped: int = 0


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if isinstance(record, dict) and isinstance(record.get("event"), str) and isinstance(record.get("time"), (int, float)):
        return record
    return None


def parse_ledger(data: bytes) -> Records:
    """The records in a ledger's bytes (the report reads them through its storage layer)."""
    records = Records()
    for line in data.splitlines():
        if not line.strip():
            continue
        record = _record(line)
        cut = line.rfind(_HEAD)
        if record is None and cut > 0:
            # A line cut off without its newline ran into the next record: read that one alone.
            records.skipped += 1
            record = _record(line[cut:])
        if record is None:
            records.skipped += 1
        else:
            records.append(record)
    return records


def read_ledger(path: str | os.PathLike[str]) -> Records:
    """The records of the ledger file ``path`` (``FileNotFoundError`` when there is none)."""
    return parse_ledger(Path(path).read_bytes())
