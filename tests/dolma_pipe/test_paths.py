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
