"""Phases: a per-file -> per-bucket -> per-file stage runs the same on every executor and resumes in any phase."""

from __future__ import annotations

import io
import os
import re
import time
from pathlib import Path

import orjson
import pytest

from dolma_pipe.documents import read_attribute_rows, write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.manifest import read_manifest
from dolma_pipe.runner import run_stage
from tests.support.cli import run_cli
from tests.support.documents import make_docs
from tests.support.outputs import done_markers, stage_outputs
from tests.support.phased_stage import make_stage
from tests.support.processes import kill_when
from tests.support.repo import REPO_ROOT

ROOT = REPO_ROOT
FILES = 5
BUCKETS = 6


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Five files with planted exact duplicates: within a file, across files, and three copies of one text."""
    root = tmp_path_factory.mktemp("phased")
    files = [make_docs(40, seed=f, words=30) for f in range(FILES)]
    files[0][5]["text"] = files[0][3]["text"]  # within a file: line 6 repeats line 4
    files[2][0]["text"] = files[1][7]["text"]  # across files: the earlier file's copy survives
    files[4][9]["text"] = files[1][7]["text"]  # a third copy
    files[3][1]["text"] = files[4][2]["text"]  # the later file's line is the copy to drop
    for f, docs in enumerate(files):
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), docs)
    (root / "documents" / "part-9.jsonl").write_bytes(b'{"id": "x", "text": "bad then good"}\n{broken\n')
    return root


EXPECTED_MARKED = {"part-0.jsonl.gz": [5], "part-2.jsonl.gz": [0], "part-4.jsonl.gz": [2, 9]}


def _overrides(corpus: Path, out: Path, **extra) -> dict:
    return {"documents": [f"{corpus}/documents/*"], "destination": str(out), "buckets": BUCKETS, "progress": False, **extra}


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("ref") / "out"
    run_stage(make_stage(_overrides(corpus, out, processes=1)), stream=io.StringIO())
    return stage_outputs(out)


def test_first_copy_in_input_order_survives(corpus, tmp_path):
    out = tmp_path / "out"
    summary = run_stage(make_stage(_overrides(corpus, out, processes=2)), stream=io.StringIO())
    assert summary.status == "complete"
    marked = {}
    for f in range(FILES):
        rows = list(read_attribute_rows(str(out / "attributes" / f"part-{f}.jsonl.gz")))
        assert len(rows) == 40
        lines = [i for i, (_, row) in enumerate(rows) if row["attributes"]["dup"]]
        if lines:
            marked[f"part-{f}.jsonl.gz"] = lines
    assert marked == EXPECTED_MARKED
    manifest = read_manifest(str(out))
    assert [p.name for p in manifest.phases] == ["hash", "bucket", "mark"]
    assert [len(p.tasks) for p in manifest.phases] == [FILES + 1, BUCKETS, FILES + 1]
    assert manifest.phase("bucket").step == {"duplicates": 4}
    assert manifest.totals["marked"] == 4 and manifest.totals["hashed"] == FILES * 40 + 1
    # The bad line is quarantined once (hash phase), not again by the phase that rereads the file.
    assert manifest.errors == {"malformed_json": 1}
    assert (out / "_errors" / "hash" / "part-9.jsonl.jsonl").exists()
    assert sorted(p.name for p in (out / "_done").iterdir()) == ["bucket", "hash", "mark"]


@pytest.mark.parametrize("processes", [2, 4])
def test_same_bytes_for_any_process_count(corpus, reference, tmp_path, processes):
    out = tmp_path / "out"
    run_stage(make_stage(_overrides(corpus, out, processes=processes)), stream=io.StringIO())
    assert stage_outputs(out) == reference


def _kill_in_bucket_phase(overrides: dict, out: Path) -> tuple[int, int]:
    """Start the stage in a subprocess, SIGKILL it once some (not all) bucket tasks are done; the
    bucket tasks done when the kill was sent, and once the process group is gone (on Ray, tasks
    already on the cluster may still finish after their driver died)."""
    markers = out / "_done" / "bucket"
    seen: list[Path] = []

    def ready() -> bool:
        seen[:] = done_markers(markers)
        return bool(seen)

    kill_when("tests.support.phased_stage", [orjson.dumps(overrides).decode()], ready, env={"PHASED_STAGE_DELAY": "0.4"})
    return len(seen), len(done_markers(markers))


def _check_killed_state(out: Path, done: int) -> None:
    assert 0 < done < BUCKETS
    assert len(list((out / "_done" / "hash").glob("*.done"))) == FILES + 1
    assert not (out / "_done" / "mark").exists() and not (out / "attributes").exists()
    manifest = read_manifest(str(out))
    assert manifest.status == "running"
    assert [p.status for p in manifest.phases] == ["complete", "running", "pending"]


@pytest.mark.parametrize("processes", [1, 2])
def test_killed_in_second_phase_resumes_there(corpus, reference, tmp_path, processes):
    out = tmp_path / "out"
    overrides = _overrides(corpus, out, processes=processes)
    _, done = _kill_in_bucket_phase(overrides, out)
    _check_killed_state(out, done)
    err = io.StringIO()
    summary = run_stage(make_stage(overrides), stream=err)
    hash_phase, bucket_phase, mark_phase = summary.manifest.phases
    assert all(r.skipped for r in hash_phase.tasks.values())
    assert sum(r.skipped for r in bucket_phase.tasks.values()) == done
    assert not any(r.skipped for r in mark_phase.tasks.values())
    assert f"bucket tasks  {BUCKETS} ({BUCKETS - done} processed, {done} already done, 0 failed)" in err.getvalue()
    assert stage_outputs(out) == reference


def test_adding_an_input_redoes_a_cross_file_stage(corpus, tmp_path):
    root = tmp_path / "c"
    for f in range(2):
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), make_docs(10, seed=f))
    out = tmp_path / "out"
    overrides = {"documents": [f"{root}/documents/*"], "destination": str(out), "buckets": 2, "processes": 1, "progress": False}
    run_stage(make_stage(overrides), stream=io.StringIO())
    again = run_stage(make_stage(overrides), stream=io.StringIO())
    assert all(r.skipped for r in again.results)
    # A new file whose first document repeats one of part-1: part-1 keeps it, and every phase is redone.
    extra = make_docs(3, seed=7)
    extra[0]["text"] = make_docs(10, seed=1)[4]["text"]
    write_documents(str(root / "documents" / "part-2.jsonl.gz"), extra)
    redone = run_stage(make_stage(overrides), stream=io.StringIO())
    assert not any(r.skipped for r in redone.results)
    assert redone.totals["marked"] == 1
    rows = list(read_attribute_rows(str(out / "attributes" / "part-2.jsonl.gz")))
    assert rows[0][1]["attributes"]["dup"] == [[0, len(extra[0]["text"]), 1]]


def test_changed_earlier_phase_redoes_later_phases(corpus, tmp_path):
    """A task whose earlier phase changed is redone even if its own marker looks finished."""
    root = tmp_path / "c"
    docs = make_docs(10, seed=1)
    path = root / "documents" / "part-0.jsonl.gz"
    write_documents(str(path), docs)
    out = tmp_path / "out"
    overrides = {"documents": [f"{root}/documents/*"], "destination": str(out), "buckets": 2, "processes": 1, "progress": False}
    assert run_stage(make_stage(overrides), stream=io.StringIO()).totals.get("marked", 0) == 0
    docs[9]["text"] = docs[0]["text"]
    write_documents(str(path), docs)
    os.utime(path, (time.time() + 5, time.time() + 5))
    redone = run_stage(make_stage(overrides), stream=io.StringIO())
    assert redone.totals["marked"] == 1 and not any(r.skipped for r in redone.results)


def test_adding_an_input_to_tag_only_tags_the_new_file(tmp_path):
    root = tmp_path / "c"
    for f in range(2):
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), make_docs(5, seed=f))
    args = ["tag", "--documents", f"{root}/documents/*", "--taggers", "char_length_with_paragraphs_v1", "--processes", "1"]
    run_cli(*args, check=True)
    write_documents(str(root / "documents" / "part-2.jsonl.gz"), make_docs(5, seed=2))
    again = run_cli(*args, check=True)
    assert "files        3 (1 processed, 2 already done, 0 failed)" in again.stderr
    manifest = read_manifest(str(root / "attributes" / "char_length_with_paragraphs_v1"))
    assert [r.skipped for r in manifest.phases[0].tasks.values()] == [True, True, False]


def test_manifest_reads_back_typed(corpus, tmp_path):
    out = tmp_path / "out"
    run_stage(make_stage(_overrides(corpus, out, processes=1)), stream=io.StringIO())
    manifest = read_manifest(str(out))
    assert manifest.stage == "phased-test" and manifest.status == "complete"
    assert manifest.config["buckets"] == BUCKETS and manifest.executor.workers == 1
    assert [f.rel for f in manifest.inputs] == [f"part-{f}.jsonl.gz" for f in range(FILES)] + ["part-9.jsonl"]
    assert set(manifest.timings) >= {"wall_seconds", "hash_seconds", "bucket_seconds", "mark_seconds"}
    (out / "_manifest.json").write_text('{"stage": "x"}')
    from dolma_pipe.manifest import ManifestError

    with pytest.raises(ManifestError, match="_manifest.json: not a dolma-pipe manifest"):
        read_manifest(str(out))


def test_one_fingerprint_rule_and_what_a_run_resolved_is_in_its_manifest(tmp_path):
    """No stage defines its own fingerprint (a class that tries is refused); what a run resolves
    from its config is fixed, recorded, and part of the fingerprint."""
    from dolma_pipe.cli import COMMANDS
    from dolma_pipe.config import load_config
    from dolma_pipe.documents import write_documents
    from dolma_pipe.stage import Resolved, Stage
    from dolma_pipe.stages.dedup import DedupConfig, DedupStage
    from tests.support.documents import make_docs

    for cmd in COMMANDS:
        cls = cmd.load() if cmd.target else None
        if isinstance(cls, type) and issubclass(cls, Stage):
            assert cls.fingerprint is Stage.fingerprint, cmd.name
    with pytest.raises(TypeError, match="defines fingerprint"):
        type("Own", (DedupStage,), {"fingerprint": lambda self, inputs: "x"})
    docs = tmp_path / "documents"
    write_documents(str(docs / "a.jsonl.gz"), make_docs(10))
    cfg = {"documents": [str(docs / "*")], "dedupe": {"name": "d", "paragraphs": {"attribute_name": "p"}}, "minhash": {"threshold": 0.8}}
    stage = DedupStage(load_config(DedupConfig, None, {**cfg, "progress": False}))
    summary = run_stage(stage, stream=io.StringIO())
    assert summary.manifest.resolved == {"name": "d", "buckets": 1, "mode": "exact", "minhash": {"bands": 10, "rows": 6, "hashes": 60}}
    assert isinstance(stage.resolved, Resolved)
    with pytest.raises(TypeError, match="fixed"):
        stage.resolved["buckets"] = 2
    # Other numbers for the run (more hash ranges than the input asks for): another fingerprint.
    other = DedupStage(load_config(DedupConfig, None, {**cfg, "buckets": 3}))
    assert other.prepare(stage.plan_inputs()) != summary.manifest.fingerprint


def test_a_stopped_runs_summary_says_which_phases_it_never_reached(corpus, tmp_path, monkeypatch):
    """Phases after a failure are "not reached", not "idle phases" (issue 27, finding 11)."""
    from dolma_pipe.runner import RunFailed
    from tests.support.phased_stage import PhasedStage

    def broken(self, task, quarantine, ctx):
        raise RuntimeError("a bucket task fails")

    monkeypatch.setattr(PhasedStage, "_bucket", broken)
    stream = io.StringIO()
    with pytest.raises(RunFailed):
        run_stage(make_stage(_overrides(corpus, tmp_path / "out", processes=1)), stream=stream)
    summary = stream.getvalue()
    assert "idle phases" not in summary
    assert re.search(r"\n  not reached +1 phase\(s\) after the stop \(mark\)\n", summary)
    assert re.search(rf"\n  bucket tasks +{BUCKETS} \(0 processed, 0 already done, {BUCKETS} failed\)\n", summary)


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_bytes_on_ray(self, corpus, reference, tmp_path, ray_address):
        out = tmp_path / "out"
        stage = make_stage(_overrides(corpus, out, processes=2, ray_address=ray_address))
        with RayExecutor(2, ray_address) as ex:
            summary = run_stage(stage, executor=ex, stream=io.StringIO())
        assert summary.status == "complete" and summary.manifest.executor.name == "ray"
        assert stage_outputs(out) == reference

    @pytest.mark.ray
    def test_killed_in_second_phase_resumes_on_ray(self, corpus, reference, tmp_path, ray_address):
        out = tmp_path / "out"
        overrides = _overrides(corpus, out, processes=2, ray_address=ray_address)
        done, _ = _kill_in_bucket_phase(overrides, out)
        _check_killed_state(out, done)
        time.sleep(1.0)  # a task of the killed driver may still be finishing on the cluster
        summary = run_stage(make_stage(overrides), stream=io.StringIO())
        assert sum(r.skipped for r in summary.manifest.phase("bucket").tasks.values()) >= done
        assert stage_outputs(out) == reference
