"""``stats``: what a corpus holds, per file and in total.

Counts documents, characters, UTF-8 bytes and whitespace words, per source,
with a log2 histogram of document lengths.  Per-file figures travel in the
completion markers (so a resumed run aggregates everything), and the totals are
written to ``<destination>/stats.json`` and printed as a table.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import orjson
from pydantic import Field

from dolma_pipe import storage
from dolma_pipe.config import PathStr, RunOptions
from dolma_pipe.documents import read_documents
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Stage, StepResult, Task, TaskOutput


class StatsConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1, description="input document files or globs (local or s3://)")
    destination: PathStr = Field(..., description="where stats.json, markers and errors are written")


def length_bucket(chars: int) -> str:
    """Upper bound of the power-of-two bucket holding ``chars`` (``"0"`` for empty texts)."""
    return "0" if chars == 0 else str(1 << math.ceil(math.log2(chars + 1)))


class StatsStage(Stage[StatsConfig]):
    name = "stats"
    description = "count documents, characters, bytes and words per source"
    config_model = StatsConfig

    @property
    def output_root(self) -> str:
        return self.config.destination

    def process(self, task: Task, quarantine: Quarantine) -> TaskOutput:
        per_source: dict[str, Counter] = {}
        lengths: Counter = Counter()
        docs = 0
        for _, doc in read_documents(task.path, quarantine):
            text = doc["text"]
            docs += 1
            src = per_source.setdefault(str(doc.get("source") or "(none)"), Counter())
            src["docs"] += 1
            src["chars"] += len(text)
            src["bytes"] += len(text.encode("utf-8", errors="surrogatepass"))
            src["words"] += len(text.split())
            lengths[length_bucket(len(text))] += 1
        data = {"sources": {k: dict(v) for k, v in per_source.items()}, "length_hist": dict(lengths)}
        return TaskOutput(docs_in=docs, data=data)

    def finish(self, records: list[TaskRecord]) -> StepResult:
        sources: dict[str, Counter] = {}
        lengths: Counter = Counter()
        for r in records:
            for name, counts in r.data["sources"].items():
                sources.setdefault(name, Counter()).update(counts)
            lengths.update(r.data["length_hist"])
        total: Counter = Counter()
        for counts in sources.values():
            total.update(counts)
        report = {
            "totals": dict(total),
            "sources": {k: dict(v) for k, v in sorted(sources.items())},
            "length_hist": {k: lengths[k] for k in sorted(lengths, key=int)},
        }
        storage.write_bytes(storage.join(self.output_root, "stats.json"), orjson.dumps(report, option=orjson.OPT_INDENT_2))
        return StepResult(data={"stats": report}, table=render_table(report))


def render_table(report: dict[str, Any]) -> str:
    header = ("source", "docs", "chars", "bytes", "words")
    rows = [(name, *(f"{c.get(k, 0):,}" for k in header[1:])) for name, c in report["sources"].items()]
    rows.append(("TOTAL", *(f"{report['totals'].get(k, 0):,}" for k in header[1:])))
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(header), *map(fmt, rows)])
