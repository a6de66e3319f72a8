"""Quality buckets of Dolmino sources: exact quantile edges (a brute-force sort agrees), ties in
one bucket, repetition curves (drop, whole repeats, fractions) and their cap, tokens per bucket
within one document of the plan, topics, documents without a score, the same documents for any
process count, on Ray and across reruns, and one clear error per bad key."""

from __future__ import annotations

import collections
import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

from dolma_pipe.config import ConfigError
from dolma_pipe.documents import write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.manifest import read_manifest
from mixers import quality
from mixers.config import QualityConfig, QualityCurveConfig
from mixers.dolmino import MixPlanError
from tests.support.documents import make_docs
from tests.support.mixes import run, seed_docs
from tests.support.outputs import stage_outputs
from tests.support.tokens import train_tokenizer

FILES, PER_FILE = 4, 80
SEEDS = [0, 1, 2]
TOPICS = ("arts", "code", "news")
CURVE = [0.0, 1.0, 1.0, 2.0, 3.5]  # dropped, kept, kept, upsampled, upsampled most


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A 'web' source (several files, varied lengths) with a quality score (ties, two spans on some
    documents, none on a few), topic labels and a drop flag; a plain 'math' source; a tokenizer."""
    root = tmp_path_factory.mktemp("quality")
    rng = random.Random(7)
    texts = []
    for f in range(FILES):
        docs = [d for k in range(4) for d in make_docs(PER_FILE // 4, seed=10 * f + k, words=15 + 20 * k, source=TOPICS[(f + k) % 3])]
        rows = []
        for i, d in enumerate(docs):
            d["id"] = f"web-{f}-{i}"
            score = round(rng.random(), 2)  # 100 values over 320 documents: many ties
            attrs: dict = {"exp__flag__drop": [[0, 1, 1.0]] if i % 9 == 4 else []}
            if i % 23 != 11:  # a few documents have no score
                spans = [[0, 5, score]] + ([[5, 9, 1 - score]] if i % 3 == 0 else [])
                attrs["exp__quality__score"] = spans
            for t in TOPICS:
                attrs[f"exp__topic__{t}"] = [[0, 5, round(rng.random(), 3)]]
            rows.append({"id": d["id"], "attributes": attrs})
        texts += [d["text"] for d in docs]
        write_documents(str(root / "web" / "documents" / f"part-{f}.jsonl.gz"), docs)
        write_documents(str(root / "web" / "attributes" / "q" / f"part-{f}.jsonl.gz"), rows)
    math_docs = make_docs(40, seed=99, words=40, source="math")
    texts += [d["text"] for d in math_docs]
    write_documents(str(root / "math" / "documents" / "part-0.jsonl.gz"), math_docs)
    train_tokenizer(root / "tokenizer.json", texts)
    return root


def spec(corpus: Path, out: Path, web_tokens: int = 16_000, **q) -> dict:
    web = {
        "name": "web",
        "documents": [str(corpus / "web" / "documents" / "*.gz")],
        "attributes": ["q"],
        "filter": {"exclude": ["flag__drop == 1"]},
        "tokens": web_tokens,
        "max_repetition": 3,
        "quality": {"attribute": "quality__score", "buckets": 5, "repetition": CURVE, "missing": "drop", **q},
    }
    math = {"name": "math", "documents": [str(corpus / "math" / "documents" / "*.gz")], "tokens": 1_500}
    return {
        "sources": [web, math],
        "output": str(out),
        "tokenizer": str(corpus / "tokenizer.json"),
        "seeds": SEEDS,
        "max_size_in_bytes": 6000,
        "processes": 1,
        "progress": False,
    }


def web_plan(out: Path) -> dict:
    return {p["name"]: p for p in read_manifest(str(out)).phase("count").step["plan"]}["web"]


@pytest.fixture(scope="module")
def truth(corpus) -> dict[str, dict]:
    """Every web document as the tests see it, by id: score (first span), topic (argmax), source,
    kept (the filter), tokens (the tokenizer, as tokenize counts)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(corpus / "tokenizer.json"))
    out = {}
    for f in range(FILES):
        with gzip.open(corpus / "web" / "documents" / f"part-{f}.jsonl.gz", "rt") as fh:
            docs = [json.loads(line) for line in fh]
        with gzip.open(corpus / "web" / "attributes" / "q" / f"part-{f}.jsonl.gz", "rt") as fh:
            rows = [json.loads(line)["attributes"] for line in fh]
        for d, a in zip(docs, rows):
            spans = a.get("exp__quality__score")
            topics = {t: a[f"exp__topic__{t}"][0][2] for t in TOPICS}
            out[d["id"]] = {
                "score": spans[0][2] if spans else None,
                "max": max(s[2] for s in spans) if spans else None,
                "topic": min(topics, key=lambda t: (-topics[t], t)),
                "source": d["source"],
                "kept": not a["exp__flag__drop"],
                "tokens": len(tok.encode(d["text"].strip(), add_special_tokens=False).ids) + 1,
            }
    return out


