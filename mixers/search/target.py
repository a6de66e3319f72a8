"""The mix a proposal is for: its size, each source's repetition cap, and the tokens each source has.

A proposal is only useful if ``dolma-pipe mix`` can make it: each source must give
``weight x target_tokens`` tokens within ``max_repetition`` repeats of what it has. Those numbers
belong to the mix that will be made, not to the proxies:

- **the target**: ``fit.target_tokens``, else ``fit.spec``'s ``target_tokens`` (the mix the
  proposal is written as), else ``proxy.tokens`` (no mix named: the caps hold at the proxies' size
  only, and the olmix file carries no ``target_tokens``);
- **the cap** of a source: its ``sources.N.max_repetition``, and with ``fit.spec`` at most the
  spec's ``max_repetition`` for it (what ``mix`` enforces);
- **the tokens a source has**: with ``fit.spec``, the spec's own count, as ``mix`` makes it (the
  spec's filters and span replacement, its tokenizer); otherwise the search's shards.

The spec's count is read from the spec's own count cache when a ``mix`` run of it left one (the
same files, rules and tokenizer: :mod:`mixers.sources`), else counted here once and kept in
``<output>/spec-counts.json`` under the same keys, so a refit counts nothing again. The spec is
loaded and checked by the ``mix`` stage itself when the search starts, so a spec ``mix`` would
refuse is refused before any proxy trains; the proposal is checked with ``mix``'s own planning
rules before it is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dolma_pipe import storage, workdir
from dolma_pipe.config import ConfigError, load_config, read_config_file
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Task
from dolma_pipe.workdir import WorkFileError
from mixers import dolmino, tokens
from mixers.config import MixConfig
from mixers.reading import mix_file
from mixers.sources import Sources
from mixers.stage import MixStage

if TYPE_CHECKING:
    from mixers.search.config import MixSearchConfig


@dataclass(frozen=True)
class Target:
    """Where a proposal must be feasible: ``available[i] * max_repetition[i] >= weight[i] * tokens``."""

    tokens: int
    source: str  # which key set ``tokens``: fit.target_tokens, fit.spec or proxy.tokens
    counted: str  # what ``available`` counts, in words
    available: np.ndarray
    max_repetition: np.ndarray
    cap_keys: list[str]  # per source, the key(s) that set its cap

    def caps(self) -> np.ndarray:
        """Each source's largest weight, less what rounding the weights to 6 digits and the
        requested tokens to whole ones can add, so a proposal within them stays within ``mix``'s."""
        slack = len(self.available) * 1e-6 + 1.0 / self.tokens
        return np.clip(self.available * self.max_repetition / float(self.tokens) - slack, 0.0, 1.0)

    def binding(self, unconstrained: np.ndarray) -> list[int]:
        """The sources whose cap changed the proposal: the one proposed without caps
        (``unconstrained``) takes more of them than their cap allows."""
        return [i for i, (w, c) in enumerate(zip(unconstrained, self.caps())) if c < 1.0 and w > c + 1e-6]

    def as_json(self, names: list[str], binding: list[int]) -> dict[str, Any]:
        cap = self.caps()
        return {
            "tokens": self.tokens,
            "from": self.source,
            "counted": self.counted,
            "available": dict(zip(names, map(int, self.available))),
            "max_repetition": dict(zip(names, map(float, self.max_repetition))),
            "caps": dict(zip(names, (round(float(c), 6) for c in cap))),
            "binding": [names[i] for i in binding],
        }


def search_target(config: MixSearchConfig, spec: SpecMix | None, available: np.ndarray, counts_path: str) -> Target:
    """The size, caps and tokens a search's proposal must be feasible at (``available``: the
    search's shards' tokens; ``counts_path``: where the spec's count is kept)."""
    names = [s.name for s in config.sources]
    reps = np.array([s.max_repetition for s in config.sources], dtype=np.float64)
    keys = [f"sources.{i}.max_repetition" for i in range(len(names))]
    fit = config.fit
    if spec is None:
        tokens, where = (fit.target_tokens, "fit.target_tokens") if fit.target_tokens else (config.proxy.tokens, "proxy.tokens")
        return Target(tokens, where, "tokens of the search's shards", available, reps, keys)
    counted = spec.count(counts_path)
    spec_reps = np.array([spec.max_repetition(n) for n in names])
    for i, n in enumerate(names):  # the cap that holds: the lower of the two (both, when equal)
        spec_key = f"fit.spec's sources.{spec.index[n]}.max_repetition"
        keys[i] = spec_key if spec_reps[i] < reps[i] else keys[i] if reps[i] < spec_reps[i] else f"{keys[i]} and {spec_key}"
    tokens, where = (fit.target_tokens, "fit.target_tokens") if fit.target_tokens else (spec.target_tokens, "fit.spec")
    return Target(
        tokens,
        where,
        f"tokens of fit.spec's sources after its filters ({spec.config.tokenizer})",
        np.array([counted[n] for n in names], dtype=np.float64),
        np.minimum(reps, spec_reps),
        keys,
    )


class SpecError(ConfigError):
    """``fit.spec`` cannot be loaded, counted or written as ``mix`` would; the message names it."""


