"""``dolma-pipe index`` and ``query``: counts, documents found and traced spans against brute-force
scans, on real ``tokenize`` shards (several shards, parts of shards) and on documents (multi-byte
UTF-8, documents shorter than the n-gram); a changed shard refused; a killed build resumed; the
same index for any process count and on Ray; contamination counts; the command line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from dolma_pipe.manifest import read_manifest
from dolma_pipe.stages.index import Index, IndexQueryError
from dolma_pipe.stages.index import stage as index_stage
from tests.support.cli import run_cli
from tests.support.index import (
    EOS,
    index_config,
    planted_documents,
    run_index,
    scan_count,
    scan_longest,
    shard_documents,
    text,
    tokenize_corpus,
    write_corpus,
)
from tests.support.outputs import done_markers, stage_outputs
from tests.support.processes import kill_when


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[list[dict]]]:
    root = tmp_path_factory.mktemp("index")
    files = planted_documents()
    tokenize_corpus(root, files)
    return root, files


@pytest.fixture(scope="module")
def token_index(corpus) -> Path:
    root, _ = corpus
    out = root / "index"
    run_index(index_config(out, shards=[str(root / "tokens" / "train")]))
    return out


def _patterns(docs: list[list[int]], rng: random.Random, n: int) -> list[list[int]]:
    """N-grams drawn from the documents (some ending with EOS, some holding it inside), and
    n-grams of the corpus's own tokens that occur nowhere."""
    out = []
    for _ in range(n):
        d = rng.choice([d for d in docs if len(d) > 2])
        k = rng.randrange(1, min(12, len(d)) + 1)
        p = rng.randrange(len(d) - k + 1)
        out.append(d[p : p + k])
    out += [d[-3:] + docs[0][:2] for d in docs[:5]]  # across a document's end: never counted
    vocab = sorted({t for d in docs for t in d})
    out += [[rng.choice(vocab) for _ in range(rng.randrange(3, 8))] for _ in range(n // 4)]
    return out


@pytest.mark.parametrize("split", [False, True])
def test_token_counts_and_documents_match_a_scan(corpus, token_index, tmp_path, monkeypatch, split):
    root, _ = corpus
    out = token_index
    if split:
        # The least memory a config takes as if a token took 2,000 bytes: parts of about 520
        # tokens, so every shard (1,500 tokens) is indexed in several.
        monkeypatch.setitem(index_stage.MEMORY_PER_SYMBOL, "u16", 2000)
        out = tmp_path / "split"
        run_index(index_config(out, shards=[str(root / "tokens" / "train")], memory_per_task=1 << 20))
    index = Index(str(out))
    docs = shard_documents(root / "tokens")
    token_docs = [t for _, t in docs]
    shards = len(index.info.sources)
    assert shards >= 3 and (len(index.parts) >= 2 * shards) == split
    assert index.info.documents == len(docs) and index.info.symbols == sum(map(len, token_docs))
    rng = random.Random(1)
    patterns = _patterns(token_docs, rng, 300)
    assert [index.count(p) for p in patterns] == [scan_count(token_docs, p) for p in patterns]
    assert sum(index.count(p) > 1 for p in patterns) > 50  # repeats within and across shards
    for p in patterns[:60]:
        hits = index.find(p, limit=1000)
        want = sorted(i for i, d in docs for q in range(len(d) - len(p) + 1) if d[q : q + len(p)] == p)
        assert sorted(h.id for h in hits) == want
        for h in hits:
            tokens = dict(docs)[h.id]
            assert tokens[h.offset : h.offset + len(p)] == p


def test_counts_of_text_use_the_index_tokenizer(corpus, token_index):
    root, files = corpus
    index = Index(str(token_index))
    docs = [t for _, t in shard_documents(root / "tokens")]
    phrase = files[0][0]["text"].split(" ")
    for words in (1, 3, 8):
        query = " ".join(phrase[:words])
        ids = index.tokenizer.encode(query, add_special_tokens=False).ids
        assert index.count(query) == index.count(ids) == scan_count(docs, ids) >= 1
    assert index.count("zzzz qqqq") == 0
    assert index.count([EOS]) == len(docs)  # one EOS ends every document


def test_trace_spans_match_a_scan(corpus, token_index):
    root, files = corpus
    index = Index(str(token_index))
    docs = [t for _, t in shard_documents(root / "tokens")]
    rng = random.Random(3)
    seen = files[1][5]["text"] + " " + files[2][9]["text"]
    # files[0][2] repeats its own start: a span found twice.
    query_text = f"{text(rng, 8)} {seen[:300]} qqq zzz {files[0][3]['text'][:200]} xyz {files[0][2]['text'][:60]}"
    query = index.encode(query_text)
    spans = index.trace(query_text, min_length=6, docs=2)
    best = [scan_longest(docs, query, i) for i in range(len(query))]
    want, reach = [], 0
    for i, m in enumerate(best):
        if m >= 6 and i + m > reach:
            want.append((i, i + m))
            reach = i + m
    assert sorted((s.start, s.end) for s in spans) == want and len(want) >= 2
    for s in spans:
        assert s.count == scan_count(docs, query[s.start : s.end]) >= 1
        assert 1 <= len(s.documents) <= min(2, s.count)
        assert s.text == index.decode(query[s.start : s.end])
    probs = [s.unigram_log10_probability for s in spans]
    assert probs == sorted(probs)  # the least likely first
    # Common spans left out before the maximal ones are kept (infini-gram's attribute, max_cnt).
    cap = 1
    want, reach = [], 0
    for i, m in enumerate(best):
        if m >= 6 and i + m > reach and scan_count(docs, query[i : i + m]) <= cap:
            want.append((i, i + m))
            reach = i + m
    rare = index.trace(query_text, min_length=6, max_count=cap)
    assert sorted((s.start, s.end) for s in rare) == want and all(s.count <= cap for s in rare) and len(rare) < len(spans)


def test_document_index_of_utf8_bytes(corpus, tmp_path, monkeypatch):
    """Bytes of text: multi-byte characters, documents shorter than the n-gram, repeats across
    files and parts; the documents found are the scan's, with their lines."""
    root, files = corpus
    monkeypatch.setitem(index_stage.MEMORY_PER_SYMBOL, "u8", 500)  # parts of about 2 KB
    out = tmp_path / "docs-index"
    summary = run_index(index_config(out, documents=[str(root / "documents" / "*.gz")], memory_per_task=1 << 20))
    index = Index(str(out))
    assert len(index.parts) > len(files) and summary.manifest.results["documents"] == sum(map(len, files))
    texts = [d["text"].encode() for rows in files for d in rows]
    rng = random.Random(4)
    patterns = []
    for _ in range(300):
        b = rng.choice(texts)
        k = rng.randrange(1, 40)
        p = rng.randrange(max(1, len(b) - k + 1))
        patterns.append(b[p : p + k])
    patterns += ["日本語".encode(), "größe naïve".encode(), b"\xa5", texts[0][-4:] + b"\xff" + texts[1][:3], b"absent text"]
    assert [index.count(p) for p in patterns] == [scan_count(texts, p) for p in patterns]
    short = next(d for rows in files for d in rows if len(d["text"]) < 10)
    hits = index.find(short["text"], limit=10_000)
    assert short["id"] in {h.id for h in hits}
    line = {d["id"]: (f, i + 1) for f, rows in enumerate(files) for i, d in enumerate(rows)}
    for h in index.find("日本語", limit=10_000):
        f, n = line[h.id]
        assert h.src.endswith(f"part-{f}.jsonl.gz") and h.loc == n and "日本語" in h.snippet
    spans = index.trace(files[2][7]["text"] + " unseen words here", min_length=20)
    assert spans and spans[0].count >= 1


def test_a_changed_shard_is_refused(corpus, tmp_path):
    root, _ = corpus
    tokens = tmp_path / "tokens"
    import shutil

    shutil.copytree(root / "tokens", tokens)
    out = tmp_path / "index"
    run_index(index_config(out, shards=[str(tokens / "train")]))
    assert Index(str(out)).count([EOS]) > 0
    shard = sorted((tokens / "train").glob("*.npy"))[1]
    data = bytearray(shard.read_bytes())
    data[10], data[11] = data[11], data[10] ^ 1  # same size, other tokens
    shard.write_bytes(bytes(data))
    with pytest.raises(IndexQueryError, match=rf"{shard} changed since the index .* was built from it"):
        Index(str(out))
    r = run_cli("query", "--index", str(out), "--count", "the")
    assert r.returncode == 1 and f"{shard} changed since" in r.stderr and "Traceback" not in r.stderr
    redone = run_index(index_config(out, shards=[str(tokens / "train")]))  # a rerun redoes that shard only
    assert sum(not r.skipped for r in redone.results) == 1
    assert Index(str(out)).count([EOS]) > 0


def test_killed_build_resumes(corpus, token_index, tmp_path):
    root, _ = corpus
    out = tmp_path / "index"
    cfg = index_config(out, shards=[str(root / "tokens" / "train")])
    markers = out / "_done"  # the one phase's markers
    kill_when("tests.support.index", [json.dumps(cfg), "0.7"], lambda: bool(done_markers(markers, recursive=True)))
    done = len(done_markers(markers, recursive=True))
    assert read_manifest(str(out)).status == "running" and not (out / "index.json").exists()
    with pytest.raises(IndexQueryError, match="no index here"):
        Index(str(out))
    summary = run_index(cfg)
    assert sum(r.skipped for r in summary.results) == done < len(summary.results)
    assert stage_outputs(out) == stage_outputs(token_index)


@pytest.mark.parametrize("processes", [2])
def test_same_index_for_any_process_count(corpus, token_index, tmp_path, processes):
    root, _ = corpus
    out = tmp_path / "index"
    run_index(index_config(out, shards=[str(root / "tokens" / "train")], processes=processes))
    assert stage_outputs(out) == stage_outputs(token_index)


def test_contamination_counts(corpus, tmp_path):
    root, files = corpus
    rng = random.Random(9)
    leaked = [{"id": f"e{i}", "text": files[i % 3][i]["text"]} for i in range(6) if len(files[i % 3][i]["text"]) > 80]
    clean = [{"id": f"c{i}", "text": "Lorem ipsum dolor sit amet " + str(rng.random())} for i in range(4)]
    evals = tmp_path / "evals"
    write_corpus(evals, [leaked, clean])
    out = tmp_path / "index"
    n = 20
    summary = run_index(
        index_config(
            out, documents=[str(root / "documents" / "*.gz")], contamination={"evaluation": [str(evals / "documents" / "*")], "ngram": n}
        )
    )
    found = summary.manifest.results["contamination"]
    texts = [d["text"].encode() for rows in files for d in rows]
    for rel, rows in (("part-0.jsonl.gz", leaked), ("part-1.jsonl.gz", clean)):
        grams = [d["text"].encode()[p : p + n] for d in rows for p in range(len(d["text"].encode()) - n + 1)]
        hits = sum(scan_count(texts, g) > 0 for g in grams)
        assert found[rel]["ngrams"] == len(grams) and found[rel]["found"] == hits
    assert found["part-0.jsonl.gz"]["documents_with_any"] == len(leaked) and found["part-1.jsonl.gz"]["found"] == 0


def test_query_command(corpus, token_index):
    root, files = corpus
    phrase = " ".join(files[0][0]["text"].split(" ")[:4])
    r = run_cli("query", "--index", str(token_index), "--count", phrase, "--output", "jsonl", check=True)
    assert json.loads(r.stdout) == {"query": phrase, "count": Index(str(token_index)).count(phrase)}
    r = run_cli("query", "--index", str(token_index), "--trace", files[1][5]["text"][:200] + " qqq", "--min_length", "4", check=True)
    assert "span(s) found verbatim in the corpus" in r.stdout and "f1-5" in r.stdout
    r = run_cli("query", "--index", str(token_index), "--find", phrase, "--output", "jsonl", check=True)
    assert "f0-0" in {json.loads(line)["id"] for line in r.stdout.splitlines()}
    r = run_cli("query", "--index", str(root / "nowhere"), "--count", "x")
    assert r.returncode == 1 and "no index here" in r.stderr


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_index_on_ray(self, corpus, token_index, tmp_path, ray_address):
        from dolma_pipe.executors import RayExecutor

        root, _ = corpus
        out = tmp_path / "index"
        with RayExecutor(2, ray_address) as ex:
            run_index(index_config(out, shards=[str(root / "tokens" / "train")], processes=2, ray_address=ray_address), executor=ex)
        assert stage_outputs(out) == stage_outputs(token_index)
