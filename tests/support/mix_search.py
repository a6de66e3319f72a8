"""Helpers of the ``mix-search`` tests that start from documents: word tokenizers, Dolma documents,
``dolma-pipe tokenize`` runs, and the tiny proxy config they train with.

The documents are sentences of a small word list; a word-level tokenizer over that list (id 0 ends
a document) keeps every id below the proxy's vocabulary, so a proxy trains in seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

VOCAB = 128
EOS = 0


def words(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def word_tokenizer(path: Path, vocab_words: list[str]) -> Path:
    """A word-level tokenizer.json: ``<eos>`` is id 0, ``<unk>`` 1, then ``vocab_words``."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"<eos>": 0, "<unk>": 1, **{w: i + 2 for i, w in enumerate(vocab_words)}}
    tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(path))
    return path


def write_documents(folder: Path, source: str, vocab_words: list[str], n: int, seed: int, length: tuple[int, int] = (20, 60)) -> Path:
    """``n`` documents of random words in ``folder/documents/<source>/part-0.jsonl.gz``; returns the file."""
    from dolma_pipe.documents import write_documents as write

    rng = np.random.default_rng(seed)
    out = folder / "documents" / source / "part-0.jsonl.gz"
    docs = [
        {"id": f"{source}-{i}", "text": " ".join(rng.choice(vocab_words, size=int(rng.integers(*length))).tolist()), "source": source}
        for i in range(n)
    ]
    write(str(out), docs)
    return out


def tokenize(documents: Path, destination: Path, tokenizer: Path, val_fraction: float = 0.2) -> Path:
    """``dolma-pipe tokenize`` of ``documents`` into ``destination/{train,val}``; returns ``destination``."""
    from dolma_pipe.cli import main

    args = ["tokenize", "--documents", str(documents), "--destination", str(destination), "--processes", "1", "--no-progress"]
    args += ["--tokenizer.name_or_path", str(tokenizer), "--tokenizer.eos_token_id", str(EOS)]
    args += ["--validation.fraction", str(val_fraction)]
    assert main(args) == 0
    return destination


def proxy_config(path: Path, vocab_size: int = VOCAB, **train: object) -> Path:
    """A proxy's training config: one tiny layer, 256 tokens a step (a proxy of 2,048 tokens is 8 steps)."""
    cfg = {
        "model": {"preset": "tiny", "vocab_size": vocab_size, "d_model": 32, "n_layers": 1, "n_heads": 2, "max_seq_len": 32},
        "data": {"seq_len": 32, "eos_id": EOS},
        "train": {"global_batch_size": 8, "micro_batch_size": 8, "precision": "fp32", **train},
        "optim": {"lr": 1.0e-2},
        "schedule": {"kind": "cosine", "warmup_steps": 1},
        "log": {"interval": 5},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def anneal_config(path: Path) -> Path:
    """The stage-2 form of :func:`proxy_config` for microanneals: the learning rate decayed linearly
    to zero from the one the checkpoint ended with, the optimizer state loaded."""
    proxy_config(path)
    cfg = yaml.safe_load(path.read_text())
    cfg["schedule"] = {"kind": "linear_decay", "start_lr": None}
    cfg["checkpoint"] = {"load_optimizer": True}
    path.write_text(yaml.safe_dump(cfg))
    return path


SOURCES = ("a", "b", "c")


def make_sources(root: Path) -> dict[str, Path]:
    """Three sources of documents over their own words (one tokenizer for all), each tokenized
    into ``root/tokens/<name>/{train,val}``."""
    vocab = {n: words(n, 30) for n in SOURCES}
    tok = word_tokenizer(root / "tok.json", [w for n in SOURCES for w in vocab[n]])
    out: dict[str, Path] = {"tokenizer": tok}
    for i, n in enumerate(SOURCES):
        out[f"{n}-docs"] = write_documents(root / "corpus", n, vocab[n], 60, seed=i)
        out[n] = tokenize(out[f"{n}-docs"], root / "tokens" / n, tok)
    return out
