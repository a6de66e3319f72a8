"""Helpers for tests and benchmarks: tiny shards, configs, and launching real torchrun jobs.

Kept inside the package (not in tests/) so ``bench/trainer.py`` can use them too. Nothing here
is used by a training run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from train.shards import ShardWriter, shard_name

EOS = 0
VOCAB = 512


def write_shard(path: str | Path, docs: list[list[int]], eos_id: int = EOS, vocab_size: int = VOCAB, dtype=None, src: str = "test") -> Path:
    """One shard of ``docs`` (token lists; EOS is appended to each) through ``train.shards``;
    ids ``<stem>-<i>``, ``loc`` the document's position."""
    path = Path(path)
    with ShardWriter(path, vocab_size=vocab_size, eos_id=eos_id, dtype=dtype) as w:
        for i, doc in enumerate(docs):
            w.add(doc, id=f"{path.stem}-{i}", src=src, loc=i)
    return path


def make_shards(
    root: str | Path, n_train_shards: int = 3, docs_per_shard: int = 60, seed: int = 0, vocab: int = VOCAB, motif_seed: int = 0
) -> dict[str, str]:
    """Learnable token shards: documents repeat a few short motifs (fixed by ``motif_seed``,
    so a tiny model's loss falls fast and carries over between data sets); ``seed`` picks
    the documents. Returns ``{"train": dir, "val": dir}``."""
    motif_rng = np.random.default_rng(motif_seed)
    motifs = [motif_rng.integers(1, vocab, size=int(motif_rng.integers(5, 12))).tolist() for _ in range(8)]
    rng = np.random.default_rng([motif_seed, seed])
    root = Path(root)
    for part in range(n_train_shards):
        docs = []
        for _ in range(docs_per_shard):
            m = motifs[int(rng.integers(0, len(motifs)))]
            docs.append((m * 8)[: int(rng.integers(10, 60))])
        write_shard(root / "train" / f"{shard_name(part)}.npy", docs, vocab_size=vocab)
    val = [(motifs[i % len(motifs)] * 8)[:40] for i in range(48)]
    write_shard(root / "val" / f"{shard_name(0)}.npy", val, vocab_size=vocab)
    return {"train": str(root / "train"), "val": str(root / "val")}


def tiny_config(save_dir: str | Path, shards: dict[str, str], **sections: dict[str, Any]) -> dict[str, Any]:
    """A raw config dict for a tiny fp32 run; ``sections`` update the defaults per section."""
    cfg: dict[str, Any] = {
        "run_name": "test",
        "model": {"preset": "tiny"},
        "data": {"paths": [shards["train"]], "val_paths": [shards["val"]], "seq_len": 32, "eos_id": EOS},
        "train": {"global_batch_size": 8, "micro_batch_size": 2, "max_steps": 6, "precision": "fp32"},
        "optim": {"lr": 1.0e-2},
        "schedule": {"kind": "cosine", "warmup_steps": 2},
        "checkpoint": {"save_dir": str(save_dir), "interval": 3, "keep_last": 5},
        "log": {"interval": 1},
    }
    for name, values in sections.items():
        cfg.setdefault(name, {}).update(values)
    return cfg


def write_config(path: str | Path, cfg: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg))
    return path


def launch(
    config: str | Path,
    nproc: int = 2,
    sets: list[str] | None = None,
    env: dict | None = None,
    timeout: float = 240,
    module: str = "train",
    module_args: list[str] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``torchrun --standalone --nproc-per-node N -m train --config ...`` (or plain
    ``python -m train`` for one process) exactly as a user would. ``module`` / ``module_args``
    run another entry point instead (the tests' launcher with hooks) with these arguments
    before ``--config``."""
    if nproc == 1:
        cmd = [sys.executable, "-m", module]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", "-m", module]
    cmd += [*(module_args or []), "--config", str(config)]
    for s in sets or []:
        cmd += ["--set", s]
    repo = str(Path(__file__).resolve().parent.parent)
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    full_env.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=repo)


def read_metrics(save_dir: str | Path) -> list[dict]:
    path = Path(save_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def train_losses(save_dir: str | Path) -> dict[int, float]:
    """step -> training loss (the last record wins if a step was logged twice)."""
    return {m["step"]: m["loss"] for m in read_metrics(save_dir) if "loss" in m}
