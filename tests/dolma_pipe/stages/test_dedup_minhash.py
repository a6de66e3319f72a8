"""dedup's MinHash near-duplicates: precision and recall on planted near copies of real text
against the exact Jaccard of every pair, clusters with the first document as survivor, scripts
written without spaces, and each verification mode."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path

import pytest

from dolma_pipe.documents import write_documents
from dolma_pipe.manifest import read_manifest
from dolma_pipe.minhash import MinHasher
from tests.support.dedup import attribute_rows, documents_in_order, near_copy, near_corpus, run
from tests.support.documents import sample_rows
from tests.support.outputs import stage_outputs

THRESHOLD = 0.8


def _config(corpus: Path, out: Path, **minhash) -> dict:
    return {
        "documents": [f"{corpus}/documents/*"],
        "dedupe": {"name": "near"},
        "minhash": {"threshold": THRESHOLD, **minhash},
        "destination": str(out),
        "processes": 2,
        "progress": False,
    }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[tuple[str, str]], set[tuple[str, str]]]:
    """Real documents with planted near copies, and every pair of true Jaccard >= THRESHOLD
    (exact, over all pairs, with the stage's own shingles: lower-cased word 5-grams)."""
    root = tmp_path_factory.mktemp("near")
    planted = near_corpus(root)
    docs = documents_in_order(root)
    mh = MinHasher(8)
    sets = [set(mh.shingle_set(d["text"])) for d in docs]
    truth = set()
    for i, j in itertools.combinations(range(len(docs)), 2):
        a, b = sets[i], sets[j]
        if min(len(a), len(b)) < THRESHOLD * max(len(a), len(b)):
            continue  # the Jaccard is at most |small| / |large|
        inter = len(a & b)
        if inter / (len(a) + len(b) - inter) >= THRESHOLD:
            truth.add((docs[i]["id"], docs[j]["id"]))
    return root, planted, truth


def _cluster_pairs(out: Path) -> tuple[set[tuple[str, str]], list[dict]]:
    rows = [json.loads(line) for line in gzip.open(out / "near" / "_clusters.jsonl.gz")]
    by: dict[int, list[str]] = {}
    for r in rows:
        by.setdefault(r["cluster"], []).append(r["id"])
    return {tuple(p) for ids in by.values() for p in itertools.combinations(ids, 2)}, rows


def _order(corpus: Path) -> dict[str, int]:
    return {d["id"]: i for i, d in enumerate(documents_in_order(corpus))}


def _pairs_in_order(pairs: set, order: dict[str, int]) -> set[tuple[str, str]]:
    return {tuple(sorted(p, key=order.__getitem__)) for p in pairs}


def test_precision_and_recall_on_planted_near_copies(corpus, tmp_path):
    root, planted, truth = corpus
    assert len(truth) >= 20, "the copies with up to 2% of words edited are about at or above the threshold"
    run(_config(root, tmp_path))
    order = _order(root)
    found, rows = _cluster_pairs(tmp_path)
    found, truth = _pairs_in_order(found, order), _pairs_in_order(truth, order)
    tp = len(found & truth)
    precision, recall = tp / max(len(found), 1), tp / len(truth)
    assert precision >= 0.95 and recall >= 0.95, (precision, recall, len(found), len(truth))
    # Planted copies far below the threshold (40% of words replaced) are not clustered.
    far = {c for o, c in planted if c.endswith(tuple(f"near{j}" for j in range(5, 60, 6)))}
    assert far and not far & {r["id"] for r in rows}
    # Each cluster's survivor is its first document in the global order, listed first.
    for _cluster, members in itertools.groupby(rows, key=lambda r: r["cluster"]):
        members = list(members)
        first = min(members, key=lambda r: order[r["id"]])
        assert members[0] is first and first["survivor"] and all(not m["survivor"] for m in members[1:])
        assert all(m["survivor_id"] == first["id"] and m["size"] == len(members) for m in members)
    # The attribute marks every member but the survivor.
    marked = {d["id"] for d, a in attribute_rows(root, "near", destination=tmp_path).values() if a.get("minhash_duplicate")}
    assert marked == {r["id"] for r in rows if not r["survivor"]}
    manifest = read_manifest(str(tmp_path / "near"))
    assert manifest.results["parameters"]["minhash"] == {"bands": 10, "rows": 6, "hashes": 60}
    assert manifest.results["phases"]["clusters"]["counts"]["clusters"] == len({r["cluster"] for r in rows})


@pytest.mark.parametrize("verify", ["signature", "none"])
def test_other_verification_modes(corpus, tmp_path, verify):
    root, _, truth = corpus
    run(_config(root, tmp_path, verify=verify))
    order = _order(root)
    found, _ = _cluster_pairs(tmp_path)
    found, truth = _pairs_in_order(found, order), _pairs_in_order(truth, order)
    tp = len(found & truth)
    assert tp / len(truth) >= 0.9 and tp / max(len(found), 1) >= 0.85, (verify, tp, len(found), len(truth))
    phases = [p.name for p in read_manifest(str(tmp_path / "near")).phases]
    assert ("verify" in phases) == (verify != "none")


def test_same_bytes_for_one_and_three_processes(corpus, tmp_path):
    root, _, _ = corpus
    one, three = tmp_path / "one", tmp_path / "three"
    run({**_config(root, one), "processes": 1, "buckets": 2})
    run({**_config(root, three), "processes": 3, "buckets": 2})
    assert stage_outputs(one / "near") == stage_outputs(three / "near")


def test_unspaced_scripts_are_shingled_by_character(tmp_path):
    chinese = [r for r in sample_rows("debian-handbook/*") if sum("\u4e00" <= c <= "\u9fff" for c in r["text"]) > 300][:6]
    assert len(chinese) == 6
    mh = MinHasher(8)
    words = mh.words_of(chinese[0]["text"])
    assert sum(len(w) == 1 and "\u4e00" <= w <= "\u9fff" for w in words) > 300, "each Han character is a word"
    rng = random.Random(1)
    docs = list(chinese)
    for j, r in enumerate(chinese[:3]):
        chars = list(r["text"])
        for _ in range(len(chars) // 400):  # a quarter of a percent of the characters changed
            chars[rng.randrange(len(chars))] = "字"
        docs.append({**r, "id": f"{r['id']}|copy{j}", "text": "".join(chars)})
    write_documents(str(tmp_path / "documents" / "zh.jsonl.gz"), docs)
    run(_config(tmp_path, tmp_path / "out"))
    _, rows = _cluster_pairs(tmp_path / "out")
    survivor_of = {r["id"]: r["survivor_id"] for r in rows}
    for j, r in enumerate(chinese[:3]):
        assert mh.jaccard(r["text"], docs[6 + j]["text"]) >= THRESHOLD
        assert survivor_of[f"{r['id']}|copy{j}"] == survivor_of[r["id"]] == r["id"]


def test_documents_without_words_are_left_alone(tmp_path):
    texts = ["", "   ", "!!! ... ???", "the same short text", "the same short text"]
    write_documents(str(tmp_path / "documents" / "a.jsonl"), [{"id": str(i), "text": t} for i, t in enumerate(texts)])
    summary = run(_config(tmp_path, tmp_path / "out"))
    assert summary.totals["documents_without_shingles"] == 3
    rows = attribute_rows(tmp_path, "near", destination=tmp_path / "out")
    assert [bool(a.get("minhash_duplicate")) for _, a in rows.values()] == [False, False, False, False, True]


def test_near_copy_helper_edits_words():
    rng = random.Random(0)
    text = " ".join(f"w{i}" for i in range(200))
    assert near_copy(text, 0.0, rng) == text
    assert MinHasher(8).jaccard(text, near_copy(text, 0.05, rng)) < 1.0
