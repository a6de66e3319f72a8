"""``dolma-pipe mix-search``: pools, proxy data, mixtures, the regression, and whole searches.

The corpus has a planted answer: source ``good`` is drawn from the same motifs as the ``target``
domain's held-out documents, ``noise`` is uniform random tokens (it can only hurt), ``other`` is
drawn from other motifs (its own domain). A swarm over them must learn that ``good`` helps the
target and propose more of it than the uniform mixture and the prior.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from dolma_pipe.config import ConfigError
from mixers.search import mixtures, regression
from mixers.search.config import MixSearchConfig
from mixers.search.pools import read_pool, take, write_proxy_data
from tests.support.outputs import done_markers
from tests.support.processes import kill_when
from train.shards import read_shard, shard_name

pytestmark = pytest.mark.train

VOCAB = 128
EOS = 0


def _motifs(seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB, size=int(rng.integers(4, 8))).tolist() for _ in range(6)]


def _docs(kind: str, n: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(20, 90))
        if kind == "noise":
            out.append(rng.integers(1, VOCAB, size=length).tolist())
        else:
            motifs = _motifs(1 if kind == "good" else 2)
            doc: list[int] = []
            while len(doc) < length:
                doc += motifs[int(rng.integers(0, len(motifs)))]
            out.append(doc[:length])
    return out


def _write(folder: Path, docs: list[list[int]], shards: int, src: str) -> None:
    from train.shards import ShardWriter

    per = -(-len(docs) // shards)
    for s in range(shards):
        with ShardWriter(folder / f"{shard_name(s)}.npy", vocab_size=VOCAB, eos_id=EOS) as w:
            for i, d in enumerate(docs[s * per : (s + 1) * per]):
                w.add(d, id=f"{src}-{s}-{i}", src=src, loc=i)


def make_corpus(root: Path) -> dict[str, Path]:
    """Three sources (two shards each) and two evaluation domains; returns their folders."""
    out = {}
    for kind, seed in [("good", 10), ("noise", 11), ("other", 12)]:
        _write(root / kind / "train", _docs(kind, 240, seed), 2, kind)
        out[kind] = root / kind / "train"
    _write(root / "target" / "val", _docs("good", 40, 99), 1, "target")
    _write(root / "other" / "val", _docs("other", 40, 98), 1, "other-val")
    out["target_val"] = root / "target" / "val"
    out["other_val"] = root / "other" / "val"
    return out


def train_config(path: Path) -> Path:
    cfg = {
        "model": {"preset": "tiny", "vocab_size": VOCAB, "d_model": 32, "n_layers": 1, "n_heads": 2, "max_seq_len": 64},
        "data": {"seq_len": 64, "eos_id": EOS},
        "train": {"global_batch_size": 8, "micro_batch_size": 8, "precision": "fp32"},
        "optim": {"lr": 1.0e-2},
        "schedule": {"kind": "cosine", "warmup_steps": 2},
        "log": {"interval": 5},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def search_spec(root: Path, corpus: dict[str, Path], **extra) -> dict:
    spec = {
        "method": "swarm",
        "output": str(root / "search"),
        "processes": 1,
        "progress": False,
        "sources": [{"name": k, "paths": [str(corpus[k])]} for k in ("good", "noise", "other")],
        "eval": {"domains": {"target": [str(corpus["target_val"])], "other": [str(corpus["other_val"])]}, "max_instances": 64},
        "proxy": {"config": str(train_config(root / "proxy.yaml")), "tokens": 8192},
        "swarm": {"runs": 8, "seed": 3},
        "fit": {"objective": {"target": 1.0}, "regression": "linear", "candidates": 2000, "top_k": 8},
    }
    for k, v in extra.items():
        spec[k] = {**spec.get(k, {}), **v} if isinstance(v, dict) else v
    return spec


def run_search(spec: dict, path: Path) -> int:
    from dolma_pipe.cli import main

    path.write_text(yaml.safe_dump(spec))
    return main(["mix-search", "-c", str(path)])


# ---- pools and proxy data ----------------------------------------------------------------------


def test_take_gives_requested_tokens_within_one_document_and_nests_across_requests(tmp_path):
    corpus = make_corpus(tmp_path)
    pool = read_pool("good", [str(corpus["good"])])
    assert len(pool.keys) == 240 and len(pool.shards) == 2
    biggest = int(pool.tokens.max())
    previous = None
    for requested in (500, 3000, pool.available, pool.available + 1234, 2 * pool.available + 77):
        t = take(pool, requested, seed=5)
        assert abs(t.tokens - requested) <= biggest
        assert t.whole == requested // pool.available
        if previous is not None and previous.whole == t.whole:
            assert not np.any(previous.subset & ~t.subset)  # a larger request takes a superset
        previous = t
    # the seed, not the order of the shards, picks the documents
    reordered = read_pool("good", [str(corpus["good"] / f"{shard_name(1)}.npy"), str(corpus["good"] / f"{shard_name(0)}.npy")])
    a, b = take(pool, 3000, 5), take(reordered, 3000, 5)
    assert set(pool.keys[a.subset].tolist()) == set(reordered.keys[b.subset].tolist())
    assert set(pool.keys[take(pool, 3000, 6).subset].tolist()) != set(pool.keys[a.subset].tolist())


def test_proxy_data_holds_the_taken_documents_tokens_for_tokens(tmp_path):
    corpus = make_corpus(tmp_path)
    pools = [read_pool(n, [str(corpus[n])]) for n in ("good", "noise")]
    takes = [take(pools[0], pools[0].available + 400, 1), take(pools[1], 0, 1)]
    written = write_proxy_data(tmp_path / "proxy", pools, takes, vocab_size=VOCAB, eos_id=EOS, dtype=np.dtype(np.uint16))
    assert [p.name for p in written] == ["good-00000.npy"]  # nothing taken of noise: no shard
    shard = read_shard(written[0], np.uint16, eos_id=EOS)
    assert shard.n_tokens == takes[0].tokens
    originals = {}
    for p, _ in [(Path(s), None) for s in pools[0].shards]:
        sh = read_shard(p, np.uint16)
        for i, d in enumerate(sh.docs):
            originals[d.id] = sh.document(i).tolist()
    got = [shard.document(i).tolist() for i in range(len(shard.docs))]
    # every document once (the whole repeat), then the subset: each a copy of an original
    assert len(got) == 240 + int(takes[0].subset.sum())
    assert sorted(map(tuple, got[:240])) == sorted(map(tuple, originals.values()))


# ---- mixtures and the regression -----------------------------------------------------------


def test_sampled_mixtures_are_seeded_and_within_caps():
    available = np.array([1000.0, 200.0, 5000.0])
    cap = mixtures.caps(available, np.array([1.0, 2.0, 1.0]), 1000)
    assert cap.tolist() == [1.0, 0.4, 1.0]
    center = mixtures.prior({}, ["a", "b", "c"], available)
    a = mixtures.sample(np.random.default_rng(0), center, 1.0, 50, cap, "swarm")
    b = mixtures.sample(np.random.default_rng(0), center, 1.0, 50, cap, "swarm")
    assert np.array_equal(a, b) and a.shape == (50, 3)
    assert np.all(a[:, 1] <= 0.4 + 1e-12) and np.allclose(a.sum(axis=1), 1)
    with pytest.raises(ConfigError, match="max_repetition"):
        mixtures.sample(np.random.default_rng(0), center, 1.0, 5, np.array([0.1, 0.1, 0.1]), "swarm")
    d = mixtures.as_dict(np.array([0.3333333, 0.3333333, 0.3333334]), ["a", "b", "c"], digits=3)
    assert sum(d.values()) == pytest.approx(1.0, abs=1e-12) and sorted(d.values()) == [0.333, 0.333, 0.334]


def test_regression_recovers_a_planted_effect_and_proposes_within_caps():
    rng = np.random.default_rng(0)
    x = rng.dirichlet(np.ones(3), size=24)
    # domain 0 improves with source 0, is hurt by source 1; domain 1 improves with source 2
    y = np.stack([3.0 - 1.0 * x[:, 0] + 0.8 * x[:, 1], 2.5 - 0.7 * x[:, 2]], axis=1) + rng.normal(0, 0.01, size=(24, 2))
    objective = np.array([1.0, 0.0])
    for kind in ("linear", "loglinear", "quadratic", "gbm"):
        f = regression.fit(kind, x, y, ["t", "o"], objective, 5, 0)
        assert f.spearman["t"] > 0.8 and f.spearman["objective"] > 0.8, kind
    f = regression.fit("linear", x, y, ["t", "o"], objective, 5, 0)
    cap = np.array([0.6, 1.0, 1.0])
    best = regression.propose(f, objective, np.full(3, 1 / 3), cap, 5000, 16, 0)
    assert best[0] == pytest.approx(0.6, abs=0.05) and best[1] < 0.05  # as much of source 0 as allowed, none of 1
    assert np.array_equal(best, regression.propose(f, objective, np.full(3, 1 / 3), cap, 5000, 16, 0))
    near = regression.propose(f, objective, np.full(3, 1 / 3), cap, 5000, 16, 0, max_kl=0.05)
    assert regression.kl(near, np.full(3, 1 / 3)) <= 0.05 and near[0] > 1 / 3 and near[1] < 1 / 3
    with pytest.raises(ValueError, match="max_kl"):
        regression.propose(f, objective, np.full(3, 1 / 3), np.array([0.2, 1.0, 1.0]), 5000, 16, 0, max_kl=1e-4)


def test_spec_mistakes_name_the_key(tmp_path):
    corpus = make_corpus(tmp_path)
    base = search_spec(tmp_path, corpus)
    with pytest.raises(ValueError, match="fit.objective: 'nope'"):
        MixSearchConfig.model_validate({**base, "fit": {"objective": {"nope": 1}}})
    with pytest.raises(ValueError, match="swarm.prior: 'web' is not a source"):
        MixSearchConfig.model_validate({**base, "swarm": {"prior": {"web": 1}}})
    with pytest.raises(ValueError, match="microanneal: the section is required"):
        MixSearchConfig.model_validate({**base, "method": "microanneal"})
    no_domains = {**base, "eval": {}}
    with pytest.raises(ValueError, match="no evaluation domain"):
        MixSearchConfig.model_validate(no_domains)
    bad = {**base, "proxy": {"config": str(tmp_path / "missing.yaml"), "tokens": 100}}
    assert run_search(bad, tmp_path / "bad.yaml") != 0


def test_a_proxy_picks_its_model_family_in_its_training_config(tmp_path):
    """The proxies' family is their training config's (``model.preset`` or ``model.block_pattern``,
    in ``proxy.config`` or ``proxy.set``): checked by the trainer's loader when the search loads,
    written into each run's config, and part of what the search resolves, so that a proxy config
    changed to another family trains the runs again. A bad block kind names its key; a microanneal
    whose proxy does not build its checkpoint's model is refused before any run."""
    from mixers.search.proxy import ProxyRun, _run_config, train_settings
    from mixers.search.stage import MixSearchStage
    from train.config import PRESETS, from_dict

    corpus = make_corpus(tmp_path)
    spec = search_spec(tmp_path, corpus)
    fingerprints, patterns = {}, {}
    for family in ("tiny", "tiny-olmo3", "tiny-hybrid"):
        cfg = yaml.safe_load(Path(spec["proxy"]["config"]).read_text())
        cfg["model"].update(preset=family, n_layers=4)
        Path(spec["proxy"]["config"]).write_text(yaml.safe_dump(cfg))  # the same file, edited
        stage = MixSearchStage(MixSearchConfig.model_validate(spec))
        fingerprints[family] = stage.prepare(stage.plan_inputs())
        assert stage.resolved.as_json()["proxy"]["model"]["block_pattern"] == PRESETS[family].block_pattern
        run = _run_config(stage.run.settings, ProxyRun("run-000", {"good": 1.0}, 8192, 0), tmp_path / "d", tmp_path / "c")
        patterns[family] = from_dict(run).model.block_pattern  # what the proxy's trainer reads
    assert patterns == {f: PRESETS[f].block_pattern for f in patterns} and len(set(fingerprints.values())) == 3
    # proxy.set picks it too, and its mistakes name proxy.set
    hybrid = train_settings(spec["proxy"]["config"], ["model.block_pattern=[gated_deltanet,full_attention]"])
    assert hybrid.raw["model"]["block_pattern"] == ["gated_deltanet", "full_attention"]
    with pytest.raises(ConfigError, match=r"config key 'proxy.set': .*model.block_pattern\[0\]: expected one of .*got 'mamba'"):
        train_settings(spec["proxy"]["config"], ["model.block_pattern=[mamba]"])
    # a microanneal's proxies anneal its checkpoint: a proxy of another family is refused at load
    import torch

    from train.checkpoint import save_model_weights
    from train.model import Transformer

    settings = train_settings(spec["proxy"]["config"], [])  # the hybrid, as the file was left
    dense = from_dict({**settings.raw, "model": {**settings.raw["model"], "preset": "tiny", "block_pattern": ["full_attention"]}})
    with torch.device("meta"):
        weights = Transformer(dense.model).state_dict()
    ckpt = save_model_weights(
        tmp_path / "stage1" / "step4", {k: torch.zeros(v.shape) for k, v in weights.items()}, {"step": 4, "config": dense.to_dict()}
    )
    microanneal = {"checkpoint": str(ckpt), "baseline": {"good": 1.0}}
    anneal = {**spec, "method": "microanneal", "microanneal": microanneal, "proxy": dict(spec["proxy"])}
    with pytest.raises(
        ConfigError,
        match=r"config key 'proxy.config': its model \(block_pattern \['gated_deltanet'.*is not the model of microanneal.checkpoint .*\['full_attention'\].*weights differ",
    ):
        MixSearchStage(MixSearchConfig.model_validate(anneal))
    anneal["proxy"]["set"] = ["model.preset=tiny", "model.block_pattern=[full_attention]"]
    assert MixSearchStage(MixSearchConfig.model_validate(anneal)).run.settings.raw["model"]["block_pattern"] == ["full_attention"]


