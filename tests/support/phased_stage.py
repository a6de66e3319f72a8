"""A three-phase test stage: per-file hashing, per-bucket duplicate finding, per-file marking.

It exercises what cross-file stages need from the core: tasks that are not
files (buckets), phases reading what earlier phases wrote, a driver-side step,
a global "first copy wins" rule (input order, then line) that must give the same
bytes for any process count and executor, and resuming in any phase.

``python -m tests.support.phased_stage CONFIG_JSON`` runs it (for kill-and-resume tests);
``PHASED_STAGE_DELAY`` (seconds) slows each bucket task so a test can kill it there.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import orjson
from pydantic import Field

from dolma_pipe import storage
from dolma_pipe.config import PathStr, RunOptions, load_config
from dolma_pipe.documents import JsonlWriter, read_documents
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.runner import run_stage
from dolma_pipe.stage import Phase, RunContext, Stage, StepResult, Task, TaskOutput


class PhasedConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1)
    destination: PathStr
    buckets: int = Field(4, ge=1)


def _text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class PhasedStage(Stage[PhasedConfig]):
    name = "phased-test"
    config_model = PhasedConfig
    depends_on_input_set = True

    @property
    def output_root(self) -> str:
        return self.config.destination

    def phases(self) -> list[Phase]:
        return [
            Phase("hash", plan=self._plan_files, run=self._hash, outputs=self._hash_outputs, unit="file"),
            Phase("bucket", plan=self._plan_buckets, run=self._bucket, outputs=self._bucket_outputs, after=self._count),
            Phase("mark", plan=self._plan_files, run=self._mark, outputs=self._mark_outputs, unit="file"),
        ]

    # hash: every document's text hash, split into buckets by hash
    def _hash_path(self, rel: str, bucket: int) -> str:
        return storage.join(self.output_root, "work", "hash", rel, f"bucket-{bucket:04d}.json")

    def _hash_outputs(self, task: Task) -> list[str]:
        return [self._hash_path(task.rel, b) for b in range(self.config.buckets)]

    def _hash(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        index = [f.rel for f in ctx.inputs].index(task.rel)
        per_bucket: list[list] = [[] for _ in range(self.config.buckets)]
        n = 0
        for line, doc in read_documents(task.path, quarantine):
            h = _text_hash(doc["text"])
            per_bucket[int(h, 16) % self.config.buckets].append([h, index, line])
            n += 1
        for b, rows in enumerate(per_bucket):
            storage.write_bytes(self._hash_path(task.rel, b), orjson.dumps(rows))
        return TaskOutput(docs_in=n, counts={"hashed": n})

    # bucket: in global order (input file, then line) the first copy of each hash survives
    def _plan_buckets(self, ctx: RunContext) -> list[Task]:
        return [Task(key=f"bucket-{b:04d}", params={"bucket": b}) for b in range(self.config.buckets)]

    def _bucket_path(self, bucket: int) -> str:
        return storage.join(self.output_root, "work", "dups", f"bucket-{bucket:04d}.json")

    def _bucket_outputs(self, task: Task) -> list[str]:
        return [self._bucket_path(task.params["bucket"])]

    def _bucket(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        delay = float(os.environ.get("PHASED_STAGE_DELAY", "0"))
        if delay:
            time.sleep(delay)
        b = task.params["bucket"]
        rows = [row for f in ctx.inputs for row in orjson.loads(storage.read_bytes(self._hash_path(f.rel, b)))]
        rows.sort(key=lambda r: (r[1], r[2]))
        seen: set[str] = set()
        dups = []
        for h, index, line in rows:
            if h in seen:
                dups.append([index, line])
            seen.add(h)
        storage.write_bytes(self._bucket_path(b), orjson.dumps(dups))
        return TaskOutput(counts={"duplicates": len(dups)}, data={"duplicates": len(dups)})

    def _count(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        return StepResult(data={"duplicates": sum(r.data["duplicates"] for r in records)})

    # mark: Dolma-style attribute rows, [[0, len, 1]] on every later copy
    def _mark_path(self, rel: str) -> str:
        return storage.join(self.output_root, "attributes", rel)

    def _mark_outputs(self, task: Task) -> list[str]:
        return [self._mark_path(task.rel)]

    def _mark(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        index = [f.rel for f in ctx.inputs].index(task.rel)
        dups = {
            line for b in range(self.config.buckets) for i, line in orjson.loads(storage.read_bytes(self._bucket_path(b))) if i == index
        }
        marked = 0
        # Bad records were counted in the hash phase; reading the file again must not count them twice.
        with JsonlWriter(self._mark_path(task.rel)) as out:
            for line, doc in read_documents(task.path, Quarantine()):
                spans = [[0, len(doc["text"]), 1]] if line in dups else []
                marked += bool(spans)
                out.write_many([{"id": doc["id"], "attributes": {"dup": spans}}])
        return TaskOutput(counts={"marked": marked, "docs_out": out.count})


def make_stage(overrides: dict) -> PhasedStage:
    return PhasedStage(load_config(PhasedConfig, None, overrides))


if __name__ == "__main__":
    run_stage(make_stage(orjson.loads(sys.argv[1])))
