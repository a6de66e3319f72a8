"""``dolma-pipe query``: count, find or trace against an index, as a table or JSON lines."""

from __future__ import annotations

from typing import Literal

import orjson
from pydantic import Field, model_validator

from dolma_pipe.action import Action
from dolma_pipe.config import PathStr, StrictModel
from dolma_pipe.documents import read_documents
from dolma_pipe.quarantine import Quarantine

from .query import Index, spans_as_json


class QueryConfig(StrictModel):
    index: PathStr = Field(..., description="the index folder (dolma-pipe index)")
    count: str | None = Field(None, description="count the occurrences of this text")
    find: str | None = Field(None, description="documents holding this text")
    trace: str | None = Field(None, description="the spans of this text found verbatim in the corpus, and their documents")
    trace_file: PathStr | None = Field(None, description="trace every document's text of this file (e.g. a model's generations)")
    tokens: list[int] | None = Field(None, description="count token ids instead of a text")
    limit: int = Field(10, ge=1, description="find: documents to show")
    min_length: int = Field(8, ge=1, description="trace: shortest span, in tokens (bytes for a document index)")
    docs: int = Field(3, ge=0, description="trace: documents shown per span")
    top: int | None = Field(None, ge=1, description="trace: the spans to show, least likely first (default: all)")
    max_count: int | None = Field(None, ge=1, description="trace: leave out spans found more often than this (common phrases)")
    output: Literal["table", "jsonl"] = Field("table", description="a table for a person, or JSON lines")

    @model_validator(mode="after")
    def _one(self) -> QueryConfig:
        asked = [k for k in ("count", "find", "trace", "trace_file", "tokens") if getattr(self, k) is not None]
        if len(asked) != 1:
            raise ValueError("ask one thing: count, find, trace, trace_file or tokens")
        return self


class QueryAction(Action[QueryConfig]):
    name = "query"
    description = "count, find or trace text against an index"
    config_model = QueryConfig

    def run(self) -> str:
        cfg = self.config
        index = Index(cfg.index)
        if cfg.count is not None or cfg.tokens is not None:
            what = cfg.count if cfg.count is not None else cfg.tokens
            assert what is not None
            n = index.count(what)
            return orjson.dumps({"query": what, "count": n}).decode() if cfg.output == "jsonl" else f"{n:,}"
        if cfg.find is not None:
            hits = index.find(cfg.find, cfg.limit)
            if cfg.output == "jsonl":
                return "\n".join(orjson.dumps(h.__dict__).decode() for h in hits)
            return "\n".join(f"{h.id}  {h.src}:{h.loc}  {h.snippet!r}" for h in hits) or "(not found)"
        texts = [cfg.trace] if cfg.trace is not None else [d["text"] for _, d in read_documents(str(cfg.trace_file), Quarantine())]
        out = []
        for k, text in enumerate(texts):
            spans = index.trace(text, cfg.min_length, cfg.docs, cfg.top, max_count=cfg.max_count)
            if cfg.output == "jsonl":
                out.append(orjson.dumps({"text": k, "spans": spans_as_json(spans)}).decode())
                continue
            out.append(f"text {k}: {len(spans)} span(s) found verbatim in the corpus (least likely first)")
            for s in spans:
                out.append(f"  [{s.start}:{s.end}] x{s.count:,} log10 p={s.unigram_log10_probability:.1f}  {s.text!r}")
                for h in s.documents:
                    out.append(f"      {h.id}  {h.src}:{h.loc}  {h.snippet!r}")
        return "\n".join(out)
