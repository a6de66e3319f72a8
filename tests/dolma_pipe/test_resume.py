"""Killed runs resume: finished files are skipped, the rest redone, bytes identical to a clean run."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import orjson
import pytest

from dolma_pipe.config import load_config
from dolma_pipe.documents import read_documents, write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.convert import ConvertConfig, ConvertStage
from tests.support.cli import run_cli
from tests.support.documents import make_docs
from tests.support.outputs import done_markers, stage_outputs
from tests.support.processes import kill_when

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


def _outputs(root: Path) -> dict[str, bytes]:
    """Every finished output and error file, and each marker's counts, errors and data (what is not
    timing, paths or fingerprints)."""
    return stage_outputs(root, marker_keys=("counts", "errors", "data"))


# Each stage killed and resumed: its command line for a corpus and a destination, and where under the
# destination its output root (outputs, _done/ markers, _errors/, _manifest.json) is.
TAGGER = "c4_v2"  # a Rust kernel: tagging big_corpus takes seconds
STAGES = {
    "convert": (
        lambda corpus, out: ["convert", "--documents", f"{corpus}/documents/*", "--destination", str(out), "--format", "jsonl.gz"],
        "",
    ),
    "tag": (lambda corpus, out: ["tag", "--documents", f"{corpus}/documents/*", "--taggers", TAGGER, "--destination", str(out)], TAGGER),
    "stats": (lambda corpus, out: ["stats", "--documents", f"{corpus}/documents/*", "--destination", str(out)], ""),
}


def _args(stage: str, corpus: Path, out: Path, *extra: str) -> list[str]:
    return [*STAGES[stage][0](corpus, out), *extra]


def _root(stage: str, out: Path) -> Path:
    return out / STAGES[stage][1]


@pytest.fixture(scope="module")
def reference(big_corpus, tmp_path_factory):
    """``reference(stage)``: the outputs of a clean one-process run of ``stage`` over big_corpus."""
    cache: dict[str, dict[str, bytes]] = {}

    def get(stage: str) -> dict[str, bytes]:
        if stage not in cache:
            out = tmp_path_factory.mktemp(f"ref-{stage}") / "out"
            run_cli(*_args(stage, big_corpus, out, "--processes", "1"), check=True)
            cache[stage] = _outputs(_root(stage, out))
        return cache[stage]

    return get


def _kill_midway(args: list[str], root: Path) -> int:
    """Start ``dolma-pipe args``, SIGKILL its process group once a first file is marked done
    under ``root``; the number of markers then."""
    kill_when("dolma_pipe", args, lambda: bool(done_markers(root / "_done")))
    return len(done_markers(root / "_done"))


def _check_partial_outputs(root: Path, reference: dict[str, bytes], done: int, exact: bool = True) -> None:
    """After the kill: at least one file finished, and everything visible under a final name
    (outputs, error files, markers) is the clean run's, byte for byte: a file being written only
    exists under a hidden temporary name.  A finished file's output is there (its marker is
    written last); a stage's own end (stats.json) is not; the manifest still says running.
    ``exact``: the markers are the ``done`` counted at the kill (not so on Ray, whose workers may
    finish a task after their driver died)."""
    assert done >= 1, "killed before any file finished: nothing to resume"
    partial = _outputs(root)
    markers = [n for n in partial if n.startswith("_done/")]
    assert len(markers) == done if exact else len(markers) >= done
    for name, data in partial.items():
        assert name in reference, f"{name} is visible after the kill but no clean run writes it"
        assert data == reference[name], f"{name} is visible after the kill but differs from the clean run's"
    outputs = [n for n in reference if not n.startswith("_") and n != "stats.json"]
    if outputs:  # a stage with one output per input file
        assert len([n for n in partial if n in outputs]) >= len(markers)
    assert "stats.json" not in partial
    manifest = orjson.loads((root / "_manifest.json").read_bytes())
    assert manifest["status"] == "running"


def _already_done(stderr: str) -> int:
    found = re.findall(r"\b(\d+) already done\b", stderr)
    assert len(found) == 1, stderr
    return int(found[0])


@pytest.mark.slow
@pytest.mark.parametrize("processes", ["1", "2"])
@pytest.mark.parametrize("stage", list(STAGES))
def test_kill_and_resume_local(big_corpus, reference, tmp_path, stage, processes):
    out = tmp_path / "out"
    root = _root(stage, out)
    args = _args(stage, big_corpus, out, "--processes", processes)
    done = _kill_midway(args, root)
    assert done < FILES + 1
    _check_partial_outputs(root, reference(stage), done)
    assert (root / "_lock.json").exists(), "the killed run's lock stays"
    resumed = run_cli(*args, check=True)
    assert _already_done(resumed.stderr) == done
    assert _outputs(root) == reference(stage)
    assert orjson.loads((root / "_manifest.json").read_bytes())["status"] == "complete"
    # The rerun took the dead run's lock over, said so, and let it go.
    assert re.search(r"took over \S*_lock\.json: its run \(pid \d+ on .*\) is gone", resumed.stderr), resumed.stderr
    assert not (root / "_lock.json").exists()


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
@pytest.mark.slow
def test_cli_starts_its_own_ray(make_corpus, tmp_path):
    root = make_corpus(files=3, docs=10)
    proc = run_cli("convert", "--documents", f"{root}/documents/*", "--destination", str(tmp_path / "o"), "--ray", "--processes", "2")
    assert proc.returncode == 0, proc.stderr
    manifest = orjson.loads((tmp_path / "o" / "_manifest.json").read_bytes())
    assert manifest["executor"] == {"name": "ray", "workers": 2} and manifest["totals"]["docs_out"] == 30


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    @pytest.mark.slow
    def test_kill_and_resume_ray(self, big_corpus, reference, tmp_path, ray_address):
        out = tmp_path / "out"
        args = _args("convert", big_corpus, out, "--ray-address", ray_address, "--processes", "2")
        done = _kill_midway(args, out)
        assert done < FILES + 1
        _check_partial_outputs(out, reference("convert"), done, exact=False)
        resumed = run_cli(*args, check=True)
        # At least the files marked done at the kill (a task of the killed driver may have finished since).
        assert done <= _already_done(resumed.stderr) < FILES + 1
        # A task of the killed driver may still have been finishing; give Ray a moment to reap it.
        time.sleep(1.0)
        assert _outputs(out) == reference("convert")

    @pytest.mark.ray
    def test_ray_executor_in_process(self, make_corpus, tmp_path, ray_address):
        root = make_corpus(files=4, docs=25)
        cfg = load_config(
            ConvertConfig, None, {"documents": [f"{root}/documents/*"], "destination": str(tmp_path / "o"), "ray_address": ray_address}
        )
        with RayExecutor(2, ray_address) as ex:
            summary = run_stage(ConvertStage(cfg), executor=ex)
        assert summary.status == "complete" and summary.totals["docs_out"] == 100
        manifest = orjson.loads((tmp_path / "o" / "_manifest.json").read_bytes())
        assert manifest["executor"]["name"] == "ray"
