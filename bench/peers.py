"""What every bench shares: the peers' environments and how a command is measured.

``ensure_dolma()`` installs Dolma 1.2.1 once into its own virtual environment
(``bench/_work/dolma-venv``), with the boto stack pinned so pip does not backtrack for minutes.
``run_measured()`` runs one command and returns the CPU seconds (user + system) of its whole
process tree, its wall seconds and its peak resident memory: every bench reports docs (or
tokens) per CPU-second side by side with the peer, on the same input, in one run.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "_work")
DOLMA_VENV = os.path.join(WORK, "dolma-venv")
DOLMA_REQUIREMENTS = ["dolma==1.2.1", "boto3==1.28.17", "botocore==1.31.17", "aiobotocore==2.5.4", "pycld2"]
OUR_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")


def ensure_dolma() -> str:
    """The ``dolma`` command of Dolma 1.2.1 in its own virtual environment (installed once)."""
    exe = os.path.join(DOLMA_VENV, "bin", "dolma")
    if os.path.exists(exe):
        return exe
    print(f"installing {' '.join(DOLMA_REQUIREMENTS)} into {DOLMA_VENV} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", DOLMA_VENV], check=True)
    subprocess.run([os.path.join(DOLMA_VENV, "bin", "pip"), "install", "-q", *DOLMA_REQUIREMENTS], check=True)
    return exe


def dolma_env() -> dict[str, str]:
    # Dolma imports nltk, which tries to download punkt data; there is no network for it here.
    return dict(os.environ, NLTK_DATA=os.path.join(WORK, "nltk_data"))


_compiled = False


def our_env() -> dict[str, str]:
    """dolma-pipe's environment, its bytecode brought up to date first.

    ``pip install`` compiles a package's bytecode, so the peers start from .pyc files; this
    checkout is installed editable, and with PYTHONDONTWRITEBYTECODE set (as in CI containers)
    every module edited since its last .pyc would be compiled again in every measured run (~0.1
    CPU-s). Compiling once here measures dolma-pipe as installed, as the peers are.
    """
    global _compiled
    if not _compiled:
        import compileall

        for package in ("dolma_pipe", "taggers", "mixers", "train", "report"):
            compileall.compile_dir(os.path.join(ROOT, package), quiet=1)
        _compiled = True
    return dict(os.environ, PYTHONPATH=ROOT)


@dataclass
class Measured:
    cpu: float  # user + system seconds of the whole process tree
    wall: float
    peak_rss_mb: float  # the largest resident set of any process in the tree
    output: str


_launcher: ProcessPoolExecutor | None = None


def run_measured(cmd: list[str], env: dict | None = None, cwd: str | None = None) -> Measured:
    """Run ``cmd`` to completion and measure it; a failure prints its output's tail and exits.

    The command is started by a small launcher process (spawned once), not by the bench itself:
    Linux keeps a process's peak memory across ``exec``, so a command forked from a bench holding
    hundreds of MB of answers would report them as its own peak."""
    global _launcher
    if _launcher is None:
        _launcher = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    return _launcher.submit(_run_measured, cmd, env, cwd).result()


def _run_measured(cmd: list[str], env: dict | None, cwd: str | None) -> Measured:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    text = output.decode(errors="replace")
    if proc.returncode != 0:
        sys.stderr.write(text[-4000:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    return Measured(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, text)
