"""Validation loss and perplexity: inside the trainer and for checkpoints from the command line.

``python -m train.evaluate --val-paths VAL_DIR ckptA ckptB ... [--device cuda]`` builds each
checkpoint's model from the config stored in its ``trainer_state.json`` (on the meta device,
materialised on ``--device``: default cuda if available, else cpu; the weights are then loaded,
never initialised) and prints loss and perplexity on the held-out shards (one process, no
process group needed).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from train.config import ModelConfig
from train.data import TokenDataset, eval_indices, token_dtype


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


def empty_model(mcfg: ModelConfig, device) -> torch.nn.Module:
    """The model with uninitialised storage on ``device`` (built on meta: no init pass, no
    second copy), to be filled by a checkpoint load."""
    from train.model import Transformer

    with torch.device("meta"):
        model = Transformer(mcfg)
    return model.to_empty(device=torch.device(device))


def evaluate_checkpoints(
    paths: list[str], val_paths: list[str], seq_len: int | None = None, max_instances: int = 1024, micro_batch: int = 4, device=None
) -> dict[str, dict]:
    """Loss/perplexity of each checkpoint on the validation shards, in this process."""
    from train.checkpoint import load_model_weights, read_state

    device = torch.device(device) if device is not None else default_device()
    results = {}
    for path in paths:
        state = read_state(path)
        mcfg = model_config_from_state(state)
        dcfg = state["config"]["data"]
        sl = seq_len or dcfg["seq_len"]
        data = TokenDataset(val_paths, sl, token_dtype(dcfg["token_dtype"], mcfg.vocab_size))
        model = empty_model(mcfg, device)
        load_model_weights(path, model)
        idx = eval_indices(data.n_instances, max_instances, 0, 1)
        results[str(path)] = evaluate_loss(model, data, idx, micro_batch, device, mcfg.vocab_size)
        del model
    return results


def print_table(results: dict[str, dict], out=sys.stdout) -> None:
    width = max(len(k) for k in results)
    print(f"{'checkpoint':<{width}}  {'loss':>8}  {'ppl':>10}", file=out)
    for k, r in results.items():
        print(f"{k:<{width}}  {r['loss']:8.4f}  {r['ppl']:10.3f}", file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.evaluate", description=__doc__)
    ap.add_argument("checkpoints", nargs="+", help="checkpoint folders (step<N>/ or a soup)")
    ap.add_argument("--val-paths", action="append", required=True, metavar="PATH", help="held-out token shards or folder (repeatable)")
    ap.add_argument("--seq-len", type=int, default=None, help="default: the checkpoint's data.seq_len")
    ap.add_argument("--max-instances", type=int, default=1024)
    ap.add_argument("--device", default=None, help="cuda, cuda:1, cpu, ... (default: cuda if available, else cpu)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    results = evaluate_checkpoints(args.checkpoints, args.val_paths, args.seq_len, args.max_instances, device=args.device)
    print(json.dumps(results, indent=1)) if args.json else print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
