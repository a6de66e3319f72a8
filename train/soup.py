"""Model souping: average the weights of several checkpoints into a new checkpoint.

``python -m train.soup --out SOUP_DIR ckptA ckptB ckptC [--val-paths VAL] [--weights ...]``

Runs in one process (no process group) on ``--device`` (default cuda if available, else cpu):
one model is built on the meta device and materialised without initialisation; each ingredient
is loaded into it with DCP and folded, tensor by tensor, into a weighted running mean kept in
float32 (memory: two copies of the model), which is written as a model-only DCP checkpoint with a
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

from train.checkpoint import STATE_FILE, load_model_weights, read_state, save_model_weights
from train.errors import SoupError, TrainError, report
from train.evaluate import default_device, empty_model, evaluate_checkpoints, model_config_from_state, print_table


def _model_diff(a: dict, b: dict) -> str:
    return ", ".join(f"model.{k}: {b[k]} vs {a.get(k)}" for k in b if a.get(k) != b[k])


def _check_out(out: Path, paths: list[str]) -> None:
    """``out`` is deleted and rewritten: refuse an ingredient, or a folder that a soup did
    not write (a run's save_dir, say)."""
    if any(out.resolve() == Path(p).resolve() for p in paths):
        raise SoupError(f"--out {out}: is one of the ingredients")
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    try:
        kind = json.loads((out / STATE_FILE).read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        kind = None
    if kind != "soup":
        raise SoupError(f"--out {out}: exists and is not a soup written by train.soup (it would be deleted); choose a new folder")


def soup(paths: list[str], out: str, weights: list[float] | None = None, device: torch.device | str | None = None) -> Path:
    if len(paths) < 2:
        raise SoupError("a soup needs at least two checkpoints")
    weights = weights or [1.0] * len(paths)
    if len(weights) != len(paths):
        raise SoupError(f"--weights needs one number per checkpoint ({len(weights)} for {len(paths)})")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise SoupError("--weights must be non-negative with a positive sum")
    _check_out(Path(out), paths)
    states = [read_state(p) for p in paths]
    mcfg = model_config_from_state(states[0])
    for p, s in zip(paths[1:], states[1:]):
        if model_config_from_state(s) != mcfg:
            diff = _model_diff(states[0]["config"]["model"], s["config"]["model"])
            raise SoupError(f"{p}: model shape differs from {paths[0]} ({diff}); only same-shape models can be souped")
    dev = torch.device(device) if device is not None else default_device()
    model = empty_model(mcfg, dev)  # storage only: every value comes from a checkpoint
    mean: dict[str, torch.Tensor] = {}
    seen_w = 0.0
    for p, w in zip(paths, weights):
        load_model_weights(p, model)
        seen_w += w
        with torch.no_grad():
            for k, v in model.state_dict().items():
                if k not in mean:
                    mean[k] = v.detach().to(torch.float32, copy=True)
                elif w:
                    # weighted running mean: m += (w / sum of weights so far) * (x - m)
                    mean[k].add_(v.to(torch.float32) - mean[k], alpha=w / seen_w)
    avg = {k: v.cpu() for k, v in mean.items()}
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
    ap = argparse.ArgumentParser(prog="python -m train.soup", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoints", nargs="+", help="ingredient checkpoint folders")
    ap.add_argument("--out", required=True, help="folder for the souped checkpoint")
    ap.add_argument(
        "--weights",
        type=lambda s: [float(x) for x in s.split(",")],
        default=None,
        help="comma-separated weight per ingredient, e.g. 0.5,0.25,0.25 (default: uniform)",
    )
    ap.add_argument(
        "--val-paths",
        action="append",
        default=None,
        metavar="PATH",
        help="evaluate ingredients and soup on these shards or folder (repeatable)",
    )
    ap.add_argument(
        "--max-instances",
        type=int,
        default=None,
        help="instances evaluated (default: the checkpoint's data.val_max_instances, as in training)",
    )
    ap.add_argument("--device", default=None, help="cuda, cpu, ... (default: cuda if available, else cpu)")
    args = ap.parse_args(argv)
    try:
        out = soup(args.checkpoints, args.out, args.weights, device=args.device)
        print(f"soup of {len(args.checkpoints)} checkpoints -> {out}")
        if args.val_paths:
            results = evaluate_checkpoints(
                [*args.checkpoints, str(out)], args.val_paths, max_instances=args.max_instances, device=args.device
            )
            print_table(results)
            (Path(out) / "eval.json").write_text(json.dumps(results, indent=1))
    except TrainError as e:
        return report(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
