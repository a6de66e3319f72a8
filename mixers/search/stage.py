"""``dolma-pipe mix-search``: the search as phases on the runner (local or Ray: one proxy per task).

The stage checks the config when it is made (the proxy's training config, every source and domain
tokenized as the proxy reads them, ``fit.spec`` loaded by ``mix``, a microanneal's checkpoint),
lists the shards as inputs and resolves what the run uses (:class:`.config.MixSearchResolved`); its
phases are :mod:`.phases` (``pools``, ``runs``, ``confirm``) built from one :class:`.run.SearchRun`.

Outputs under ``output``: ``runs/<key>/{result.json,config.yaml,train.log}``, ``search.json`` (every
run, the fit, the proposal and its predicted losses), ``proposal.olmix.yaml`` and, with
``fit.spec``, ``proposal.mix.yaml``. The ``fit`` and ``confirm`` sections change no run: a rerun
with another regression refits without training anything again.
"""

from __future__ import annotations

from dolma_pipe import paths, storage
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import InputFile
from dolma_pipe.stage import Phase, Stage
from dolma_pipe.workdir import WorkDir
from mixers.search import tables, tokenizers
from mixers.search.config import MixSearchConfig, MixSearchResolved
from mixers.search.phases import SearchPhases
from mixers.search.proxy import check_checkpoint_model, train_settings
from mixers.search.run import SearchRun
from mixers.search.target import SpecMix
from train.shards import ShardError, find_shards


class MixSearchStage(Stage[MixSearchConfig]):
    name = "mix-search"
    description = "choose a mixture by proxy training runs: a swarm with a regression, or microanneals"
    config_model = MixSearchConfig
    depends_on_input_set = True
    # Neither changes a run: a rerun with another fit refits, one with confirmation runs adds them.
    run_keys = frozenset({"fit", "confirm", "keep_work"})
    # The fit table's warning when its Spearman could be chance (:mod:`.tables`), where tests look for it.
    _cv_warning = staticmethod(tables.cv_warning)

    def __init__(self, config: MixSearchConfig):
        super().__init__(config)
        settings = train_settings(config.proxy.config, config.proxy.set)
        # Every source and domain tokenized alike, and as the proxy reads them: refused now, not at training.
        keys = config.domain_keys
        tokenizers.check(
            [(f"sources.{i}.paths", s.paths) for i, s in enumerate(config.sources)]
            + [(keys[d], p) for d, p in config.domain_paths.items()],
            vocab_size=settings.vocab_size,
            eos_id=settings.eos_id,
            proxy=f"proxy.config {config.proxy.config}",
            eval_tokenizer=config.eval.tokenizer,
        )
        # The mix the proposal is written as, checked by mix itself now rather than after the runs.
        spec = SpecMix(config.fit.spec, [s.name for s in config.sources]) if config.fit.spec is not None else None
        work = WorkDir(storage.join(config.output, "_work"))
        if config.microanneal is not None and not storage.exists(storage.join(config.microanneal.checkpoint, "trainer_state.json")):
            raise ConfigError(
                f"config key 'microanneal.checkpoint': {config.microanneal.checkpoint} is not a checkpoint (no trainer_state.json)"
            )
        if config.microanneal is not None:
            check_checkpoint_model(settings, config.microanneal.checkpoint)  # the anneals' model is the checkpoint's
        self.run = SearchRun(config, settings, spec, config.output, work)

    @property
    def names(self) -> list[str]:
        return self.run.names

    @property
    def output_root(self) -> str:
        return self.config.output

    @property
    def work(self) -> WorkDir:
        return self.run.work

    # ---- inputs and what a run resolves ---------------------------------------------------------

    def _shards(self, key: str, shard_paths: list[str]) -> list[tuple[str, str]]:
        try:
            return [(str(p), rel) for p, rel in find_shards(shard_paths)]
        except ShardError as e:
            raise paths.PathError(f"config key '{key}': {e}") from None

    def plan_inputs(self) -> list[InputFile]:
        """Every source's shards (``<source>/<name>``), then every domain's (``eval/<domain>/<name>``)."""
        found: list[tuple[str, str]] = []
        for i, s in enumerate(self.config.sources):
            found += [(p, f"{s.name}/{rel}") for p, rel in self._shards(f"sources.{i}.paths", s.paths)]
        keys = self.config.domain_keys
        for d, shard_paths in self.config.domain_paths.items():
            found += [(p, f"eval/{d}/{rel}") for p, rel in self._shards(keys[d], shard_paths)]
        out = []
        for p, rel in found:
            info = storage.stat(p)
            out.append(InputFile(path=p, rel=rel, size=info.size, mtime=info.mtime))
        return out

    def resolve(self, inputs: list[InputFile]) -> MixSearchResolved:
        """The proxy's training config as the trainer reads it, and the checkpoint anneals start from."""
        ma = self.config.microanneal
        if ma is None:
            return MixSearchResolved(proxy=self.run.settings.raw)
        state = storage.stat(storage.join(ma.checkpoint, "trainer_state.json"))
        return MixSearchResolved(proxy=self.run.settings.raw, checkpoint=(ma.checkpoint, state.size, state.mtime))

    def phases(self) -> list[Phase]:
        return SearchPhases(self.run).phases()
