"""Running ``dolma-pipe`` as a user does: ``python -m dolma_pipe`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str, check: bool = False, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "dolma_pipe", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"dolma-pipe {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc
