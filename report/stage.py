"""``dolma-pipe report``: the runs below some folders, summarised file by file on the executor and
written as one offline page plus the data behind it.

Phases (:mod:`.phases`, built from the run value of :mod:`.run`):

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

from dolma_pipe import storage
from dolma_pipe import tokenizer as toks
from dolma_pipe.manifest import InputFile
from dolma_pipe.stage import Phase, Stage
from report import sections
from report.config import ReportConfig
from report.discover import RunSet, corpus_files, discover, warn
from report.phases import report_phases
from report.resolved import Clusters, ReportResolved, TokenizerFile
from report.run import ReportRun
from report.summarize import RuleSet


class ReportStage(Stage[ReportConfig]):
    name = "report"
    description = "one offline HTML page (and its data) of what every stage did to the corpus"
    config_model = ReportConfig
    run_keys = frozenset({"title", "series_points"})
    resolved: ReportResolved

    def __init__(self, config: ReportConfig):
        super().__init__(config)
        # What plan_inputs() found below the folders: the resolved values are read from it, and
        # the phases are built from it (pickled with the stage to workers).
        self.found = RunSet()
        self.rule_sets: dict[str, RuleSet] = {}

    @property
    def output_root(self) -> str:
        return self.config.destination

    def input_patterns(self) -> list[str]:
        return []

    def plan_inputs(self) -> list[InputFile]:
        self.found = discover(list(self.config.runs), self.output_root)
        warn(self.found.problems)
        self.rule_sets = {f"{g.run} / {g.name}": RuleSet.of(f"{g.run} / {g.name}", g.rules, g.verdicts, g.short) for g in self.found.groups}
        return corpus_files(self.found)

    def resolve(self, inputs: list[InputFile]) -> ReportResolved:
        return ReportResolved(
            runs=tuple((r.root, r.stage, r.status, r.manifest.fingerprint) for r in self.found.runs),
            rules={k: rs.rules.digest() for k, rs in sorted(self.rule_sets.items())},
            tokenizer=_tokenizer_file(self.config, self.found),
            clusters=_clusters(self.config, self.found),
            contamination=tuple(
                sorted(
                    run.manifest.config["decontamination"]["attribute_name"]
                    for run in self.found.of("dedup")
                    if run.manifest.config.get("decontamination")
                )
            ),
        )

    def phases(self) -> list[Phase]:
        return report_phases(ReportRun(self.config, self.resolved, self.found, self.rule_sets))


def _tokenizer_name(config: ReportConfig, found: RunSet) -> str | None:
    """The config's tokenizer, else the first one a tokenize run found used."""
    if config.tokenizer:
        return config.tokenizer
    for run in found.of("tokenize"):
        name = (run.manifest.config.get("tokenizer") or {}).get("name_or_path")
        if name:
            return str(name)
    return None


def _tokenizer_file(config: ReportConfig, found: RunSet) -> TokenizerFile | None:
    """The tokenizer's file and digest; None (and a note on the page) where it cannot be read."""
    name = _tokenizer_name(config, found)
    if not name:
        return None
    try:
        path = toks.resolve(name)
        return TokenizerFile(path=path, digest=toks.file_digest(path))
    except toks.TokenizerError as exc:
        found.problems.append(f"tokenizer {name!r}: {exc}; token weights are left out")
        return None


def _clusters(config: ReportConfig, found: RunSet) -> dict[str, Clusters]:
    """The clusters of every MinHash dedup run that kept its clusters file, by the run's name."""
    out = {}
    for run in found.of("dedup"):
        path = storage.join(run.root, "_clusters.jsonl.gz")
        if run.manifest.config.get("minhash") and storage.exists(path):
            sizes, largest = sections.read_clusters(path, config.largest_clusters, config.members_per_cluster)
            out[run.name] = Clusters.model_validate({"sizes": {str(k): v for k, v in sorted(sizes.items())}, "largest": largest})
    return out
