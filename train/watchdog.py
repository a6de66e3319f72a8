"""The step watchdog: a rank that finishes no step for too long dumps every thread's stack and
exits with ``errors.EXIT_HANG``, which recovery restarts like any other failure.

A hang is the failure that costs most, because nothing ends it: a deadlock, a collective whose
peer was stopped, a filesystem that stopped answering all block a rank (and, through the next
collective, every rank) until the job's time limit. The process groups' timeouts
(``dist.set_collective_timeout``) end a collective that a peer never joins; this watchdog ends
everything else, on the rank that is stuck, and says where it was stuck.

It is a daemon thread that wakes up about once a second. The main thread only stores a time and
a step number in ``beat`` (no lock, no system call), so it costs nothing per step. The thread
needs the GIL to run, and gets it whenever the main thread blocks in C++: torch's collectives,
``.item()`` waiting for a GPU, file reads and ``time.sleep`` all release it (the tests hang a
rank in a gloo collective whose peer is SIGSTOPped). Only C code that blocks while holding the
GIL would keep it from firing; the collective timeouts still end the other ranks then.

A process that is itself SIGSTOPped cannot run its watchdog: its peers' collective timeouts or
watchdogs fire, and the launcher kills it (SIGKILL ends a stopped process).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from train.errors import EXIT_HANG

# How long the watchdog waits for the stack file and ``on_fire`` (each may touch a filesystem that
# is itself the reason for the hang) before it exits anyway.
_SIDE_WORK_TIMEOUT = 10.0


class StepWatchdog:
    """Fires when no step finishes within the limit: ``timeout_first`` seconds from the start for
    the first step (``resilience.init_timeout``: building, restoring and compiling happen before
    it), then ``timeout`` seconds after each ``beat`` (``resilience.step_timeout``).
    ``timeout == 0`` turns the watchdog off; ``timeout_first == 0`` only spares the first step.

    Firing: every thread's stack goes to stderr and to ``<dump_dir>/hang-rank{R}-{unix time}.txt``,
    one line ``watchdog: rank R on HOST: no step finished in N s (last step S); stacks in PATH``
    goes to stderr, ``on_fire(message)`` is called (at most 10 s are given to it) and the process
    exits with ``os._exit(EXIT_HANG)``: no ``finally``, no atexit, nothing that could block again.

    ``start_step`` is the step the run starts from (a resumed run's), named in the line if the
    first step never finishes. ``poll`` is how often the thread looks (the firing is late by at
    most that much)."""

    def __init__(
        self,
        timeout_first: float,
        timeout: float,
        rank: int,
        host: str,
        dump_dir: Path | None,
        on_fire: Callable[[str], None] | None = None,
        start_step: int | None = None,
        poll: float = 1.0,
    ):
        self.timeout_first, self.timeout = timeout_first, timeout
        self.rank, self.host = rank, host
        self.dump_dir = Path(dump_dir) if dump_dir is not None else None
        self.on_fire = on_fire
        self.poll = poll
        self._last_beat = time.monotonic()
        self._step = start_step
        self._beaten = False
        self._paused = 0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="step-watchdog", daemon=True)
        if timeout > 0:
            self._thread.start()

    # -- the main thread's side ---------------------------------------------------------

    def beat(self, step: int) -> None:
        """A step finished (call after every step, on every rank)."""
        # two plain stores: the watchdog reads them without a lock (a stale read only delays it)
        self._step = step
        self._last_beat = time.monotonic()
        self._beaten = True

    def pause(self) -> None:
        """Stop watching (e.g. around a long blocking save or the final evaluation, whose length
        has nothing to do with a step's) until ``resume``; pauses nest."""
        self._paused += 1

    def resume(self) -> None:
        """Watch again, the limit counted from now."""
        self._last_beat = time.monotonic()
        self._paused = max(0, self._paused - 1)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def close(self) -> None:
        """Stop the thread (the end of training, or before a clean exit)."""
        self._closed.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    @property
    def active(self) -> bool:
        return self._thread.is_alive()

    # -- the watchdog thread -------------------------------------------------------------

    def _limit(self) -> float:
        return self.timeout if self._beaten else self.timeout_first

    def _overdue(self) -> float | None:
        """Seconds since the last beat if past the limit, else None."""
        limit = self._limit()
        if self._paused or limit <= 0:
            return None
        waited = time.monotonic() - self._last_beat
        return waited if waited >= limit else None

    def _watch(self) -> None:
        while not self._closed.is_set():
            limit = self._limit()
            left = limit - (time.monotonic() - self._last_beat) if limit > 0 else self.poll
            self._closed.wait(min(self.poll, max(left, 0.01)))
            if self._closed.is_set():
                return
            waited = self._overdue()
            if waited is not None:
                self._fire(waited)

    def _fire(self, waited: float) -> None:
        stacks = _stacks()  # taken once, here: the file and stderr show the same moment
        # stderr first: it needs no filesystem, so the stacks are out even if the rest blocks
        os.write(2, f"watchdog: rank {self.rank}: no step finished in {waited:.0f} s; stacks of every thread:\n{stacks}".encode())
        where = self._write_stacks(waited, stacks)
        last = "none yet" if self._step is None else str(self._step)
        message = f"watchdog: rank {self.rank} on {self.host}: no step finished in {waited:.0f} s (last step {last}); stacks in {where}"
        os.write(2, (message + "\n").encode())
        if self.on_fire is not None:
            _bounded(lambda: self.on_fire(message) if self.on_fire else None, _SIDE_WORK_TIMEOUT)
        os._exit(EXIT_HANG)

    def _write_stacks(self, waited: float, stacks: str) -> str:
        """The stack file's path, or where the stacks are instead if it could not be written."""
        if self.dump_dir is None:
            return "stderr"
        path = self.dump_dir / f"hang-rank{self.rank}-{int(time.time())}.txt"
        header = f"rank {self.rank} on {self.host}, pid {os.getpid()}: no step finished in {waited:.0f} s (last step {self._step})\n\n"

        def write() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(header + stacks)

        error = _bounded(write, _SIDE_WORK_TIMEOUT)
        return str(path) if error is None else f"stderr ({path} not written: {error})"


def _stacks() -> str:
    """Every thread's Python stack, as ``faulthandler`` writes it (it needs a file descriptor:
    an anonymous in-memory file, so that no filesystem is involved)."""
    fd = os.memfd_create("stacks") if hasattr(os, "memfd_create") else None
    with open(fd, "w+") if fd is not None else tempfile.TemporaryFile("w+") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
        f.seek(0)
        return f.read()


def _bounded(fn: Callable[[], object], seconds: float) -> str | None:
    """Run ``fn`` in a daemon thread for at most ``seconds``; the error in words, or None."""
    errors: list[str] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # the watchdog exits whatever happens here
            errors.append(f"{type(e).__name__}: {e}")

    t = threading.Thread(target=run, name="step-watchdog-side", daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        return f"gave up after {seconds:.0f} s"
    return errors[0] if errors else None
