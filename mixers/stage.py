"""``mix``: Dolma's mixer (streams) and Dolmino-style token-target mixes (sources), as phases.

This module checks the spec, finds the run's output root and groups (:mod:`mixers.layout`),
resolves what the run uses (a source mix's tokenizer and requested tokens) and lists the inputs
with their attribute files; the phases are those of :mod:`mixers.streams` (filter, shard) or
:mod:`mixers.sources` (count, sample, shard).

Every task's outputs depend on its inputs alone, so outputs are byte-identical for any process
count and executor and across reruns, and a killed run resumes in the phase where it stopped.
Every output document has ``metadata.provenance = "<input file name>:<line>"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dolma_pipe import paths, storage
from dolma_pipe import tokenizer as toks
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import InputFile
from dolma_pipe.stage import Phase, Resolved, Stage
from dolma_pipe.workdir import WorkDir
from mixers.config import MixConfig
from mixers.layout import Group, MixLayout
from mixers.olmix import apply_mixture
from mixers.streams import Streams, dry_run

if TYPE_CHECKING:
    from mixers.quality import QualitySpec

# A mix of sources also imports mixers.dolmino, .quality, .tokens and .sources (numpy with them:
# about 0.1 CPU-second a process); a mix of Dolma's streams needs none of them, so they are
# imported where a spec with sources first needs them.


class MixResolved(Resolved):
    """What a mix run resolves: the attribute files its rules read (path, size, mtime), and for a
    mix of sources the tokenizer that counts (its file's digest, 16 hex digits) and each source's
    requested tokens (None for streams: left out of the manifest)."""

    attributes: tuple[tuple[str, int, float], ...]
    tokenizer: str | None = None
    requested_tokens: dict[str, int] | None = None


def check_spec(cfg: MixConfig) -> None:
    """Whole-spec checks the field types cannot express; ConfigError naming the key."""
    if bool(cfg.streams) == bool(cfg.sources):
        raise ConfigError("the mix spec needs either 'streams' (Dolma's mixer) or 'sources' (a Dolmino-style mix), not both or neither")
    names = [g.name for g in (cfg.streams or cfg.sources)]
    kind = cfg.kind
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise ConfigError(f"config key '{kind}.{i}.name': name {name!r} is used twice")
    if cfg.sources:
        from mixers import dolmino

        for key in ("output", "tokenizer"):
            if getattr(cfg, key) is None:
                raise ConfigError(f"config key '{key}' is required for a mix of sources")
        dolmino.requested_tokens(cfg)
    else:
        for key in ("output", "tokenizer", "target_tokens"):
            if getattr(cfg, key) is not None:
                raise ConfigError(f"config key '{key}' belongs to a mix of sources; streams set their output under streams.N.output")


class MixStage(Stage[MixConfig]):
    name = "mix"
    description = "mix sources into a corpus from a YAML spec (Dolma and Dolmino style)"
    config_model = MixConfig
    depends_on_input_set = True
    # Dolma's work_dir is accepted and unused; the others say how a run goes, not what it writes.
    run_keys = frozenset({"batch_size", "dryrun", "work_dir", "keep_work"})

    def __init__(self, config: MixConfig):
        # An olmix mixture file sets the sources' ratios; the run records the spec as applied.
        config = apply_mixture(config)
        super().__init__(config)
        check_spec(config)
        if config.sources:
            from mixers import dolmino, tokens

            assert config.tokenizer is not None
            # The file the name stands for (workers read it); the spec keeps the name as written.
            self.tokenizer_path = tokens.resolve(config.tokenizer)
            self.tokenizer_sha = tokens.digest(self.tokenizer_path)
            self.tokenizer_id = self.tokenizer_sha[:16]
            self.requested = dolmino.requested_tokens(config)
        else:
            self.tokenizer_path = self.tokenizer_id = self.tokenizer_sha = ""
            self.requested = {}
        self.layout = MixLayout(config)
        # Quality attributes resolved against the sources' attribute files, as their rules are.
        self.scoring: dict[int, QualitySpec] = {}
        if config.sources:
            from mixers import quality

            self.scoring = quality.resolve_all(config)
        self._attribute_files: list[InputFile] = []

    @property
    def output_root(self) -> str:
        return self.layout.root

    @property
    def destination_key(self) -> str:
        return "output" if self.config.sources else "destination"

    @property
    def work(self) -> WorkDir:
        return self.layout.work

    @property
    def dry_run(self) -> bool:
        return self.config.dryrun

    @property
    def groups(self) -> list[Group]:
        return self.layout.groups

    def resolve(self, inputs: list[InputFile]) -> MixResolved:
        """The attribute files the rules read, as they are (a tag or dedup run redone since gives
        other rows: the mix is redone too); sources: the tokenizer that counts (its file's digest)
        and each source's requested tokens."""
        attributes = tuple((f.path, f.size, f.mtime) for f in self._attribute_files)
        if not self.config.sources:
            return MixResolved(attributes=attributes)
        toks.ship(self.work, self.tokenizer_path, self.tokenizer_sha)  # for nodes that lack the file
        return MixResolved(attributes=attributes, tokenizer=self.tokenizer_id, requested_tokens=self.requested)

    def plan_inputs(self) -> list[InputFile]:
        """Every group's inputs (named ``<group>/<relative name>``), each with its attribute files."""
        inputs = []
        attributes = []
        for g in self.groups:
            for path, rel, info in paths.expand(list(g.patterns), exclude_under=self.output_root):
                for j, name in enumerate(g.rules.attribute_sets):
                    attr = paths.attribute_path(path, name)
                    try:
                        a = storage.stat(attr)
                    except storage.StorageError:
                        raise ConfigError(
                            f"config key '{g.key}.attributes.{j}': attribute set {name!r} has no file {attr} for {path}"
                        ) from None
                    attributes.append(InputFile(path=attr, rel=attr, size=a.size, mtime=a.mtime))
                inputs.append(InputFile(path=path, rel=f"{g.name}/{rel}", size=info.size, mtime=info.mtime))
        # Attribute files of a killed tag or dedup run look whole too.
        paths.refuse_unfinished([a.path for a in attributes])
        self._attribute_files = attributes
        return inputs

    def phases(self) -> list[Phase]:
        if self.config.dryrun:
            return dry_run(self.layout)
        if self.config.sources:
            from mixers.sources import Sources

            return Sources(self.layout, self.tokenizer_path, self.tokenizer_sha, self.requested, self.scoring).phases()
        return Streams(self.layout).phases()
