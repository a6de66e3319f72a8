"""The token-shard format (train/shards.py): writer, reader, dtype rule, sidecar quoting,
atomic publication. numpy only: no torch needed."""

from __future__ import annotations

import ast
import gzip
import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.repo import REPO_ROOT
from train.shards import (
    DocRecord,
    ShardError,
    ShardSetWriter,
    ShardWriter,
    check_sidecar,
    dtype_for_vocab,
    find_shards,
    read_shard,
    shard_name,
    sidecar_path,
)


def test_module_imports_only_numpy_and_the_standard_library():
    tree = ast.parse((REPO_ROOT / "train" / "shards.py").read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    assert roots - set(sys.stdlib_module_names) == {"numpy"}


def test_names_and_dtype_rule():
    assert shard_name(0) == "part-00000" and shard_name(123) == "part-00123" and shard_name(123456) == "part-123456"
    assert sidecar_path("x/part-00003.npy") == Path("x/part-00003.csv.gz")
    assert dtype_for_vocab(512) == np.uint16 and dtype_for_vocab(50280) == np.uint16
    assert dtype_for_vocab(65536) == np.uint16  # ids 0..65535 fit
    assert dtype_for_vocab(65537) == np.uint32 and dtype_for_vocab(100278) == np.uint32
    with pytest.raises(ValueError):
        dtype_for_vocab(0)


def test_round_trip_single_documents_and_batches(tmp_path):
    path = tmp_path / "out" / "part-00000.npy"
    with ShardWriter(path, vocab_size=100278, eos_id=100257) as w:  # uint32
        rec = w.add(np.array([70000, 5, 6]), id="d0", src="a.jsonl.gz", loc=0)
        assert rec == DocRecord(0, 4, "d0", "a.jsonl.gz", 0)
        w.add([], id="empty", src="a.jsonl.gz", loc=1)  # an empty document is just its EOS
        # a batch: three documents concatenated, with offsets
        w.add_batch(np.array([1, 2, 3, 4, 5], dtype=np.int32), [0, 2, 2, 5], ids=["x", "y", "z"], srcs="b.jsonl", locs=[7, 8, 9])
    assert w.n_docs == 5 and w.n_tokens == 4 + 1 + 3 + 1 + 4
    raw = np.fromfile(path, dtype=np.uint32)  # headerless: the file is the tokens, nothing else
    assert raw.tolist() == [70000, 5, 6, 100257, 100257, 1, 2, 100257, 100257, 3, 4, 5, 100257]
    shard = read_shard(path, np.uint32, eos_id=100257)
    assert shard.n_tokens == 13 and isinstance(shard.tokens, np.memmap)
    assert [(d.start, d.end, d.id, d.src, d.loc) for d in shard.docs] == [
        (0, 4, "d0", "a.jsonl.gz", 0),
        (4, 5, "empty", "a.jsonl.gz", 1),
        (5, 8, "x", "b.jsonl", 7),
        (8, 9, "y", "b.jsonl", 8),
        (9, 13, "z", "b.jsonl", 9),
    ]
    assert shard.document(2).tolist() == [1, 2, 100257]
    # the sidecar is plain OLMo/Dolma CSV: no header, start,end,id,src,loc
    assert gzip.open(sidecar_path(path), "rt").read().splitlines()[:2] == ["0,4,d0,a.jsonl.gz,0", "4,5,empty,a.jsonl.gz,1"]
    assert check_sidecar(path, 13) == 5


def test_documents_that_bring_their_own_eos(tmp_path):
    path = tmp_path / "part-00000.npy"
    with ShardWriter(path, vocab_size=512, eos_id=0, add_eos=False) as w:
        w.add_batch(np.array([3, 4, 0, 5, 0]), [0, 3, 5], ids=["a", "b"], srcs="s", locs=[0, 1])
        with pytest.raises(ShardError, match=r"document 'c' does not end with EOS \(0\)"):
            w.add([7, 8], id="c", src="s", loc=2)
        with pytest.raises(ShardError, match="document 'd' does not end with EOS"):
            w.add([], id="d", src="s", loc=3)
    assert read_shard(path, np.uint16, eos_id=0).tokens.tolist() == [3, 4, 0, 5, 0]  # refused ones left no trace


def test_token_ids_must_fit_the_vocabulary_and_the_dtype(tmp_path):
    # uint16 cannot hold a 100k vocabulary: refused before anything is written
    with pytest.raises(ShardError, match=r"uint16 cannot hold the token ids of a vocabulary of 100278.*use uint32"):
        ShardWriter(tmp_path / "a.npy", vocab_size=100278, eos_id=0, dtype=np.uint16)
    with pytest.raises(ShardError, match="uint16 or uint32"):
        ShardWriter(tmp_path / "a.npy", vocab_size=200, eos_id=0, dtype=np.uint8)
    with pytest.raises(ShardError, match=r"eos_id 512 is outside the vocabulary \[0, 512\)"):
        ShardWriter(tmp_path / "a.npy", vocab_size=512, eos_id=512)
    with ShardWriter(tmp_path / "part-00000.npy", vocab_size=50280, eos_id=0) as w:
        w.add([1, 2], id="ok", src="s", loc=0)
        # an id past uint16 would wrap silently in a plain astype: the writer names it
        with pytest.raises(
            ShardError,
            match=r"document 'big': token id 70000 is outside the vocabulary "
            r"\[0, 50280\) and does not fit in uint16",
        ):
            w.add_batch(np.array([1, 2, 70000]), [0, 1, 3], ids=["fine", "big"], srcs="s", locs=[1, 2])
        with pytest.raises(ShardError, match=r"document 'neg': token id -1 is outside"):
            w.add([-1], id="neg", src="s", loc=3)
        with pytest.raises(ShardError, match="integers"):
            w.add([1.5], id="float", src="s", loc=4)
        with pytest.raises(ShardError, match="offsets"):
            w.add_batch(np.array([1, 2, 3]), [0, 2], ids=["a", "b"], srcs="s", locs=[0, 1])
    shard = read_shard(tmp_path / "part-00000.npy", np.uint16, eos_id=0)
    assert [d.id for d in shard.docs] == ["ok"] and shard.tokens.tolist() == [1, 2, 0]


def test_sidecar_quotes_odd_ids_and_sources(tmp_path):
    odd = ["a,b", 'say "hi"', "line\nbreak", " spaced ", "", "ünïcödé,🙂", "tab\there", "cr\rx"]
    path = tmp_path / "part-00000.npy"
    with ShardWriter(path, vocab_size=512, eos_id=0) as w:
        for i, doc_id in enumerate(odd):
            w.add([i + 1], id=doc_id, src=f"s3://bucket/dir,{i}/x.jsonl.gz", loc=i)
    docs = read_shard(path, np.uint16, eos_id=0).docs
    assert [d.id for d in docs] == odd
    assert [d.src for d in docs] == [f"s3://bucket/dir,{i}/x.jsonl.gz" for i in range(len(odd))]
    assert [(d.start, d.end, d.loc) for d in docs] == [(2 * i, 2 * i + 2, i) for i in range(len(odd))]
    text = gzip.open(sidecar_path(path), "rt", newline="").read()
    assert text.startswith('0,2,"a,b","s3://bucket/dir,0/x.jsonl.gz",0\r\n2,4,"say ""hi"""')  # csv defaults, as Dolma
    with pytest.raises(ShardError, match="must be a string"):
        with ShardWriter(tmp_path / "part-00001.npy", vocab_size=512, eos_id=0) as w:
            w.add([1], id=7, src="s", loc=0)


def test_sidecars_without_quoting_as_the_trainer_read_them_still_read(tmp_path):
    """Sidecars written by hand or by older tools (plain ``str.join``, even 2-4 columns) read."""
    np.array([5, 0, 6, 7, 0], dtype=np.uint16).tofile(tmp_path / "part-00000.npy")
    with gzip.open(tmp_path / "part-00000.csv.gz", "wt") as f:
        f.write("0,2,doc-a,src,0\n2,5,doc-b\n")
    docs = read_shard(tmp_path / "part-00000.npy", np.uint16, eos_id=0).docs
    assert docs == [DocRecord(0, 2, "doc-a", "src", 0), DocRecord(2, 5, "doc-b", "", -1)]


@pytest.mark.parametrize("status", ["running", "failed"])
def test_find_shards_refuses_the_shards_of_an_unfinished_run(tmp_path, status):
    import json

    dest = tmp_path / "tokens"  # tokenize writes <destination>/{train,val}/part-*.npy and <destination>/_manifest.json
    with ShardSetWriter(dest / "train", vocab_size=512, eos_id=0, max_tokens=4) as w:
        for i in range(3):
            w.add([1, 2, 3], id=str(i), src="s", loc=i)
    manifest = dest / "_manifest.json"
    manifest.write_text(json.dumps({"stage": "tokenize", "status": status, "inputs": []}))
    expected = (
        f"{manifest}: the shards under {dest} are the output of an unfinished tokenize run (status {status}); "
        "rerun that tokenize to finish it"
    )
    for given in (dest, dest / "train", dest / "train" / "part-00000.npy"):
        with pytest.raises(ShardError) as err:
            find_shards([given])
        assert str(err.value) == expected
    manifest.write_text(json.dumps({"stage": "tokenize", "status": "complete"}))
    assert len(find_shards([dest / "train"])) == 3
    # A manifest in the shard folder itself counts too; files of that name that are no run's do not.
    (dest / "train" / "_manifest.json").write_text(json.dumps({"stage": "tokenize", "status": "running"}))
    with pytest.raises(ShardError, match="unfinished tokenize run"):
        find_shards([dest / "train"])
    (dest / "train" / "_manifest.json").write_text("{}")
    manifest.write_text("not json")
    assert len(find_shards([dest])) == 3


def _write_shards(folder: Path, n: int = 2) -> None:
    with ShardSetWriter(folder, vocab_size=512, eos_id=0, max_tokens=4) as w:
        for i in range(n):
            w.add([1, 2, 3], id=str(i), src="s", loc=i)


def _run(folder: Path, stage: str, status: str = "complete") -> None:
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_manifest.json").write_text(json.dumps({"stage": stage, "status": status, "inputs": []}))


def test_find_shards_takes_no_other_run_files_and_no_bookkeeping(tmp_path):
    """An index (or any run but tokenize) written under the folder given is not read as shards,
    nor are the runner's ``_``-folders; plain OLMo shards with no manifest still are."""
    dest = tmp_path / "tokens"
    _write_shards(dest / "train", 2)
    _write_shards(dest / "val", 1)
    _run(dest, "tokenize")
    want = sorted(str(p.relative_to(dest)) for p in dest.rglob("part-*.npy"))
    assert [rel for _, rel in find_shards([dest])] == want
    # An index built inside the shards' folders: its manifest says whose files they are.
    index = dest / "train" / "index"
    (index / "shards").mkdir(parents=True)
    np.zeros(4, dtype=np.int64).tofile(index / "shards" / "part-00000.starts.npy")
    _run(index, "index")
    # The runner's own folders, and a tokenize run's work files.
    for junk in ("_done/write/part-00000.npy", "_work/pack/runs.npy", "train/_errors/x.npy"):
        (dest / junk).parent.mkdir(parents=True, exist_ok=True)
        (dest / junk).write_bytes(b"\0\0")
    assert [rel for _, rel in find_shards([dest])] == want
    assert [rel for _, rel in find_shards([dest / "train"])] == [r.split("/", 1)[1] for r in want if r.startswith("train/")]
    # Another run's folder given as data is refused, naming it.
    for given in (index, index / "shards", index / "shards" / "part-00000.starts.npy"):
        with pytest.raises(ShardError, match=rf"^{index} holds the output of an index run \(its _manifest.json\), not token shards"):
            find_shards([given])
    # Plain shards with no manifest anywhere (OLMo's) are shards.
    plain = tmp_path / "olmo"
    _write_shards(plain, 2)
    assert len(find_shards([plain])) == 2


def test_find_shards_refuses_shards_beside_another_run_files(tmp_path):
    """Shards whose own folder is another run's output: whose files are whose cannot be told."""
    dest = tmp_path / "tokens"
    _write_shards(dest / "train", 2)
    _run(dest, "tokenize")
    _run(dest / "train", "index", status="failed")
    for given in (dest, dest / "train", dest / "train" / "part-00000.npy"):
        with pytest.raises(ShardError, match=rf"^{dest / 'train'} holds token shards and the output of an index run .* side by side"):
            find_shards([given])


def test_no_empty_shard_and_temporary_names_until_close(tmp_path):
    w = ShardWriter(tmp_path / "part-00000.npy", vocab_size=512, eos_id=0)
    assert w.close() is None
    assert list(tmp_path.iterdir()) == []  # nothing at all, not even a temporary
    w = ShardWriter(tmp_path / "part-00001.npy", vocab_size=512, eos_id=0)
    w.add([1, 2, 3], id="a", src="s", loc=0)
    names = sorted(p.name for p in tmp_path.iterdir())
    # while open: hidden temporaries that neither end in .npy nor .csv.gz
    assert len(names) == 2 and all(n.startswith(".part-00001.") and ".tmp-" in n for n in names)
    assert not any(n.endswith((".npy", ".csv.gz")) for n in names)
    with pytest.raises(ShardError, match="no .npy token shards"):
        find_shards([tmp_path])
    assert w.close() == tmp_path / "part-00001.npy"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00001.csv.gz", "part-00001.npy"]
    assert find_shards([tmp_path]) == [(tmp_path / "part-00001.npy", "part-00001.npy")]
    # an exception inside the with block drops the shard
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path / "part-00002.npy", vocab_size=512, eos_id=0) as w:
            w.add([1], id="a", src="s", loc=0)
            raise RuntimeError("killed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00001.csv.gz", "part-00001.npy"]
    with pytest.raises(ValueError, match="closed"):
        w.add([1], id="late", src="s", loc=1)


