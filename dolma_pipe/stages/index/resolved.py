"""What an index run settles from its config before it builds: the token shards' dtype and
tokenizer (given, or as the tokenize run beside them recorded), and the values the manifest
records of the run and its fingerprint hashes (:class:`IndexResolved`)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from dolma_pipe import tokenizer as toks
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import run_beside
from dolma_pipe.stage import Resolved
from dolma_pipe.suffix import Symbol

from .config import IndexConfig
from .sources import shard_folders

# Only a token index has a tokenizer: a document index records neither value.
TOKEN_ONLY = frozenset({"tokenizer_sha256", "eos_token_id"})


class IndexResolved(Resolved):
    kind: Literal["tokens", "documents"]
    symbol: Symbol
    # A part's most symbols: what fits the config's memory_per_task.
    max_symbols: int
    # Token shards: the tokenizer's digest (null when neither the config nor a tokenize manifest
    # names the tokenizer) and the id ending every document.
    tokenizer_sha256: str | None = None
    eos_token_id: int | None = None

    def as_json(self) -> dict[str, Any]:
        # A token index records an unknown digest as null, as it always has (its fingerprint stays).
        return self.model_dump(mode="json", exclude=set(TOKEN_ONLY) if self.kind == "documents" else None)


def token_settings(cfg: IndexConfig) -> tuple[np.dtype, dict, list[str]]:
    """The shards' dtype and tokenizer: given, or as the tokenize run that wrote them recorded;
    and the folders of the tokenize runs found beside them."""
    assert cfg.shards is not None
    recorded: dict[str, Any] = {}
    runs = []
    for folder in sorted(set(shard_folders(cfg.shards))):
        found = run_beside(folder, "tokenize")
        if found is not None:
            recorded = recorded or found[1].results
            runs.append(found[0])
    dtype = cfg.dtype or recorded.get("dtype")
    if dtype is None:
        raise ConfigError("config key 'dtype': the shards' token dtype (uint16 or uint32); no tokenize manifest beside them says it")
    if np.dtype(dtype) not in (np.dtype(np.uint16), np.dtype(np.uint32)):
        raise ConfigError(f"config key 'dtype': token shards are uint16 or uint32, got {dtype}")
    tok = dict(recorded.get("tokenizer") or {})
    if cfg.tokenizer is not None:
        try:
            info = toks.inspect(cfg.tokenizer)
        except toks.TokenizerError as exc:
            raise ConfigError(f"config key 'tokenizer': {exc}") from None
        if tok and tok.get("sha256") != info.sha256:
            raise ConfigError(
                f"config key 'tokenizer': {cfg.tokenizer} is not the tokenizer the shards were written with ({tok.get('name_or_path')})"
            )
        tok.update(name_or_path=cfg.tokenizer, file=info.path, sha256=info.sha256, vocab_size=info.vocab_size)
    if cfg.eos_token_id is not None:
        if tok.get("eos_token_id") not in (None, cfg.eos_token_id):
            raise ConfigError(f"config key 'eos_token_id': the shards were written with {tok['eos_token_id']} ending every document")
        tok["eos_token_id"] = cfg.eos_token_id
    if tok.get("eos_token_id") is None:
        raise ConfigError(
            "config key 'eos_token_id': the token ending every document (no match runs past it); no tokenize manifest beside the shards says it"
        )
    return np.dtype(dtype), tok, runs
