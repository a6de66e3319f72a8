"""Validation loss and perplexity: inside the trainer and for checkpoints from the command line.

``python -m train.evaluate --val-paths VAL_DIR ckptA ckptB ... [--device cuda]`` builds each
checkpoint's model from the config stored in its ``trainer_state.json`` (on the meta device,
materialised on ``--device``: default cuda if available, else cpu; the weights are then loaded,
never initialised) and prints loss and perplexity on the held-out shards (one process, no
process group needed). ``--untrained CONFIG`` adds the model a training config starts from (its
``model`` section initialised with ``train.init_seed`` as the trainer does, its ``data`` section
for reading the shards): the baseline every trained checkpoint should beat.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from train.checkpoint import CheckpointError
from train.config import ModelConfig
from train.data import TokenDataset, check_shard_results, eval_indices, shard_checks, token_dtype
from train.errors import TrainError, report

if TYPE_CHECKING:
    from train.model import Transformer


@torch.no_grad()
def evaluate_loss(
    model: torch.nn.Module, dataset: TokenDataset, indices: np.ndarray, micro_batch: int, device: torch.device | str, vocab_size: int
) -> dict:
    """Mean next-token cross entropy over ``indices`` (summed over all ranks if distributed).

    A ``-1`` index is a padding slot (see ``train.data.eval_indices``): it runs through the
    model like any instance, so every rank makes the same forwards, and counts for nothing.
    """
    was_training = model.training
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)  # (sum of losses, token count)
    for i in range(0, len(indices), micro_batch):
        chunk = indices[i : i + micro_batch]
        real = torch.from_numpy(chunk >= 0).to(device)
        tokens = torch.from_numpy(dataset.batch(np.where(chunk >= 0, chunk, 0))).to(device)
        logits = model(tokens)[:, :-1, :vocab_size].float()
        targets = tokens[:, 1:]
        per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
        per_instance = per_token.view(targets.shape).double().sum(dim=1)
        total[0] += per_instance[real].sum()
        total[1] += real.sum() * targets.shape[1]
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(total)
    model.train(was_training)
    loss = (total[0] / total[1].clamp(min=1)).item()
    return {"loss": loss, "ppl": math.exp(loss), "tokens": int(total[1].item())}


def model_config_from_state(state: dict) -> ModelConfig:
    return ModelConfig(**state["config"]["model"])


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def empty_model(mcfg: ModelConfig, device) -> Transformer:
    """The model with uninitialised storage on ``device`` (built on meta: no init pass, no
    second copy), to be filled by a checkpoint load."""
    from train.model import Transformer

    with torch.device("meta"):
        model = Transformer(mcfg)
    return model.to_empty(device=torch.device(device))


UNTRAINED_PREFIX = "untrained:"


def untrained_state(config_path: str, overrides: list[str] | None = None) -> dict:
    """What ``evaluate_checkpoints`` needs of a checkpoint (its config), for the weights a training
    config starts from; a config mistake is a ``CheckpointError`` naming the file."""
    from dataclasses import asdict

    from train.config import ConfigError, load_config

    try:
        cfg = load_config(config_path, overrides)
    except (ConfigError, OSError) as e:
        raise CheckpointError(f"{config_path}: {e}") from e
    return {"config": asdict(cfg)}


def evaluate_checkpoints(
    paths: list[str],
    val_paths: list[str],
    seq_len: int | None = None,
    max_instances: int | None = None,
    micro_batch: int = 4,
    device: torch.device | str | None = None,
    untrained: list[str] | None = None,
) -> dict[str, dict]:
    """Loss/perplexity of each checkpoint on the validation shards, in this process.

    The shards get the trainer's checks first (token ids below the checkpoint's vocabulary,
    sound sidecars, EOS at the end if the run set ``data.eos_id``): a wrong path or shards
    from another tokenizer are a ``DataError`` naming the file, a wrong checkpoint a
    ``CheckpointError`` naming it. Each of ``untrained`` (training config files) is evaluated
    first, with the weights it initialises, under the name ``untrained:<config>``.
    """
    from train.checkpoint import load_model_weights, read_state
    from train.model import init_weights

    dev = torch.device(device) if device is not None else default_device()
    states = {UNTRAINED_PREFIX + c: untrained_state(c) for c in untrained or []}
    states.update({str(p): read_state(p) for p in paths})  # every path checked before any work
    scans: dict[tuple, tuple[TokenDataset, dict[str, dict]]] = {}
    results = {}
    for path, state in states.items():
        mcfg = model_config_from_state(state)
        dcfg = state["config"]["data"]
        sl = seq_len or dcfg["seq_len"]
        dtype = token_dtype(dcfg["token_dtype"], mcfg.vocab_size)
        key = (sl, str(dtype), dcfg.get("eos_id"))
        if key not in scans:  # one read of the shards for all checkpoints that read them alike
            data = TokenDataset(val_paths, sl, dtype, dcfg.get("eos_id"))
            scans[key] = (data, shard_checks(data)[0])
        data, checks = scans[key]
        check_shard_results(data, checks, mcfg.vocab_size)
        model = empty_model(mcfg, dev)
        if path.startswith(UNTRAINED_PREFIX) and path not in paths:
            init_weights(model, states[path]["config"]["train"]["init_seed"])
        else:
            load_model_weights(path, model)
        limit = max_instances if max_instances is not None else dcfg.get("val_max_instances", 1024)
        idx = eval_indices(data.n_instances, limit, 0, 1)
        results[path] = evaluate_loss(model, data, idx, micro_batch, dev, mcfg.vocab_size)
        del model
    return results


def print_table(results: dict[str, dict], out=sys.stdout) -> None:
    width = max(len(k) for k in results)
    print(f"{'checkpoint':<{width}}  {'loss':>8}  {'ppl':>10}", file=out)
    for k, r in results.items():
        print(f"{k:<{width}}  {r['loss']:8.4f}  {r['ppl']:10.3f}", file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.evaluate", description=__doc__)
    ap.add_argument("checkpoints", nargs="*", help="checkpoint folders (step<N>/ or a soup)")
    ap.add_argument("--val-paths", action="append", required=True, metavar="PATH", help="held-out token shards or folder (repeatable)")
    ap.add_argument("--seq-len", type=int, default=None, help="default: the checkpoint's data.seq_len")
    ap.add_argument(
        "--max-instances",
        type=int,
        default=None,
        help="instances evaluated (default: the checkpoint's data.val_max_instances, as in training)",
    )
    ap.add_argument("--device", default=None, help="cuda, cuda:1, cpu, ... (default: cuda if available, else cpu)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--output", default=None, metavar="FILE", help="also write the results as JSON to FILE (dolma-pipe report reads it)")
    ap.add_argument(
        "--untrained", action="append", default=[], metavar="CONFIG", help="also the untrained model of this training config (repeatable)"
    )
    args = ap.parse_args(argv)
    if not args.checkpoints and not args.untrained:
        ap.error("give at least one checkpoint or --untrained CONFIG")
    try:
        results = evaluate_checkpoints(
            args.checkpoints, args.val_paths, args.seq_len, args.max_instances, device=args.device, untrained=args.untrained
        )
    except TrainError as e:
        return report(e)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
