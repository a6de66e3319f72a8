"""Killed runs resume: finished files are skipped, the rest redone, bytes identical to a clean run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from dolma_pipe.config import load_config
from dolma_pipe.documents import read_documents, write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.convert import ConvertConfig, ConvertStage
from tests.helpers import make_docs, run_cli

FILES = 10


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("big")
    for f in range(FILES):
        docs = make_docs(12000, seed=f, words=80)
        write_documents(str(root / "documents" / f"part-{f:04d}.jsonl.gz"), docs)
    # A bad line in one file, so the quarantine is part of what must resume identically.
    (root / "documents" / "part-0003.jsonl.gz").write_bytes((root / "documents" / "part-0003.jsonl.gz").read_bytes())
    bad = root / "documents" / "part-0010.jsonl"
    bad.write_bytes(b'{"id": 1, "text": "int id"}\n{nope\n')
    return root


def _outputs(out: Path) -> dict[str, bytes]:
    """Every finished output, error file and marker count; hidden temporaries excluded."""
    files = {}
    for p in sorted(out.rglob("*")):
        if p.is_file() and not p.name.startswith(".") and p.name != "_manifest.json":
            data = p.read_bytes()
            if p.suffix == ".done":
                rec = orjson.loads(data)
                data = orjson.dumps({"counts": rec["counts"], "errors": rec["errors"]})
            files[str(p.relative_to(out))] = data
    return files


def _convert_args(corpus: Path, out: Path, *extra: str) -> list[str]:
    return ["convert", "--documents", f"{corpus}/documents/*", "--destination", str(out), "--format", "jsonl.gz", *extra]


@pytest.fixture(scope="module")
def reference(big_corpus, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("ref") / "out"
    run_cli(*_convert_args(big_corpus, out, "--processes", "1"), check=True)
    return _outputs(out)


def _kill_midway(args: list[str], out: Path) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dolma_pipe", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.time() + 120
    try:
        while time.time() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"run finished before it could be killed: {proc.stderr.read().decode()[-2000:]}")
            if list((out / "_done").glob("*.done")) if (out / "_done").exists() else []:
                break
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    return len(list((out / "_done").glob("*.done")))


def _check_no_partial_outputs(out: Path) -> None:
    for p in (out / "documents").glob("*"):
        if p.name.startswith("."):
            continue  # a temporary name: never mistaken for output
        q = Quarantine()
        docs = list(read_documents(str(p), q))
        assert q.total == 0 and docs, f"{p} looks finished but is not"
    manifest = orjson.loads((out / "_manifest.json").read_bytes())
    assert manifest["status"] == "running"


@pytest.mark.parametrize("processes", ["1", "2"])
def test_kill_and_resume_local(big_corpus, reference, tmp_path, processes):
    out = tmp_path / "out"
    args = _convert_args(big_corpus, out, "--processes", processes)
    done = _kill_midway(args, out)
    assert 0 < done < FILES + 1
    _check_no_partial_outputs(out)
    resumed = run_cli(*args, check=True)
    assert f"{done} already done" in resumed.stderr
    assert _outputs(out) == reference
    assert orjson.loads((out / "_manifest.json").read_bytes())["status"] == "complete"


def test_force_redoes_and_changed_input_is_redone(big_corpus, tmp_path, make_corpus):
    root = make_corpus(files=2, docs=10)
    out = tmp_path / "o"
    args = ["convert", "--documents", f"{root}/documents/*", "--destination", str(out), "--processes", "1"]
    run_cli(*args, check=True)
    assert "2 already done" in run_cli(*args, check=True).stderr
    assert "0 already done" in run_cli(*args, "--force", check=True).stderr
    changed = root / "documents" / "part-0001.jsonl.gz"
    write_documents(str(changed), make_docs(11, seed=99))
    os.utime(changed, (time.time() + 5, time.time() + 5))
    again = run_cli(*args, check=True)
    assert "1 already done" in again.stderr
    assert len(list(read_documents(str(out / "documents" / "part-0001.jsonl.gz")))) == 11


@pytest.mark.ray
def test_kill_and_resume_ray(big_corpus, reference, tmp_path, ray_address):
    out = tmp_path / "out"
    args = _convert_args(big_corpus, out, "--ray-address", ray_address, "--processes", "2")
    done = _kill_midway(args, out)
    assert done < FILES + 1
    resumed = run_cli(*args, check=True)
    assert "already done" in resumed.stderr
    # A task of the killed driver may still have been finishing; give Ray a moment to reap it.
    time.sleep(1.0)
    assert _outputs(out) == reference


@pytest.mark.ray
def test_ray_executor_in_process(make_corpus, tmp_path, ray_address):
    root = make_corpus(files=4, docs=25)
    cfg = load_config(
        ConvertConfig, None, {"documents": [f"{root}/documents/*"], "destination": str(tmp_path / "o"), "ray_address": ray_address}
    )
    with RayExecutor(2, ray_address) as ex:
        summary = run_stage(ConvertStage(cfg), executor=ex)
    assert summary.status == "complete" and summary.totals["docs_out"] == 100
    manifest = orjson.loads((tmp_path / "o" / "_manifest.json").read_bytes())
    assert manifest["executor"]["name"] == "ray"


def test_rerun_clears_temporaries_left_by_a_killed_run(make_corpus, tmp_path):
    root = make_corpus(files=2, docs=5)
    out = tmp_path / "o"
    stale = [out / "documents" / ".part-0000.jsonl.gz.tmp-0123456789ab", out / "_done" / ".part-0001.jsonl.gz.done.tmp-ba9876543210"]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half written")
    keep = out / "documents" / ".unrelated-hidden-file"
    keep.write_bytes(b"not ours")
    run_cli("convert", "--documents", f"{root}/documents/*", "--destination", str(out), "--processes", "1", check=True)
    assert not any(p.exists() for p in stale) and keep.exists()
    assert sorted(p.name for p in (out / "documents").iterdir()) == [".unrelated-hidden-file", "part-0000.jsonl.gz", "part-0001.jsonl.gz"]


@pytest.mark.ray
def test_cli_starts_its_own_ray(make_corpus, tmp_path):
    root = make_corpus(files=3, docs=10)
    proc = run_cli("convert", "--documents", f"{root}/documents/*", "--destination", str(tmp_path / "o"), "--ray", "--processes", "2")
    assert proc.returncode == 0, proc.stderr
    manifest = orjson.loads((tmp_path / "o" / "_manifest.json").read_bytes())
    assert manifest["executor"] == {"name": "ray", "workers": 2} and manifest["totals"]["docs_out"] == 30
