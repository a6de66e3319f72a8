"""Small helpers shared by the test modules: synthetic documents, free ports, running the CLI."""

from __future__ import annotations

import glob
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import orjson
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no out up into"
).split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_docs(n: int, seed: int = 0, words: int = 60, source: str = "test") -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "id": f"{source}-{seed}-{i}",
            "text": " ".join(rng.choices(WORDS, k=words)) + f" ünïcödé {i}.",
            "source": source,
            "added": "2026-01-01T00:00:00Z",
            "metadata": {"n": i, "tags": ["a", "b"]},
        }
        for i in range(n)
    ]


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


def kept_under_tmp(*keep: str | Path) -> list[str]:
    """The folders :func:`private_tmp` keeps visible: the checkout, the Python environment and
    ``keep``, those under ``/tmp`` (outermost only)."""
    paths = {Path(p).resolve() for p in (REPO_ROOT, sys.prefix, *keep)}
    under = sorted(str(p) for p in paths if Path("/tmp") in p.parents)
    return [p for p in under if not any(p != q and p.startswith(q + "/") for q in under)]


def private_tmp(*keep: str | Path) -> str:
    """Shell commands (``&&``-joined, for a shell that ``unshare --mount --propagation private``
    started) that give the namespace a tmpfs of its own on ``/tmp``: a node that shares no disk.
    The checkout, the Python environment and ``keep`` stay visible where they are when they lie
    under ``/tmp`` (a CI clone may): each is bind-mounted aside, then moved back onto the new
    tmpfs; nothing else of the host's ``/tmp`` shows."""
    tops = kept_under_tmp(*keep)
    steps = [f'keep{i}=$(mktemp -d /run/dolma-pipe-keep.XXXXXX) && mount --bind {shlex.quote(p)} "$keep{i}"' for i, p in enumerate(tops)]
    steps.append("mount -t tmpfs tmpfs /tmp")
    steps += [f'mkdir -p {shlex.quote(p)} && mount --move "$keep{i}" {shlex.quote(p)} && rmdir "$keep{i}"' for i, p in enumerate(tops)]
    return " && ".join(steps)


def done_markers(directory: Path, recursive: bool = False) -> list[Path]:
    """The ``.done`` markers in a ``_done/<phase>`` directory (none while it does not exist)."""
    return list(directory.rglob("*.done") if recursive else directory.glob("*.done")) if directory.exists() else []


SAMPLE_DOCUMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "sample", "documents")


def sample_rows(pattern: str = "*/*") -> list[dict]:
    """Every document of the bundled sample corpus under ``pattern``, in file order."""
    from dolma_pipe.documents import read_documents

    return [row for path in sorted(glob.glob(os.path.join(SAMPLE_DOCUMENTS, pattern))) for _, row in read_documents(path)]


# -- skips for a missing dependency (what `make test` installs): failures in CI ------------------------

# Prefix of a skip reason that means "something `make test` installs is missing": under CI the
# conftest hook turns such a skip into a failure, as it does pytest.importorskip's "could not import".
MISSING = "missing: "
DEPENDENCY_SKIP_PREFIXES = (MISSING, "could not import ")


def running_in_ci() -> bool:
    """Whether the suite runs in CI (``CI`` set, as CI services do, and not 0/false/no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_missing(what: str, allow_module_level: bool = False) -> NoReturn:
    """Skip because ``what`` (a dependency `make test` installs) is missing; under CI this fails
    the test instead (see ``tests/conftest.py``), so CI never passes quietly without it."""
    pytest.skip(MISSING + what, allow_module_level=allow_module_level)


def train_tokenizer(path: str | Path, texts: list[str], vocab_size: int = 400) -> str:
    """A small BPE tokenizer trained on ``texts`` and saved as a ``tokenizer.json`` at ``path``
    (for tests that count tokens without the OLMo tokenizers); returns the path."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]", "<|endoftext|>"], show_progress=False)
    )
    tok.save(str(path))
    return str(path)


def stage_outputs(root: Path, marker_keys: tuple[str, ...] | None = None) -> dict[str, bytes]:
    """Every output and error file under a stage's output root, and each marker's record without
    its timing and fingerprint (which covers the destination), or only its ``marker_keys``; the
    manifest, the lock a killed run leaves and temporaries left out. Two runs that must agree byte
    for byte compare these."""
    files = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.startswith(".") and p.name not in ("_manifest.json", "_lock.json"):
            data = p.read_bytes()
            if p.suffix == ".done":
                rec = orjson.loads(data)
                if marker_keys is None:
                    rec.pop("seconds"), rec.pop("fingerprint"), rec.pop("outputs", None)
                else:
                    rec = {k: rec.get(k) for k in marker_keys}
                data = orjson.dumps(rec, option=orjson.OPT_SORT_KEYS)
            files[str(p.relative_to(root))] = data
    return files
