"""What a tokenize run is fixed to when it starts, the one value its phases are built from.

:func:`settle` reads the tokenizer once on the driver and checks the ids and dtype the config asks
for (a :class:`~dolma_pipe.config.ConfigError` naming the key); :class:`TokenizeResolved` is what
the manifest records of them and the fingerprint hashes; :class:`TokenizeRun` adds the config and
the run's paths. The phase classes (:mod:`.encode`, :mod:`.shards`) hold a :class:`TokenizeRun`,
never the stage, so it pickles to workers alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
from pydantic import BaseModel, ConfigDict

from dolma_pipe import storage
from dolma_pipe import tokenizer as toks
from dolma_pipe.config import ConfigError
from dolma_pipe.stage import Resolved
from dolma_pipe.workdir import WorkDir
from train.shards import TOKENS_SUFFIX, dtype_for_vocab, shard_name

from .config import TokenizeConfig, ValidationOptions
from .rules import seed_key

# numpy's name of the shards' token type.
TokenDtype = Literal["uint16", "uint32"]


class TokenizerIds(BaseModel):
    """The tokenizer as it is (its file's digest: a name can come to mean another file) and the
    ids the shards are written with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: str
    vocab_size: int
    eos_token_id: int
    bos_token_id: int | None
    pad_token_id: int


class TokenizeResolved(Resolved):
    tokenizer: TokenizerIds
    dtype: TokenDtype

    def as_json(self) -> dict[str, Any]:
        # An unset BOS is recorded as null, as every tokenize manifest has it: the fingerprint
        # of a run that sets none stays what it was.
        return self.model_dump(mode="json")


def settle(config: TokenizeConfig) -> tuple[toks.TokenizerInfo, TokenizeResolved]:
    """The tokenizer the config names (its file, digest and size), and the ids and dtype the run
    writes with: the config's, else the packaged tokenizer's (pad: EOS, as in Dolma)."""
    t = config.tokenizer
    try:
        info = toks.inspect(t.name_or_path)
    except toks.TokenizerError as exc:
        raise ConfigError(f"config key 'tokenizer.name_or_path': {exc}") from None
    known = toks.special_ids(t.name_or_path)
    eos = t.eos_token_id if t.eos_token_id is not None else known.get("eos_token_id")
    if eos is None:
        raise ConfigError("config key 'tokenizer.eos_token_id' is required for this tokenizer: every document of a shard ends with EOS")
    pad = t.pad_token_id if t.pad_token_id is not None else (known.get("pad_token_id") or eos)
    vocab = info.vocab_size
    for key, value in (("eos_token_id", eos), ("bos_token_id", t.bos_token_id), ("pad_token_id", pad)):
        if value is not None and value >= vocab:
            raise ConfigError(f"config key 'tokenizer.{key}': {value} is outside the vocabulary of {vocab:,} entries")
    auto = dtype_for_vocab(vocab)
    dtype = np.dtype(config.dtype) if config.dtype else auto
    if np.iinfo(dtype).max < vocab - 1:
        raise ConfigError(f"config key 'dtype': {config.dtype} cannot hold the ids of a vocabulary of {vocab:,} entries; use {auto}")
    ids = TokenizerIds(sha256=info.sha256, vocab_size=vocab, eos_token_id=eos, bos_token_id=t.bos_token_id, pad_token_id=pad)
    return info, TokenizeResolved(tokenizer=ids, dtype=cast(TokenDtype, dtype.name))


@dataclass(frozen=True)
class TokenizeRun:
    """The config, the resolved tokenizer, and where the run reads and writes."""

    config: TokenizeConfig
    resolved: TokenizeResolved
    # The tokenizer file on the driver (workers find it through :meth:`tokenizer_file`).
    tokenizer_path: str

    @property
    def root(self) -> str:
        return self.config.destination

    @property
    def work(self) -> WorkDir:
        return WorkDir(storage.join(self.root, "_work"))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.resolved.dtype)

    @property
    def eos_id(self) -> int:
        return self.resolved.tokenizer.eos_token_id

    @property
    def bos_id(self) -> int | None:
        return self.resolved.tokenizer.bos_token_id

    @property
    def order_key(self) -> bytes:
        return seed_key(self.config.seed, b"order")

    @property
    def valid_key(self) -> bytes:
        v = self.config.validation
        return seed_key(v.seed if v is not None else ValidationOptions.model_fields["seed"].default, b"validation")

    def tokenizer_file(self) -> str:
        """The tokenizer file on this machine (:func:`dolma_pipe.tokenizer.local_copy`)."""
        return toks.local_copy(self.work, self.tokenizer_path, self.resolved.tokenizer.sha256)

    def work_path(self, rel: str, suffix: str) -> str:
        return self.work.path("encode", rel + suffix)

    def shard_path(self, split: str, index: int) -> str:
        return storage.join(self.root, split, shard_name(index) + TOKENS_SUFFIX)
