"""Running ``dolma-pipe`` as a user does: ``python -m dolma_pipe`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


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


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a command wrote to stderr (``capsys``), checked to be one line and no traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
