"""Model souping: average the weights of several checkpoints into a new checkpoint.

``python -m train.soup --out SOUP_DIR ckptA ckptB ckptC [--val-paths VAL] [--weights ...]``

Runs in one process (no process group): each ingredient is loaded with DCP into a plain
model, summed in float64, divided, and written as a model-only DCP checkpoint with a
``trainer_state.json`` naming its ingredients. That folder loads like any other checkpoint
(evaluation, export, or ``checkpoint.init_from`` with ``load_optimizer: false``). With
``--val-paths`` it also reports validation loss and perplexity of each ingredient and the soup.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from train.checkpoint import load_model_weights, read_state, save_model_weights
from train.evaluate import evaluate_checkpoints, model_config_from_state, print_table
from train.model import Transformer


def soup(paths: list[str], out: str, weights: list[float] | None = None) -> Path:
    if len(paths) < 2:
        raise ValueError("a soup needs at least two checkpoints")
    weights = weights or [1.0] * len(paths)
    if len(weights) != len(paths):
        raise ValueError("--weights needs one number per checkpoint")
    total_w = float(sum(weights))
    states = [read_state(p) for p in paths]
    mcfg = model_config_from_state(states[0])
    for p, s in zip(paths[1:], states[1:]):
        if model_config_from_state(s) != mcfg:
            raise ValueError(f"{p}: model shape differs from {paths[0]}; only same-shape models can be souped")
    model = Transformer(mcfg)
    acc: dict[str, torch.Tensor] | None = None
    for p, w in zip(paths, weights):
        load_model_weights(p, model)
        sd = model.state_dict()
        if acc is None:
            acc = {k: torch.zeros_like(v, dtype=torch.float64) for k, v in sd.items()}
        for k, v in sd.items():
            acc[k] += v.double() * (w / total_w)  # float64 sum: order of ingredients barely matters
    avg = {k: v.to(torch.float32) for k, v in acc.items()}
    state = {
        "kind": "soup",
        "ingredients": [str(p) for p in paths],
        "weights": weights,
        "step": max(s["step"] for s in states),
        "tokens_seen": max(s["tokens_seen"] for s in states),
        "lr": 0.0,
        "peak_lr": 0.0,
        "data": states[0]["data"],
        "config": states[0]["config"],
        "time": time.time(),
    }
    return save_model_weights(out, avg, state)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.soup", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoints", nargs="+", help="ingredient checkpoint folders")
    ap.add_argument("--out", required=True, help="folder for the souped checkpoint")
    ap.add_argument("--weights", type=lambda s: [float(x) for x in s.split(",")], default=None,
                    help="comma-separated weight per ingredient, e.g. 0.5,0.25,0.25 (default: uniform)")
    ap.add_argument("--val-paths", action="append", default=None, metavar="PATH",
                    help="evaluate ingredients and soup on these shards or folder (repeatable)")
    ap.add_argument("--max-instances", type=int, default=1024)
    args = ap.parse_args(argv)
    out = soup(args.checkpoints, args.out, args.weights)
    print(f"soup of {len(args.checkpoints)} checkpoints -> {out}")
    if args.val_paths:
        results = evaluate_checkpoints([*args.checkpoints, str(out)], args.val_paths, max_instances=args.max_instances)
        print_table(results)
        (Path(out) / "eval.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
