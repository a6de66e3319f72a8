"""One run at a time per destination: a lock file that names its holder.

A run takes ``<folder>/_lock.json`` in its output root (and in its work directory when that is
elsewhere) before it writes anything there, and removes it when it ends, however it ends (an
error, Ctrl-C, SIGTERM). The file names the holder: host, pid, the process's start, when the run
started, the stage and its command line. A second run into the same place is refused at once,
in one line naming the holder.

A lock whose holder is gone is taken over, with a line saying so:

- on this host, when its pid is not running, or now belongs to another process (told by the
  process's start time, so a reused pid is not mistaken for the holder);
- from another host (a shared filesystem, S3), when it was not refreshed for ``STALE_SECONDS``:
  a holder rewrites its lock every ``HEARTBEAT_SECONDS``.

Local locks are created with ``O_EXCL`` and taken over by renaming the stale file away first, so
two runs that find the same stale lock cannot both take it. On S3 the same is done with
conditional writes: ``If-None-Match: *`` to create, ``If-Match`` on the stale object's ETag to
take it over (S3 and moto support both).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, TextIO

import orjson

from dolma_pipe import storage
from dolma_pipe.errors import DolmaPipeError

LOCK = "_lock.json"
HEARTBEAT_SECONDS = 60.0
STALE_SECONDS = 5 * HEARTBEAT_SECONDS


class LockHeld(DolmaPipeError, RuntimeError):
    """Another run is writing into the same destination; the message names it."""


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # Field 22; the command name (field 2) is in parentheses and may hold spaces.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def command_line() -> str:
    """How this process was started, as a shell would read it (``dolma-pipe dedup -c x.yaml``)."""
    argv = list(sys.argv)
    if argv and os.path.basename(argv[0]) in ("__main__.py", "dolma-pipe"):
        argv[0] = "dolma-pipe"
    return shlex.join(argv)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def holder_gone(current: dict[str, Any]) -> str | None:
    """Why the holder of a lock (its file's content) is gone, or None when it may still be running:
    the rule a run uses to take a lock over, and the report to tell a killed run from a running one."""
    host, pid = current.get("host"), current.get("pid")
    if not isinstance(pid, int) or not host:
        return "the lock names no holder (a run was killed while taking it)"
    started = current.get("started", "?")
    if host == socket.gethostname():
        if not _alive(pid):
            return f"its run (pid {pid} on {host}, started {started}) is gone"
        start = _process_start(pid)
        if start is not None and current.get("process_start") not in (None, start):
            return f"its run (pid {pid} on {host}, started {started}) is gone (pid {pid} is another process now)"
        return None
    beat = current.get("heartbeat")
    if isinstance(beat, int | float) and time.time() - beat > STALE_SECONDS:
        return f"its run (pid {pid} on {host}, started {started}) has not refreshed it for {time.time() - beat:,.0f} s"
    return None


class RunLock:
    """The locks of one run (one per folder); ``with RunLock(...)`` holds them for the block."""

    def __init__(self, folders: list[str], stage: str, stream: TextIO):
        self.paths = [storage.join(f, LOCK) for f in dict.fromkeys(folders)]
        self.stage = stage
        self.stream = stream
        self.holder: dict[str, Any] = {
            "stage": stage,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "process_start": _process_start(os.getpid()),
            "started": _now(),
            "command": command_line(),
            "id": uuid.uuid4().hex,
        }
        self._etags: dict[str, str] = {}
        self._held: list[str] = []
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> RunLock:
        try:
            for path in self.paths:
                self._acquire(path)
                self._held.append(path)
        except BaseException:
            self.release()
            raise
        self._beat = threading.Thread(target=self._heartbeat, name="dolma-pipe-lock", daemon=True)
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ---- taking ---------------------------------------------------------------------------------

    def _content(self) -> bytes:
        return orjson.dumps({**self.holder, "heartbeat": time.time()}, option=orjson.OPT_INDENT_2)

    def _acquire(self, path: str) -> None:
        for _ in range(5):
            if self._create(path):
                return
            current, etag = self._read(path)
            if current is None:
                continue  # released between our attempt and the read: try again
            why = holder_gone(current)
            if why is None:
                raise LockHeld(self._refusal(path, current))
            if self._take_over(path, etag):
                print(f"dolma-pipe {self.stage}: took over {path}: {why}", file=self.stream, flush=True)
                return
        raise LockHeld(f"{path}: other runs keep taking this lock; try again")

    def _create(self, path: str) -> bool:
        data = self._content()
        if storage.is_remote(path):
            bucket, key = storage.split_s3(path)
            try:
                out = storage.s3_client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            except Exception as exc:
                if _precondition_failed(exc):
                    return False
                raise storage.StorageError(f"{path}: cannot write the run's lock ({exc})") from exc
            self._etags[path] = out.get("ETag", "")
            return True
        local = storage.local_path(path)
        try:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            fd = os.open(local, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError as exc:
            raise storage.StorageError(f"{local}: cannot write the run's lock ({exc.strerror or exc})") from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return True

    def _read(self, path: str) -> tuple[dict[str, Any] | None, str]:
        if storage.is_remote(path):
            bucket, key = storage.split_s3(path)
            try:
                got = storage.s3_client().get_object(Bucket=bucket, Key=key)
                raw, etag = got["Body"].read(), got.get("ETag", "")
            except Exception:
                return None, ""
        else:
            try:
                with open(storage.local_path(path), "rb") as fh:
                    raw, etag = fh.read(), ""
            except FileNotFoundError:
                return None, ""
        try:
            current = orjson.loads(raw)
        except orjson.JSONDecodeError:
            current = {}
        # A lock cut short (its writer killed while writing it) names nobody: take it over.
        return (current if isinstance(current, dict) else {}), etag

    def _refusal(self, path: str, current: dict[str, Any]) -> str:
        folder = path[: -len(LOCK) - 1]
        return (
            f"{folder} is being written by another run: {current.get('stage', '?')} started {current.get('started', '?')} "
            f"by pid {current.get('pid')} on {current.get('host')} ({current.get('command', '?')}); wait for it to end or "
            f"write elsewhere (if that run is gone without this host seeing it, delete {path})"
        )

    def _take_over(self, path: str, etag: str) -> bool:
        if storage.is_remote(path):
            bucket, key = storage.split_s3(path)
            try:
                out = storage.s3_client().put_object(Bucket=bucket, Key=key, Body=self._content(), IfMatch=etag)
            except Exception as exc:
                if _precondition_failed(exc):
                    return False  # another run took it first
                raise storage.StorageError(f"{path}: cannot take over the run's lock ({exc})") from exc
            self._etags[path] = out.get("ETag", "")
            return True
        local = storage.local_path(path)
        aside = f"{local}.stale-{uuid.uuid4().hex[:12]}"
        try:
            os.rename(local, aside)  # only one of several runs that found it stale gets to move it
        except FileNotFoundError:
            return self._create(path)
        with contextlib.suppress(OSError):
            os.unlink(aside)
        return self._create(path)

    # ---- holding and letting go -----------------------------------------------------------------

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            for path in list(self._held):
                with contextlib.suppress(Exception):
                    self._refresh(path)

    def _refresh(self, path: str) -> None:
        data = self._content()
        if storage.is_remote(path):
            bucket, key = storage.split_s3(path)
            out = storage.s3_client().put_object(Bucket=bucket, Key=key, Body=data, IfMatch=self._etags.get(path, "*"))
            self._etags[path] = out.get("ETag", "")
            return
        local = storage.local_path(path)
        current, _ = self._read(path)
        if current is None or current.get("id") != self.holder["id"]:
            return  # not ours any more: never write over another run's lock
        storage.write_bytes(local, data)  # whole or not at all: another run may read it any time

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=5)
        for path in reversed(self._held):
            with contextlib.suppress(Exception):
                current, _ = self._read(path)
                if current is not None and current.get("id") == self.holder["id"]:
                    storage.remove(path)
        self._held.clear()


def _precondition_failed(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "412", "ConditionalRequestConflict") or status in (409, 412)
