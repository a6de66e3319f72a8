"""``dolma-pipe report``: the runs below some folders, summarised file by file on the executor and
written as one offline page plus the data behind it.

Phases:

``documents``  one task per corpus document file (what tag, dedup, stats and mix runs read): its
               summary with its attribute sets and the mix rules that read it
               (:func:`.summarize.summarize_documents`); the driver merges them.
``tokens``     one task per token shard's metadata (every tokenize run): tokens and lengths per
               source; the driver then builds the sections (:mod:`.sections`) and writes the page
               (:mod:`.page`).

The runs found, their fingerprints and the mix rules are the run's resolved values, so a run redone
or added below the folders redoes what depends on it, and a rerun over unchanged runs does nothing
but write the page again.
"""

from __future__ import annotations

import re
from collections import Counter

from dolma_pipe import paths, storage
from dolma_pipe import tokenizer as toks
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Stage, StepResult, Task, TaskOutput
from report import charts, page, sections
from report.config import ReportConfig
from report.discover import RunSet, attribute_sets, corpus_files, discover, token_metadata, warn
from report.resolved import Clusters, ReportResolved, TokenizerFile
from report.summarize import RuleSet, merge, summarize_documents, summarize_tokens
from report.training import read_train_run

_WORD = re.compile(r"\w+")


