"""Dolma's path conventions: attribute paths, relative names, glob expansion."""

from __future__ import annotations

import pytest

from dolma_pipe import paths


def test_attribute_path_matches_dolma():
    assert paths.attribute_path("s3://b/x/documents/a/b.jsonl.gz", "exp") == "s3://b/x/attributes/exp/a/b.jsonl.gz"
    assert paths.attribute_path("/data/documents/cc/0.json.gz", "dedup") == "/data/attributes/dedup/cc/0.json.gz"
    # Only the path component named documents is replaced, not a substring of another name.
    assert paths.attribute_path("/d/my_documents/documents/f.jsonl", "t") == "/d/my_documents/attributes/t/f.jsonl"


def test_attribute_path_needs_documents_component():
    with pytest.raises(paths.PathError, match="no 'documents/' component"):
        paths.attribute_path("/data/raw/f.jsonl", "x")
    with pytest.raises(paths.PathError):
        paths.attribute_path("/data/documents/f.jsonl", "a/b")


def test_expand_and_relative_names(tmp_path):
    for rel in ["documents/a/1.jsonl", "documents/a/2.jsonl", "documents/b/c/3.jsonl.gz"]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    found = paths.expand([f"{tmp_path}/documents/**/*"])
    assert [f.rel for f in found] == ["a/1.jsonl", "a/2.jsonl", "b/c/3.jsonl.gz"]


def test_expand_without_documents_component(tmp_path):
    (tmp_path / "raw" / "x").mkdir(parents=True)
    (tmp_path / "raw" / "x" / "f.jsonl").write_text("")
    (found,) = paths.expand([f"file://{tmp_path}/raw/**/*.jsonl"])
    assert (found.path, found.rel, found.info.size) == (f"{tmp_path}/raw/x/f.jsonl", "x/f.jsonl", 0)


def test_expand_errors(tmp_path):
    with pytest.raises(paths.PathError, match="no input files match"):
        paths.expand([f"{tmp_path}/nothing/*.jsonl"])
    for d in ("one", "two"):
        (tmp_path / d / "documents").mkdir(parents=True)
        (tmp_path / d / "documents" / "same.jsonl").write_text("")
    with pytest.raises(paths.PathError, match="same output name"):
        paths.expand([f"{tmp_path}/one/documents/*", f"{tmp_path}/two/documents/*"])


def _manifest(folder, status: str, stage: str = "mix", inputs: list[str] = ()) -> None:
    import orjson

    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"path": p, "rel": p, "size": 0, "mtime": 0.0} for p in inputs]
    (folder / "_manifest.json").write_bytes(orjson.dumps({"stage": stage, "status": status, "inputs": rows}))


def _touch(path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


@pytest.mark.parametrize("status", ["running", "failed"])
def test_expand_refuses_the_outputs_of_an_unfinished_run(tmp_path, status):
    # Streams: <root>/<name>-NNNN.jsonl.gz; Dolmino: <root>/seed-<n>/documents/<source>-NNNN.jsonl.gz.
    for shard in (tmp_path / "mix" / "s-0000.jsonl.gz", tmp_path / "dolmino" / "seed-0" / "documents" / "web-0000.jsonl.gz"):
        _touch(shard)
        root = shard.parent if shard.parent.name != "documents" else shard.parent.parent.parent
        _manifest(root, status)
        pattern = str(shard.parent / "*.jsonl.gz")
        with pytest.raises(paths.PathError) as err:
            paths.expand([pattern])
        message = str(err.value)
        assert message == (
            f"{root}/_manifest.json: these inputs (e.g. {shard}) are the output of an unfinished mix run "
            f"(status {status}); rerun that mix to finish it"
        )
        assert "\n" not in message
        _manifest(root, "complete")
        assert [f.path for f in paths.expand([pattern])] == [str(shard)]


def test_expand_accepts_an_unfinished_runs_own_folder_and_its_inputs(tmp_path):
    # A run whose root holds its inputs (stats on X/documents with destination X) did not write them.
    doc = tmp_path / "x" / "documents" / "a.jsonl.gz"
    _touch(doc)
    _manifest(tmp_path / "x", "running", stage="stats", inputs=[str(doc)])
    assert [f.path for f in paths.expand([f"{tmp_path}/x/documents/*.gz"])] == [str(doc)]
    # Not a dolma-pipe manifest, or too far up: not looked at.
    (tmp_path / "x" / "_manifest.json").write_text("{not json")
    _touch(tmp_path / "x" / "documents" / "b.jsonl.gz")
    assert len(paths.expand([f"{tmp_path}/x/documents/*.gz"])) == 2
    _manifest(tmp_path, "running")
    deep = tmp_path / "x" / "d" / "e" / "f.jsonl.gz"
    _touch(deep)
    assert len(paths.expand([str(deep)])) == 1


def test_refuse_unfinished_skips_the_current_runs_root_and_reads_each_manifest_once(tmp_path, monkeypatch):
    from dolma_pipe import storage

    files = []
    for i in range(20):
        files.append(tmp_path / "out" / "a" / f"s-{i:04d}.jsonl.gz")
        _touch(files[-1])
    _manifest(tmp_path / "out", "running")
    with pytest.raises(paths.PathError, match="unfinished mix run"):
        paths.refuse_unfinished([str(f) for f in files])
    # The current run's own root (a resumed run reading past its own manifest) is not looked at.
    paths.refuse_unfinished([str(f) for f in files], own_root=str(tmp_path / "out") + "/")
    reads = []
    real = storage.read_bytes
    monkeypatch.setattr(storage, "read_bytes", lambda p: reads.append(p) or real(p))
    _manifest(tmp_path / "out", "complete")
    paths.refuse_unfinished([str(f) for f in files])
    assert reads == [f"{tmp_path}/out/_manifest.json"]


def test_one_output_root_rule_for_the_stages_that_write_attributes(tmp_path):
    """tag and dedup find where an attribute set goes by one rule (paths.attribute_output_root)."""
    from dolma_pipe.paths import PathError, attribute_output_root

    for sub in ("documents", "docs-a"):
        (tmp_path / "x" / sub).mkdir(parents=True)
        (tmp_path / "x" / sub / "f.jsonl").write_text("{}\n")
    x = tmp_path / "x"
    assert attribute_output_root([f"{x}/documents/*.gz"], "q") == f"{x}/attributes/q"
    assert attribute_output_root([f"{x}/documents/*.gz"], "q", destination="s3://b/out") == "s3://b/out/q"
    assert attribute_output_root([f"{x}/docs-a/*"], "q", document_dir="docs-a") == f"{x}/attributes/q"
    # A wildcard where the documents folder is (Dolma's tests have doc*/): each matching file decides.
    assert attribute_output_root([f"{x}/docu*/*"], "q") == f"{x}/attributes/q"
    with pytest.raises(PathError, match=r"docs-a/f.jsonl: path has no 'documents/' component"):
        attribute_output_root([f"{x}/d*/*"], "q")
    with pytest.raises(PathError, match="no 'documents/' component"):
        attribute_output_root([f"{x}/elsewhere/*.gz"], "q")
    with pytest.raises(PathError, match="several trees"):
        attribute_output_root([f"{x}/documents/*", f"{tmp_path}/y/documents/*"], "q")
