"""``convert``: read documents in any supported format, write clean Dolma documents.

The first stage a corpus usually meets: it validates every record (integer ids
become strings, bad records are quarantined with file and line) and writes the
good ones as ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` or ``.parquet`` under
``<destination>/documents/`` with the input's relative name.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from dolma_pipe import storage
from dolma_pipe.config import PathStr, RunOptions
from dolma_pipe.documents import open_writer, read_documents
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Stage, Task, TaskOutput

_KNOWN_SUFFIX = re.compile(r"\.(jsonl|json)(\.(gz|zst|zstd))?$|\.(parquet|gz|zst|zstd)$")
BATCH = 1024


class ConvertConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1, description="input document files or globs (local or s3://)")
    destination: PathStr = Field(..., description="output root; documents go to <destination>/documents/")
    format: Literal["jsonl", "jsonl.gz", "jsonl.zst", "parquet"] = Field("jsonl.gz", description="output format")


def output_name(rel: str, fmt: str) -> str:
    return _KNOWN_SUFFIX.sub("", rel) + "." + fmt


class ConvertStage(Stage[ConvertConfig]):
    name = "convert"
    description = "validate documents and write them as Dolma jsonl/.gz/.zst/parquet"
    config_model = ConvertConfig
    output_dir = "documents"

    @property
    def output_root(self) -> str:
        return self.config.destination

    def output_name(self, rel: str) -> str:
        return output_name(rel, self.config.format)

    def process(self, task: Task, quarantine: Quarantine) -> TaskOutput:
        out_path = self.output_path(task.rel)
        assert out_path is not None
        docs = read_documents(task.path, quarantine)
        first = next(docs, None)
        if first is None:
            # Nothing good to keep (the reasons are quarantined): no empty output file.
            storage.remove(out_path)
            return TaskOutput(docs_in=0, counts={"docs_out": 0})
        batch: list[dict] = [first[1]]
        docs_in = 1
        with open_writer(out_path) as writer:
            for _, doc in docs:
                docs_in += 1
                batch.append(doc)
                if len(batch) >= BATCH:
                    writer.write_many(batch)
                    batch.clear()
            writer.write_many(batch)
        return TaskOutput(docs_in=docs_in, counts={"docs_out": writer.count})
