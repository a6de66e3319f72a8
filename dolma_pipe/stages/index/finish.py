"""The step after the ``build`` phase, on the driver, every run: ``index.json`` (:mod:`.format`)
from the build tasks' records in input order, the part files and source copies an earlier build
left removed, and, when asked, the evaluation sets' n-grams found in the index counted
(:mod:`.contamination`); a summary of the index."""

from __future__ import annotations

from typing import Any

import orjson

from dolma_pipe import storage
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.stage import RunContext, StepResult

from .format import INFO, IndexInfo, Part, Source
from .run import IndexRun


def _where_the_text_is(kind: str, info: IndexInfo, root: str) -> str:
    if kind == "documents":
        return "beside them"
    if any(s.local_copy for s in info.sources):
        return "of the S3 shards copied beside them"
    if storage.is_remote(root) and any(storage.is_remote(s.path) for s in info.sources):
        return "read from the shards where they are, by a query's local copy"
    return "read in place"


class Finish:
    """Writes ``index.json``, removes stale parts, counts contamination, and says what was built."""

    def __init__(self, run: IndexRun):
        self.run = run

    def finish(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        run = self.run
        order = {f.rel: i for i, f in enumerate(ctx.inputs)}
        records = sorted(records, key=lambda r: order[r.key])
        info = IndexInfo(kind=run.kind, symbol=run.symbol, tokenizer=run.tokenizer)
        for i, r in enumerate(records):
            info.sources.append(Source.model_validate(r.data["source"]))
            info.parts += [Part(source=i, **p) for p in r.data["parts"]]
        removed = self._remove_stale(records)
        storage.write_bytes(storage.join(run.root, INFO), orjson.dumps(info.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
        index_bytes = sum(p.length * p.width for p in info.parts)
        data: dict[str, Any] = {
            "kind": run.kind,
            "sources": len(info.sources),
            "parts": len(info.parts),
            "documents": info.documents,
            "symbols": info.symbols,
            "index_bytes": index_bytes,
            "stale_parts_removed": removed,
        }
        lines = [
            f"index of {info.documents:,} documents, {info.symbols:,} {self._units} in "
            f"{len(info.parts):,} part(s) of {len(info.sources):,} source(s) -> {run.root}",
            f"  suffix arrays: {index_bytes / 1e6:,.1f} MB ({index_bytes / max(info.symbols, 1):.2f} bytes a symbol, the text "
            + _where_the_text_is(run.kind, info, run.root)
            + ")",
        ]
        if run.config.contamination is not None:
            data["contamination"] = self._contamination(lines)
        return StepResult(data=data, table="\n".join(lines))

    @property
    def _units(self) -> str:
        return "tokens" if self.run.kind == "tokens" else "bytes"

    def _contamination(self, lines: list[str]) -> dict[str, dict[str, Any]]:
        """Each evaluation set's n-grams found in the index; a line for each added to ``lines``."""
        from .contamination import count_contamination

        config = self.run.config.contamination
        assert config is not None
        found = count_contamination(self.run.root, config)
        lines.append(f"  evaluation n-grams ({config.ngram} {self._units}) found in the index:")
        for name, row in found.items():
            left_out = f" ({row['bad_records']:,} bad records left out)" if row["bad_records"] else ""
            lines.append(
                f"    {name}: {row['found']:,} of {row['ngrams']:,} ({row['share']:.2%}); "
                f"{row['documents_with_any']:,} of {row['documents']:,} documents{left_out}"
            )
        return found

    def _remove_stale(self, records: list[TaskRecord]) -> int:
        """Part files and source copies an earlier build left (other sources, other parts):
        removed, so the folder holds this index only."""
        root = self.run.root
        keep = {storage.join(root, rel) for r in records for rel in r.data.get("files", {})}
        removed = 0
        for folder in ("shards", "sources"):
            for path in storage.glob(storage.join(root, folder, "**")):
                name = path.rsplit("/", 1)[-1]
                if path not in keep and not name.startswith("."):
                    storage.remove(path)
                    removed += 1
        return removed
