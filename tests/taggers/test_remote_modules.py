"""A user's tagger module on object storage (``tagger_modules: [s3://...]``): every process reads
it through the storage layer, as workers on nodes that share no disk with the driver must; the
tag and warc stages both take it. And a module that fails, local or on S3, fails again when loaded
again."""

from __future__ import annotations

import gzip
import json

import pytest

from dolma_pipe import storage
from taggers import registry
from taggers.base import TaggerError
from tests.support.warc import html_page, response, run, write_warc

MODULE = """
from taggers.base import Span, Tagger
from taggers.registry import register


@register("NAME")
class RemoteWords(Tagger):
    description = "test: the document's word count, from a module on S3"

    def predict(self, doc):
        return [Span("words", 0, len(doc.text), float(len(doc.text.split())))]
"""


def test_a_module_on_s3_registers_its_taggers_and_a_missing_one_is_named(s3_bucket):
    url = f"s3://{s3_bucket}/plugins/remote_words.py"
    storage.write_bytes(url, MODULE.replace("NAME", "test_remote_words").encode())
    registry.load_modules([url])
    assert registry.get("test_remote_words").description.endswith("from a module on S3")
    registry.load_modules([url])  # loaded once: no second registration
    missing = f"s3://{s3_bucket}/plugins/nope.py"
    with pytest.raises(TaggerError, match=f"cannot load tagger module {missing}"):
        registry.load_modules([missing])


def test_the_warc_stage_runs_a_post_tagger_from_s3(s3_bucket, tmp_path):
    url = f"s3://{s3_bucket}/plugins/remote_words.py"  # another bucket's module: its tagger has its own name
    storage.write_bytes(url, MODULE.replace("NAME", "test_remote_warc_words").encode())
    pages = [response(f"https://r.example.org/{i}", html_page(f"Page {i}", [f"word {i} " * (i + 3)])) for i in range(40)]
    write_warc(tmp_path / "in" / "part.warc.gz", pages)
    out = tmp_path / "out"
    config = {"documents": [str(tmp_path / "in" / "*")], "destination": str(out), "processes": 1}
    run({**config, "tagger_modules": [url], "post": {"taggers": ["test_remote_warc_words"]}})
    docs = [json.loads(x) for x in gzip.open(out / "documents" / "part.jsonl.gz")]
    rows = [json.loads(x) for x in gzip.open(out / "attributes" / "test_remote_warc_words" / "part.jsonl.gz")]
    assert len(docs) == len(rows) == 40
    for doc, row in zip(docs, rows):
        assert row["id"] == doc["id"]
        assert row["attributes"]["test_remote_warc_words__test_remote_warc_words__words"] == [
            [0, len(doc["text"]), float(len(doc["text"].split()))]
        ]


@pytest.mark.parametrize("remote", [False, True])
def test_a_module_that_fails_fails_again_when_loaded_again(s3_bucket, tmp_path, remote):
    """Not half-registered after its first failure: a second load runs it again, and fails again,
    instead of finding its name taken and skipping it."""
    source = "raise RuntimeError('not today')\n"
    where = f"s3://{s3_bucket}/plugins/broken.py" if remote else str(tmp_path / "broken.py")
    storage.write_bytes(where, source.encode())
    for _ in range(2):
        with pytest.raises(TaggerError, match="cannot load tagger module .*broken.py: RuntimeError: not today"):
            registry.load_modules([where])