class SpecMix:
    """``fit.spec`` loaded and checked by the ``mix`` stage (no file is written by loading it)."""

    def __init__(self, path: str, names: list[str]):
        self.path = path
        try:
            config: MixConfig = load_config(MixConfig, path)
            if not config.sources:
                raise ConfigError("it is not a mix of sources (no 'sources' list): a proposal sets sources' ratios")
            self.stage = MixStage(config)
            self.config = self.stage.config  # with its olmix mixture file applied, as mix runs it
            missing = [n for n in names if n not in {s.name for s in self.config.sources}]
            if missing:
                raise ConfigError(
                    f"it has no source named {', '.join(map(repr, missing))} (the search's sources must be the spec's, by name)"
                )
            self.inputs = self.stage.plan_inputs()
        except DolmaPipeError as e:
            raise SpecError(f"config key 'fit.spec': {path}: {e}") from None
        self.index = {s.name: i for i, s in enumerate(self.config.sources)}

    @property
    def target_tokens(self) -> int:
        """What the spec asks for in all: its ``target_tokens``, or its sources' ``tokens`` summed."""
        return self.config.target_tokens or sum(self.stage.requested.values())

    def max_repetition(self, name: str) -> float:
        return self.config.sources[self.index[name]].max_repetition

    def count(self, cache_path: str) -> dict[str, int]:
        """Tokens each of the spec's sources has after its rules, as ``mix`` counts them: from the
        spec's count cache where a run left one, else counted here (and kept in ``cache_path``)."""
        st = self.stage
        sources = Sources(st.layout, st.tokenizer_path, st.tokenizer_sha, st.requested, st.scoring)
        mine: dict[str, int] = json.loads(storage.read_bytes(cache_path)) if storage.exists(cache_path) else {}
        out = {g.name: 0 for g in st.layout.groups}
        changed = False
        for f in self.inputs:
            g = st.layout.group_of(f)
            task = Task(key=f.rel, inputs=(f,), params={"group": g.index})
            cache = sources.cache_dir(task)
            ident = st.layout.rel(cache)
            n = _cached_tokens(cache)
            if n is None:
                n = mine.get(ident)
            if n is None:
                n = self._count_file(g, f.path)
                mine[ident] = n
                changed = True
            out[g.name] += n
        if changed:
            storage.write_bytes(cache_path, json.dumps(mine, indent=1, sort_keys=True).encode())
        return out

    def _count_file(self, group: Any, path: str) -> int:
        n = 0

        def sink(r: Any) -> None:
            nonlocal n
            n += sum(tokens.count(self.stage.tokenizer_path, r.texts))

        try:
            mix_file(
                group.rules, path, Quarantine(), sink, batch_size=self.config.batch_size, compression=group.compression_in, collect=True
            )
        except DolmaPipeError as e:
            raise SpecError(f"config key 'fit.spec': {self.path}: counting {path} as mix would: {e}") from None
        return n

    def proposal(self, proposal: dict[str, float], target: int, output: str) -> dict[str, Any]:
        """The spec as written, with each source's ``ratio`` the proposed weight (sources weighed 0
        or not searched left out), ``target_tokens`` the target, ``output`` the search's ``mix``."""
        raw = read_config_file(self.path)
        by = {s.get("name"): s for s in raw.get("sources") or [] if isinstance(s, dict)}
        kept = []
        for name, w in proposal.items():
            if w > 0:
                s = dict(by[name])
                s.pop("tokens", None)
                s["ratio"] = w
                if s.get("max_repetition", 1.0) != self.max_repetition(name):  # as the spec's mixture file set it
                    s["max_repetition"] = self.max_repetition(name)
                kept.append(s)
        raw["sources"] = kept
        raw["target_tokens"] = target
        raw.pop("mixture", None)  # the ratios are the proposal's, not the mixture file's
        # Its own output: running the proposal must not overwrite the mix the spec makes.
        raw["output"] = output
        return raw

    def check(self, what: str, proposal: dict[str, Any] | MixConfig, available: dict[str, int]) -> None:
        """``proposal`` (a spec, or its raw form) planned by ``mix``'s own rules with the counted
        tokens: a SpecError where ``mix`` would refuse it (the search's caps keep it from happening)."""
        try:
            cfg = proposal if isinstance(proposal, MixConfig) else MixConfig.model_validate(proposal)
            requested = dolmino.requested_tokens(cfg)
            for i, s in enumerate(cfg.sources):
                dolmino.size_source(i, s.name, 0, available[s.name], requested[s.name], s.max_repetition, f"ratio {s.ratio}")
        except (ValueError, DolmaPipeError) as e:
            raise SpecError(f"config key 'fit.spec': {what} from {self.path} would be refused by mix: {e}") from None


def _cached_tokens(cache: str) -> int | None:
    """Tokens a ``mix`` run of the spec counted for one file (its cache's ``meta.json``), if any."""
    meta = storage.join(cache, "meta.json")
    try:
        if not storage.exists(meta):
            return None
        return int(json.loads(workdir.read(meta))["counts"]["tokens"])
    except (WorkFileError, storage.StorageError, ValueError, KeyError, TypeError):
        return None  # damaged or of another format: counted again here
