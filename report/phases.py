"""The report's phases, built from its run value (:class:`.run.ReportRun`).

``documents`` (:class:`Documents`): one task per corpus document file, its summary with its
attribute sets and the mix rules that read it (:func:`.summarize.summarize_documents`); the
driver merges them. ``tokens`` (:class:`Tokens`): one task per token shard's metadata, tokens and
lengths per source; the driver then builds the sections (:mod:`.sections`) and writes the page
(:mod:`.page`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dolma_pipe import paths, storage
from dolma_pipe import tokenizer as toks
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, StepResult, Task, TaskOutput
from report import charts, page, sections
from report.discover import attribute_sets, token_metadata
from report.evaluation import match_evaluation
from report.run import ReportRun
from report.summarize import merge, summarize_documents, summarize_tokens
from report.training import read_train_run


def report_phases(run: ReportRun) -> list[Phase]:
    documents, tokens = Documents(run), Tokens(run)
    return [
        Phase("documents", plan=documents.plan, run=documents.summarize, after=documents.merge, unit="file"),
        Phase("tokens", plan=tokens.plan, run=tokens.summarize, after=tokens.write),
    ]


class Documents:
    """A task per corpus document file: what its attribute sets and the mix rules that read it say."""

    def __init__(self, run: ReportRun):
        self.run = run

    def plan(self, ctx: RunContext) -> list[Task]:
        found = self.run.found
        sets = attribute_sets(found)
        groups: dict[str, list[str]] = {}
        for g in found.groups:
            for path in g.files:
                groups.setdefault(path, []).append(f"{g.run} / {g.name}")
        wanted = self._wanted_texts()
        tasks = []
        for f in ctx.inputs:
            ids = sorted({i for rel, got in wanted.items() if f.path == rel or f.path.endswith("/" + rel) for i in got})
            names = sets.get(f.path, [])
            attribute_files = []
            for name in names:
                info = storage.stat(paths.attribute_path(f.path, name))
                attribute_files.append([name, info.size, info.mtime])
            params = {"sets": names, "attribute_files": attribute_files, "rules": groups.get(f.path, []), "texts": ids}
            tasks.append(Task(key=f.rel, inputs=(f,), params=params))
        return tasks

    def _wanted_texts(self) -> dict[str, list[str]]:
        """The ids of the largest clusters' members, by their file (relative to the dedup's documents)."""
        wanted: dict[str, list[str]] = {}
        for clusters in self.run.resolved.clusters.values():
            for c in clusters.largest:
                for m in c.members:
                    wanted.setdefault(m.file, []).append(m.id)
        return wanted

    def summarize(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        tok = self.run.resolved.tokenizer
        cfg = self.run.config
        summary = summarize_documents(
            task.path,
            task.path,
            task.params["sets"],
            [self.run.rule_sets[k] for k in task.params["rules"]],
            set(task.params["texts"]),
            list(self.run.resolved.contamination),
            quarantine,
            seed=cfg.seed,
            sample_chars=cfg.sample_chars,
            samples_per_rule=max(cfg.samples_per_rule, cfg.contaminated_samples),
            tokenizer=toks.load(tok.path) if tok else None,
        )
        docs = sum(w[0] for w in summary["counts"]["sources"].values())
        return TaskOutput(docs_in=docs, data=summary)

    def merge(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        return StepResult(data=merge((r.data for r in records), self.run.sample_limits))


class Tokens:
    """A task per token shard's metadata; then, on the driver, the page from everything summarised."""

    def __init__(self, run: ReportRun):
        self.run = run

    def plan(self, ctx: RunContext) -> list[Task]:
        tasks = []
        for run, split, path in token_metadata(self.run.found):
            info = storage.stat(path)
            rel = f"{run}/{split}/{path.rsplit('/', 1)[-1]}"
            tasks.append(
                Task(
                    key=rel, inputs=(InputFile(path=path, rel=rel, size=info.size, mtime=info.mtime),), params={"run": run, "split": split}
                )
            )
        return tasks

    def summarize(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return TaskOutput(data=summarize_tokens(task.params["run"], task.params["split"], task.path))

    def write(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        """The page and its data folder, from the documents' merged summary and the tokens'."""
        found, cfg = self.run.found, self.run.config
        merged = ctx.steps["documents"].data
        tokens = merge((r.data for r in records), {})
        counts = {**merged["counts"], **tokens["counts"]}
        samples = merged["samples"]
        match_evaluation(found, samples.get("contaminated", {}))
        weigh = sections.Weigher(counts.get("bytes_per_token", {}))
        parts = self._sections(counts, samples, merged["texts"], weigh)
        docs = sum(w[0] for w in counts.get("sources", {}).values())
        subtitle = (
            f"{len(found.runs)} runs, {len(found.train_runs)} training runs below {', '.join(cfg.runs)}; "
            f"{docs:,} corpus documents summarised"
        )
        data = {"title": cfg.title, "subtitle": subtitle, "has_tokens": weigh.has_tokens, "sections": parts}
        runs = [
            {"root": r.root, "name": r.name, "stage": r.stage, "status": r.status, "finished": r.finished, "totals": r.manifest.totals}
            for r in found.runs
        ]
        written = page.write(self.run.root, data, {"counts": counts, "samples": samples}, runs)
        path = self.run.page_path
        n_charts = sum(len(p["charts"]) for p in parts)
        table = (
            f"report: {path} ({written[page.PAGE] / 1e6:.2f} MB, {n_charts} charts in {len(parts)} sections)\n  data: {self.run.data_dir}/"
        )
        table += "".join(f"\n{line}" for line in self._left_out_lines())
        return StepResult(data={"page": path, "bytes": written, "charts": {p["id"]: len(p["charts"]) for p in parts}}, table=table)

    def _sections(self, counts: dict[str, Any], samples: dict[str, Any], texts: Any, weigh: sections.Weigher) -> list[dict[str, Any]]:
        """The page's sections in order, each chart with its drawn Vega spec."""
        found = self.run.found
        trains = [read_train_run(folder) for folder in found.train_runs]
        parts = [
            sections.overview(found, counts, weigh, trains),
            sections.tag(found, counts, weigh),
            sections.mixes(found, self.run.rule_sets, counts, samples.get("removed", {}), weigh),
            sections.dedup(found, counts, samples, texts, self.run.resolved.clusters, weigh),
            sections.tokenize(counts),
            sections.train(found, trains, self.run.config.series_points),
        ]
        for part in parts:
            for c in part["charts"]:
                drawn = charts.spec(c)
                if drawn is not None:
                    c["vega"] = drawn
        return parts

    def _left_out_lines(self) -> list[str]:
        """What the summary says of the runs it left out and what it could not read (the page's Notes)."""
        found = self.run.found
        problems = found.problems
        if not problems:
            return []
        statuses = Counter(r.status for r in found.runs if not r.complete)
        unreadable = len(found.unreadable)
        parts = [f"{n:,} {status} run{'s' if n > 1 else ''}" for status, n in sorted(statuses.items())]
        if unreadable:
            parts.append(f"{unreadable:,} unreadable manifest{'s' if unreadable > 1 else ''}")
        head = f"  left out: {', '.join(parts)} (the page's Notes list them)" if parts else "  notes (also on the page):"
        return [head, *(f"    {p}" for p in problems)]
