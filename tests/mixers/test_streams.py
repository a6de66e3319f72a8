"""Dolma-style streams as a staged run: size-bounded shards with consistent names, the same bytes
for any process count, executor and rerun, resuming after a kill, `shuffle: false`, dry runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from dolma_pipe.config import ConfigError, load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.manifest import read_manifest
from dolma_pipe.paths import PathError
from mixers.config import MixConfig
from tests.support.documents import make_docs
from tests.support.mixes import run
from tests.support.outputs import done_markers, stage_outputs
from tests.support.processes import kill_when

FILES = 6
DOCS = 60


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Six files of 60 documents with a score attribute and a paragraph-duplicate attribute."""
    root = tmp_path_factory.mktemp("streams")
    for f in range(FILES):
        docs = make_docs(DOCS, seed=f, words=40 + 10 * f)
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), docs)
        rows = [{"id": d["id"], "attributes": {"q": [[0, len(d["text"]), (i * 7 % 10) / 10]]}} for i, d in enumerate(docs)]
        write_documents(str(root / "attributes" / "score" / f"part-{f}.jsonl.gz"), rows)
        rows = [{"id": d["id"], "attributes": {"dup": [[0, 4, 1.0]] if i % 5 == 0 else []}} for i, d in enumerate(docs)]
        write_documents(str(root / "attributes" / "dups" / f"part-{f}.jsonl.gz"), rows)
    return root


def spec(corpus: Path, out: Path, max_size: int = 6000, **extra) -> dict:
    return {
        "streams": [
            {
                "name": "mixed",
                "documents": [str(corpus / "documents" / "*.jsonl.gz")],
                "attributes": ["score", "dups"],
                "output": {"path": str(out), "max_size_in_bytes": max_size, "discard_fields": ["attributes"]},
                "filter": {"syntax": "jq", "exclude": [".attributes.q[0][2] < 0.3"]},
                "span_replacement": [{"span": "$.attributes.dup", "min_score": 0.5, "replacement": ""}],
            }
        ],
        "progress": False,
        **extra,
    }


def docs_of(out: Path) -> list[dict]:
    rows = []
    for p in sorted(out.glob("*.jsonl.gz")):
        with gzip.open(p, "rt") as fh:
            rows += [json.loads(line) for line in fh]
    return rows


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("ref") / "out"
    run(spec(corpus, out, processes=1))
    return stage_outputs(out)


