"""Every writer of multi-member output keeps documents whole: many shards of many members, with
documents from a few bytes to larger than a member and a shard, for streams and Dolmino sources,
read back line by line (every line parses, every id is there as often as it should be, every text
equals the input's)."""

from __future__ import annotations

import collections
import gzip
import io
import json
import random
from pathlib import Path

import pytest
import zstandard

import mixers.sources
import mixers.streams
from dolma_pipe.config import load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.runner import run_stage
from mixers.config import MixConfig
from mixers.output import MemberWriter
from mixers.stage import MixStage
from tests.support.documents import WORDS
from tests.support.tokens import train_tokenizer

# Raw bytes per member in these tests (the stage's own rule gives 1 MiB or more): small enough that
# a few megabytes of documents make hundreds of members and dozens of shards.
MEMBER_BYTES = 6000
SHARD_BYTES = 9000  # compressed bytes per shard: a handful of members each


def text_of(rng: random.Random, size: int) -> str:
    """About ``size`` bytes of text; random letters past a few KB so that large ones compress badly
    (a document larger than a shard after compression)."""
    if size <= 8:
        return "".join(rng.choices("abcdéß ", k=size)).strip() or "x"
    if size < 4000:
        out = []
        while sum(len(w) + 1 for w in out) < size:
            out.append(rng.choice(WORDS))
        return " ".join(out) + " ünïcödé"
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz ÄÖÜ\n", k=size))


SIZES = [1, 3, 5, 20, 80, 300, 1500, 3000, 5999, 6000, 6001, 9000, 20_000, 60_000]


def make_corpus(root: Path, files: int = 4, per_file: int = 120, seed: int = 0, sizes: list[int] = SIZES) -> dict[str, str]:
    """``files`` input files of documents of every size in ``sizes`` (cycled, shuffled); {id: text}."""
    rng = random.Random(seed)
    texts = {}
    for f in range(files):
        chosen = [sizes[i % len(sizes)] for i in range(per_file)]
        rng.shuffle(chosen)
        docs = []
        for i, size in enumerate(chosen):
            doc_id = f"d{f}-{i}"
            texts[doc_id] = text_of(rng, size)
            docs.append({"id": doc_id, "text": texts[doc_id], "source": "t"})
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), docs)
    return texts


def read_lines(path: Path) -> list[bytes]:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(raw)
    elif path.suffix == ".zst":
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True) as fh:
            data = fh.read()
    else:
        data = raw
    assert data.endswith(b"\n"), f"{path} does not end with a line end"
    return data.split(b"\n")[:-1]


def parse_shards(shards: list[Path]) -> list[dict]:
    docs = []
    for shard in shards:
        for n, line in enumerate(read_lines(shard), 1):
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as exc:  # a document cut in two
                raise AssertionError(f"{shard}:{n} does not parse: {line[:80]!r}...{line[-80:]!r}") from exc
    return docs


@pytest.fixture
def small_members(monkeypatch):
    """Members of MEMBER_BYTES in this process (tasks run inline with one process)."""
    monkeypatch.setattr(mixers.streams, "member_bytes", lambda max_bytes: MEMBER_BYTES)
    monkeypatch.setattr(mixers.sources, "member_bytes", lambda max_bytes: MEMBER_BYTES)


def run_mix(config: dict):
    return run_stage(MixStage(load_config(MixConfig, None, config)), stream=io.StringIO())


@pytest.mark.parametrize("compression", ["gz", "zst", ""])
def test_member_writer_members_hold_whole_lines(tmp_path, compression):
    """Batches of every shape (one line, many lines, lines larger than a member, a batch that ends
    a member mid-batch after earlier buffered lines): each member is whole lines, counted right."""
    rng = random.Random(7)
    lines = [json.dumps({"id": str(i), "text": text_of(rng, SIZES[i % len(SIZES)])}).encode() + b"\n" for i in range(400)]
    path = tmp_path / f"out.jsonl{'.' + compression if compression else ''}"
    with MemberWriter(str(path), compression, MEMBER_BYTES) as w:
        i = 0
        while i < len(lines):
            k = rng.choice([1, 1, 2, 5, 17, 40])
            batch = lines[i : i + k]
            w.write(b"".join(batch), [len(x) for x in batch])
            i += k
    assert len(w.members) > 50
    raw = path.read_bytes()
    seen = []
    for m in w.members:
        piece = raw[m.offset : m.offset + m.length]
        data = {"gz": gzip.decompress, "zst": zstandard.ZstdDecompressor().decompress, "": bytes}[compression](piece)
        assert len(data) == m.raw_bytes and data.endswith(b"\n") and data.count(b"\n") == m.docs
        seen += data.split(b"\n")[:-1]
    assert seen == [x[:-1] for x in lines]
    assert w.docs == len(lines)


