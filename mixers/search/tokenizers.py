"""The sources' and domains' shards checked against the proxy before anything trains.

A search's shards come from ``dolma-pipe tokenize`` runs, whose manifest (beside the ``train/`` and
``val/`` folders) records the tokenizer: its name, its file's digest, its vocabulary size and the
id ending every document. A proxy trains one model over every source, so every source must be
tokenized with one tokenizer, and it must fit the proxy: ids below ``model.vocab_size`` and the same
end-of-document id as ``data.eos_id``. Otherwise training fails minutes later naming an internal
document id (or, with two small tokenizers, trains on nonsense without failing). Each mismatch is
one line naming the config key of the shards and both tokenizers. Shards no tokenize run wrote
(no manifest beside them) are not checked here: the trainer still refuses ids outside its
vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dolma_pipe import storage
from dolma_pipe import tokenizer as toks
from dolma_pipe.config import ConfigError
from dolma_pipe.manifest import ManifestError, run_beside
from train.shards import TOKENS_SUFFIX


@dataclass(frozen=True)
class Recorded:
    """A tokenizer as a tokenize run (or ``eval.tokenizer``) names it, and where it was found."""

    key: str  # the config key that names the shards (or the tokenizer)
    where: str  # the shards' folder (or the tokenizer's path)
    name: str
    sha256: str | None
    vocab_size: int | None
    eos_token_id: int | None

    def describe(self, with_key: bool = False) -> str:
        what = ([self.key] if with_key else []) + ([f"{self.vocab_size:,} entries"] if self.vocab_size is not None else [])
        return f"{self.name} ({', '.join(what)})" if what else self.name


def tokenize_results(path: str) -> dict[str, Any] | None:
    """What the tokenize run that wrote the shards at ``path`` (a folder or a ``.npy`` file)
    recorded (:func:`~dolma_pipe.manifest.run_beside`); None when no readable manifest says."""
    path = path.rstrip("/")
    folder = path.rsplit("/", 1)[0] if path.endswith(TOKENS_SUFFIX) else path
    try:
        found = run_beside(folder, "tokenize")
    except (ManifestError, storage.StorageError):
        return None
    return found[1].results if found is not None and found[1].results.get("tokenizer") else None


def recorded(key: str, path: str) -> Recorded | None:
    results = tokenize_results(path)
    if results is None:
        return None
    tok = results["tokenizer"]
    return Recorded(key, path, str(tok.get("name_or_path")), tok.get("sha256"), tok.get("vocab_size"), tok.get("eos_token_id"))


def check(
    shards: list[tuple[str, list[str]]],
    *,
    vocab_size: int,
    eos_id: int,
    proxy: str,
    eval_tokenizer: str | None = None,
) -> None:
    """``shards``: (config key, shard paths) of every source and domain. ConfigError when one was
    tokenized with another tokenizer than the rest (or than ``eval.tokenizer``), with more ids than
    the proxy's ``model.vocab_size`` or with another end-of-document id than its ``data.eos_id``."""
    reference: Recorded | None = None
    if eval_tokenizer is not None:
        try:
            info = toks.inspect(eval_tokenizer)
        except toks.TokenizerError as e:
            raise ConfigError(f"config key 'eval.tokenizer': {e}") from None
        reference = Recorded("eval.tokenizer", info.path, eval_tokenizer, info.sha256, info.vocab_size, None)
        if info.vocab_size > vocab_size:
            raise ConfigError(
                f"config key 'eval.tokenizer': {eval_tokenizer} has {info.vocab_size:,} entries, more than the proxy's "
                f"model.vocab_size {vocab_size:,} ({proxy}): give the tokenizer the shards were written with"
            )
    for key, paths in shards:
        for path in paths:
            rec = recorded(key, path)
            if rec is None:
                continue
            if reference is None:
                reference = rec
            elif rec.sha256 != reference.sha256:
                raise ConfigError(
                    f"config key '{key}': {path} was tokenized with {rec.describe()}, not with {reference.describe(with_key=True)}: "
                    "a proxy trains one model on every source, so tokenize every source (and domain) with one tokenizer"
                )
            if rec.vocab_size is not None and rec.vocab_size > vocab_size:
                raise ConfigError(
                    f"config key '{key}': {path} was tokenized with {rec.describe()}, more ids than the proxy's "
                    f"model.vocab_size {vocab_size:,} ({proxy}): tokenize it with the proxy's tokenizer or raise model.vocab_size"
                )
            if rec.eos_token_id is not None and rec.eos_token_id != eos_id:
                raise ConfigError(
                    f"config key '{key}': {path} was tokenized with {rec.describe()}, whose documents end with id "
                    f"{rec.eos_token_id}, not the proxy's data.eos_id {eos_id} ({proxy})"
                )
