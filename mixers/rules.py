"""A stream's (or source's) rules, checked when the spec loads and compiled for the rule engine.

Every filter rule and span selector is compiled once on the driver: a jq or JSONPath syntax
error, an undefined jq filter, a negative JSONPath index, a shorthand typo or an attribute name
no attribute file holds is one :class:`~dolma_pipe.config.ConfigError` naming the config key
(``streams.0.filter.exclude.1``) and the column, before any file is read. Shorthand rules become
jq programs here, so workers run one engine. :class:`StreamRules` is what workers receive.

A jq or JSONPath rule (or span selector) that reads an attribute no attribute file holds
(``.attributes.foo``, ``$.attributes[?(@.foo ...)]``; see :func:`~dolma_pipe.filters.rule_attributes`)
is a warning on stderr naming the config key, with a did-you-mean, not an error: Dolma runs such
a rule (the attribute is null on every document). Names are looked for as the shorthand looks for
them (:class:`~mixers.attribute_keys.AttributeKeys`: the first rows, further rows when a name is
not there, and the names a complete dedup run declares).
"""

from __future__ import annotations

import difflib
import hashlib
import sys
from dataclasses import asdict, dataclass
from typing import Literal

import orjson

from dolma_pipe.config import ConfigError
from dolma_pipe.filters import DocumentMixer, RuleSyntax, SpanRule, check_rule, rule_attributes
from mixers import shorthand
from mixers.attribute_keys import AttributeKeys
from mixers.config import FilterConfig, SpanReplacementConfig


