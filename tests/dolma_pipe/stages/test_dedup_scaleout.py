"""dedup's MinHash clusters past ``minhash.cluster_memory``: rounds of hash-range tasks
(large-star / small-star) give the single task's clusters, survivors and bytes, for any number
of processes, on Ray and after a kill; the algorithm against union-find on random graphs."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

from dolma_pipe.config import ConfigError, load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.manifest import read_manifest
from dolma_pipe.stages.dedup import DedupConfig
from dolma_pipe.stages.dedup import components as cc
from tests.support.dedup import kill_in_phase, run

CHAIN = 14


def _words(rng: random.Random, n: int) -> list[str]:
    return [f"w{rng.randrange(50_000)}" for _ in range(n)]


def _edit(words: list[str], edits: int, rng: random.Random) -> list[str]:
    out = list(words)
    for _ in range(edits):
        out[rng.randrange(len(out))] = f"x{rng.randrange(10**9)}"
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Four files: near-duplicate clusters of 2, 3, 4 and 6 documents, a chain of CHAIN
    documents each a near copy of the one before (ends far apart: it needs several steps), and
    singletons, shuffled over the files."""
    root = tmp_path_factory.mktemp("scaleout")
    rng = random.Random(11)
    docs: list[dict] = []
    for c, size in enumerate((2, 3, 4, 6, 2, 3)):
        base = _words(rng, 300)
        docs += [{"id": f"c{c}-{k}", "text": " ".join(_edit(base, 2, rng))} for k in range(size)]
    words = _words(rng, 300)
    for k in range(CHAIN):
        docs.append({"id": f"chain-{k}", "text": " ".join(words)})
        words = _edit(words, 4, rng)
    docs += [{"id": f"single-{k}", "text": " ".join(_words(rng, 200))} for k in range(30)]
    rng.shuffle(docs)
    for f in range(4):
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), docs[f::4])
    return root


def _config(corpus: Path, out: Path, processes: int = 1, **minhash) -> dict:
    return {
        "documents": [f"{corpus}/documents/*"],
        "dedupe": {"name": "near"},
        "minhash": {"threshold": 0.8, **minhash},
        "destination": str(out),
        "processes": processes,
        "progress": False,
    }


def _outputs(out: Path) -> dict[str, bytes]:
    """The clusters file and the attribute files."""
    root = out / "near"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.gz"))}


def _ran(out: Path) -> dict[str, int]:
    return {p.name: len(p.tasks) for p in read_manifest(str(out / "near")).phases if p.tasks}


# A budget that the corpus's 42 kept pairs exceed: 6 hash ranges (512 bytes a pair), 4 file groups.
TINY = 4096
PARTS = 6


@pytest.fixture(scope="module")
def single(corpus, tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path_factory.mktemp("single")
    run(_config(corpus, out))
    return out, _outputs(out)


def test_the_corpus_has_every_kind_of_cluster(single):
    out, outputs = single
    rows = [json.loads(line) for line in gzip.open(out / "near" / "_clusters.jsonl.gz")]
    sizes = sorted({r["size"] for r in rows})
    assert sizes == [2, 3, 4, 6, CHAIN], sizes
    chain = [r for r in rows if r["id"].startswith("chain-")]
    assert len(chain) == CHAIN and len({r["cluster"] for r in chain}) == 1
    assert "clusters" in _ran(out) and "graph" not in _ran(out)


@pytest.mark.parametrize("processes", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_scaled_out_clusters_are_the_single_tasks(corpus, single, tmp_path, processes):
    run(_config(corpus, tmp_path, processes, cluster_memory=TINY))
    assert _outputs(tmp_path) == single[1]
    ran = _ran(tmp_path)
    assert "clusters" not in ran and ran["graph"] >= 1 and ran["star-01"] == PARTS and ran["clusters-file"] == 1
    steps = [name for name in ran if name.startswith("star-")]
    assert len(steps) >= 3, steps  # the chain needs several rounds
    results = read_manifest(str(tmp_path / "near")).results
    single_results = read_manifest(str(single[0] / "near")).results
    assert results["clusters"] == single_results["clusters"]


@pytest.mark.slow
def test_killed_mid_steps_resumes_to_the_same_bytes(corpus, single, tmp_path):
    cfg = _config(corpus, tmp_path, 2, cluster_memory=TINY)
    done = kill_in_phase(cfg, tmp_path / "near", "star-02")
    assert done < PARTS
    summary = run(cfg)
    assert _outputs(tmp_path) == single[1]
    phases = {p.name: p for p in summary.manifest.phases}
    skipped = [r for r in phases["star-01"].tasks.values() if r.skipped]
    assert len(skipped) == PARTS, "the finished step is not redone"


def test_cluster_memory_is_checked_at_load(corpus, tmp_path):
    with pytest.raises(ConfigError, match="cluster_memory"):
        load_config(DedupConfig, None, _config(corpus, tmp_path, cluster_memory=0))


def _union_find(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int, int]]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in zip(a.tolist(), b.tolist()):
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    roots = {x: find(x) for x in parent}
    size: dict[int, int] = {}
    for r in roots.values():
        size[r] = size.get(r, 0) + 1
    return sorted((r, x, size[r]) for x, r in roots.items() if size[r] > 1 or x != r)


def _ids(rng: np.random.Generator, n: int) -> np.ndarray:
    """Node ids as the stage makes them: (file << 32) | document."""
    return (rng.integers(0, 6, n).astype(np.uint64) << np.uint64(32)) | rng.integers(0, 5000, n).astype(np.uint64)


def test_star_steps_match_union_find_on_random_graphs():
    rng = np.random.default_rng(5)
    for _ in range(40):
        n, m = int(rng.integers(2, 400)), int(rng.integers(1, 500))
        ids = _ids(rng, n)
        a, b = ids[rng.integers(0, n, m)], ids[rng.integers(0, n, m)]
        want = [r for r in _union_find(a, b) if r[2] > 1]
        for parts in (1, 2, 5):
            survivor, node, size, _ = cc.components(a, b, parts)
            assert list(zip(survivor.tolist(), node.tolist(), size.tolist())) == want


def test_a_chain_in_input_order_takes_logarithmic_steps():
    # The worst case for an unmixed order: every document linked to the next one.
    for n in (10, 1000, 20_000):
        chain = np.arange(n, dtype=np.uint64) + (np.uint64(3) << np.uint64(32))
        survivor, node, size, steps = cc.components(chain[:-1], chain[1:], 3)
        assert (survivor == chain[0]).all() and (node == chain).all() and (size == n).all()
        assert steps <= 2 + 2 * np.log2(n), (n, steps)


def test_mix_is_a_bijection():
    x = np.random.default_rng(1).integers(0, 2**63, 10_000, dtype=np.uint64)
    assert (cc.unmix(cc.mix(x)) == x).all() and len(np.unique(cc.mix(x))) == len(x)


@pytest.mark.slow
def test_unverified_pairs_from_several_buckets(corpus, tmp_path):
    one, scaled = tmp_path / "one", tmp_path / "scaled"
    run({**_config(corpus, one, verify="none"), "buckets": 2})
    run({**_config(corpus, scaled, 2, verify="none", cluster_memory=TINY), "buckets": 2})
    assert _outputs(scaled) == _outputs(one)
    assert _ran(scaled)["graph"] == 2  # one task per bucket of candidate pairs


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    @pytest.mark.slow
    def test_scaled_out_on_ray(self, corpus, single, tmp_path, ray_address):
        run({**_config(corpus, tmp_path, 2, cluster_memory=TINY), "ray_address": ray_address})
        assert _outputs(tmp_path) == single[1]
