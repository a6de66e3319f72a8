"""olmix mixture files: read, written, and applied to a Dolmino-style ``sources:`` spec.

AllenAI's olmix (github.com/allenai/olmix) writes a mixture as the ``mix`` section of a launch
config (``olmix/aliases.py``: ``LaunchConfig.mix: dict[str, MixEntry]``, ``MixEntry(weight,
repetition_factor)``; ``olmix generate`` writes one such file per variant)::

    mix:
      dclm:science_math_and_technology: {weight: 0.3, repetition_factor: 1.0}
      wikipedia: {weight: 0.2, repetition_factor: 2.0}

A domain is ``source``, ``source:topic`` or ``source:topic:quality``; its weight is its share of
the tokens (the weights of a mixture add up to 1) and its repetition factor the most times its
documents may be repeated. olmix also reads the ``mix`` nested (``flatten_mix``: keys other than
``weight`` and ``repetition_factor`` are children, a leaf's weight is the product of the weights
on its path, a repetition factor is inherited from the nearest level that sets it, a bare number
is a child's weight), and its earlier versions wrote each entry as a list ``[weight,
repetition_factor]`` (``VariantConfig.mix: dict[str, tuple[float, float]]``, and the
``{"mixes": [...]}`` JSON of ``mk_mixes``). All of these are read; the flat form is written.

olmix keeps the token budget outside the mixture (``max_tokens`` of a generation config,
``constraints.target_tokens`` of a fit); a file here may hold it as a top-level
``target_tokens``. Every other top-level key (a launch config's ``name``, ``data``, ``training``,
...) is kept as it is and written back.

Applied to a spec (``to_mix_sources``), domain ``a:b`` is the source named ``a.b`` (``:`` cannot be
in a source name, which names output files): its ``ratio`` becomes the domain's weight (the
weights normalised to add up to exactly 1), its ``max_repetition`` the repetition factor. As
olmix does, a domain of weight 0 and a source the mixture does not name take no part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from dolma_pipe import storage
from dolma_pipe.config import ConfigError
from mixers.config import MixConfig

PROPS = ("weight", "repetition_factor")
# olmix rounds nested weights to 6 decimals: its example mixtures add up to 1 within 2e-6.
SUM_TOLERANCE = 1e-4


class OlmixError(ConfigError):
    """An olmix file that cannot be read or applied; the message names the file and the key."""


@dataclass
class OlmixMix:
    """A mixture: ``domains`` maps each domain to ``(weight, repetition_factor)``."""

    target_tokens: int | None
    domains: dict[str, tuple[float, float]]
    extra: dict[str, Any] = field(default_factory=dict)  # the file's other top-level keys, written back as they were


def domain_to_source(domain: str) -> str:
    return domain.replace(":", ".")


def source_to_domain(name: str) -> str:
    return name.replace(".", ":")


def _number(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise OlmixError(f"{where}: key {key!r}: expected a number, got {value!r}")
    if value < 0:
        raise OlmixError(f"{where}: key {key!r}: must be >= 0, got {value!r}")
    return float(value)


def _flatten(where: str, prefix: str, node: Any, weight: float, rep: float, out: dict[str, tuple[float, float]]) -> None:
    """olmix's ``flatten_mix`` of one entry: a list ``[weight, repetition_factor]``, a leaf
    ``{weight, repetition_factor}``, a nested level, or a bare number (a weight)."""
    key = f"mix.{prefix}"
    if isinstance(node, (list, tuple)):
        if len(node) != 2:
            raise OlmixError(f"{where}: key {key!r}: expected [weight, repetition_factor], got {node!r}")
        out[prefix] = (weight * _number(where, f"{key}.0", node[0]), _number(where, f"{key}.1", node[1]))
        return
    if not isinstance(node, dict):
        out[prefix] = (weight * _number(where, key, node), rep)
        return
    weight *= _number(where, f"{key}.weight", node.get("weight", 1.0))
    rep = _number(where, f"{key}.repetition_factor", node.get("repetition_factor", rep))
    children = {k: v for k, v in node.items() if k not in PROPS}
    if not children:
        if "weight" not in node:
            raise OlmixError(f"{where}: key {key!r}: an entry needs a 'weight'")
        out[prefix] = (weight, rep)
    for name, child in children.items():
        _flatten(where, f"{prefix}:{name}", child, weight, rep, out)


def check(mix: OlmixMix, where: str) -> None:
    """Weights and repetition factors >= 0, weights adding up to 1, ``target_tokens`` a positive
    integer or None; ``OlmixError`` naming ``where`` and the key."""
    if not mix.domains:
        raise OlmixError(f"{where}: key 'mix': no domain")
    for domain, (w, r) in mix.domains.items():
        if not domain or not isinstance(domain, str):
            raise OlmixError(f"{where}: key 'mix': a domain needs a name, got {domain!r}")
        _number(where, f"mix.{domain}.weight", w)
        _number(where, f"mix.{domain}.repetition_factor", r)
    total = sum(w for w, _ in mix.domains.values())
    if abs(total - 1) > SUM_TOLERANCE:
        raise OlmixError(f"{where}: key 'mix': the weights add up to {total:.6g}, not 1")
    t = mix.target_tokens
    if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t <= 0):
        raise OlmixError(f"{where}: key 'target_tokens': expected a positive integer, got {t!r}")


def parse_olmix(data: Any, where: str, index: int | None = None) -> OlmixMix:
    """A mixture from a file's parsed content (see the module's docstring); ``index`` picks one
    mixture of a ``{"mixes": [...]}`` file that holds several."""
    if not isinstance(data, dict):
        raise OlmixError(f"{where}: expected a mapping with a 'mix' key, got {type(data).__name__}")
    data = dict(data)
    if "mixes" in data and "mix" not in data:  # olmix's mk_mixes JSON: several mixtures
        mixes = data.pop("mixes")
        if not isinstance(mixes, list) or not mixes:
            raise OlmixError(f"{where}: key 'mixes': expected a non-empty list of mixtures")
        if index is None and len(mixes) > 1:
            raise OlmixError(f"{where}: key 'mixes' holds {len(mixes)} mixtures: say which one (index 0..{len(mixes) - 1})")
        i = index or 0
        if not 0 <= i < len(mixes):
            raise OlmixError(f"{where}: key 'mixes': no mixture {i} (it holds {len(mixes)})")
        data["mix"] = mixes[i]
    elif index not in (None, 0):
        raise OlmixError(f"{where}: holds one mixture, not a 'mixes' list to pick mixture {index} from")
    if "mix" not in data:
        raise OlmixError(f"{where}: key 'mix' is missing (olmix's {{domain: {{weight, repetition_factor}}}})")
    raw = data.pop("mix")
    if not isinstance(raw, dict):
        raise OlmixError(f"{where}: key 'mix': expected a mapping of domains, got {type(raw).__name__}")
    domains: dict[str, tuple[float, float]] = {}
    for name, node in raw.items():
        _flatten(where, str(name), node, 1.0, 1.0, domains)
    target = data.pop("target_tokens", None)
    if isinstance(target, float) and target.is_integer():  # 1e9 in YAML is a float
        target = int(target)
    mix = OlmixMix(target_tokens=target, domains=domains, extra=data)
    check(mix, where)
    return mix


def read_olmix(path: str, index: int | None = None) -> OlmixMix:
    """The mixture of an olmix file (YAML or JSON, local or remote); ``OlmixError`` naming the
    file and the key for anything wrong in it."""
    try:
        text = storage.read_bytes(path)
    except (storage.StorageError, OSError) as exc:
        raise OlmixError(f"olmix file {path} cannot be read ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise OlmixError(f"{where}: invalid YAML/JSON ({getattr(exc, 'problem', None) or exc})") from None
    return parse_olmix(data, path, index)


def dump_olmix(mix: OlmixMix) -> dict[str, Any]:
    """What ``write_olmix`` writes: the other keys, ``target_tokens`` (when set), then the flat ``mix``."""
    out: dict[str, Any] = {k: v for k, v in mix.extra.items() if k not in ("mix", "target_tokens")}
    if mix.target_tokens is not None:
        out["target_tokens"] = mix.target_tokens
    out["mix"] = {d: {"weight": float(w), "repetition_factor": float(r)} for d, (w, r) in mix.domains.items()}
    return out


def write_olmix(path: str, mix: OlmixMix) -> None:
    """Write ``mix`` as an olmix YAML file (flat ``mix``, as ``olmix generate`` writes it),
    atomically, to a local or remote path; checked first (``OlmixError`` naming ``path``)."""
    check(mix, path)
    text = yaml.safe_dump(dump_olmix(mix), sort_keys=False, default_flow_style=False, allow_unicode=True)
    try:
        storage.write_bytes(path, text.encode("utf-8"))
    except (storage.StorageError, OSError) as exc:
        raise OlmixError(f"olmix file {path} cannot be written ({exc})") from None


def to_mix_sources(mix: OlmixMix, base: MixConfig, where: str = "olmix mixture") -> MixConfig:
    """``base`` (a ``sources:`` spec) with the mixture applied: each domain's source gets
    ``ratio`` = its weight (normalised), ``tokens`` unset, ``max_repetition`` = its repetition
    factor; ``target_tokens`` is the mixture's, else the spec's. Sources the mixture does not name
    and domains of weight 0 are left out (olmix launches those with no data). A domain with no
    source, a repetition factor below 1 or no ``target_tokens`` anywhere is an ``OlmixError``."""
    check(mix, where)
    if not base.sources:
        raise OlmixError(f"{where}: a mixture applies to a mix of 'sources' (a Dolmino-style spec), not to streams")
    names = {s.name for s in base.sources}
    unknown = [d for d in mix.domains if domain_to_source(d) not in names]
    if unknown:
        raise OlmixError(
            f"{where}: domains with no source in the spec: {', '.join(unknown)} "
            f"(domain 'a:b' is the source named 'a.b'; the spec has {', '.join(sorted(names))})"
        )
    for d, (_, r) in mix.domains.items():
        if r < 1:
            raise OlmixError(f"{where}: key 'mix.{d}.repetition_factor': {r:g} is below 1 (max_repetition 1 already means no repeat)")
    target = mix.target_tokens if mix.target_tokens is not None else base.target_tokens
    if target is None:
        raise OlmixError(f"{where}: key 'target_tokens' is missing, in the mixture and in the spec: the weights need a total")
    total = sum(w for w, _ in mix.domains.values())
    by_source = {domain_to_source(d): (w / total, r) for d, (w, r) in mix.domains.items() if w > 0}
    data = base.model_dump()
    data["target_tokens"] = target
    data["sources"] = [
        {**s, "ratio": by_source[s["name"]][0], "tokens": None, "max_repetition": by_source[s["name"]][1]}
        for s in data["sources"]
        if s["name"] in by_source
    ]
    try:
        return MixConfig.model_validate(data)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise OlmixError(f"{where}: the spec with the mixture applied is not valid ({str(exc).splitlines()[0]})") from None


def from_mix_config(cfg: MixConfig) -> OlmixMix:
    """The mixture a ``sources:`` spec asks for: each source's share of the total (its ``ratio``,
    or its ``tokens`` over ``target_tokens``, or over the sum of tokens when there is no target),
    its ``max_repetition``, as domain ``a:b`` for source ``a.b``."""
    if not cfg.sources:
        raise OlmixError("an olmix mixture comes from a mix of 'sources' (a Dolmino-style spec), not from streams")
    target = cfg.target_tokens
    if target is None:
        if any(s.ratio is not None for s in cfg.sources):
            raise OlmixError("config key 'target_tokens' is required: a source gives a ratio")
        target = sum(s.tokens or 0 for s in cfg.sources)
    domains = {}
    for s in cfg.sources:
        share = s.ratio if s.ratio is not None else (s.tokens or 0) / target
        domains[source_to_domain(s.name)] = (float(share), float(s.max_repetition))
    mix = OlmixMix(target_tokens=cfg.target_tokens if cfg.target_tokens is not None else target, domains=domains)
    check(mix, "the spec's sources")
    return mix


def apply_mixture(cfg: MixConfig) -> MixConfig:
    """``cfg`` with its ``mixture`` file applied (unchanged when it names none)."""
    if cfg.mixture is None:
        return cfg
    if not cfg.sources:
        raise OlmixError("config key 'mixture': an olmix mixture belongs to a mix of sources, not to streams")
    return to_mix_sources(read_olmix(cfg.mixture), cfg, where=cfg.mixture)