# ---- whole searches ----------------------------------------------------------------------------


def _search_json(root: Path) -> dict:
    return json.loads((root / "search" / "search.json").read_text())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_swarm_learns_the_planted_answer_and_reruns_to_the_same_proposal(tmp_path, capsys):
    corpus = make_corpus(tmp_path)
    spec = search_spec(tmp_path, corpus, confirm={"seeds": [1]})
    assert run_search(spec, tmp_path / "search.yaml") == 0
    out = capsys.readouterr().out
    s = _search_json(tmp_path)
    assert [r["key"] for r in s["runs"]] == [f"run-{i:03d}" for i in range(8)]
    p = s["proposal"]
    # the planted answer: most of the source that matches the target, little noise
    assert p["good"] > max(s["uniform"]["good"], s["prior"]["good"]) and p["noise"] < s["uniform"]["noise"]
    assert s["fit"]["spearman"]["target"] >= 0.7
    assert s["proposal_beats"] == {"uniform": True, "prior": True}
    assert s["confirm"]["proposal"]["target"] < min(s["confirm"]["uniform"]["target"], s["confirm"]["prior"]["target"])
    olmix = (tmp_path / "search" / "proposal.olmix.yaml").read_text()
    assert "good" in olmix
    assert "swarm: 8 proxy runs" in out and "confirmation runs" in out
    records = tmp_path / "search" / "runs"
    results = {
        k: ((records / k / "result.json").read_bytes(), (records / k / "result.json").stat().st_mtime_ns) for k in ("run-000", "run-007")
    }

    # a rerun trains nothing and proposes the same; another regression refits the same runs
    assert run_search(spec, tmp_path / "search.yaml") == 0
    assert _search_json(tmp_path)["proposal"] == p
    refit = search_spec(tmp_path, corpus, fit={"regression": "loglinear"})
    assert run_search(refit, tmp_path / "refit.yaml") == 0
    assert _search_json(tmp_path)["fit"]["regression"] == "loglinear"
    assert {k: ((records / k / "result.json").read_bytes(), (records / k / "result.json").stat().st_mtime_ns) for k in results} == results
    assert json.loads((tmp_path / "search" / "_manifest.json").read_text())["status"] == "complete"


