"""A stream's ``compression.output`` means what it means in Dolma: ``gz`` (and no value) writes gzip
shards named ``.jsonl.gz``, ``zst`` (or ``zstd``) zstd shards named ``.jsonl.zst``, ``''`` plain
``.jsonl``."""

from __future__ import annotations

import gzip
import io

import pytest
import zstandard

from dolma_pipe.config import load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.runner import run_stage
from mixers.config import MixConfig
from mixers.stage import MixStage


@pytest.mark.parametrize(
    "output,name,read",
    [
        (None, "s-0000.jsonl.gz", gzip.decompress),
        ("gz", "s-0000.jsonl.gz", gzip.decompress),
        ("zst", "s-0000.jsonl.zst", lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d)),
        ("zstd", "s-0000.jsonl.zst", lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d)),
        ("", "s-0000.jsonl", bytes),
    ],
)
def test_output_compression_names(tmp_path, output, name, read):
    write_documents(str(tmp_path / "c" / "documents" / "a.jsonl"), [{"id": "d0", "text": "t"}])
    stream = {"name": "s", "documents": [str(tmp_path / "c" / "documents" / "*")], "output": {"path": str(tmp_path / "out")}}
    if output is not None:
        stream["compression"] = {"output": output}
    spec = {"streams": [stream], "processes": 1, "progress": False}
    run_stage(MixStage(load_config(MixConfig, None, spec)), stream=io.StringIO())
    (shard,) = (tmp_path / "out").glob("s-*")
    assert shard.name == name
    assert read(shard.read_bytes()).startswith(b'{"id":"d0"')
