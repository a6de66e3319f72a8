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
from taggers.stage import build_named, check_named, key_part

from .config import WarcConfig
from .errors import WarcError


def check(config: WarcConfig) -> None:
    """Every tagger named exists, once, with options that validate (before any file is read). The
    options are kept as validated (model paths absolute, as the modules' paths are since the
    config loaded): the workers read both from the config, wherever they run."""
    names = config.pre.taggers + config.post.taggers
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise WarcError(f"pre.taggers / post.taggers: each tagger runs once; repeated: {repeated}")
    try:
        registry.load_modules(config.tagger_modules)
    except TaggerError as exc:
        raise WarcError(f"tagger_modules: {exc}") from None
    try:
        for name in names:
            registry.get(name)
    except TaggerError as exc:
        raise WarcError(f"pre.taggers / post.taggers: {exc}") from None
    try:
        config.tagger_options = check_named(names, config.tagger_modules, config.tagger_options)
    except TaggerError as exc:  # options that do not validate: the message names their key
        raise WarcError(str(exc)) from None


class TaggerGroup:
    """The taggers of one side (pre or post): spans per document, kept for the attribute files."""

    def __init__(self, names: list[str], skip: bool, modules: list[str], options: dict[str, dict[str, Any]]):
        """``modules`` and ``options``: the config's ``tagger_modules`` and ``tagger_options`` (as
        :func:`check` left them); each tagger is built once per process (``build_named``)."""
        self.taggers = build_named(names, modules, {n: o for n, o in options.items() if n in names})  # the other side's are its own
        self.skip = skip
        self.prefixes = [f"{key_part(t.name)}__{key_part(t.name)}__" for t in self.taggers]

    def tag_many(self, items: list[tuple[str, str, str, dict[str, Any]]]) -> list[list[dict[str, Any]] | None | Exception]:
        """One attribute row per tagger for each document (id, text, source, metadata), or None
        for a document when ``skip`` is set and no tagger gave it a span; each tagger called once
        for all of them (``predict_batch``: one fastText call, not one a document); a document's
        entry is the exception a tagger raised on it. When a tagger raises on the batch, it is
        called again document by document, so that only the documents it fails on are lost."""
        if not self.taggers:
            return [[] for _ in items]  # nothing to skip by: every record kept, with no rows
        docs = [Document(*item) for item in items]
        by_tagger = [_grouped(tagger, docs) for tagger in self.taggers]
        results: list[list[dict[str, Any]] | None | Exception] = []
        for i, doc in enumerate(docs):
            grouped = [g[i] for g in by_tagger]
            failed = next((g for g in grouped if isinstance(g, Exception)), None)
            if failed is not None:
                results.append(failed)
                continue
            rows: list[dict[str, Any]] = [
                {"id": doc.id, "attributes": {prefix + key_part(t): v for t, v in g.items() if t}}
                for g, prefix in zip(grouped, self.prefixes)
                if not isinstance(g, Exception)  # none is (``failed``); for the type checker
            ]
            no_span = not any(spans for row in rows for spans in row["attributes"].values())
            results.append(None if self.skip and no_span else rows)
        return results

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.taggers]


def _grouped(tagger: Tagger, docs: list[Document]) -> list[Grouped | Exception]:
    """``tagger``'s grouped spans of each document, or the exception it raised there."""
    try:
        grouped: list[Grouped | Exception] = [tagger.group(spans) for spans in tagger.predict_batch(docs)]
        if len(grouped) != len(docs):
            raise TaggerError(f"{tagger.name}: predict_batch gave {len(grouped)} results for {len(docs)} documents")
        return grouped
    except Exception as exc:
        if len(docs) == 1:
            return [exc]
    out: list[Grouped | Exception] = []
    for doc in docs:
        try:
            out.append(tagger.group(tagger.predict(doc)))
        except Exception as exc:  # this document's alone: the others keep their rows
            out.append(exc)
    return out
