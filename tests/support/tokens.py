"""Tokenizers for tests: a small BPE trained here, for counting tokens without the OLMo tokenizers."""

from __future__ import annotations

from pathlib import Path


def train_tokenizer(path: str | Path, texts: list[str], vocab_size: int = 400) -> str:
    """A small BPE tokenizer trained on ``texts`` and saved as a ``tokenizer.json`` at ``path``
    (for tests that count tokens without the OLMo tokenizers); returns the path."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]", "<|endoftext|>"], show_progress=False)
    )
    tok.save(str(path))
    return str(path)
