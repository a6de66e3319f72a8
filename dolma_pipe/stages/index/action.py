"""``dolma-pipe query``: count, find or trace against an index, as a table or JSON lines.

What cannot be answered is refused when the config loads, naming the key: an empty text (it
would match everywhere or nowhere), a negative token id, a ``--trace_file`` that holds no text.
A token id past the index's vocabulary is refused once the index is open (its record says it).
"""

from __future__ import annotations

from typing import Literal

import orjson
from pydantic import Field, field_validator, model_validator

from dolma_pipe.action import Action
from dolma_pipe.config import PathStr, StrictModel

from .query import Index, IndexQueryError, spans_as_json
from .texts import TraceFormat, TraceText, read_trace_texts


class QueryConfig(StrictModel):
    index: PathStr = Field(..., description="the index folder (dolma-pipe index), local or s3://")
    count: str | None = Field(None, description="count the occurrences of this text")
    find: str | None = Field(None, description="documents holding this text")
    trace: str | None = Field(None, description="the spans of this text found verbatim in the corpus, and their documents")
    trace_file: PathStr | None = Field(
        None, description="trace every text of this file (a model's generations): JSON lines with 'text', or --format lines"
    )
    format: TraceFormat = Field("jsonl", description="trace_file: JSON lines with a 'text' (and optional 'id'), or one text a line")
    tokens: list[int] | None = Field(None, description="count token ids instead of a text")
    limit: int = Field(10, ge=1, description="find: documents to show")
    min_length: int = Field(8, ge=1, description="trace: shortest span, in tokens (bytes for a document index)")
    docs: int = Field(3, ge=0, description="trace: documents shown per span")
    top: int | None = Field(None, ge=1, description="trace: the spans to show, least likely first (default: all)")
    max_count: int | None = Field(None, ge=1, description="trace: leave out spans found more often than this (common phrases)")
    output: Literal["table", "jsonl"] = Field("table", description="a table for a person, or JSON lines")
    cache: PathStr | None = Field(
        None, description="an s3:// index: the local folder of its checked copy (default: dolma-pipe-index-cache in the temporary folder)"
    )
    verify: bool = Field(
        True,
        description="hash every part and shard against the index's record before answering (about 0.3 s a GB from disk); "
        "false skips it for a large index: a damaged part may then answer wrongly, never crash",
    )

    @field_validator("count", "find", "trace")
    @classmethod
    def _not_empty(cls, value: str | None) -> str | None:
        if value == "":
            raise ValueError("an empty text matches nothing; give the text to look for")
        return value

    @field_validator("tokens")
    @classmethod
    def _token_ids(cls, value: list[int] | None) -> list[int] | None:
        if value is not None:
            if not value:
                raise ValueError("no token ids; give one or more")
            if any(t < 0 for t in value):
                raise ValueError("token ids are 0 or more (up to the index's vocabulary)")
        return value

    @model_validator(mode="after")
    def _one(self) -> QueryConfig:
        asked = [k for k in ("count", "find", "trace", "trace_file", "tokens") if getattr(self, k) is not None]
        if len(asked) != 1:
            raise ValueError("ask one thing: count, find, trace, trace_file or tokens")
        if self.format != "jsonl" and self.trace_file is None:
            raise ValueError("config key 'format' says how trace_file holds its texts; give trace_file, or leave format out")
        return self


class QueryAction(Action[QueryConfig]):
    name = "query"
    description = "count, find or trace text against an index"
    config_model = QueryConfig

    def run(self) -> str:
        cfg = self.config
        index = Index(cfg.index, verify=cfg.verify, cache=cfg.cache)
        if cfg.tokens is not None:
            try:
                index.encode(cfg.tokens)
            except IndexQueryError as exc:
                raise IndexQueryError(f"config key 'tokens': {exc}") from None
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
        if cfg.trace is not None:
            texts = [TraceText(0, cfg.trace)]
        else:
            assert cfg.trace_file is not None
            texts = list(read_trace_texts(cfg.trace_file, cfg.format))
        out = []
        for k, t in enumerate(texts):
            spans = index.trace(t.text, cfg.min_length, cfg.docs, cfg.top, max_count=cfg.max_count)
            if cfg.output == "jsonl":
                row: dict = {"text": k}
                if cfg.trace_file is not None:
                    row.update(line=t.line, **({"id": t.id} if t.id is not None else {}))
                out.append(orjson.dumps({**row, "spans": spans_as_json(spans)}).decode())
                continue
            where = "" if cfg.trace_file is None else f" (line {t.line}{f', id {t.id}' if t.id is not None else ''})"
            out.append(f"text {k}{where}: {len(spans)} span(s) found verbatim in the corpus (least likely first)")
            for s in spans:
                out.append(f"  [{s.start}:{s.end}] x{s.count:,} log10 p={s.unigram_log10_probability:.1f}  {s.text!r}")
                for h in s.documents:
                    out.append(f"      {h.id}  {h.src}:{h.loc}  {h.snippet!r}")
        return "\n".join(out)
