"""Benchmark: our trainer against a plain single-file PyTorch loop, same model, same batches.

    .venv/bin/python bench/trainer.py [--preset small] [--seq-len 256] [--global-batch 8]
                                      [--micro-batch 4] [--steps 20] [--nproc 1] [--threads 2]

Runs the real trainer (``python -m train`` / torchrun: FSDP2, DCP, logging, data order) for
``--steps`` steps on synthetic shards, then a bare loop (model, AdamW, the same micro-batches,
z-loss, clipping; no FSDP, no checkpoints) for the same steps in this process, and prints
tokens/s and step time of both and their ratio (median over steps after ``--warmup``).
It also prints the MFU our logs would report for the OLMo 2 1B preset on an H100 at a few
throughputs (FLOPs per token from ``train.model.flops_per_token``, 989.5 TFLOP/s dense bf16).
Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from train.config import PRESETS, OptimConfig
from train.data import GlobalOrder, TokenDataset, token_dtype
from train.loss import lm_loss
from train.model import Transformer, describe, init_weights
from train.optim import build_optimizer, clip_grad_norm
from train.shards import ShardSetWriter
from train.testing import launch, read_metrics, write_config

H100_BF16 = 989.5e12


def make_data(root: Path, vocab: int, n_tokens: int) -> str:
    """Random-token shards (about four) written through ``train.shards``, in the dtype the
    trainer reads for this vocabulary (uint32 above 65536 tokens, e.g. the OLMo 2 presets)."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(50, 2000, size=n_tokens // 1000)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(1, vocab, size=int(offsets[-1]))
    with ShardSetWriter(root, vocab_size=vocab, eos_id=0, max_tokens=int(offsets[-1] + len(lengths)) // 4 + 2000) as w:
        w.add_batch(tokens, offsets, ids=[f"doc-{i}" for i in range(len(lengths))], srcs="bench", locs=range(len(lengths)))
    return str(root)


def ours(args, data: str, work: Path) -> list[float]:
    cfg = {
        "run_name": "bench",
        "model": {"preset": args.preset},
        "data": {"paths": [data], "seq_len": args.seq_len},
        "train": {
            "global_batch_size": args.global_batch,
            "micro_batch_size": args.micro_batch,
            "max_steps": args.steps,
            "precision": "fp32",
        },
        "optim": {"lr": 1.0e-3},
        "schedule": {"kind": "cosine", "warmup_steps": 2},
        "checkpoint": {"save_dir": str(work / "run"), "interval": 0, "resume": False},
        "eval": {"at_end": False},
    }
    r = launch(
        write_config(work / "bench.yaml", cfg),
        nproc=args.nproc,
        env={"OMP_NUM_THREADS": str(max(1, args.threads // args.nproc))},
        timeout=3600,
    )
    if r.returncode:
        sys.exit(f"trainer failed:\n{r.stdout}\n{r.stderr}")
    return [m["step_time"] for m in read_metrics(work / "run") if "step_time" in m]


def plain(args, data: str) -> list[float]:
    """The reference: what a single-file nanoGPT-style loop does for the same step."""
    torch.set_num_threads(args.threads)
    mcfg = PRESETS[args.preset]
    model = Transformer(mcfg)
    init_weights(model, 0)
    opt = build_optimizer(model, OptimConfig(), lr=1e-3)
    ds = TokenDataset([data], args.seq_len, token_dtype("auto", mcfg.vocab_size))  # as the trainer reads it
    order = GlobalOrder(ds.n_instances, 0)
    accum = args.global_batch // args.micro_batch
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        idx = order.global_indices(step * args.global_batch, args.global_batch)
        for mb in np.split(idx, accum):
            tokens = torch.from_numpy(ds.batch(mb))
            ce, z = lm_loss(model(tokens), tokens, mcfg.vocab_size, 1e-5)
            ((ce + z) / accum).backward()
        clip_grad_norm(list(model.parameters()), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--nproc", type=int, default=1, help="ranks for our trainer (the plain loop is 1 process)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads(), help="CPU threads in total")
    args = ap.parse_args()

    mcfg = PRESETS[args.preset]
    info = describe(mcfg, args.seq_len)
    tokens_per_step = args.global_batch * args.seq_len
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = make_data(work / "data", mcfg.vocab_size, n_tokens=max(200_000, 4 * tokens_per_step * args.steps))
        ours_t = ours(args, data, work)[args.warmup :]
        plain_t = plain(args, data)[args.warmup :]
    o, p = statistics.median(ours_t), statistics.median(plain_t)
    print(
        f"model {args.preset}: {info['total'] / 1e6:.2f}M params, {info['flops_per_token'] / 1e6:.1f} MFLOP/token; "
        f"batch {args.global_batch} x {args.seq_len} tokens, micro-batch {args.micro_batch}, "
        f"{args.steps} steps ({args.warmup} warmup), {args.threads} threads"
    )
    print(f"{'':<28}{'step time (s)':>14}{'tokens/s':>12}")
    print(f"{'ours (' + str(args.nproc) + ' rank, FSDP2+DCP)':<28}{o:>14.4f}{tokens_per_step / o:>12.0f}")
    print(f"{'plain PyTorch loop':<28}{p:>14.4f}{tokens_per_step / p:>12.0f}")
    print(f"ratio ours/plain tokens/s: {p / o:.3f}")
    f1b = describe(PRESETS["olmo2-1b"], 4096)["flops_per_token"]
    print(
        f"\nOLMo 2 1B preset, seq 4096: {f1b / 1e9:.3f} GFLOP/token (training). MFU our logs show on one H100 "
        f"(989.5 TFLOP/s bf16 dense) at a given per-GPU throughput:"
    )
    for tps in (10_000, 20_000, 30_000, 40_000, 50_000):
        print(f"  {tps:>6} tokens/s/GPU -> MFU {tps * f1b / H100_BF16:.1%}")
    print(f"  40% MFU needs {0.4 * H100_BF16 / f1b:,.0f} tokens/s/GPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
