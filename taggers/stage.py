"""``tag``: run taggers over document files and write Dolma attribute files.

For ``X/documents/a/b.jsonl.gz`` and experiment ``E`` the rows go to
``X/attributes/E/a/b.jsonl.gz`` (or ``<destination>/E/a/b.jsonl.gz``), one row
per good document in order: ``{"id": ..., "attributes": {"E__<tagger>__<type>":
[[start, end, score], ...]}}``.  As in Dolma, ``<tagger>`` and ``<type>`` are the
names with every character other than ``[A-Za-z0-9_]`` made ``_`` (Dolma's
``make_variable_name``: ``dclm-oh-eli5`` writes ``E__dclm_oh_eli5__score``), and
a type named ``""`` is not written.  Taggers are built once per worker process and
fed documents in batches.  A tagger that fails on one document does not stop
the file: the document is quarantined as ``tagger_error`` and its row is
written with that tagger's defaults, so rows still line up with documents.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import Field, field_validator

from dolma_pipe import paths
from dolma_pipe.compression import ATTRIBUTE_GZIP_LEVEL
from dolma_pipe.config import ModuleRef, PathStr, RunOptions
from dolma_pipe.documents import JsonlWriter, read_documents
from dolma_pipe.manifest import InputFile
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stage import Stage, Task, TaskOutput
from taggers import registry
from taggers.base import Document, Grouped, Span, Tagger, TaggerError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_NOT_VARIABLE = re.compile(r"[^a-zA-Z0-9_]")
_KEYS: dict[str, str] = {}


def key_part(name: str) -> str:
    """A tagger or span type name as Dolma puts it in an attribute key (``make_variable_name``)."""
    key = _KEYS.get(name)
    if key is None:
        key = _KEYS[name] = _NOT_VARIABLE.sub("_", name)
    return key


class TagConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1, description="document files or globs (under a documents/ folder)")
    taggers: list[str] = Field(..., min_length=1, description="registered tagger names (see `dolma-pipe list`)")
    experiment: str | None = Field(None, description="attribute set name; defaults to the tagger's name when only one runs")
    destination: PathStr | None = Field(
        None, description="write to <destination>/<experiment>/... instead of X/attributes/<experiment>/..."
    )
    tagger_modules: list[ModuleRef] = Field(default_factory=list, description="extra modules (files or names) that register taggers")
    tagger_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="options per tagger name, passed to its constructor"
    )
    batch_size: int = Field(256, ge=1, description="documents given to each tagger at once")

    @field_validator("experiment")
    @classmethod
    def _experiment_is_a_name(cls, v: str | None) -> str | None:
        if v is not None and (not _NAME.match(v) or "__" in v):
            raise ValueError(
                "must start with a letter or digit and hold letters, digits, '_', '-' or '.', without '__' (it prefixes attribute names)"
            )
        return v

    @field_validator("taggers")
    @classmethod
    def _taggers_once_each(cls, v: list[str]) -> list[str]:
        repeated = sorted({t for t in v if v.count(t) > 1})
        if repeated:
            raise ValueError(f"each tagger runs once; repeated: {repeated}")
        return v


_INSTANCES: dict[tuple[str, bytes], Tagger] = {}


def check_taggers(config: TagConfig) -> dict[str, dict[str, Any]]:
    """Every configured tagger exists and its options validate, without building one (no model
    loads): the stage checks this when it is made from its config, before any file is read.

    Returns the options as validated (the keys the user gave, model paths made absolute), which
    the stage sends to its workers: a Ray worker elsewhere resolves no path relative to itself.
    """
    return check_named(config.taggers, config.tagger_modules, config.tagger_options)


def check_named(names: Sequence[str], modules: list[str], options: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`check_taggers` for any stage that runs taggers: ``names`` after importing
    ``modules`` (``tagger_modules``), ``options`` by tagger name (``tagger_options``)."""
    registry.load_modules(modules)
    unknown = set(options) - set(names)
    if unknown:
        raise TaggerError(f"config key 'tagger_options' names taggers that do not run: {sorted(unknown)}")
    normalised = {}
    for name in names:
        cls = registry.get(name)
        given = options.get(name, {})
        if cls.options_model() is not None:  # None: a tagger whose own __init__ checks its options
            given = cls.validate_options(given).model_dump(mode="json", exclude_unset=True)
        if name in options:
            normalised[name] = given
    return normalised


def build_taggers(config: TagConfig) -> list[Tagger]:
    """The configured taggers, built once per process (models load once per worker)."""
    return build_named(config.taggers, config.tagger_modules, config.tagger_options)