def test_output_is_deterministic(tmp_path):
    def write(d):
        with ShardWriter(d / "part-00000.npy", vocab_size=512, eos_id=0) as w:
            w.add_batch(np.arange(1, 101), [0, 10, 60, 100], ids=["a", "b,c", "d"], srcs="s", locs=[0, 1, 2])
        return [hashlib.sha256((d / n).read_bytes()).hexdigest() for n in ("part-00000.npy", "part-00000.csv.gz")]

    first = write(tmp_path / "a")
    import time

    time.sleep(1.1)  # gzip headers carry a timestamp unless mtime=0
    assert write(tmp_path / "b") == first


def test_reader_refuses_a_sidecar_that_does_not_match_the_file(tmp_path):
    path = tmp_path / "part-00000.npy"
    with ShardWriter(path, vocab_size=512, eos_id=0) as w:
        w.add([1, 2, 3], id="a", src="s", loc=0)
        w.add([4, 5], id="b", src="s", loc=1)
    side = sidecar_path(path)

    def sidecar(text):
        with gzip.open(side, "wt") as f:
            f.write(text)

    sidecar("0,4,a,s,0\n4,9,b,s,1\n")  # the file has 7 tokens
    with pytest.raises(ShardError, match=r"part-00000.csv.gz row 2: document \[4, 9\) is outside the shard's 7 tokens"):
        read_shard(path, np.uint16)
    sidecar("0,4,a,s,0\n5,7,b,s,1\n")
    with pytest.raises(ShardError, match=r"row 2: document \[5, 7\) does not start where the previous one ends \(4\)"):
        read_shard(path, np.uint16)
    sidecar("0,4,a,s,0\n")
    with pytest.raises(ShardError, match=r"cover tokens \[0, 4\) but the shard has 7"):
        read_shard(path, np.uint16)
    sidecar("0,4,a,s,0\n4,4,b,s,1\n")
    with pytest.raises(ShardError, match="outside the shard's 7 tokens or empty"):
        read_shard(path, np.uint16)
    sidecar("0,4,a,s,0\nfour,seven,b,s,1\n")
    with pytest.raises(ShardError, match="line 2: expected start,end,id,src,loc"):
        read_shard(path, np.uint16)
    sidecar("0,4,a,s,0\n4,7,b,s,1\n")
    assert len(read_shard(path, np.uint16, eos_id=0).docs) == 2
    with pytest.raises(ShardError, match=r"document 'a' \[0, 4\) does not end with EOS \(5\)"):
        read_shard(path, np.uint16, eos_id=5)
    # read with the wrong dtype: the spans run past the (halved) file
    with pytest.raises(ShardError, match="not a multiple of uint32|outside the shard"):
        read_shard(path, np.uint32)
    side.write_bytes(b"not gzip")
    with pytest.raises(ShardError, match="unreadable"):
        read_shard(path, np.uint16)
    side.unlink()
    with pytest.raises(ShardError, match="sidecar part-00000.csv.gz is missing"):
        read_shard(path, np.uint16)


def test_shard_set_writer_starts_a_new_shard_before_the_budget(tmp_path):
    with ShardSetWriter(tmp_path, vocab_size=512, eos_id=0, max_tokens=10, first_index=3) as w:
        # sizes with EOS: 5, 5, 2, 21 (longer than the budget: a shard of its own), then 3
        w.add_batch(np.arange(1, 30), [0, 4, 8, 9, 29], ids=list("abcd"), srcs="s", locs=range(4))
        w.add([1, 2], id="e", src="s", loc=4)
    assert [p.name for p in w.paths] == ["part-00003.npy", "part-00004.npy", "part-00005.npy", "part-00006.npy"]
    docs = [[d.id for d in read_shard(p, np.uint16, eos_id=0).docs] for p in w.paths]
    assert docs == [["a", "b"], ["c"], ["d"], ["e"]]
    with ShardSetWriter(tmp_path / "empty", vocab_size=512, eos_id=0, max_tokens=10) as w:
        pass
    assert w.paths == [] and not (tmp_path / "empty").exists()
