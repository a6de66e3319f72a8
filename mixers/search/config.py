"""The ``mix-search`` spec: sources as token shards, evaluation domains, the proxy runs, the method.

Checked when it loads (types, ranges, unknown keys) and when the stage is made (names that must
agree across sections); each mistake is one message naming the key. :class:`MixSearchResolved` is
what a run resolves from it (the manifest's ``resolved``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from dolma_pipe.config import PathStr, RunOptions, StrictModel
from dolma_pipe.stage import Resolved

# As a mix spec's source names (an olmix domain ``a:b`` is the source ``a.b``).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def _check_name(v: str) -> str:
    if not _NAME.match(v):
        raise ValueError("must start with a letter or digit and hold letters, digits, '_', '-' or '.' (as mix spec sources)")
    return v


class SearchSource(StrictModel):
    """One source (a domain of the mixture): its tokenized documents."""

    name: str = Field(..., description="the source's name (as in a Dolmino mix spec's sources and an olmix file's domains)")
    paths: list[PathStr] = Field(..., min_length=1, description="its token shards: .npy files or folders (tokenize's train/)")
    val: list[PathStr] = Field(default_factory=list, description="its held-out shards (tokenize's val/): an evaluation domain")
    max_repetition: float = Field(default=1.0, ge=1.0, description="most times a document may be used in a proposed mix (as in mix specs)")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name(v)


class EvalSection(StrictModel):
    domains: dict[str, list[PathStr]] = Field(
        default_factory=dict, description="evaluation domains beside the sources' val shards: name -> held-out token shards"
    )
    max_instances: int = Field(default=256, ge=1, description="instances evaluated per domain")
    tokenizer: PathStr | None = Field(default=None, description="tokenizer.json of the shards: adds bits per byte per domain")


class ProxySection(StrictModel):
    config: PathStr = Field(..., description="training config of a proxy (train/configs/tiny.yaml; for microanneal a stage-2 config)")
    set: list[str] = Field(default_factory=list, description="overrides of that config, as train's --set key=value")
    tokens: int = Field(..., gt=0, description="tokens each proxy trains on: its mix's size and its steps (tokens / batch tokens)")
    nproc: int = Field(default=1, ge=1, description="processes per proxy (torchrun --standalone when above 1)")
    threads: int = Field(
        default=1, ge=1, description="CPU threads per process of a proxy: fixed, so a run's losses are the same on any executor"
    )
    scratch: str | None = Field(
        default=None, description="local folder of a running proxy's data and checkpoints (default: the system's temporary folder)"
    )


class SwarmSection(StrictModel):
    runs: int = Field(default=16, ge=3, description="proxy runs (mixtures sampled around the prior)")
    seed: int = Field(default=0, ge=0, description="seeds the sampled mixtures, the documents taken and the search")
    prior: dict[str, float] = Field(default_factory=dict, description="the prior mixture (default: each source's share of the tokens)")
    concentration: float = Field(default=1.0, gt=0, description="Dirichlet concentration around the prior (per source: n * prior * this)")


class FitSection(StrictModel):
    """How the swarm's runs become a proposal: changing it refits, it trains nothing again."""

    objective: dict[str, float] = Field(
        default_factory=dict, description="weights of the domains' losses in the objective (default: every domain, weight 1)"
    )
    regression: Literal["linear", "loglinear", "quadratic", "gbm"] = Field(
        default="loglinear", description="model of each domain's loss from the weights: linear, loglinear (of the loss), quadratic, gbm"
    )
    folds: int = Field(default=5, ge=2, description="cross-validation folds (at most the number of runs)")
    candidates: int = Field(default=100_000, ge=100, description="mixtures scored when searching for the best")
    top_k: int = Field(default=32, ge=1, description="the proposal is the mean of the best top_k candidates (RegMix)")
    max_kl: float | None = Field(
        default=None,
        gt=0,
        description="keep the proposal within this KL divergence (nats) of the prior: a regression fit on a few runs is trusted near them only",
    )
    target_tokens: int | None = Field(
        default=None,
        gt=0,
        description="tokens of the mix the proposal is for (the repetition caps hold at this size; default: proxy.tokens)",
    )
    spec: PathStr | None = Field(default=None, description="a Dolmino mix spec (sources) to write with the proposed ratios")

    @field_validator("objective")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        if any(w < 0 for w in v.values()) or (v and sum(v.values()) <= 0):
            raise ValueError("weights are >= 0 and not all 0")
        return v


class ConfirmSection(StrictModel):
    """Confirmation runs: the proposal, the uniform mixture and the prior trained once more as proxies."""

    seeds: list[int] = Field(default_factory=lambda: [1], min_length=1, description="data seeds of the confirmation runs (one run each)")
    tokens: int | None = Field(default=None, gt=0, description="tokens of each confirmation run (default: proxy.tokens)")


