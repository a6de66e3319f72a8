"""One proxy run: a mixture's data drawn from the pools, trained by ``python -m train``, evaluated per domain.

The trainer is driven only through its command line and public functions (``train.config``,
``train.evaluate.evaluate_domains``), as DESIGN.md asks of mix search. A run's data and checkpoints
live in a local scratch folder of the worker that runs it and are removed when it ends: nothing a
run writes is read by another task, so a proxy runs on any node of a cluster that shares no disk.
What it leaves is its record under ``<output>/runs/<key>/`` (written through the storage layer): the
training config it ran, its log, and ``result.json`` (weights, tokens taken per source, steps,
seconds, and loss and bits per byte per domain).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dolma_pipe import extras, storage
from dolma_pipe.config import ConfigError
from dolma_pipe.errors import DolmaPipeError
from mixers.search.pools import Pool, take, write_proxy_data


class ProxyError(DolmaPipeError, RuntimeError):
    """A proxy run failed; the message names the run and ends with the tail of its log."""


@dataclass(frozen=True)
class TrainSettings:
    """What the search reads of the proxy's training config (checked once, on the driver)."""

    raw: dict[str, Any]  # the config, overrides applied, as train dumps it
    vocab_size: int
    eos_id: int
    dtype: str
    tokens_per_step: int


def train_settings(config_path: str, overrides: list[str]) -> TrainSettings:
    """The proxy config loaded and checked by the trainer's own loader, ``model`` section
    included: the family of the proxies (``model.preset``, ``model.block_pattern``) is the
    config's, as for any run of the trainer. A mistake names ``proxy.config``, or ``proxy.set``
    when the config loads without the overrides."""
    extras.require("torch", "the proxies' trainer")  # said before any work, not by a worker
    from train.config import ConfigError as TrainConfigError
    from train.config import load_config
    from train.data import token_dtype

    try:
        cfg = load_config(config_path, overrides)
    except (TrainConfigError, OSError) as e:
        key = "proxy.config"
        if overrides and isinstance(e, TrainConfigError):
            try:
                load_config(config_path, [])
                key = "proxy.set"
            except (TrainConfigError, OSError):
                pass
        raise ConfigError(f"config key '{key}': {config_path}: {e}") from None
    if cfg.data.eos_id is None:
        raise ConfigError(f"config key 'proxy.config': {config_path} sets no data.eos_id (the token that ends every document)")
    dtype = token_dtype(cfg.data.token_dtype, cfg.model.vocab_size)
    return TrainSettings(cfg.to_dict(), cfg.model.vocab_size, cfg.data.eos_id, str(dtype), cfg.train.global_batch_size * cfg.data.seq_len)


