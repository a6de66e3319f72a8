"""What every phase of a search reads, fixed when the config loads: :class:`SearchRun`.

The stage (:mod:`.stage`) makes it once, after checking the config, and the phases
(:mod:`.phases`) are built from it (they pickle with it to the workers): the config, the proxy's
training settings as the trainer read them, ``fit.spec`` as ``mix`` loaded it, and where the run's
files go (``<output>/runs/<key>/``, ``search.json``, the pools under ``_work/``). It also holds the
few rules every phase shares: the tokens each source has, its cap at a size, and a proxy task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from dolma_pipe import storage
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import TaskRecord
from dolma_pipe.stage import RunContext, Task
from dolma_pipe.workdir import WorkDir
from mixers.search import mixtures
from mixers.search.config import MixSearchConfig
from mixers.search.proxy import TrainSettings
from mixers.search.target import SpecMix

# A proxy run's record files under ``runs/<key>/``.
RECORD_FILES = ("result.json", "config.yaml", "train.log")
# What search.json keeps of each run's result.
RUN_KEYS = ("key", "weights", "tokens", "steps", "domains")


@dataclass(frozen=True)
class SearchRun:
    """One search's fixed values: config, proxy settings, ``fit.spec`` and layout."""

    config: MixSearchConfig
    settings: TrainSettings  # the proxy's training config, checked (the manifest's resolved.proxy)
    spec: SpecMix | None  # the mix the proposal is written as (fit.spec), loaded by mix itself
    root: str  # the output
    work: WorkDir  # the pools

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.config.sources]

    @property
    def domains(self) -> list[str]:
        return list(self.config.domain_paths)

    # ---- where things go -------------------------------------------------------------------------

    def pool_path(self, name: str) -> str:
        return self.work.path("pools", f"{name}.npz")

    def record_dir(self, key: str) -> str:
        return storage.join(self.root, "runs", key)

    def record_files(self, key: str) -> list[str]:
        return [storage.join(self.record_dir(key), f) for f in RECORD_FILES]

    def path(self, name: str) -> str:
        """A file of the search's own at the top of the output (``search.json``, the proposal's)."""
        return storage.join(self.root, name)

    def write_search(self, summary: dict[str, Any]) -> None:
        storage.write_bytes(self.path("search.json"), json.dumps(summary, indent=1).encode())

    # ---- the sources' tokens and caps ------------------------------------------------------------

    def available(self, ctx: RunContext) -> np.ndarray:
        """Each source's tokens, as the ``pools`` phase counted them."""
        return np.array([ctx.steps["pools"].data["available"][n] for n in self.names], dtype=np.float64)

    def max_repetition(self) -> np.ndarray:
        return np.array([s.max_repetition for s in self.config.sources], dtype=np.float64)

    def proxy_cap(self, ctx: RunContext, tokens: int) -> np.ndarray:
        return mixtures.caps(self.available(ctx), self.max_repetition(), tokens)

    def check_feasible(self, ctx: RunContext, key: str, weights: dict[str, float], tokens: int) -> None:
        """A ConfigError naming the cap to raise when a proxy of ``tokens`` cannot take ``weights``."""
        names = self.names
        w = mixtures.normalise(weights, names)
        cap = self.proxy_cap(ctx, tokens)
        over = [n for n, x, c in zip(names, w, cap) if x > c + 1e-9]
        if over:
            i = names.index(over[0])
            raise ConfigError(
                f"{key}: source {over[0]!r} cannot give {w[i]:.3f} of {tokens:,} tokens within sources.{i}.max_repetition "
                f"{self.config.sources[i].max_repetition:g}: raise it or lower proxy.tokens"
            )


def proxy_task(key: str, weights: dict[str, float], tokens: int, seed: int, init_from: str | None = None) -> Task:
    """One proxy run as a task of the ``runs`` or ``confirm`` phase (its params are its marker's)."""
    return Task(key=key, params={"weights": weights, "tokens": tokens, "seed": seed, "init_from": init_from})


def results(records: list[TaskRecord]) -> list[dict[str, Any]]:
    """The proxy runs' results (their ``result.json``), in key order."""
    return [r.data for r in sorted(records, key=lambda r: r.key)]
