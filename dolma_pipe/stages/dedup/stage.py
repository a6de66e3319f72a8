"""The ``dedup`` stage: its phases, chosen by the config, in order.

=============  ==============  ==========================================================
phase          tasks           what
=============  ==============  ==========================================================
scan           input files     keys, paragraph keys, MinHash bands, decontamination hits
documents      hash ranges     first copy of each document key (exact mode)
bands          hash ranges     MinHash candidate pairs
verify         input files     candidate pairs checked (``minhash.verify``)
clusters       one             connected components, survivors, ``_clusters.jsonl.gz``
graph ...      hash ranges     the same, in bounded memory, past ``minhash.cluster_memory``
                               (:mod:`.scaleout`: star steps, labels, numbers, names)
removed        input files     documents removed whole (when paragraphs are deduplicated too)
paragraphs     hash ranges     first copy of each paragraph key (exact mode)
bloom          one             Bloom mode's test-and-set in the global order, then publish
suffix         input files     each file's text and its suffix array (``substrings``)
substrings     key ranges      repeated substrings, by merging the files' suffix arrays
attributes     input files     Dolma attribute files
=============  ==============  ==========================================================

Each phase is a row of :data:`PHASES`: which family (:mod:`.phases`, :mod:`.clustering`,
:mod:`.summary`) it belongs to, which of the family's methods plan it, run its tasks, name their
outputs and end it, and which configs have it. A family is built from the resolved run
(:class:`.run.DedupRun`: the config, :class:`.config.DedupResolved`, the work files' layout).

Every decision follows one global order (input files by relative name, then line, then
paragraph), never which worker ran first, so outputs are the same bytes for any number of
processes, on Ray, and across reruns; each phase has its own completion markers, so a killed
run resumes in the phase (and at the task) where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from dolma_pipe import paths, storage
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import InputFile
from dolma_pipe.stage import Phase, Repeat, Stage, StepResult, Task, TaskOutput
from dolma_pipe.workdir import WorkDir

from . import decontam
from .bloommode import FilterState
from .clustering import ScaleOut
from .config import BloomResolved, BloomStart, DedupConfig, DedupResolved, attribute_set_name, check, resolved
from .phases import BloomMode, Exact, NearDuplicates, Scan, Substrings
from .run import (
    DedupRun,
    Family,
    always,
    exact_documents,
    exact_paragraphs,
    needs_removed,
    verifies,
    with_minhash,
    with_substrings,
    writes_filter,
)
from .summary import Attributes
from .workfiles import Layout


class DedupStage(Stage[DedupConfig]):
    name = "dedup"
    description = "exact, paragraph (Bloom filter) and near-duplicate (MinHash LSH) deduplication, and decontamination"
    config_model = DedupConfig
    depends_on_input_set = True
    run_keys = frozenset({"keep_work"})

    def __init__(self, config: DedupConfig):
        check(config)
        super().__init__(config)
        self.set_name = attribute_set_name(config) or ""
        self.document_dir = config.dedupe.document_dir or paths.DOCUMENTS
        self._root = paths.attribute_output_root(config.documents, self.set_name, config.destination, self.document_dir)
        # Under Dolma's work_dir.output, a folder per attribute set: configs often share one work_dir.
        work_out = config.work_dir.output if config.work_dir is not None else None
        work = storage.join(work_out, self.set_name) if work_out else storage.join(self._root, "_work")
        if config.substrings is not None and storage.is_remote(work):
            # Its suffix arrays are built and merged over memory-mapped work files: refused now,
            # not after the whole scan phase has run.
            found = f"{work_out} is on S3" if work_out else f"without work_dir.output it would be {work}, on S3"
            raise ConfigError(
                f"config key 'work_dir.output': substring dedup needs a local work directory, and {found}; "
                "give work_dir.output a local folder (the documents and attributes may stay on S3)"
            )
        self.layout = Layout(WorkDir(work))
        self._filter: FilterState | None = None

    # ---- where things go ----------------------------------------------------------------

    @property
    def output_root(self) -> str:
        return self._root

    @property
    def destination_key(self) -> str:
        return "dedupe.name"

    @property
    def work(self) -> WorkDir:
        return self.layout.work

    def keeps_work_file(self, path: str) -> bool:
        # Bloom mode's record of what it published and the filter it started from: a rerun after
        # publishing (or with --force) needs them to know where the run started.
        return path.endswith(("/bloom/published.json", "/bloom/initial.bloom"))

    def output_name(self, rel: str) -> str:
        return paths.attribute_file_name(rel)

    def plan_inputs(self) -> list[InputFile]:
        inputs = super().plan_inputs()
        if self.document_dir == paths.DOCUMENTS:
            return inputs
        # Relative names below the custom documents folder, as Dolma's path rule has them.
        out = []
        for f in inputs:
            rel = paths.relative_below(f.path, self.document_dir) or f.rel
            out.append(InputFile(path=f.path, rel=rel, size=f.size, mtime=f.mtime))
        if len({f.rel for f in out}) != len(out):
            raise paths.PathError(f"two inputs have the same name below '{self.document_dir}/'; rename one")
        return sorted(out, key=lambda f: f.rel)

    # ---- the run --------------------------------------------------------------------------

    def resolve(self, inputs: list[InputFile]) -> DedupResolved:
        """Hash ranges, MinHash bands x rows, Bloom sizes and the filter the run starts from, and the
        evaluation files decontamination reads."""
        c = self.config
        evaluation = decontam.identity(c.decontamination) if c.decontamination is not None else None
        bloom = None
        if c.bloom_filter is not None:
            state = self._filter = FilterState(c, self.layout, self.output_root)
            sized = {} if c.bloom_filter.read_only else {"bits": state.bits, "hashes": state.hashes}
            bloom = BloomResolved(start=BloomStart(**state.identity()), **sized)
        return resolved(c, sum(f.size for f in inputs), evaluation, bloom)

    def phases(self) -> list[Phase]:
        """The phases of this config, built from the resolved run: asked after :meth:`Stage.prepare`,
        on the driver and on each worker from the pickled stage."""
        if not isinstance(self.resolved, DedupResolved):
            raise RuntimeError("dedup's phases were asked for before its run was resolved (Stage.prepare)")
        run = DedupRun(self.config, self.resolved, self.layout, self.output_root, self.set_name, self._filter)
        rows = [row for row in PHASES if row.when(self.config)]
        families = {row.family: row.family(run) for row in rows}  # one of each, sharing the run
        return [row.phase(families[row.family]) for row in rows]


# ---- the phase table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One phase: the family whose methods plan it, run its tasks, name their outputs and end it
    (on the driver); the phase is in a run whose config ``when`` accepts."""

    name: str
    family: type[Family]
    plan: Callable[..., list[Task]]
    run: Callable[..., TaskOutput]
    outputs: Callable[..., list[str]]
    after: Callable[..., StepResult]
    when: Callable[[DedupConfig], bool] = always
    unit: str = "task"
    repeat: Callable[..., Repeat] | None = None  # the family's rounds, for a repeated phase

    def phase(self, family: Family) -> Phase:
        """This row's phase, its methods bound to ``family`` (an instance of :attr:`family`)."""

        def bound(method: Callable[..., Any]) -> Callable[..., Any]:
            return partial(method, family)

        return Phase(
            self.name,
            plan=bound(self.plan),
            run=bound(self.run),
            outputs=bound(self.outputs),
            after=bound(self.after),
            unit=self.unit,
            repeat=None if self.repeat is None else self.repeat(family),
        )


