"""Dolma's ``pre`` and ``post`` taggers of ``dolma warc``, written as Dolma attribute files.

A pre-tagger sees the record before extraction (``text`` empty, the decoded HTML in
``metadata.html``, as Dolma hands it over); a post-tagger sees the extracted document. Each tagger
writes its own attribute set, ``<destination>/attributes/<tagger>/<file>.jsonl.gz``, one row per
written document in the documents' order, keys ``<tagger>__<tagger>__<type>`` (the names Dolma's
warc gives its inline attributes). With ``skip``, a record whose taggers there give no span at
all is skipped, as Dolma's ``pre.skip`` / ``post.skip`` do.

This is the one module of the core that imports a plugin family (the layer entry in
``tests/test_import_graph.py``): the warc stage runs taggers as Dolma's does.
"""

from __future__ import annotations

from typing import Any

from taggers import registry
from taggers.base import Document, Grouped, Tagger, TaggerError
from taggers.stage import key_part

from .config import WarcConfig
from .errors import WarcError

_BUILT: dict[str, Tagger] = {}


def check(config: WarcConfig) -> None:
    """Every tagger named exists, once (before any file is read)."""
    names = config.pre.taggers + config.post.taggers
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise WarcError(f"pre.taggers / post.taggers: each tagger runs once; repeated: {repeated}")
    try:
        for name in names:
            registry.get(name)
    except TaggerError as exc:
        raise WarcError(f"pre.taggers / post.taggers: {exc}") from None


def _build(name: str) -> Tagger:
    if name not in _BUILT:
        _BUILT[name] = registry.get(name)()
    return _BUILT[name]


class TaggerGroup:
    """The taggers of one side (pre or post): spans per document, kept for the attribute files."""

    def __init__(self, names: list[str], skip: bool):
        self.taggers = [_build(n) for n in names]
        self.skip = skip
        self.prefixes = [f"{key_part(t.name)}__{key_part(t.name)}__" for t in self.taggers]

    def tag(self, doc_id: str, text: str, source: str, metadata: dict[str, Any]) -> list[dict[str, Any]] | None:
        """One attribute row per tagger, or None when ``skip`` is set and no tagger gave a span."""
        if not self.taggers:
            return []
        doc = Document(doc_id, text, source, metadata)
        rows = []
        spans = 0
        for tagger, prefix in zip(self.taggers, self.prefixes):
            grouped: Grouped = tagger.group(tagger.predict(doc))
            attributes = {prefix + key_part(t): v for t, v in grouped.items() if t}
            spans += sum(len(v) for v in attributes.values())
            rows.append({"id": doc_id, "attributes": attributes})
        if self.skip and spans == 0:
            return None
        return rows

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.taggers]