def brute_edges(values: list[float], weights: list[int], n: int) -> list[float | None]:
    """Edge b: the lowest score with at least b/n of the weight strictly below it (None: no such score)."""
    total = sum(weights)
    below = {v: sum(w for u, w in zip(values, weights) if u < v) for v in set(values)}
    return [min((v for v in below if below[v] * n >= b * total), default=None) for b in range(1, n)]


def bucket(score: float, edges: list[float | None]) -> int:
    return sum(e is not None and e <= score for e in edges)


@pytest.fixture(scope="module")
def mixed(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mixed") / "out"
    run(spec(corpus, out))
    return out


# ---- edges, buckets and sizes ---------------------------------------------------------------------


def test_edges_equal_a_brute_force_sort_by_documents_and_tokens(corpus, mixed, truth, tmp_path):
    kept = [t for t in truth.values() if t["kept"] and t["score"] is not None]
    plan = web_plan(mixed)["quality"]
    assert plan["edges"] == {"": brute_edges([t["score"] for t in kept], [1] * len(kept), 5)}
    assert plan["missing_docs"] == sum(1 for t in truth.values() if t["kept"] and t["score"] is None) > 0
    docs = collections.Counter(bucket(t["score"], plan["edges"][""]) for t in kept)
    assert [c["docs"] for c in plan["cells"]] == [docs[b] for b in range(5)]
    out = tmp_path / "tokens"
    run(spec(corpus, out, by="tokens", reduce="max"))
    plan = web_plan(out)["quality"]
    assert plan["edges"] == {"": brute_edges([t["max"] for t in kept], [t["tokens"] for t in kept], 5)}


def test_edges_are_exact_and_ties_share_a_bucket():
    rng = np.random.default_rng(3)
    for n_docs, buckets in ((1, 20), (7, 20), (1000, 20), (999, 7), (50, 1)):
        scores = np.round(rng.random(n_docs), 1)  # heavy ties
        weights = rng.integers(1, 500, n_docs)
        for w in (np.ones(n_docs, dtype=np.int64), weights):
            edges = quality.quantile_edges(scores, w, buckets)
            assert quality.edges_json(edges) == brute_edges(scores.tolist(), w.tolist(), buckets)
            b = quality.bucket_of(scores, edges)
            for v in np.unique(scores):
                assert len(set(b[scores == v].tolist())) == 1  # equal scores, one bucket
                assert b[scores == v][0] == (buckets * w[scores < v].sum()) // w.sum()  # floor(N * share below)
            assert np.all(np.diff(b[np.argsort(scores)]) >= 0)  # a higher score, never a lower bucket


def test_factors_of_the_short_curve():
    def factors(buckets: int, **curve) -> list[float]:
        return quality.factors(QualityConfig(attribute="q", buckets=buckets, curve=QualityCurveConfig(**curve)))

    linear = factors(20, drop_below=0.4, top=7)
    assert linear[:8] == [0.0] * 8 and linear[8] == 1 and linear[-1] == 7 and len(linear) == 20
    assert np.allclose(np.diff(linear[8:]), 6 / 11)
    expo = factors(4, drop_below=0.25, bottom=0.5, top=8, shape="exponential")
    assert np.allclose(expo, [0, 0.5, 2, 8])
    assert factors(5, drop_below=0.42, top=2) == [0, 0, 1, 1.5, 2]  # the bucket across 0.42 stays


def test_each_bucket_gets_its_share_within_one_document(corpus, mixed, truth):
    plan = web_plan(mixed)
    q = plan["quality"]
    edges = q["edges"][""]
    avail = [c["available"] for c in q["cells"]]
    scale = plan["requested"] / sum(f * a for f, a in zip(CURVE, avail))
    reps = [c["repetition"] for c in q["cells"]]
    assert reps[0] == 0 and 0 < reps[1] < 1 < reps[3] < 2 < reps[4] <= 3  # drop, subset, whole + fraction
    for s in SEEDS:
        copies = collections.Counter(d["id"] for d in seed_docs(mixed, s, "web"))
        assert all(truth[i]["kept"] and truth[i]["score"] is not None for i in copies)  # filtered and unscored: never
        for b, c in enumerate(q["cells"]):
            assert c["requested"] == round(scale * CURVE[b] * c["available"])
            mine = [i for i, t in truth.items() if t["kept"] and t["score"] is not None and bucket(t["score"], edges) == b]
            assert sum(truth[i]["tokens"] for i in mine) == c["available"]
            taken = sum(copies[i] * truth[i]["tokens"] for i in mine)
            assert taken == c["seeds"][str(s)]["tokens"]
            assert abs(taken - c["requested"]) <= max(truth[i]["tokens"] for i in mine), (b, s)
            whole = c["whole_repeats"]
            assert {copies[i] for i in mine} <= {whole, whole + 1}
            assert c["requested"] == 0 or sum(copies[i] == whole + 1 for i in mine) > 0 or c["remainder"] == 0
        assert sum(c["seeds"][str(s)]["tokens"] for c in q["cells"]) == plan["seeds"][str(s)]["tokens"]
    upper = [{i for i, n in collections.Counter(d["id"] for d in seed_docs(mixed, s, "web")).items() if n == 3} for s in SEEDS]
    assert upper[0] != upper[1] != upper[2]  # seeds pick other subsets


def test_buckets_within_topics(corpus, truth, tmp_path):
    for key, field in (("topic__", "topic"), ("source", "source")):
        out = tmp_path / key
        run(spec(corpus, out, key=key))
        q = web_plan(out)["quality"]
        assert q["topics"] == list(TOPICS)
        for topic in TOPICS:
            kept = [t["score"] for t in truth.values() if t["kept"] and t["score"] is not None and t[field] == topic]
            assert q["edges"][topic] == brute_edges(kept, [1] * len(kept), 5), (key, topic)
            assert sum(c["docs"] for c in q["cells"] if c["topic"] == topic) == len(kept)


def test_missing_scores(corpus, truth, tmp_path):
    with pytest.raises(
        MixPlanError,
        match=r"source 'web' \(sources\.0\): \d+ kept documents .* have no 'exp__quality__score' score\. Fix: set sources\.0\.quality\.missing",
    ):
        run(spec(corpus, tmp_path / "error", missing="error"))
    out = tmp_path / "zero"
    run(spec(corpus, out, missing=0.0))
    q = web_plan(out)["quality"]
    lacking = {i for i, t in truth.items() if t["kept"] and t["score"] is None}
    assert q["missing_docs"] == len(lacking) and q["cells"][0]["low"] is None
    assert q["cells"][0]["docs"] == sum(1 for t in truth.values() if t["kept"] and (t["score"] or 0) < q["edges"][""][0])
    assert not lacking & {d["id"] for d in seed_docs(out, 0, "web")}  # scored 0: the dropped bucket


def test_a_bucket_over_the_cap_names_the_keys_and_the_fix(corpus, tmp_path):
    with pytest.raises(MixPlanError) as err:
        run(spec(corpus, tmp_path / "out", web_tokens=30_000))
    message = str(err.value)
    assert message.startswith("source 'web' (sources.0): bucket 4 would repeat ")
    assert "factor 3.5 of sources.0.quality.repetition" in message and "above sources.0.max_repetition 3" in message
    assert "Fix: raise sources.0.max_repetition to at least" in message
    assert not any((tmp_path / "out").glob("seed-*"))


@pytest.mark.parametrize(
    "change, pattern",
    [
        ({"attribute": "quality__scor"}, r"config key 'sources\.0\.quality\.attribute': unknown attribute 'quality__scor' \(did you mean"),
        ({"key": "topik__"}, r"config key 'sources\.0\.quality\.key': no attribute key starts with 'topik__'"),
        ({"repetition": [1, 2]}, r"config key 'sources\.0\.quality': .*'repetition' lists 2 factors for 5 buckets"),
        ({"repetition": [1, 1, -1, 1, 1]}, r"config key 'sources\.0\.quality': .*'repetition' factors are numbers >= 0"),
        (
            {"curve": {"top": 2, "shpe": "linear"}},
            r"unknown config key 'sources\.0\.quality\.curve\.shpe' \(did you mean 'sources\.0\.quality\.curve\.shape'\?\)",
        ),
        ({"curve": {"top": 2}}, r"config key 'sources\.0\.quality': .*give exactly one of 'repetition' \(a factor per bucket\) or 'curve'"),
        ({"bukets": 5}, r"unknown config key 'sources\.0\.quality\.bukets' \(did you mean 'sources\.0\.quality\.buckets'\?\)"),
        ({"by": "chars"}, r"config key 'sources\.0\.quality\.by'"),
    ],
)
def test_a_bad_key_is_one_clear_error(corpus, tmp_path, change, pattern):
    with pytest.raises(ConfigError, match=pattern):
        run(spec(corpus, tmp_path / "out", **change))


def test_the_plan_shows_every_bucket(corpus, mixed, capsys, tmp_path):
    run(spec(corpus, tmp_path / "out"))
    err = capsys.readouterr().err
    assert "web: 5 quality buckets of exp__quality__score (first span, quantiles by documents); " in err
    q = web_plan(mixed)["quality"]
    first = q["cells"][0]
    assert f"[-inf, {first['high']:.6g})" in err and f"[{q['cells'][-1]['low']:.6g}, +inf)" in err


# ---- the same documents wherever and however often it runs --------------------------------------


def strip(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if not k.startswith("_cache")}


def test_same_bytes_for_two_processes_and_a_rerun(corpus, mixed, tmp_path):
    out = tmp_path / "out"
    config = spec(corpus, out)
    config["processes"] = 2
    run(config)
    assert strip(stage_outputs(out)) == strip(stage_outputs(mixed))
    again = run(config)
    assert all(r.skipped for r in again.results)


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_bytes_on_ray(self, corpus, mixed, tmp_path, ray_address):
        out = tmp_path / "out"
        config = spec(corpus, out)
        config |= {"processes": 2, "ray_address": ray_address}
        with RayExecutor(2, ray_address) as ex:
            run(config, executor=ex)
        assert strip(stage_outputs(out)) == strip(stage_outputs(mixed))