class ReportStage(Stage[ReportConfig]):
    name = "report"
    description = "one offline HTML page (and its data) of what every stage did to the corpus"
    config_model = ReportConfig
    run_keys = frozenset({"title", "series_points"})
    resolved: ReportResolved

    def __init__(self, config: ReportConfig):
        super().__init__(config)
        self.found = RunSet()
        self.rule_sets: dict[str, RuleSet] = {}

    @property
    def output_root(self) -> str:
        return self.config.destination

    # ---- what the report reads ------------------------------------------------------------------

    def input_patterns(self) -> list[str]:
        return []

    def plan_inputs(self) -> list[InputFile]:
        self.found = discover(list(self.config.runs), self.output_root)
        warn(self.found.problems)
        self.rule_sets = {f"{g.run} / {g.name}": RuleSet.of(f"{g.run} / {g.name}", g.rules, g.verdicts, g.short) for g in self.found.groups}
        return corpus_files(self.found)

    def _tokenizer_name(self) -> str | None:
        if self.config.tokenizer:
            return self.config.tokenizer
        for run in self.found.of("tokenize"):
            name = (run.manifest.config.get("tokenizer") or {}).get("name_or_path")
            if name:
                return str(name)
        return None

    def resolve(self, inputs: list[InputFile]) -> ReportResolved:
        return ReportResolved(
            runs=tuple((r.root, r.stage, r.status, r.manifest.fingerprint) for r in self.found.runs),
            rules={k: rs.rules.digest() for k, rs in sorted(self.rule_sets.items())},
            tokenizer=self._tokenizer_file(),
            clusters=self._clusters(),
            contamination=tuple(
                sorted(
                    run.manifest.config["decontamination"]["attribute_name"]
                    for run in self.found.of("dedup")
                    if run.manifest.config.get("decontamination")
                )
            ),
        )

    def _tokenizer_file(self) -> TokenizerFile | None:
        name = self._tokenizer_name()
        if not name:
            return None
        try:
            path = toks.resolve(name)
            return TokenizerFile(path=path, digest=toks.file_digest(path))
        except toks.TokenizerError as exc:
            self.found.problems.append(f"tokenizer {name!r}: {exc}; token weights are left out")
            return None

    def _clusters(self) -> dict[str, Clusters]:
        """The clusters of every MinHash dedup run that kept its clusters file, by the run's name."""
        out = {}
        for run in self.found.of("dedup"):
            path = storage.join(run.root, "_clusters.jsonl.gz")
            if run.manifest.config.get("minhash") and storage.exists(path):
                sizes, largest = sections.read_clusters(path, self.config.largest_clusters, self.config.members_per_cluster)
                out[run.name] = Clusters.model_validate({"sizes": {str(k): v for k, v in sorted(sizes.items())}, "largest": largest})
        return out

    # ---- phases -------------------------------------------------------------------------------

    def phases(self) -> list[Phase]:
        return [
            Phase("documents", plan=self._plan_documents, run=self._documents, after=self._merge_documents, unit="file"),
            Phase("tokens", plan=self._plan_tokens, run=self._tokens, after=self._write),
        ]

    def _plan_documents(self, ctx: RunContext) -> list[Task]:
        sets = attribute_sets(self.found)
        groups: dict[str, list[str]] = {}
        for g in self.found.groups:
            for path in g.files:
                groups.setdefault(path, []).append(f"{g.run} / {g.name}")
        wanted: dict[str, list[str]] = {}
        for clusters in self.resolved.clusters.values():
            for c in clusters.largest:
                for m in c.members:
                    wanted.setdefault(m.file, []).append(m.id)
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

    def _documents(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        tok = self.resolved.tokenizer
        cfg = self.config
        summary = summarize_documents(
            task.path,
            task.path,
            task.params["sets"],
            [self.rule_sets[k] for k in task.params["rules"]],
            set(task.params["texts"]),
            list(self.resolved.contamination),
            quarantine,
            seed=cfg.seed,
            sample_chars=cfg.sample_chars,
            samples_per_rule=max(cfg.samples_per_rule, cfg.contaminated_samples),
            tokenizer=toks.load(tok.path) if tok else None,
        )
        docs = sum(w[0] for w in summary["counts"]["sources"].values())
        return TaskOutput(docs_in=docs, data=summary)

    def _sample_limits(self) -> dict[str, int]:
        return {"removed": self.config.samples_per_rule, "contaminated": self.config.contaminated_samples}

    def _merge_documents(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        merged = merge((r.data for r in records), self._sample_limits())
        return StepResult(data=merged)

    def _plan_tokens(self, ctx: RunContext) -> list[Task]:
        tasks = []
        for run, split, path in token_metadata(self.found):
            info = storage.stat(path)
            rel = f"{run}/{split}/{path.rsplit('/', 1)[-1]}"
            tasks.append(
                Task(
                    key=rel, inputs=(InputFile(path=path, rel=rel, size=info.size, mtime=info.mtime),), params={"run": run, "split": split}
                )
            )
        return tasks

    def _tokens(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        return TaskOutput(data=summarize_tokens(task.params["run"], task.params["split"], task.path))

    def _write(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        merged = ctx.steps["documents"].data
        tokens = merge((r.data for r in records), {})
        counts = {**merged["counts"], **tokens["counts"]}
        samples = merged["samples"]
        self._match_evaluation(samples.get("contaminated", {}))
        weigh = sections.Weigher(counts.get("bytes_per_token", {}))
        cfg = self.config
        trains = [read_train_run(folder) for folder in self.found.train_runs]
        parts = [
            sections.overview(self.found, counts, weigh, trains),
            sections.tag(self.found, counts, weigh),
            sections.mixes(self.found, self.rule_sets, counts, samples.get("removed", {}), weigh),
            sections.dedup(self.found, counts, samples, merged["texts"], self.resolved.clusters, weigh),
            sections.tokenize(counts),
            sections.train(self.found, trains, cfg.series_points),
        ]
        for part in parts:
            for c in part["charts"]:
                drawn = charts.spec(c)
                if drawn is not None:
                    c["vega"] = drawn
        docs = sum(w[0] for w in counts.get("sources", {}).values())
        subtitle = (
            f"{len(self.found.runs)} runs, {len(self.found.train_runs)} training runs below {', '.join(cfg.runs)}; "
            f"{docs:,} corpus documents summarised"
        )
        data = {"title": cfg.title, "subtitle": subtitle, "has_tokens": weigh.has_tokens, "sections": parts}
        runs = [
            {"root": r.root, "name": r.name, "stage": r.stage, "status": r.status, "finished": r.finished, "totals": r.manifest.totals}
            for r in self.found.runs
        ]
        written = page.write(self.output_root, data, {"counts": counts, "samples": samples}, runs)
        path = storage.join(self.output_root, page.PAGE)
        n_charts = sum(len(p["charts"]) for p in parts)
        table = f"report: {path} ({written[page.PAGE] / 1e6:.2f} MB, {n_charts} charts in {len(parts)} sections)\n  data: {storage.join(self.output_root, page.DATA_DIR)}/"
        table += "".join(f"\n{line}" for line in self._left_out_lines())
        return StepResult(data={"page": path, "bytes": written, "charts": {p["id"]: len(p["charts"]) for p in parts}}, table=table)

    def _left_out_lines(self) -> list[str]:
        """What the summary says of the runs it left out and what it could not read (the page's Notes)."""
        problems = self.found.problems
        if not problems:
            return []
        statuses = Counter(r.status for r in self.found.runs if not r.complete)
        unreadable = len(self.found.unreadable)
        parts = [f"{n:,} {status} run{'s' if n > 1 else ''}" for status, n in sorted(statuses.items())]
        if unreadable:
            parts.append(f"{unreadable:,} unreadable manifest{'s' if unreadable > 1 else ''}")
        head = f"  left out: {', '.join(parts)} (the page's Notes list them)" if parts else "  notes (also on the page):"
        return [head, *(f"    {p}" for p in problems)]

    def _match_evaluation(self, contaminated: dict[str, list]) -> None:
        """Beside each sampled contaminated paragraph, the evaluation document it shares words with."""
        if not contaminated:
            return
        from dolma_pipe.documents import read_documents

        evaluation = []
        for run in self.found.of("dedup"):
            section = run.manifest.config.get("decontamination")
            if not section:
                continue
            n = int(section.get("ngram_length") or 13)
            for pattern in section.get("evaluation") or []:
                for path in storage.glob(pattern):
                    for _, doc in read_documents(path, Quarantine()):
                        evaluation.append((path, str(doc.get("id")), doc["text"], n))
        for rows in contaminated.values():
            for _, record in rows:
                words = [w.lower() for w in _WORD.findall(record["paragraph"])]
                for path, doc_id, text, n in evaluation:
                    hit = _shared_ngram(words, text, n)
                    if hit is not None:
                        start, end = hit
                        lo = max(0, start - 200)
                        record["match"] = {"id": doc_id, "file": path, "text": text[lo : end + 200], "spans": [[start - lo, end - lo]]}
                        break


def _shared_ngram(words: list[str], text: str, n: int) -> tuple[int, int] | None:
    """Character span in ``text`` of the first word n-gram it shares with ``words`` (lowercase words)."""
    matches = list(_WORD.finditer(text))
    if len(words) < n or len(matches) < n:
        n = min(len(words), len(matches))
        if n == 0:
            return None
    grams = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    lowered = [m.group(0).lower() for m in matches]
    for i in range(len(lowered) - n + 1):
        if tuple(lowered[i : i + n]) in grams:
            return matches[i].start(), matches[i + n - 1].end()
    return None
