"""Phase ``attributes`` (per file group; :mod:`.attributes` writes each file) and the run's summary.

The summary is the last phase's step: what every phase found (the manifest's ``results``), the
names this attribute set can hold (the mixer's shorthand reads them), and the table printed at
the end of the run.
"""

from __future__ import annotations

import io
from typing import Any

from dolma_pipe.manifest import TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import RunContext, StepResult, Task, TaskOutput

from . import attributes
from .config import DedupConfig
from .run import Family, each_file, hex_checksum


class Attributes(Family):
    """The attribute files, and the summary of the run."""

    def attributes(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        parts = ctx.steps["suffix"].data["parts"] if "suffix" in ctx.steps else []
        scaled = self.run.scaled(ctx) is not None
        buckets = task.params["buckets"]
        key_ranges = 0
        if parts:
            # numpy (suffix arrays) is imported only by a run with a substrings pass.
            from . import substrings

            key_ranges = substrings.key_range_count(self.config, parts)

        def one(i: int, rel: str) -> TaskOutput:
            spans = b""
            if parts:
                spans = substrings.char_spans(self.layout, parts, [j for j, p in enumerate(parts) if p["file"] == i], key_ranges)
            return attributes.run_attributes(self.config, self.layout, self.run.attribute_path(rel), i, rel, buckets, spans, scaled)

        return each_file(task, one)

    def outputs(self, task: Task) -> list[str]:
        return [self.run.attribute_path(f.rel) for f in task.inputs]

    def summary(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        phases = {name: s.data for name, s in ctx.steps.items() if name != "evaluation"}
        phases["attributes"] = self.total(records, ctx).data
        scan_step = ctx.steps["scan"].data
        data: dict[str, Any] = {
            "parameters": scan_step["parameters"],
            "documents": scan_step["documents"],
            "marked": phases["attributes"]["counts"],
            "phases": phases,
            # Rows carry a name only where it marks something (as in Dolma): the mixer's shorthand
            # learns here which names this set can hold.
            "attribute_names": attribute_names(self.config),
        }
        f = self.run.filter
        if "bloom" in ctx.steps:
            data["filter"] = ctx.steps["bloom"].data["filter"]
        elif f is not None:
            data["filter"] = {"file": f.path, "checksum": hex_checksum(f.current), "read_only": True}
        if "clusters" in ctx.steps:
            scaled = ctx.steps.get("clusters-file")
            data["clusters"] = (scaled if scaled is not None and scaled.data.get("counts") else ctx.steps["clusters"]).data.get(
                "counts", {}
            )
            data["clusters_file"] = self.run.clusters_file
        return StepResult(data=data, table=self.table(data))

    def table(self, data: dict[str, Any]) -> str:
        c = self.config
        d, marked = c.dedupe, data["marked"]
        rows: list[tuple[str, str]] = [("documents", f"{data['documents']:,}")]
        if d.documents is not None:
            rows.append((f"duplicate documents ({d.documents.attribute_name})", f"{marked.get('marked_documents', 0):,}"))
        if d.paragraphs is not None:
            rows.append((f"duplicate paragraphs ({d.paragraphs.attribute_name})", f"{marked.get('marked_paragraphs', 0):,}"))
        if c.minhash is not None:
            clusters = data["clusters"]
            found = f"{clusters.get('clusters', 0):,} clusters of {clusters.get('clustered_documents', 0):,} documents"
            rows.append(
                (f"near-duplicate clusters ({c.minhash.attribute_name})", f"{found}, {marked.get('marked_near_duplicates', 0):,} marked")
            )
            rows.append(("clusters file", data["clusters_file"]))
        if c.decontamination is not None:
            rows.append((f"contaminated paragraphs ({c.decontamination.attribute_name})", f"{marked.get('marked_contaminated', 0):,}"))
        if c.substrings is not None:
            s = c.substrings
            spans = f"{marked.get('marked_substrings', 0):,} spans, {marked.get('marked_substring_chars', 0):,} characters"
            rows.append((f"repeated substrings ({s.attribute_name})", f"{spans}: repeats of at least {s.min_length} bytes (keep {s.keep})"))
        if "filter" in data:
            rows.append(("bloom filter", f"{data['filter']['file']} (checksum {data['filter']['checksum']})"))
        width = max(len(k) for k, _ in rows)
        buf = io.StringIO()
        buf.write(f"dedup {self.run.set_name}: attributes in {self.run.output_root}\n")
        for k, v in rows:
            buf.write(f"  {k.ljust(width)}  {v}\n")
        return buf.getvalue().rstrip("\n")


def attribute_names(config: DedupConfig) -> list[str]:
    """Every attribute name the run writes."""
    d = config.dedupe
    sections = (d.documents, d.paragraphs, config.minhash, config.decontamination, config.substrings)
    return sorted({s.attribute_name for s in sections if s is not None})
