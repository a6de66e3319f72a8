"""The ``tokenize`` stage: the tokenizer and its ids, the run's paths, and its phases
(:mod:`.encode`, :mod:`.shards`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dolma_pipe import storage
from dolma_pipe import tokenizer as toks
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import InputFile
from dolma_pipe.stage import Phase, Stage
from dolma_pipe.workdir import WorkDir
from train.shards import TOKENS_SUFFIX, dtype_for_vocab, shard_name

from .config import TokenizeConfig, ValidationOptions
from .encode import Encode
from .rules import seed_key
from .shards import Shards


class TokenizeStage(Stage[TokenizeConfig]):
    name = "tokenize"
    description = "tokenize documents into OLMo token shards (train and validation), deterministic and resumable"
    config_model = TokenizeConfig
    depends_on_input_set = True
    # How many documents go to one encode call, and whether _work/ stays: not what is written.
    run_keys = frozenset({"batch_size", "keep_work"})

    def __init__(self, config: TokenizeConfig):
        super().__init__(config)
        t = config.tokenizer
        try:
            self.tok_info = toks.inspect(t.name_or_path)
        except toks.TokenizerError as exc:
            raise ConfigError(f"config key 'tokenizer.name_or_path': {exc}") from None
        known = toks.special_ids(t.name_or_path)
        eos = t.eos_token_id if t.eos_token_id is not None else known.get("eos_token_id")
        if eos is None:
            raise ConfigError("config key 'tokenizer.eos_token_id' is required for this tokenizer: every document of a shard ends with EOS")
        self.eos_id: int = eos
        self.bos_id: int | None = t.bos_token_id
        self.pad_id: int = t.pad_token_id if t.pad_token_id is not None else (known.get("pad_token_id") or self.eos_id)
        vocab = self.tok_info.vocab_size
        for key, value in (("eos_token_id", self.eos_id), ("bos_token_id", self.bos_id), ("pad_token_id", self.pad_id)):
            if value is not None and value >= vocab:
                raise ConfigError(f"config key 'tokenizer.{key}': {value} is outside the vocabulary of {vocab:,} entries")
        auto = dtype_for_vocab(vocab)
        self.dtype = np.dtype(config.dtype) if config.dtype else auto
        if np.iinfo(self.dtype).max < vocab - 1:
            raise ConfigError(f"config key 'dtype': {config.dtype} cannot hold the ids of a vocabulary of {vocab:,} entries; use {auto}")
        self.order_key = seed_key(config.seed, b"order")
        v = config.validation
        self.valid_key = seed_key(v.seed if v is not None else ValidationOptions.model_fields["seed"].default, b"validation")

    @property
    def output_root(self) -> str:
        return self.config.destination

    def resolve(self, inputs: list[InputFile]) -> dict[str, Any]:
        """The tokenizer as it is (its file's digest: a name can come to mean another file) and the
        ids and dtype the shards are written with. With a remote work directory the tokenizer file
        goes there too, for workers on machines that do not have it (:meth:`tokenizer_file`)."""
        toks.ship(self.work, self.tok_info.path, self.tok_info.sha256)
        return {
            "tokenizer": {
                "sha256": self.tok_info.sha256,
                "vocab_size": self.tok_info.vocab_size,
                "eos_token_id": self.eos_id,
                "bos_token_id": self.bos_id,
                "pad_token_id": self.pad_id,
            },
            "dtype": str(self.dtype),
        }

    def phases(self) -> list[Phase]:
        encode, shards = Encode(self), Shards(self)
        return [
            Phase("encode", plan=self._plan_files, run=encode.run, outputs=encode.outputs, after=encode.split, unit="file"),
            Phase("pack", plan=shards.plan_buckets, run=shards.pack, after=shards.number),
            Phase("write", plan=shards.plan_writes, run=shards.write, outputs=shards.write_outputs, after=shards.finish, unit="bucket"),
        ]

    # -- paths

    @property
    def work(self) -> WorkDir:
        return WorkDir(storage.join(self.output_root, "_work"))

    def tokenizer_file(self) -> str:
        """The tokenizer file on this machine (:func:`dolma_pipe.tokenizer.local_copy`)."""
        return toks.local_copy(self.work, self.tok_info.path, self.tok_info.sha256)

    def keeps_work_file(self, path: str) -> bool:
        # The validation candidates are small, and a rerun of a finished run (every task skipped)
        # computes the same split from them.
        return path.endswith(".cand")

    def work_path(self, rel: str, suffix: str) -> str:
        return self.work.path("encode", rel + suffix)

    def shard_path(self, split: str, index: int) -> str:
        return storage.join(self.output_root, split, shard_name(index) + TOKENS_SUFFIX)
