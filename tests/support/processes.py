"""Processes a test starts: a free port for them, a run SIGKILLed mid-way, and finding and
killing what a test left running (its own processes only)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.repo import REPO_ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_when(module: str, args: list[str], ready: Callable[[], bool], env: dict[str, str] | None = None, timeout: float = 120) -> None:
    """Runs ``python -m module args`` from the repository root in its own process group and
    SIGKILLs the whole group as soon as ``ready()`` is true (polled every 10 ms): a run killed
    mid-way, as by the OOM killer. A run that ends first, or never gets ready, fails the test."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.time() + timeout
    try:
        while not ready():
            if proc.poll() is not None:
                raise AssertionError(f"run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            if time.time() > deadline:
                raise AssertionError(f"python -m {module}: not ready to be killed after {timeout:.0f} s")
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def processes_under(marker: str) -> list[int]:
    """Pids whose command line names ``marker`` (a test's own temporary folder): the processes a
    test started and no one else's."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def kill_processes_under(marker: str, rounds: int = 5) -> None:
    """SIGKILL every process :func:`processes_under` finds, again until none is left (a dying
    Ray node may start a last worker), at most ``rounds`` times half a second apart."""
    for _ in range(rounds):
        pids = processes_under(marker)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