@dataclass(frozen=True)
class StreamRules:
    """What the rule engine does to one stream's documents (picklable; built into a mixer per process)."""

    attribute_sets: tuple[str, ...]
    filter_syntax: Literal["jq", "jsonpath"] | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # The rules as written (shorthand before compiling), for the summary.
    include_labels: tuple[str, ...] = ()
    exclude_labels: tuple[str, ...] = ()
    spans: tuple[SpanRule, ...] = ()
    discard_fields: tuple[str, ...] = ()
    min_text_length: int = 0

    def digest(self) -> str:
        """A hash of everything that shapes the output (for caches)."""
        return hashlib.sha256(orjson.dumps(asdict(self), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]

    def mixer(self, collect: bool = False, write: bool = True) -> DocumentMixer:
        key = (self, collect, write)
        if key not in _MIXERS:
            _MIXERS[key] = DocumentMixer(
                filter_syntax=self.filter_syntax,
                include=list(self.include),
                exclude=list(self.exclude),
                spans=list(self.spans),
                discard_fields=list(self.discard_fields),
                min_text_length=self.min_text_length,
                attribute_sets=len(self.attribute_sets),
                provenance=True,
                collect=collect,
                write=write,
            )
        return _MIXERS[key]


_MIXERS: dict[tuple[StreamRules, bool, bool], DocumentMixer] = {}


def _rule_error(key: str, what: str, expr: str, column: int | None, message: str) -> ConfigError:
    where = f" at column {column}" if column is not None else ""
    return ConfigError(f"config key '{key}': {what} {expr!r}{where}: {message}")


def _shorthand_to_jq(key: str, expr: str, keys: AttributeKeys) -> str:
    try:
        tree = shorthand.parse(expr)
    except shorthand.ShorthandError as exc:
        raise _rule_error(key, "shorthand rule", expr, exc.column, exc.message) from None
    while True:
        try:
            return shorthand.to_jq(tree, shorthand.resolver(keys.keys(), keys.where))
        except shorthand.ShorthandError as exc:
            # Not in the first rows: read further (a key only rare documents hold) before failing.
            if not keys.read_more():
                raise _rule_error(key, "shorthand rule", expr, exc.column, exc.message) from None


def unknown_attributes(syntax: RuleSyntax, expr: str, keys: AttributeKeys) -> list[tuple[str, str | None]]:
    """The attribute names ``expr`` reads that no attribute row holds, each with a close known key (or None)."""
    names = rule_attributes(syntax, expr)
    missing = [n for n in names if n not in keys.keys()]
    if missing and keys.read_more():  # a key only rare documents hold: read further first
        missing = [n for n in missing if n not in keys.keys()]
    known = keys.keys()
    out: list[tuple[str, str | None]] = []
    for name in missing:
        ends = sorted(k for k in known if k.endswith("__" + name))
        if len(ends) == 1:
            out.append((name, ends[0]))
            continue
        suffixes = {k.split("__", 1)[1]: k for k in known if "__" in k}
        close = difflib.get_close_matches(name, [*known, *suffixes], n=1, cutoff=0.6)
        out.append((name, suffixes.get(close[0], close[0]) if close else None))
    return out


def _warn_unknown(key: str, what: str, syntax: RuleSyntax, expr: str, keys: AttributeKeys) -> None:
    for name, close in unknown_attributes(syntax, expr, keys):
        hint = f" (did you mean {close!r}?)" if close else ""
        known = sorted(keys.keys())
        listed = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        print(
            f"dolma-pipe mix: warning: config key '{key}': {what} {expr!r} reads attribute {name!r}, which no row of "
            f"{keys.where} holds{hint}; the rule runs (as in Dolma) but finds no such attribute. "
            f"Known: {listed or 'none'}",
            file=sys.stderr,
            flush=True,
        )


def compile_rules(
    key: str,
    filter_config: FilterConfig | None,
    span_replacement: list[SpanReplacementConfig],
    attribute_sets: list[str],
    discard_fields: list[str],
    min_text_length: int,
    document_files: list[str],
) -> StreamRules:
    """Check and compile one stream's rules; ``key`` is the stream's config key (``streams.0``)."""
    for i, name in enumerate(attribute_sets):
        if not name or "/" in name:
            raise ConfigError(f"config key '{key}.attributes.{i}': attribute set name {name!r} must be a name without '/'")
    keys = AttributeKeys(document_files, attribute_sets)
    syntax: Literal["jq", "jsonpath"] | None = None
    compiled: dict[str, list[str]] = {"include": [], "exclude": []}
    labels: dict[str, list[str]] = {"include": [], "exclude": []}
    if filter_config is not None:
        syntax = "jsonpath" if filter_config.syntax == "jsonpath" else "jq"
        for part in ("include", "exclude"):
            for i, expr in enumerate(getattr(filter_config, part)):
                rule_key = f"{key}.filter.{part}.{i}"
                if filter_config.syntax == "shorthand":
                    program = _shorthand_to_jq(rule_key, expr, keys)
                else:
                    program = expr
                    problem = check_rule("filter", syntax, expr)
                    if problem is not None:
                        raise _rule_error(rule_key, f"{syntax} rule", expr, *problem)
                    _warn_unknown(rule_key, f"{syntax} rule", syntax, expr, keys)
                compiled[part].append(program)
                labels[part].append(expr)
    spans = []
    for i, sr in enumerate(span_replacement):
        problem = check_rule("span", sr.syntax, sr.span)
        if problem is not None:
            raise _rule_error(f"{key}.span_replacement.{i}.span", f"{sr.syntax} selector", sr.span, *problem)
        _warn_unknown(f"{key}.span_replacement.{i}.span", f"{sr.syntax} selector", sr.syntax, sr.span, keys)
        problem = check_rule("replacement", "jq", sr.replacement)
        if problem is not None:
            raise _rule_error(f"{key}.span_replacement.{i}.replacement", "jq replacement", sr.replacement[1:], *problem)
        spans.append(SpanRule(sr.span, sr.syntax, sr.min_score, sr.max_score, sr.replacement))
    return StreamRules(
        attribute_sets=tuple(attribute_sets),
        filter_syntax=syntax,
        include=tuple(compiled["include"]),
        exclude=tuple(compiled["exclude"]),
        include_labels=tuple(labels["include"]),
        exclude_labels=tuple(labels["exclude"]),
        spans=tuple(spans),
        discard_fields=tuple(discard_fields),
        min_text_length=min_text_length,
    )