@pytest.fixture(scope="module")
def clean_search(tmp_path_factory) -> tuple[dict, Path]:
    """A swarm of 4 runs never killed, on the local executor, run once for the module: its spec
    and its output, which the killed search and the search on Ray must give again."""
    root = tmp_path_factory.mktemp("clean")
    spec = search_spec(root, make_corpus(root), swarm={"runs": 4, "seed": 1})
    assert run_search(spec, root / "clean.yaml") == 0
    return spec, root / "search"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_killed_swarm_reruns_only_the_missing_runs(tmp_path, clean_search):
    clean, clean_out = clean_search
    spec = {**clean, "output": str(tmp_path / "search")}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    done = tmp_path / "search" / "_done" / "runs"
    kill_when("dolma_pipe", ["mix-search", "-c", str(tmp_path / "s.yaml")], lambda: len(done_markers(done)) >= 2, timeout=300)
    finished = sorted(p.stem for p in done_markers(done))
    assert 2 <= len(finished) < 4
    records = tmp_path / "search" / "runs"
    before = {k: (records / k / "result.json").stat().st_mtime_ns for k in finished}
    assert run_search(spec, tmp_path / "s.yaml") == 0
    assert {k: (records / k / "result.json").stat().st_mtime_ns for k in finished} == before  # not trained again
    assert sorted(p.stem for p in done_markers(done)) == [f"run-{i:03d}" for i in range(4)]
    # the same runs and proposal as a search never killed
    for key in (f"run-{i:03d}" for i in range(4)):
        assert (records / key / "result.json").read_bytes() == (clean_out / "runs" / key / "result.json").read_bytes()
    assert _search_json(tmp_path)["proposal"] == json.loads((clean_out / "search.json").read_text())["proposal"]


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.timeout(600)
def test_a_swarm_on_ray_trains_the_same_runs_as_locally(tmp_path, ray_address, clean_search):
    clean, clean_out = clean_search
    on_ray = {**clean, "output": str(tmp_path / "ray"), "processes": 2, "ray_address": ray_address}
    assert run_search(on_ray, tmp_path / "ray.yaml") == 0
    for key in (f"run-{i:03d}" for i in range(4)):
        local = (clean_out / "runs" / key / "result.json").read_bytes()
        assert (tmp_path / "ray" / "runs" / key / "result.json").read_bytes() == local
    assert (
        json.loads((tmp_path / "ray" / "search.json").read_text())["proposal"]
        == json.loads((clean_out / "search.json").read_text())["proposal"]
    )