def test_shards_are_bounded_named_alike_and_in_input_order(corpus, tmp_path):
    out = tmp_path / "out"
    summary = run(spec(corpus, out, processes=2))
    shards = sorted(p.name for p in out.glob("*.gz"))
    assert len(shards) > 3
    assert shards == [f"mixed-{i:04d}.jsonl.gz" for i in range(len(shards))]
    # Each shard within the bound, unless it is one member larger than it.
    sizes = [(out / s).stat().st_size for s in shards]
    assert all(s <= 6000 for s in sizes[:-1]) or max(sizes) <= 6000 * 2
    rows = docs_of(out)
    provenance = [(r["metadata"]["provenance"].split(":")[0], int(r["metadata"]["provenance"].split(":")[1])) for r in rows]
    assert provenance == sorted(provenance)  # input files in order, then lines
    assert len(rows) == summary.totals["docs_out"] == summary.totals["docs_kept"] == FILES * DOCS * 7 // 10
    assert all("attributes" not in r for r in rows)
    # No intermediates left; the manifest holds the per-stream summary.
    assert not (out / "_work").exists()
    totals = read_manifest(str(out)).results["streams"]["mixed"]
    assert totals["removed_by_rule"] == {"exclude 0: .attributes.q[0][2] < 0.3": FILES * DOCS * 3 // 10}
    assert totals["spans_replaced"] == sum(1 for i in range(DOCS) if i % 5 == 0 and (i * 7 % 10) >= 3) * FILES


def test_a_member_shard_is_readable_by_plain_gzip(corpus, tmp_path):
    out = tmp_path / "out"
    run(spec(corpus, out, max_size=10**9, processes=1))
    (shard,) = out.glob("*.gz")
    text = gzip.decompress(shard.read_bytes()).decode()  # several members, one stream
    assert text.count("\n") == FILES * DOCS * 7 // 10


@pytest.mark.parametrize("processes", [2, 4])
def test_same_bytes_for_any_process_count(corpus, reference, tmp_path, processes):
    out = tmp_path / "out"
    run(spec(corpus, out, processes=processes))
    assert stage_outputs(out) == reference


def test_rerun_skips_and_force_rewrites_the_same_bytes(corpus, reference, tmp_path):
    out = tmp_path / "out"
    run(spec(corpus, out, processes=2))
    again = run(spec(corpus, out, processes=2))
    assert all(r.skipped for r in again.results)
    forced = run(spec(corpus, out, processes=2, force=True))
    assert not any(r.skipped for r in forced.results)
    assert stage_outputs(out) == reference


def test_an_attribute_file_rewritten_since_redoes_the_mix(corpus, tmp_path):
    """The rules read the attribute files: when a tag or dedup run rewrites one (other settings,
    other rows), a rerun redoes the mix with them, not 'already done' with the old ones."""
    import shutil

    mine = tmp_path / "corpus"
    shutil.copytree(corpus, mine)
    out = tmp_path / "out"
    first = run(spec(mine, out, processes=1))
    assert first.totals["docs_kept"] == FILES * DOCS * 7 // 10
    docs = [json.loads(line) for line in gzip.open(mine / "documents" / "part-0.jsonl.gz", "rt")]
    rows = [{"id": d["id"], "attributes": {"q": [[0, 1, 0.0]]}} for d in docs]  # every document now below 0.3
    write_documents(str(mine / "attributes" / "score" / "part-0.jsonl.gz"), rows)
    again = run(spec(mine, out, processes=1))
    assert not any(r.skipped for r in again.results)
    assert again.totals["docs_kept"] == (FILES - 1) * DOCS * 7 // 10
    assert again.manifest.resolved["attributes"] != first.manifest.resolved["attributes"]


def _kill_in_shard_phase(config: dict, out: Path) -> int:
    markers = out / "_done" / "shard" / "mixed"
    slow = {"MIX_SLOW_PHASE": "shard", "MIX_SLOW_SECONDS": "0.4"}
    kill_when("tests.support.slow_mix", [json.dumps(config)], lambda: bool(done_markers(markers)), env=slow)
    return len(done_markers(markers))


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_killed_in_shard_phase_resumes_there(corpus, reference, tmp_path, processes):
    out = tmp_path / "out"
    config = spec(corpus, out, processes=processes)
    done = _kill_in_shard_phase(config, out)
    shards = len([k for k in reference if k.endswith(".jsonl.gz")])
    assert 0 < done < shards
    assert read_manifest(str(out)).status == "running"
    # The killed run's final-named shards are refused as inputs until the run is finished.
    reader = {"streams": [{"name": "again", "documents": [str(out / "*.jsonl.gz")], "output": {"path": str(tmp_path / "again")}}]}
    with pytest.raises(PathError, match=r"_manifest\.json: these inputs .* unfinished mix run \(status running\); rerun that mix"):
        run(reader)
    summary = run(config)
    filter_phase, shard_phase = summary.manifest.phases
    assert all(r.skipped for r in filter_phase.tasks.values())
    assert sum(r.skipped for r in shard_phase.tasks.values()) == done
    assert stage_outputs(out) == reference
    assert run(reader).totals["docs_out"] == FILES * DOCS * 7 // 10


def test_shuffle_false_keeps_one_output_per_input(corpus, tmp_path):
    out = tmp_path / "out"
    run(spec(corpus, out, processes=2, shuffle=False))
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*.jsonl.gz") if "_done" not in p.parts)
    assert names == [f"documents/part-{f}.jsonl.gz" for f in range(FILES)]
    assert len(docs_of(out / "documents")) == FILES * DOCS * 7 // 10


def test_dry_run_writes_nothing_not_even_over_a_finished_runs_manifest(corpus, tmp_path):
    out = tmp_path / "out"
    summary = run(spec(corpus, out, dryrun=True))
    assert "mix dry run" in (summary.table or "") and "6 input files" in (summary.table or "")
    assert not out.exists() or not any(out.iterdir())
    run(spec(corpus, out))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    run(spec(corpus, out, dryrun=True))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_several_streams_share_a_run_root(corpus, tmp_path):
    config = spec(corpus, tmp_path / "mixes" / "a")
    second = dict(config["streams"][0], name="other", output={"path": str(tmp_path / "mixes" / "b")}, filter=None, span_replacement=[])
    config["streams"].append(second)
    summary = run(config)
    assert summary.root == str(tmp_path / "mixes")
    assert len(docs_of(tmp_path / "mixes" / "b")) == FILES * DOCS
    assert (tmp_path / "mixes" / "_manifest.json").exists()


def test_spec_errors(corpus, tmp_path):
    with pytest.raises(ConfigError, match="needs either 'streams'"):
        run({"progress": False})
    config = spec(corpus, tmp_path / "o")
    config["streams"].append(dict(config["streams"][0]))
    with pytest.raises(ConfigError, match="'streams.1.name': name 'mixed' is used twice"):
        run(config)
    with pytest.raises(ConfigError, match=r"'streams\.0\.documents\.0': no input files match"):
        run(spec(tmp_path / "nothing", tmp_path / "o"))
    with pytest.raises(ConfigError, match="unknown config key 'streams.0.output.max_size'"):
        load_config(MixConfig, None, {"streams": [{"name": "x", "documents": ["a"], "output": {"path": "o", "max_size": 1}}]})


def test_inputs_and_outputs_on_s3(corpus, reference, s3_bucket, tmp_path):
    import boto3

    s3 = boto3.client("s3")
    for p in corpus.rglob("*.jsonl.gz"):
        s3.upload_file(str(p), s3_bucket, f"c/{p.relative_to(corpus)}")
    config = spec(corpus, tmp_path / "unused", processes=2)
    config["streams"][0]["documents"] = [f"s3://{s3_bucket}/c/documents/*.jsonl.gz"]
    config["streams"][0]["output"]["path"] = f"s3://{s3_bucket}/out"
    summary = run(config)
    assert summary.status == "complete"
    listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket, Prefix="out/")["Contents"])
    shards = [k for k in listed if k.endswith(".jsonl.gz") and "/_" not in k]
    assert [k.split("/")[-1] for k in shards] == sorted(k for k in reference if k.endswith(".jsonl.gz") and "/" not in k)
    for key in shards:
        assert s3.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == reference[key.split("/")[-1]]
    assert not any("/_work/" in k for k in listed)  # intermediates removed


