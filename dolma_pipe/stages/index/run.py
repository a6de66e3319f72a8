"""What an index run is fixed to when it starts, the one value its phases are built from.

:func:`settle` works out, on the driver when the stage is made, what kind of corpus the config
names, the symbols its text is indexed as, the tokenizer a token index records, and how many
symbols fit one part; :class:`IndexRun` holds the config, the resolved values
(:class:`.resolved.IndexResolved`, as the manifest records them) and the tokenizer, with where a
source's files go. The phase classes (:mod:`.build`, :mod:`.finish`) hold an :class:`IndexRun`,
never the stage, so it pickles to workers alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from dolma_pipe import suffix
from train.shards import TOKENS_SUFFIX

from .config import MEMORY_PER_SYMBOL, IndexConfig
from .format import PART_SUFFIXES, SIDECAR_COPY, SOURCE_COPY, copy_path, part_path
from .resolved import IndexResolved, token_settings
from .sources import refuse_destination_among_shards

# numpy's dtype of a text, by symbol.
_DTYPES: dict[str, np.dtype] = {"u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32)}


def settle(config: IndexConfig) -> tuple[IndexResolved, dict | None]:
    """The run's resolved values and, for token shards, the tokenizer as ``index.json`` records it
    (given, or as the tokenize run beside the shards recorded; a :class:`~dolma_pipe.config.ConfigError`
    naming the key when neither says enough). Token shards may not hold the destination."""
    kind: Literal["tokens", "documents"] = "tokens" if config.shards is not None else "documents"
    tokenizer: dict | None = None
    symbol: suffix.Symbol
    if kind == "tokens":
        dtype, tokenizer, runs = token_settings(config)
        symbol = suffix.symbol_for(dtype)
        refuse_destination_among_shards(config.destination, list(config.shards or []), runs)
    else:
        symbol = "u8"
    max_symbols = max(1, config.memory_per_task // MEMORY_PER_SYMBOL[symbol])
    tok = tokenizer or {}
    resolved = IndexResolved(
        kind=kind,
        symbol=symbol,
        max_symbols=max_symbols,
        tokenizer_sha256=tok.get("sha256"),
        eos_token_id=tok.get("eos_token_id"),
    )
    return resolved, tokenizer


@dataclass(frozen=True)
class IndexRun:
    """The config, the resolved values, the tokenizer a token index records, and where a source's
    files go."""

    config: IndexConfig
    resolved: IndexResolved
    # Token shards: name_or_path, file, sha256, vocab_size, eos_token_id... (``index.json``'s).
    tokenizer: dict | None

    @property
    def root(self) -> str:
        return self.config.destination

    @property
    def kind(self) -> Literal["tokens", "documents"]:
        return self.resolved.kind

    @property
    def symbol(self) -> suffix.Symbol:
        return self.resolved.symbol

    @property
    def dtype(self) -> np.dtype:
        return _DTYPES[self.resolved.symbol]

    @property
    def max_symbols(self) -> int:
        return self.resolved.max_symbols

    def base(self, rel: str) -> str:
        """A source's name in the index: a shard's without ``.npy``, a document file's as it is."""
        return rel[: -len(TOKENS_SUFFIX)] if self.kind == "tokens" else rel

    def outputs(self, rel: str) -> list[str]:
        """The files a source's task may write: its part's, and a copied shard and sidecar."""
        base = self.base(rel)
        out = [part_path(self.root, base, s) for s in PART_SUFFIXES]
        return out + [copy_path(self.root, base, s) for s in (SOURCE_COPY, SIDECAR_COPY)]
