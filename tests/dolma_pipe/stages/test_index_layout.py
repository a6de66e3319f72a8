"""Where an index goes and what it is built from: a destination among the shards it indexes (their
folder, inside it, the tokenize run's folder, or a folder holding them) is refused in one line
before anything is written, and the trainer's shard discovery still reads the shards; two shard
folders with equally named shards (``tok/train tok/val``) index as one corpus, one folder's parts
keep their own names."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dolma_pipe.stages.index import Index
from tests.support.cli import run_cli
from tests.support.index import EOS, index_config, planted_documents, run_index, scan_count, tokenize_corpus
from train.shards import find_shards, read_shard


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("layout")
    return tokenize_corpus(root, planted_documents(files=2, docs=30, seed=11), validation={"fraction": 0.3})


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_a_destination_among_the_shards_is_refused_before_anything_is_written(tokens):
    before = _tree(tokens.parent)
    shards = find_shards([tokens])
    for dest, how in (
        (tokens / "train", "is the folder"),
        (tokens / "train" / "index", "is inside the folder"),
        (tokens, "is the folder"),  # the tokenize run's: its manifest would be replaced
        (tokens / "index", "is inside the folder"),
        (tokens.parent, "holds the folder"),
    ):
        r = run_cli("index", "--shards", str(tokens / "train"), "--destination", str(dest), "--no-progress")
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert lines[0].startswith(f"dolma-pipe index: error: config key 'destination': {dest} {how} ")
        assert "an index goes in a folder of its own" in lines[0]
        assert _tree(tokens.parent) == before  # nothing written, nothing replaced
    assert find_shards([tokens]) == shards


def _documents(tokens: Path, split: str) -> list[list[int]]:
    out = []
    for path, _ in find_shards([tokens / split]):
        shard = read_shard(path, "uint16", eos_id=EOS)
        out += [shard.document(i).tolist() for i in range(len(shard.docs))]
    return out


def test_two_shard_folders_with_equal_names_index_as_one_corpus(tokens, tmp_path):
    train, val = tokens / "train", tokens / "val"
    assert {p.name for p in train.glob("*.npy")} & {p.name for p in val.glob("*.npy")}  # part-00000.npy in both
    out = tmp_path / "index"
    summary = run_index(index_config(out, shards=[str(train), str(val)]))
    index = Index(str(out))
    names = [p.name for p in index.info.parts]
    assert names == sorted(names) and {n.split("/")[0] for n in names} == {"train", "val"}
    assert sorted(r.key for r in summary.results) == sorted(f"{n}.npy" for n in names)
    docs = _documents(tokens, "train") + _documents(tokens, "val")
    assert index.info.documents == len(docs) == index.count([EOS])
    rng = random.Random(2)
    for _ in range(80):
        d = rng.choice([d for d in docs if len(d) > 4])
        k = rng.randrange(1, 6)
        p = rng.randrange(len(d) - k + 1)
        assert index.count(d[p : p + k]) == scan_count(docs, d[p : p + k])
    # One folder: its shards' own names, as before two could be given.
    one = tmp_path / "one"
    run_index(index_config(one, shards=[str(train)]))
    assert [p.name for p in Index(str(one)).info.parts] == [p.stem for p in sorted(train.glob("*.npy"))]
    assert sorted(f.name for f in (one / "shards").iterdir()) == sorted(
        f"{p.stem}{s}" for p in train.glob("*.npy") for s in (".sa", ".starts.npy")
    )