class MicroannealSection(StrictModel):
    checkpoint: PathStr = Field(..., description="the stage-1 checkpoint every anneal starts from")
    baseline: dict[str, float] = Field(..., min_length=1, description="the baseline mixture (source -> weight)")
    candidates: list[str] | dict[str, dict[str, float]] = Field(
        default_factory=list, description="sources to add to the baseline, or named mixtures (default: every source not in it)"
    )
    share: float = Field(default=0.5, gt=0, lt=1, description="a candidate source's share of its anneal (the baseline has the rest)")
    seeds: list[int] = Field(
        default_factory=lambda: [0, 1],
        min_length=1,
        description="each anneal is trained once per seed (the documents taken and their order); two or more measure the noise",
    )

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v) or any(s < 0 for s in v):
            raise ValueError("seeds are distinct integers >= 0")
        return v


class MixSearchConfig(RunOptions):
    """``dolma-pipe mix-search``: choose a mixture by proxy training runs."""

    method: Literal["swarm", "microanneal"] = Field(default="swarm", description="swarm (regression over proxies) or microanneal")
    output: PathStr = Field(..., description="where runs, the proposal and the manifest go")
    sources: list[SearchSource] = Field(..., min_length=2, description="the sources mixed, as token shards")
    eval: EvalSection = Field(default_factory=lambda: EvalSection())
    proxy: ProxySection
    swarm: SwarmSection = Field(default_factory=lambda: SwarmSection())
    microanneal: MicroannealSection | None = None
    fit: FitSection = Field(default_factory=lambda: FitSection())
    confirm: ConfirmSection | None = Field(default=None, description="swarm: train the proposal, uniform and prior once more")
    keep_work: bool = Field(default=False, description="keep _work/ (the sources' document counts) after a complete run")

    @model_validator(mode="after")
    def _consistent(self) -> MixSearchConfig:
        names = [s.name for s in self.sources]
        for i, n in enumerate(names):
            if names.index(n) != i:
                raise ValueError(f"sources.{i}.name: {n!r} is used twice")
        for d in self.eval.domains:
            if d in names and self.sources[names.index(d)].val:
                raise ValueError(
                    f"eval.domains.{d}: {d!r} is already the domain of sources.{names.index(d)}.val: give this domain another name"
                )
        domains = self.domain_paths
        if not domains:
            raise ValueError("eval.domains: no evaluation domain: give sources val shards or eval.domains")
        for d in self.fit.objective:
            if d not in domains:
                raise ValueError(f"fit.objective: {d!r} is not an evaluation domain (known: {', '.join(domains)})")
        for key, mixture in self._mixtures():
            for s in mixture:
                if s not in names:
                    raise ValueError(f"{key}: {s!r} is not a source (known: {', '.join(names)})")
            if any(w < 0 for w in mixture.values()) or not sum(mixture.values()) > 0:
                raise ValueError(f"{key}: weights are >= 0 and not all 0")
        if self.method == "microanneal" and self.microanneal is None:
            raise ValueError("microanneal: the section is required with method: microanneal (checkpoint, baseline)")
        if self.microanneal is not None and isinstance(self.microanneal.candidates, list):
            for c in self.microanneal.candidates:
                if c not in names:
                    raise ValueError(f"microanneal.candidates: {c!r} is not a source (known: {', '.join(names)})")
        return self

    def _mixtures(self) -> list[tuple[str, dict[str, float]]]:
        out = [("swarm.prior", self.swarm.prior)] if self.swarm.prior else []
        if self.microanneal is not None:
            out.append(("microanneal.baseline", self.microanneal.baseline))
            if isinstance(self.microanneal.candidates, dict):
                out += [(f"microanneal.candidates.{k}", v) for k, v in self.microanneal.candidates.items()]
        return out

    @property
    def domain_paths(self) -> dict[str, list[str]]:
        """Every evaluation domain: each source with val shards, then ``eval.domains``."""
        out = {s.name: list(s.val) for s in self.sources if s.val}
        out.update({k: list(v) for k, v in self.eval.domains.items()})
        return out

    @property
    def domain_keys(self) -> dict[str, str]:
        """The config key that names each domain's shards: ``sources.N.val`` or ``eval.domains.<name>``."""
        out = {s.name: f"sources.{i}.val" for i, s in enumerate(self.sources) if s.val}
        out.update({k: f"eval.domains.{k}" for k in self.eval.domains})
        return out

    @property
    def objective(self) -> dict[str, float]:
        weights = self.fit.objective or {d: 1.0 for d in self.domain_paths}
        total = sum(weights.values())
        return {d: w / total for d, w in weights.items() if w > 0}


class MixSearchResolved(Resolved):
    """What a search resolves once: the proxy's training config as the trainer reads it (overrides
    applied), and a microanneal's checkpoint as it is (its ``trainer_state.json``: path, size, mtime),
    so a checkpoint trained further since redoes the anneals."""

    proxy: dict[str, Any]
    checkpoint: tuple[str, int, float] | None = None
