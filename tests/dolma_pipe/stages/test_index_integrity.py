"""The index checks itself: every part's files carry the xxh3 of the bytes its build wrote, the build
reads them back before calling a part done, a query refuses a damaged part (one flipped bit)
naming it, a rerun of ``index`` rebuilds that part only, and a damaged array met by a query that
skipped the checks is an error, never a Rust panic."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dolma_pipe import suffix
from dolma_pipe.runner import RunFailed
from dolma_pipe.stages.index import Index, IndexQueryError
from dolma_pipe.stages.index import files as index_files
from tests.support.cli import run_cli
from tests.support.index import EOS, index_config, planted_documents, run_index, tokenize_corpus, write_corpus
from tests.support.outputs import stage_outputs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[list[dict]], Path]:
    root = tmp_path_factory.mktemp("integrity")
    files = planted_documents(files=3, docs=25, seed=3)
    tokenize_corpus(root, files)
    reference = root / "index"
    run_index(index_config(reference, shards=[str(root / "tokens" / "train")]))
    return root, files, reference


@pytest.fixture
def index(corpus, tmp_path) -> Path:
    """An index of its own to damage (a copy elsewhere is another run: its destination differs)."""
    out = tmp_path / "index"
    run_index(_config(corpus, out))
    return out


def _flip(path: Path, at: int, mask: int = 1) -> None:
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= mask
    path.write_bytes(bytes(data))


def _config(corpus, out: Path) -> dict:
    root, _, _ = corpus
    return index_config(out, shards=[str(root / "tokens" / "train")])


def _words(files: list[list[dict]]) -> list[str]:
    return [" " + w for w in files[0][0]["text"].split(" ")[1:6]] + [" ".join(files[1][2]["text"].split(" ")[:3])]


def test_one_flipped_bit_is_refused_naming_the_part_and_a_rerun_rebuilds_it(corpus, index):
    _, files, reference = corpus
    want = {w: Index(str(reference)).count(w) for w in _words(files)}
    assert sum(want.values()) > 0
    sa = index / "shards" / "part-00001.sa"
    _flip(sa, sa.stat().st_size // 3)
    with pytest.raises(IndexQueryError, match=r"part part-00001 is damaged .*part-00001\.sa.* rerun dolma-pipe index"):
        Index(str(index))
    r = run_cli("query", "--index", str(index), "--count", " the")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and "part part-00001 is damaged" in lines[0] and "Traceback" not in r.stderr
    summary = run_index(_config(corpus, index))
    assert [(d.key, d.problem.split(" (")[0]) for d in summary.manifest.redone] == [("part-00001.npy", "damaged")]
    assert sum(not t.skipped for t in summary.results) == 1
    assert {w: Index(str(index)).count(w) for w in want} == want
    assert stage_outputs(index / "shards") == stage_outputs(reference / "shards")
    # A document start moved is damage too.
    _flip(index / "shards" / "part-00000.starts.npy", -3)
    with pytest.raises(IndexQueryError, match=r"part part-00000 is damaged .*part-00000\.starts\.npy"):
        Index(str(index))


def test_a_document_index_checks_its_text_and_ids(corpus, tmp_path):
    root, files, _ = corpus
    out = tmp_path / "docs-index"
    cfg = index_config(out, documents=[str(root / "documents" / "*.gz")])
    run_index(cfg)
    phrase = files[2][6]["text"][:30]
    n = Index(str(out)).count(phrase)
    for name, at in (("part-1.jsonl.gz.text", 100), ("part-2.jsonl.gz.docs.jsonl.gz", 30)):
        _flip(out / "shards" / name, at, 0x10)
        with pytest.raises(IndexQueryError, match=rf"is damaged \(.*{name} is not the file its build wrote\)"):
            Index(str(out))
        assert sum(not t.skipped for t in run_index(cfg).results) == 1
        assert Index(str(out)).count(phrase) == n


def test_a_damaged_array_is_an_error_never_a_panic_even_unchecked(corpus, index):
    """Positions past the text (a few bytes overwritten): Rust checks every read, a query that
    skipped the checks gets IndexQueryError, the Python face a ValueError; random damage never panics."""
    _, files, _ = corpus
    part = Index(str(index)).info.parts[0]
    sa = index / "shards" / f"{part.name}.sa"
    good = sa.read_bytes()
    data = bytearray(good)
    middle = (part.length // 2) * part.width  # the first entry every binary search reads
    data[middle : middle + part.width] = b"\xff" * part.width
    sa.write_bytes(bytes(data))
    unchecked = Index(str(index), verify=False)
    for ask in (
        lambda: unchecked.count(" the"),
        lambda: unchecked.find(" the"),
        lambda: unchecked.trace(files[0][1]["text"], min_length=2),
        lambda: unchecked.count([EOS]),
    ):
        with pytest.raises(IndexQueryError, match=rf"part {part.name}: the suffix array is damaged: .* past the text"):
            ask()
    raw = suffix.SuffixIndex(str(Path(unchecked.info.sources[0].path)), "u16", str(sa), part.width, length=part.length * 2)
    with pytest.raises(ValueError, match="damaged"):
        raw.count([EOS])
    rng = random.Random(5)
    words = _words(files)
    for _ in range(40):
        data = bytearray(good)
        for _ in range(3):
            data[rng.randrange(len(data))] = rng.randrange(256)
        sa.write_bytes(bytes(data))
        idx = Index(str(index), verify=False)
        for w in words:
            try:
                idx.count(w)
                idx.find(w, limit=5)
                idx.trace(w + w, min_length=1, docs=1)
            except IndexQueryError:
                pass  # anything else (a PanicException is a BaseException) fails the test


def test_a_build_reads_its_files_back_before_calling_a_part_done(corpus, tmp_path, monkeypatch):
    """A file that changes between its write and the task's end (a disk, a writer beside this one)
    fails the task, naming the file; nothing is marked done, and a rerun builds it."""
    verify = index_files.TaskFiles.verify

    def damaging(self: index_files.TaskFiles) -> None:
        sa = next(rel for rel in self.digests if rel.endswith(".sa"))
        _flip(Path(self.local(sa)), 7)
        verify(self)

    monkeypatch.setattr(index_files.TaskFiles, "verify", damaging)
    out = tmp_path / "index"
    with pytest.raises(
        RunFailed, match=r"task\(s\) failed, e.g. part-00000.npy: SuffixIndexError: .*part-00000\.sa: the file written hashes to"
    ):
        run_index(_config(corpus, out))
    assert not list((out / "_done").rglob("*.done"))
    monkeypatch.setattr(index_files.TaskFiles, "verify", verify)
    assert all(not t.skipped for t in run_index(_config(corpus, out)).results)
    assert stage_outputs(out / "shards") == stage_outputs(corpus[2] / "shards")


def test_documents_built_elsewhere_are_not_taken_for_damage(corpus, tmp_path):
    """A rerun of an intact index redoes nothing (the check of every part costs no rebuild)."""
    root, files, _ = corpus
    write_corpus(tmp_path / "more", files[:1])
    out = tmp_path / "index"
    run_index(index_config(out, documents=[str(tmp_path / "more" / "documents" / "*")]))
    again = run_index(index_config(out, documents=[str(tmp_path / "more" / "documents" / "*")]))
    assert all(t.skipped for t in again.results) and not again.manifest.redone