def test_member_writer_refuses_lengths_that_do_not_match_the_data(tmp_path):
    with pytest.raises(ValueError, match="line lengths add up"):
        with MemberWriter(str(tmp_path / "x.jsonl.gz"), "gz", 10) as w:
            w.write(b'{"a":1}\n{"b":2}\n', [8, 9])


def check_stream_output(out: Path, texts: dict[str, str], min_shards: int) -> None:
    shards = sorted(out.glob("all-*.jsonl.gz"))
    assert len(shards) >= min_shards
    docs = parse_shards(shards)
    ids = [d["id"] for d in docs]
    assert collections.Counter(ids) == collections.Counter(list(texts)), "every id once"
    assert all(d["text"] == texts[d["id"]] for d in docs)
    # In input order (files by name, then line).
    assert ids == sorted(ids, key=lambda i: (int(i[1 : i.index("-")]), int(i.split("-")[1])))


def stream_config(tmp_path: Path, max_size: int, processes: int) -> dict:
    output = {"path": str(tmp_path / "out"), "max_size_in_bytes": max_size}
    return {
        "streams": [{"name": "all", "documents": [str(tmp_path / "in" / "documents" / "*.gz")], "output": output}],
        "processes": processes,
        "progress": False,
    }


def test_stream_shards_hold_every_document_whole(tmp_path, small_members):
    texts = make_corpus(tmp_path / "in")
    run_mix(stream_config(tmp_path, SHARD_BYTES, 1))
    check_stream_output(tmp_path / "out", texts, min_shards=20)


@pytest.mark.slow
def test_stream_shards_hold_every_document_whole_at_the_stages_own_member_size(tmp_path):
    """The stage's own member size (1 MiB raw for shards up to 4 MB), two processes: 12 MB of text
    that compresses badly, documents up to 1.5 MB (larger than a member and a shard)."""
    texts = make_corpus(tmp_path / "in", files=3, per_file=40, seed=3, sizes=[30, 3000, 200_000, 700_000, 1_500_000])
    run_mix(stream_config(tmp_path, 1_200_000, 2))
    check_stream_output(tmp_path / "out", texts, min_shards=6)


def test_dolmino_seed_shards_hold_every_document_whole(tmp_path, small_members):
    processes = 1
    texts = make_corpus(tmp_path / "in", files=3, per_file=90, seed=1)
    tokenizer = train_tokenizer(tmp_path / "tokenizer.json", list(texts.values())[:100])
    out = tmp_path / "out"
    config = {
        "sources": [{"name": "src", "documents": [str(tmp_path / "in" / "documents" / "*.gz")], "ratio": 1.0, "max_repetition": 3}],
        "output": str(out),
        "tokenizer": tokenizer,
        # More than the source holds, less than three times: two whole repeats and a seeded subset.
        "target_tokens": 1,
        "seeds": [0, 1],
        "max_size_in_bytes": SHARD_BYTES,
        "processes": processes,
        "progress": False,
    }
    stage = MixStage(load_config(MixConfig, None, config))
    summary = run_stage(stage, stream=io.StringIO())
    available = summary.manifest.phase("count").step["plan"][0]["available"]
    config["target_tokens"] = int(available * 2.5)
    summary = run_mix(config)
    plan = summary.manifest.phase("count").step["plan"][0]
    assert plan["whole_repeats"] == 2
    for seed in (0, 1):
        shards = sorted((out / f"seed-{seed}" / "documents").glob("src-*.jsonl.gz"))
        assert len(shards) >= 20
        docs = parse_shards(shards)
        assert all(d["text"] == texts[d["id"]] for d in docs)
        counts = collections.Counter(d["id"] for d in docs)
        assert set(counts) == set(texts) and set(counts.values()) <= {2, 3}
        assert len(docs) == plan["seeds"][str(seed)]["docs"]
