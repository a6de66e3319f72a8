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

from train.checkpoint import CheckpointError
from train.config import ModelConfig
from train.data import DataError, TokenDataset, check_shard_results, eval_indices, shard_checks, token_dtype


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
    paths: list[str],
    val_paths: list[str],
    seq_len: int | None = None,
    max_instances: int = 1024,
    micro_batch: int = 4,
    device: torch.device | str | None = None,
) -> dict[str, dict]:
    """Loss/perplexity of each checkpoint on the validation shards, in this process.

    The shards get the trainer's checks first (token ids below the checkpoint's vocabulary,
    sound sidecars, EOS at the end if the run set ``data.eos_id``): a wrong path or shards
    from another tokenizer are a ``DataError`` naming the file, a wrong checkpoint a
    ``CheckpointError`` naming it.
    """
    from train.checkpoint import load_model_weights, read_state

    dev = torch.device(device) if device is not None else default_device()
    states = {str(p): read_state(p) for p in paths}  # every path checked before any work
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
        load_model_weights(path, model)
        idx = eval_indices(data.n_instances, max_instances, 0, 1)
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
    ap.add_argument("checkpoints", nargs="+", help="checkpoint folders (step<N>/ or a soup)")
    ap.add_argument("--val-paths", action="append", required=True, metavar="PATH", help="held-out token shards or folder (repeatable)")
    ap.add_argument("--seq-len", type=int, default=None, help="default: the checkpoint's data.seq_len")
    ap.add_argument("--max-instances", type=int, default=1024)
    ap.add_argument("--device", default=None, help="cuda, cuda:1, cpu, ... (default: cuda if available, else cpu)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    try:
        results = evaluate_checkpoints(args.checkpoints, args.val_paths, args.seq_len, args.max_instances, device=args.device)
    except (CheckpointError, DataError) as e:
        return report_error(e)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print_table(results)
    return 0


def report_error(e: CheckpointError | DataError) -> int:
    """A user mistake as one line on stderr and the status ``python -m train`` gives the same
    kind of mistake: 3 for a data error, 2 for a checkpoint error."""
    if isinstance(e, DataError):
        print(f"data error: {e}", file=sys.stderr)
        return 3
    print(f"checkpoint error: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
