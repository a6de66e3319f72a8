"""Dolmino-style mixes: token plans (ratios exact, repetition capped, clear errors), whole
documents chosen per seed by an order-independent rule, seeds as independent as chance, the same
bytes for any process count and rerun, a cache of counts, and resuming after a kill."""

from __future__ import annotations

import collections
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dolma_pipe.config import ConfigError
from dolma_pipe.documents import write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.manifest import read_manifest
from mixers.dolmino import MixPlanError
from tests.support.documents import make_docs
from tests.support.mixes import run, seed_docs
from tests.support.outputs import done_markers, stage_outputs
from tests.support.processes import kill_when
from tests.support.repo import REPO_ROOT
from tests.support.tokens import train_tokenizer

SOURCES = {"web": (6, 80), "wiki": (2, 50), "math": (1, 40)}
SEEDS = [0, 1, 2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Three sources of documents of varied lengths, a quality attribute, and a tokenizer trained on them."""
    root = tmp_path_factory.mktemp("dolmino")
    texts = []
    for s, (name, (files, n)) in enumerate(SOURCES.items()):
        for f in range(files):
            docs = [d for k in range(4) for d in make_docs(n // 4, seed=100 * s + 10 * f + k, words=20 + 25 * k, source=name)]
            for i, d in enumerate(docs):
                d["id"] = f"{name}-{f}-{i}"
            texts += [d["text"] for d in docs]
            write_documents(str(root / name / "documents" / f"part-{f}.jsonl.gz"), docs)
            rows = [{"id": d["id"], "attributes": {"exp__quality__score": [[0, 1, (i * 37 % 100) / 100]]}} for i, d in enumerate(docs)]
            write_documents(str(root / name / "attributes" / "q" / f"part-{f}.jsonl.gz"), rows)
    train_tokenizer(root / "tokenizer.json", texts)
    return root


def spec(corpus: Path, out: Path, target: int = 16_000, ratios=(0.5, 0.3, 0.2), max_rep=(1, 2, 4), **extra) -> dict:
    sources = []
    for (name, _), ratio, rep in zip(SOURCES.items(), ratios, max_rep):
        source = {"name": name, "documents": [str(corpus / name / "documents" / "*.gz")], "ratio": ratio, "max_repetition": rep}
        if name == "web":
            source |= {"attributes": ["q"], "filter": {"exclude": ["quality__score < 0.2"]}}
        sources.append(source)
    return {
        "sources": sources,
        "output": str(out),
        "tokenizer": str(corpus / "tokenizer.json"),
        "target_tokens": target,
        "seeds": SEEDS,
        "max_size_in_bytes": 8000,
        "progress": False,
        **extra,
    }


def count_tokens(corpus: Path, texts: list[str]) -> list[int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(corpus / "tokenizer.json"))
    return [len(e.ids) + 1 for e in tok.encode_batch([t.strip() for t in texts], add_special_tokens=False)]


@pytest.fixture(scope="module")
def mixed(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mixed") / "out"
    run(spec(corpus, out, processes=1))
    return out


def test_each_source_gets_its_planned_tokens(corpus, mixed):
    plan = {p["name"]: p for p in read_manifest(str(mixed)).phase("count").step["plan"]}
    for name, ratio in zip(SOURCES, (0.5, 0.3, 0.2)):
        p = plan[name]
        assert p["requested"] == round(ratio * 16_000)
        biggest = max(count_tokens(corpus, [d["text"] for d in seed_docs(mixed, 0, name)]))
        for s in SEEDS:
            docs = seed_docs(mixed, s, name)
            tokens = sum(count_tokens(corpus, [d["text"] for d in docs]))
            assert (tokens, len(docs)) == (p["seeds"][str(s)]["tokens"], p["seeds"][str(s)]["docs"])
            # Within 0.1% or one document of the request.
            assert abs(tokens - p["requested"]) <= max(0.001 * p["requested"], biggest), (name, s, tokens)
    assert plan["web"]["repetition"] < 1 < plan["math"]["repetition"]


def test_upsampling_is_whole_repeats_plus_a_seeded_subset(corpus, mixed):
    plan = {p["name"]: p for p in read_manifest(str(mixed)).phase("count").step["plan"]}["math"]
    assert plan["whole_repeats"] == 1 and plan["docs"] == 40
    subsets = []
    for s in SEEDS:
        copies = collections.Counter(d["id"] for d in seed_docs(mixed, s, "math"))
        assert set(copies) == {f"math-0-{i}" for i in range(40)}  # every document at least once
        assert set(copies.values()) <= {1, 2}
        subsets.append({i for i, c in copies.items() if c == 2})
        assert len(subsets[-1]) == plan["seeds"][str(s)]["docs"] - 40
    assert subsets[0] != subsets[1] != subsets[2]


def test_seeds_share_documents_as_chance_predicts(corpus, mixed):
    plan = {p["name"]: p for p in read_manifest(str(mixed)).phase("count").step["plan"]}["web"]
    n = plan["docs"]
    picked = [{d["id"] for d in seed_docs(mixed, s, "web")} for s in SEEDS]
    for a in range(3):
        for b in range(a + 1, 3):
            expected = len(picked[a]) * len(picked[b]) / n  # independent draws
            sigma = math.sqrt(expected * (1 - len(picked[a]) / n) * (1 - len(picked[b]) / n))
            assert abs(len(picked[a] & picked[b]) - expected) <= 4 * sigma + 1, (a, b, len(picked[a] & picked[b]), expected)


def test_outputs_carry_provenance_and_drop_attributes(mixed):
    doc = seed_docs(mixed, 0, "web")[0]
    name, line = doc["metadata"]["provenance"].split(":")
    assert name.startswith("part-") and int(line) >= 1
    assert "attributes" not in doc
    assert sorted(p.name for p in mixed.iterdir() if p.name != "_ids") == [
        "_cache",
        "_done",
        "_manifest.json",
        "seed-0",
        "seed-1",
        "seed-2",
    ]


@pytest.mark.parametrize("processes", [2])
def test_same_bytes_for_any_process_count_and_rerun(corpus, mixed, tmp_path, processes):
    out = tmp_path / "out"
    run(spec(corpus, out, processes=processes))
    reference = {k: v for k, v in stage_outputs(mixed).items() if not k.startswith("_cache")}
    mine = {k: v for k, v in stage_outputs(out).items() if not k.startswith("_cache")}
    assert mine == reference
    again = run(spec(corpus, out, processes=processes))
    assert all(r.skipped for r in again.results)


def test_choice_does_not_depend_on_files_or_their_order(corpus, mixed, tmp_path):
    """The same documents resharded (other files, another order) give the same documents per seed."""
    from dolma_pipe.documents import read_attribute_rows, read_documents

    docs = [d for f in range(SOURCES["web"][0]) for _, d in read_documents(str(corpus / "web" / "documents" / f"part-{f}.jsonl.gz"))]
    attrs = [
        r for f in range(SOURCES["web"][0]) for _, r in read_attribute_rows(str(corpus / "web" / "attributes" / "q" / f"part-{f}.jsonl.gz"))
    ]
    order = list(range(len(docs)))[::-1]
    halves = [order[: len(order) // 3], order[len(order) // 3 :]]
    copy = tmp_path / "copy"
    for h, part in enumerate(halves):
        write_documents(str(copy / "web" / "documents" / f"x-{h}.jsonl.gz"), [docs[i] for i in part])
        write_documents(str(copy / "web" / "attributes" / "q" / f"x-{h}.jsonl.gz"), [attrs[i] for i in part])
    for name in ("wiki", "math"):
        os.symlink(corpus / name, copy / name)
    (copy / "tokenizer.json").symlink_to(corpus / "tokenizer.json")
    out = tmp_path / "out"
    run(spec(copy, out, processes=2))
    for s in SEEDS:
        assert collections.Counter(d["id"] for d in seed_docs(out, s, "web")) == collections.Counter(
            d["id"] for d in seed_docs(mixed, s, "web")
        )


def test_infeasible_request_names_the_source_and_the_fix(corpus, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(MixPlanError) as err:
        run(spec(corpus, out, max_rep=(1, 2, 1)))
    message = str(err.value)
    assert message.startswith("source 'math' (sources.2) cannot give 3,200 tokens (ratio 0.2 of target_tokens 16,000)")
    assert "above sources.2.max_repetition 1" in message and "Fix: raise sources.2.max_repetition to at least 1." in message
    assert not any(out.glob("seed-*"))  # nothing written
    assert read_manifest(str(out)).status == "failed"


def test_counts_are_cached_across_plans(corpus, mixed, tmp_path):
    """A new target counts nothing again: the count phase reads its cache."""
    out = tmp_path / "out"
    run(spec(corpus, out))
    caches = sorted((out / "_cache").rglob("docs.jsonl.zst"))
    stamps = [p.stat().st_mtime_ns for p in caches]
    summary = run(spec(corpus, out, target=12_000))
    assert [p.stat().st_mtime_ns for p in caches] == stamps
    assert not any(r.skipped for r in summary.manifest.phase("count").tasks.values())  # redone, from the cache
    plan = {p["name"]: p for p in summary.manifest.phase("count").step["plan"]}
    assert plan["web"]["requested"] == 6_000
    assert summary.totals["tokens_kept"] == read_manifest(str(mixed)).totals["tokens_kept"]


def test_a_smaller_rerun_removes_the_earlier_runs_extra_shards(corpus, tmp_path):
    out = tmp_path / "out"
    run(spec(corpus, out, max_size_in_bytes=2000))
    (out / "seed-0" / "documents" / "README.txt").write_text("not a shard: stays")

    def shards(seed: int) -> list[str]:
        return sorted(p.name for p in (out / f"seed-{seed}" / "documents").glob("*-[0-9]*.jsonl.gz"))

    before = {s: shards(s) for s in SEEDS}
    summary = run(spec(corpus, out, target=4_000, max_size_in_bytes=2000))
    planned = summary.manifest.phase("sample").step["shards"]
    removed = 0
    for s in SEEDS:
        want = sorted(f"{name}-{j:04d}.jsonl.gz" for name in SOURCES for j in range(len(planned[str(s)][name])))
        assert shards(s) == want and len(want) < len(before[s])
        removed += len(before[s]) - len(want)
        plan = {p["name"]: p["seeds"][str(s)] for p in summary.manifest.phase("count").step["plan"]}
        for name in SOURCES:
            assert len(seed_docs(out, s, name)) == plan[name]["docs"]  # the next stage reads this run's documents only
    assert summary.manifest.results["stale_shards_removed"] == removed > 0
    assert f"removed {removed} stale shard(s)" in (summary.table or "")
    assert (out / "seed-0" / "documents" / "README.txt").read_text() == "not a shard: stays"


def test_token_sources_and_spec_errors(corpus, tmp_path):
    config = spec(corpus, tmp_path / "out")
    for source, tokens in zip(config["sources"], (3000, 1000, 500)):
        source.pop("ratio")
        source["tokens"] = tokens
    config.pop("target_tokens")
    summary = run(config)
    assert {p["name"]: p["requested"] for p in summary.manifest.phase("count").step["plan"]} == {"web": 3000, "wiki": 1000, "math": 500}
    with pytest.raises(ConfigError, match=r"ratios .* add up to 0\.9, not 1"):
        run(spec(corpus, tmp_path / "o", ratios=(0.5, 0.3, 0.1)))
    bad = spec(corpus, tmp_path / "o")
    bad.pop("target_tokens")
    with pytest.raises(ConfigError, match=r"'target_tokens' is required: sources\.0 \('web'\) gives a ratio"):
        run(bad)
    bad = spec(corpus, tmp_path / "o")
    bad["sources"][1]["tokens"] = 5
    with pytest.raises(ConfigError, match="exactly one of 'ratio' or 'tokens'"):
        run(bad)
    with pytest.raises(ConfigError, match="config key 'tokenizer': tokenizer file .*nope.json does not exist"):
        run(spec(corpus, tmp_path / "o", tokenizer=str(tmp_path / "nope.json")))
    bad = spec(corpus, tmp_path / "o")
    bad["sources"][0]["filter"] = {"exclude": ["quality__scor < 0.2"]}
    with pytest.raises(
        ConfigError,
        match=r"'sources\.0\.filter\.exclude\.0': shorthand rule .* unknown attribute 'quality__scor' \(did you mean 'quality__score'\?\)",
    ):
        run(bad)


def test_cli_prints_the_plan_before_the_summary(corpus, tmp_path):
    (tmp_path / "mix.json").write_text(json.dumps(spec(corpus, tmp_path / "out", processes=1)))
    proc = subprocess.run(
        [sys.executable, "-m", "dolma_pipe", "mix", "-c", str(tmp_path / "mix.json"), "--no-progress"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.index("Dolmino plan: target 16,000 tokens per seed") < proc.stderr.index("dolma-pipe mix: complete")
    assert "web: 6 files, 480 documents in" in proc.stdout and "requested 8,000 tokens" in proc.stdout


@pytest.mark.slow
def test_killed_in_sample_phase_resumes_there(corpus, mixed, tmp_path):
    out = tmp_path / "out"
    config = spec(corpus, out, processes=1)
    markers = out / "_done" / "sample"
    slow = {"MIX_SLOW_PHASE": "sample", "MIX_SLOW_SECONDS": "0.4"}
    kill_when("tests.support.slow_mix", [json.dumps(config)], lambda: bool(done_markers(markers, recursive=True)), env=slow)
    done = len(done_markers(markers, recursive=True))
    assert 0 < done < sum(files for files, _ in SOURCES.values())
    summary = run(config)
    assert all(r.skipped for r in summary.manifest.phase("count").tasks.values())
    assert sum(r.skipped for r in summary.manifest.phase("sample").tasks.values()) == done
    strip = lambda files: {k: v for k, v in files.items() if not k.startswith("_cache")}  # noqa: E731
    assert strip(stage_outputs(out)) == strip(stage_outputs(mixed))


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_bytes_on_ray(self, corpus, mixed, tmp_path, ray_address):
        out = tmp_path / "out"
        with RayExecutor(2, ray_address) as ex:
            run(spec(corpus, out, processes=2, ray_address=ray_address), executor=ex)
        strip = lambda files: {k: v for k, v in files.items() if not k.startswith("_cache")}  # noqa: E731
        assert strip(stage_outputs(out)) == strip(stage_outputs(mixed))