def build_named(names: Sequence[str], modules: list[str], options: dict[str, dict[str, Any]]) -> list[Tagger]:
    """:func:`build_taggers` for any stage that runs taggers (:func:`check_named`'s arguments):
    one instance per name and options in a process, shared by every task it runs."""
    check_named(names, modules, options)
    out = []
    for name in names:
        given = options.get(name, {})
        key = (name, orjson.dumps(given, option=orjson.OPT_SORT_KEYS))
        if key not in _INSTANCES:
            cls = registry.get(name)
            try:
                _INSTANCES[key] = cls(**given)
            except TaggerError:
                raise
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                raise TaggerError(f"tagger {name!r}: bad options {given}: {type(exc).__name__}: {exc}") from None
        out.append(_INSTANCES[key])
    return out


_FROZEN = False


def _freeze_heap() -> None:
    """Once per process, with the taggers built: move every object alive now (modules, models,
    tables) out of the garbage collector's sight (``gc.freeze``).  Tagging allocates millions of
    small lists; each collection would otherwise walk that whole heap again (measured: c4_v2 ~20%
    faster).  What is alive then (the taggers, their models and tables) lives as long as the process."""
    global _FROZEN
    if not _FROZEN:
        gc.collect()
        gc.freeze()
        _FROZEN = True


class TagStage(Stage[TagConfig]):
    name = "tag"
    description = "run taggers (language, quality, PII, toxicity, rules) and write Dolma attributes"
    config_model = TagConfig

    def __init__(self, config: TagConfig):
        super().__init__(config)
        if config.experiment is None and len(config.taggers) > 1:
            raise TaggerError("several taggers need one --experiment name for their attribute set")
        # A misspelled tagger or option fails now, before any file is read.
        config.tagger_options = check_taggers(config)
        self.experiment = config.experiment or config.taggers[0]
        self._root = self._output_root()

    def _output_root(self) -> str:
        return paths.attribute_output_root(self.config.documents, self.experiment, self.config.destination)

    @property
    def output_root(self) -> str:
        return self._root

    @property
    def destination_key(self) -> str:
        return "experiment"

    def output_name(self, rel: str) -> str:
        return paths.attribute_file_name(rel)

    def plan_inputs(self) -> list[InputFile]:
        build_taggers(self.config)  # fail on a bad tagger name or option before any work
        return super().plan_inputs()

    def process(self, task: Task, quarantine: Quarantine) -> TaskOutput:
        taggers = build_taggers(self.config)
        _freeze_heap()
        prefixes = [f"{self.experiment}__{key_part(t.name)}__" for t in taggers]
        out_path = self.output_path(task.rel)
        assert out_path is not None  # output_name names an output for every input
        counts = {"docs_out": 0, "spans": 0}
        docs_in = 0
        batch: list[tuple[int, Document]] = []

        def flush(writer: JsonlWriter) -> None:
            docs = [d for _, d in batch]
            rows: list[dict[str, Any]] = [{"id": d.id, "attributes": {}} for d in docs]
            for tagger, prefix in zip(taggers, prefixes):
                for row, spans in zip(rows, self._predict(tagger, batch, docs, task, quarantine)):
                    for span_type, values in tagger.group(spans).items():
                        if span_type:
                            row["attributes"][prefix + key_part(span_type)] = values
                            counts["spans"] += len(values)
            writer.write_many(rows)
            counts["docs_out"] += len(rows)
            batch.clear()

        with JsonlWriter(out_path, level=ATTRIBUTE_GZIP_LEVEL) as writer:
            for lineno, row in read_documents(task.path, quarantine):
                docs_in += 1
                batch.append((lineno, Document.from_row(row)))
                if len(batch) >= self.config.batch_size:
                    flush(writer)
            if batch:
                flush(writer)
        return TaskOutput(docs_in=docs_in, counts=counts)

    @staticmethod
    def _predict(
        tagger: Tagger, batch: list[tuple[int, Document]], docs: list[Document], task: Task, quarantine: Quarantine
    ) -> Sequence[list[Span] | Grouped]:
        try:
            results = tagger.predict_batch(docs)
            if len(results) != len(batch):
                raise TaggerError(f"predict_batch returned {len(results)} results for {len(batch)} documents")
            return results
        except Exception:
            pass  # find the documents at fault one by one
        one_by_one: list[list[Span] | Grouped] = []
        for lineno, doc in batch:
            try:
                one_by_one.append(tagger.predict(doc))
            except Exception as exc:
                quarantine.add(
                    task.path, lineno, "tagger_error", f"tagger {tagger.name!r} failed on id {doc.id!r}: {type(exc).__name__}: {exc}", None
                )
                one_by_one.append([])
        return one_by_one