def _buckets(phase: str) -> Callable[..., list[str]]:
    """A hash-range task's output: its bucket of ``phase``."""
    return partial(Family.bucket_outputs, phase=phase)


def _files(phase: str) -> Callable[..., list[str]]:
    """A file-group task's outputs: its files' work files of ``phase``."""
    return partial(Family.file_outputs, phase=phase)


def _parts(phase: str, param: str) -> Callable[..., list[str]]:
    """A scaled-out clustering task's output: the part numbered by its ``param``."""
    return partial(ScaleOut.part_outputs, phase=phase, param=param)


# Every phase a dedup run can have, in order (the table in this module's docstring); a run has
# those whose ``when`` its config meets. ``Family``'s methods are every family's.
PHASES: tuple[Row, ...] = (
    Row("scan", Scan, Scan.plan, Scan.scan, Scan.outputs, Scan.after, unit="file"),
    Row("documents", Exact, Family.plan_buckets, Exact.documents, _buckets("documents"), Family.total, exact_documents),
    Row("bands", NearDuplicates, Family.plan_buckets, NearDuplicates.bands, _buckets("pairs"), Family.total, with_minhash),
    Row("verify", NearDuplicates, Family.plan_file_groups, NearDuplicates.verify, _files("verified"), Family.total, verifies, "file"),
    Row(
        "clusters",
        NearDuplicates,
        NearDuplicates.plan_clusters,
        NearDuplicates.clusters,
        NearDuplicates.clusters_outputs,
        Family.total,
        with_minhash,
    ),
    # Past minhash.cluster_memory (on every MinHash run: they plan no task when the single one fits).
    Row("graph", ScaleOut, ScaleOut.plan_graph, ScaleOut.graph, _parts("graph", "source"), Family.total, with_minhash),
    # The star steps: round after round while one leaves unsettled nodes (star-01, star-02, ...).
    Row(
        "star", ScaleOut, ScaleOut.plan_step, ScaleOut.step, ScaleOut.step_outputs, ScaleOut.after_step, with_minhash, repeat=ScaleOut.steps
    ),
    Row("labels", ScaleOut, ScaleOut.plan_labels, ScaleOut.labels, _parts("labels", "part"), Family.total, with_minhash),
    Row("numbers", ScaleOut, ScaleOut.plan_groups, ScaleOut.numbers, _parts("numbers", "group"), ScaleOut.after_numbers, with_minhash),
    Row("names", ScaleOut, ScaleOut.plan_groups, ScaleOut.names, ScaleOut.names_outputs, Family.total, with_minhash),
    Row(
        "clusters-file",
        ScaleOut,
        ScaleOut.plan_clusters_file,
        ScaleOut.clusters_file,
        ScaleOut.clusters_file_outputs,
        Family.total,
        with_minhash,
    ),
    Row("removed", Exact, Family.plan_file_groups, Exact.removed, _files("removed"), Family.total, needs_removed, "file"),
    Row("paragraphs", Exact, Family.plan_buckets, Exact.paragraphs, _buckets("paragraphs"), Family.total, exact_paragraphs),
    Row("bloom", BloomMode, Family.plan_one, BloomMode.bloom, BloomMode.outputs, BloomMode.publish, writes_filter),
    Row(
        "suffix", Substrings, Substrings.plan_files, Substrings.suffix, Substrings.suffix_outputs, Substrings.parts, with_substrings, "file"
    ),
    Row("substrings", Substrings, Substrings.plan_key_ranges, Substrings.substrings, _buckets("substrings"), Family.total, with_substrings),
    Row("attributes", Attributes, Family.plan_file_groups, Attributes.attributes, Attributes.outputs, Attributes.summary, unit="file"),
)