def _weights(model: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The weight names and shapes a ``model`` section builds (on the meta device: no memory)."""
    import torch

    from train.config import ModelConfig
    from train.model import Transformer

    with torch.device("meta"):
        return {k: tuple(v.shape) for k, v in Transformer(ModelConfig(**model)).state_dict().items()}


def _shape(model: dict[str, Any]) -> str:
    return f"block_pattern {model['block_pattern']}, d_model {model['d_model']}, n_layers {model['n_layers']}"


def check_checkpoint_model(settings: TrainSettings, checkpoint: str) -> None:
    """A microanneal starts every anneal from ``checkpoint``: the proxy's model (its family and
    shape) must have the checkpoint's weights, name for name and shape for shape. Refused when
    the search loads, rather than by the trainer of every anneal."""
    try:
        theirs = json.loads(storage.read_bytes(storage.join(checkpoint, "trainer_state.json")))["config"]["model"]
        theirs_weights = _weights(theirs)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"config key 'microanneal.checkpoint': {checkpoint}: cannot read the model it holds ({e})") from None
    ours_weights = _weights(settings.raw["model"])
    if ours_weights != theirs_weights:
        differ = sorted(k for k in ours_weights.keys() | theirs_weights.keys() if ours_weights.get(k) != theirs_weights.get(k))
        raise ConfigError(
            f"config key 'proxy.config': its model ({_shape(settings.raw['model'])}) is not the model of "
            f"microanneal.checkpoint {checkpoint} ({_shape(theirs)}): {len(differ)} weights differ, "
            f"first {', '.join(differ[:3])}; give the proxy the checkpoint's model section"
        )


def steps_for(tokens: int, settings: TrainSettings) -> int:
    return max(1, round(tokens / settings.tokens_per_step))


@dataclass(frozen=True)
class ProxyRun:
    key: str
    weights: dict[str, float]
    tokens: int
    seed: int  # the documents taken and the instance order
    init_from: str | None = None  # microanneal: the checkpoint the anneal starts from


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _metrics(save_dir: Path) -> list[dict[str, Any]]:
    path = save_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run_config(settings: TrainSettings, run: ProxyRun, data: Path, save_dir: Path) -> dict[str, Any]:
    raw = json.loads(json.dumps(settings.raw))
    raw["run_name"] = f"mix-search-{run.key}"
    raw["data"].update(paths=[str(data)], val_paths=[], seed=run.seed)
    raw["train"].update(max_steps=steps_for(run.tokens, settings), stop_at_step=None)
    raw["schedule"]["total_steps"] = None
    raw["eval"].update(interval=0, at_end=False)
    raw["checkpoint"].update(save_dir=str(save_dir), interval=0, keep_last=1, permanent_interval=0, resume=False, overwrite=True)
    if run.init_from is not None:
        raw["checkpoint"]["init_from"] = run.init_from
    return raw


def _train(cmd: list[str], log: Path, key: str, threads: int) -> None:
    # The thread count is pinned: CPU kernels split their sums by thread, and Ray sets
    # OMP_NUM_THREADS=1 in its workers where a local process pool leaves it unset.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    with open(log, "ab") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False, env=env)
    if proc.returncode != 0:
        raise ProxyError(f"proxy run {key}: the trainer exited with status {proc.returncode}; its log ends:\n{_tail(log)}")


def run_proxy(
    run: ProxyRun,
    pools: list[Pool],
    settings: TrainSettings,
    domains: dict[str, list[str]],
    *,
    nproc: int,
    threads: int,
    max_instances: int,
    tokenizer: str | None,
    scratch_root: str | None,
    record_dir: str,
) -> dict[str, Any]:
    """Trains and evaluates one proxy; returns (and writes to ``record_dir``) its result."""
    import torch

    from train.evaluate import evaluate_domains

    # Named by the run's record, not the process: a rerun after a kill clears what the killed one left.
    tag = hashlib.blake2b(record_dir.encode(), digest_size=6).hexdigest()
    scratch = Path(scratch_root or tempfile.gettempdir()) / f"dolma-pipe-mix-search-{tag}-{run.key}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    started = time.perf_counter()
    try:
        names = [p.name for p in pools]
        takes = [take(p, round(run.weights.get(n, 0.0) * run.tokens), run.seed) for p, n in zip(pools, names)]
        write_proxy_data(
            scratch / "data", pools, takes, vocab_size=settings.vocab_size, eos_id=settings.eos_id, dtype=np.dtype(settings.dtype)
        )
        raw = _run_config(settings, run, scratch / "data", scratch / "ckpt")
        config_path = scratch / "config.yaml"
        config_path.write_text(yaml.safe_dump(raw, sort_keys=False))
        log = scratch / "train.log"
        if nproc > 1:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
        else:
            cmd = [sys.executable]
        _train([*cmd, "-m", "train", "--config", str(config_path)], log, run.key, threads)
        steps = raw["train"]["max_steps"]
        checkpoint = scratch / "ckpt" / f"step{steps}"
        if not checkpoint.is_dir():
            raise ProxyError(
                f"proxy run {run.key}: the trainer ended without its final checkpoint {checkpoint.name}; its log ends:\n{_tail(log)}"
            )
        trained = time.perf_counter() - started
        speeds = [m["tokens_per_s"] for m in _metrics(scratch / "ckpt") if "tokens_per_s" in m]
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            evaluated = evaluate_domains([str(checkpoint)], domains, max_instances=max_instances, micro_batch=16, tokenizer=tokenizer)
        finally:
            torch.set_num_threads(before)
        evaluated = evaluated[str(checkpoint)]
        result = {
            "key": run.key,
            "weights": run.weights,
            "seed": run.seed,
            "init_from": run.init_from,
            "tokens": {n: t.tokens for n, t in zip(names, takes)},
            "steps": steps,
            "domains": {d: {k: evaluated[d].get(k) for k in ("loss", "bpb", "tokens", "bytes")} for d in domains},
        }
        # result.json is the same for every rerun of the run (timings are in the manifest only).
        storage.write_bytes(storage.join(record_dir, "config.yaml"), config_path.read_bytes())
        storage.write_bytes(storage.join(record_dir, "train.log"), log.read_bytes())
        storage.write_bytes(storage.join(record_dir, "result.json"), json.dumps(result, indent=1).encode())
        timing = {"train_seconds": round(trained, 3), "seconds": round(time.perf_counter() - started, 3)}
        if speeds:  # the median of the logged steps: the first steps warm up
            timing["tokens_per_s"] = round(float(np.median(speeds)), 1)
        return {**result, **timing}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