def _lines(out: Path, pattern: str) -> int:
    return sum(gzip.decompress(p.read_bytes()).count(b"\n") for p in out.glob(pattern))


def test_a_rerun_writing_fewer_shards_removes_the_earlier_runs_extra_shards(corpus, tmp_path):
    out = tmp_path / "out"
    config = spec(corpus, out, max_size=3000, processes=2)
    # A second stream writing to the same folder, and files that are no shards: none is touched.
    other = dict(config["streams"][0], name="other", filter=None, output={"path": str(out), "max_size_in_bytes": 10**9})
    config["streams"].append(other)
    out.mkdir()
    (out / "notes.jsonl.gz").write_bytes(b"not a shard")
    (out / "mixed-extra.jsonl.gz").write_bytes(b"not one of ours either")
    first = run(config)
    before = sorted(p.name for p in out.glob("mixed-[0-9]*.jsonl.gz"))
    assert len(before) > 4 and first.manifest.results["stale_shards_removed"] == 0
    # Keep only the first input file's documents: far fewer shards.
    config["streams"][0]["filter"] = {"syntax": "jq", "include": ['.id | startswith("test-0-")']}
    second = run(config)
    after = sorted(p.name for p in out.glob("mixed-[0-9]*.jsonl.gz"))
    assert 0 < len(after) < len(before) and after == [f"mixed-{i:04d}.jsonl.gz" for i in range(len(after))]
    assert second.manifest.results["stale_shards_removed"] == len(before) - len(after)
    assert f"removed {len(before) - len(after)} stale shard(s)" in (second.table or "")
    # What the next stage reads is exactly what this run wrote.
    kept = second.manifest.results["streams"]["mixed"]["kept"]
    assert kept == DOCS == _lines(out, "mixed-[0-9]*.jsonl.gz")
    assert sorted(p.name for p in out.glob("other-*")) == ["other-0000.jsonl.gz"] and _lines(out, "other-*") == FILES * DOCS
    assert (out / "notes.jsonl.gz").read_bytes() == b"not a shard"
    assert (out / "mixed-extra.jsonl.gz").read_bytes() == b"not one of ours either"


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_bytes_on_ray(self, corpus, reference, tmp_path, ray_address):
        out = tmp_path / "out"
        with RayExecutor(2, ray_address) as ex:
            summary = run(spec(corpus, out, processes=2, ray_address=ray_address), executor=ex)
        assert summary.manifest.executor.name == "ray"
        assert stage_outputs(out) == reference
