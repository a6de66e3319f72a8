"""``dolma-pipe index``: one suffix array per shard of a corpus, built as tasks on the runner.

Two kinds of corpus:

- **token shards** written by ``tokenize`` (the trainer's data; :mod:`.sources` lists them): a
  local ``.npy`` is read in place (its array indexes it where it is; nothing is copied), one on
  S3 is copied by its task (kept in a local index to answer from), its documents from its
  sidecar; the tokenizer and dtype come from the tokenize run's manifest unless given;
- **documents**: each file's documents (read as every stage reads them) give a byte text, their
  UTF-8 text with 0xFF after each (no match crosses it), and the documents' ids and lines.

One task per source file builds its part or parts (a source whose array would not fit
``memory_per_task`` is indexed in several parts, cut between documents); the step after writes
``index.json`` (:mod:`.format`), removes parts an earlier build left, and, when asked, counts the
evaluation sets' n-grams found in the index. Resumable per source (a rerun after a shard
changed, or with a part damaged since, rebuilds that shard's parts only); the same files for any
process count, local or Ray, since each part depends on its source alone.

The stage settles the run once (:func:`.run.settle`) and builds its phase from the resolved run
(:class:`.run.IndexRun`): the tasks are :mod:`.build`'s, the step after :mod:`.finish`'s.
"""

from __future__ import annotations

from dolma_pipe import paths
from dolma_pipe.manifest import InputFile, TaskRecord
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Phase, RunContext, Stage, Task, TaskOutput
from train.shards import ShardError

from .build import Build

# The table a part's size is worked out from (:func:`.run.settle`); named here for tests to set.
from .config import MEMORY_PER_SYMBOL as MEMORY_PER_SYMBOL
from .config import IndexConfig
from .files import changed_sources, damaged_parts
from .finish import Finish
from .resolved import IndexResolved
from .run import IndexRun, settle
from .sources import list_shards


class IndexStage(Stage[IndexConfig]):
    name = "index"
    description = "suffix arrays over token shards or documents: exact counts, finding and tracing text"
    config_model = IndexConfig
    # A source's parts depend on it alone (a new or changed shard redoes its own task); the
    # contamination counts are the step after, run every time.
    run_keys = frozenset({"contamination"})

    def __init__(self, config: IndexConfig):
        super().__init__(config)
        # Settled here, not in resolve(): a bad dtype, tokenizer or destination is refused before
        # anything runs. The tokenizer as index.json records it travels with the pickled stage.
        self._settled, self.tokenizer = settle(config)

    @property
    def output_root(self) -> str:
        return self.config.destination

    def input_patterns(self) -> list[str]:
        return list(self.config.documents or [])

    def plan_inputs(self) -> list[InputFile]:
        """Documents: the files the patterns match. Token shards: every shard of the paths given
        (``train.shards``' rule: no hidden or ``_`` names, nothing of another run), named by its
        path below the folder the given paths share, so shards of equal names in two folders
        (``tok/train`` and ``tok/val``) are ``train/part-00000.npy`` and ``val/part-00000.npy``;
        one folder's shards keep their own names."""
        if self._settled.kind == "documents":
            return super().plan_inputs()
        assert self.config.shards is not None
        try:
            return [InputFile(path=info.path, rel=rel, size=info.size, mtime=info.mtime) for info, rel in list_shards(self.config.shards)]
        except ShardError as exc:
            raise paths.PathError(str(exc)) from None

    def resolve(self, inputs: list[InputFile]) -> IndexResolved:
        return self._settled

    def _run(self) -> IndexRun:
        if not isinstance(self.resolved, IndexResolved):
            raise RuntimeError("the index's phases were asked for before its run was resolved (Stage.prepare)")
        return IndexRun(self.config, self.resolved, self.tokenizer)

    def phases(self) -> list[Phase]:
        """One phase, ``build`` (:mod:`.build`), and the step after it (:mod:`.finish`), built from
        the resolved run: asked after :meth:`Stage.prepare`, on the driver and on each worker."""
        run = self._run()
        build = Build(run)
        return [Phase("build", plan=build.plan, run=build.build, outputs=build.outputs, after=Finish(run).finish, unit="file")]

    def _build(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        """A build task (:meth:`.build.Build.build`), for a stage that wraps it."""
        return Build(self._run()).build(task, quarantine, ctx)

    def damaged_outputs(self, phase: str, records: list[TaskRecord]) -> dict[str, tuple[str, str]]:
        """Finished build tasks whose files no longer hash to what the build wrote (a flipped
        bit), or were built without checksums: redone by the runner, the rest kept."""
        tasks = {r.key: r.data for r in records}
        return {**changed_sources(tasks), **damaged_parts(self.output_root, tasks)}
