"""Benchmark: our trainer against a plain single-file PyTorch loop, same model, same batches.

    .venv/bin/python bench/trainer.py [--preset small] [--seq-len 256] [--global-batch 8]
                                      [--micro-batch 4] [--steps 20] [--nproc 1] [--threads 2]
                                      [--family dense,olmo3,hybrid]

Runs the real trainer (``python -m train`` / torchrun: FSDP2, DCP, logging, data order) for
``--steps`` steps on synthetic shards, then a bare loop (model, AdamW, the same micro-batches,
z-loss, clipping; no FSDP, no checkpoints) for the same steps in this process, and prints
tokens/s and step time of both and their ratio (median over steps after ``--warmup``), and
tokens per CPU-second (the steadier figure on a shared machine): the plain loop's process time
over the steps after ``--warmup``; the trainer's, the CPU of its whole process tree in a
``--steps`` run less that of a ``--warmup`` run, so start-up counts in neither.
``--family`` (a comma list: dense, olmo3, hybrid) runs the pair once per model family, the
preset's shape with the family's block pattern (``FAMILY_MODEL``): Olmo 3's sliding window is
half the sequence, so its block-local path runs; the hybrid's GDN key dim is d_model / (2 heads),
so its parameters equal the dense model's (bench/families.py does the same).
It also prints the MFU our logs would report for the OLMo 2 1B preset on an H100 at a few
throughputs (FLOPs per token from ``train.model.flops_per_token``, 989.5 TFLOP/s dense bf16).
Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
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


def family_model(family: str, preset: str, seq_len: int) -> dict:
    """The ``model`` overrides of a family on top of ``preset`` (empty for dense)."""
    base = PRESETS[preset]
    if family == "dense":
        return {}
    if family == "olmo3":
        return {"block_pattern": ["sliding_attention"] * 3 + ["full_attention"], "sliding_window": max(1, seq_len // 2)}
    if family == "hybrid":
        return {
            "block_pattern": ["gated_deltanet"] * 3 + ["full_attention"],
            "full_attention_rope": False,
            "gdn_head_k_dim": base.d_model // (2 * base.n_heads),
        }
    raise SystemExit(f"--family: unknown family {family!r} (dense, olmo3, hybrid)")


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


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def ours(args, data: str, work: Path, family: str) -> tuple[list[float], float]:
    """The trainer's step times after ``--warmup`` steps (wall, from its metrics.jsonl) and its
    CPU-seconds per step: the CPU of a ``--steps`` run less that of a ``--warmup`` run (the same
    start-up, data checks and first steps), over the steps between."""
    cpu = {}
    for steps in (args.warmup, args.steps):
        cfg = {
            "run_name": "bench",
            "model": {"preset": args.preset, **family_model(family, args.preset, args.seq_len)},
            "data": {"paths": [data], "seq_len": args.seq_len},
            "train": {
                "global_batch_size": args.global_batch,
                "micro_batch_size": args.micro_batch,
                "max_steps": steps,
                "precision": "fp32",
            },
            "optim": {"lr": 1.0e-3},
            "schedule": {"kind": "cosine", "warmup_steps": 2},
            "checkpoint": {"save_dir": str(work / f"run-{family}-{steps}"), "interval": 0, "resume": False},
            "eval": {"at_end": False},
        }
        before = _children_cpu()
        r = launch(
            write_config(work / f"bench-{family}-{steps}.yaml", cfg),
            nproc=args.nproc,
            env={"OMP_NUM_THREADS": str(max(1, args.threads // args.nproc))},
            timeout=3600,
        )
        cpu[steps] = _children_cpu() - before
        if r.returncode:
            sys.exit(f"trainer failed:\n{r.stdout}\n{r.stderr}")
    wall = [m["step_time"] for m in read_metrics(work / f"run-{family}-{args.steps}") if "step_time" in m]
    return wall[args.warmup :], (cpu[args.steps] - cpu[args.warmup]) / (args.steps - args.warmup)


def plain(args, data: str, family: str) -> tuple[list[float], float]:
    """The reference: what a single-file nanoGPT-style loop does for the same step. Its step
    times after ``--warmup`` and its CPU-seconds per step over those steps."""
    torch.set_num_threads(args.threads)
    mcfg = dataclasses.replace(PRESETS[args.preset], **family_model(family, args.preset, args.seq_len))
    model = Transformer(mcfg)
    init_weights(model, 0)
    opt = build_optimizer(model, OptimConfig(), lr=1e-3)
    ds = TokenDataset([data], args.seq_len, token_dtype("auto", mcfg.vocab_size))  # as the trainer reads it
    order = GlobalOrder(ds.n_instances, 0)
    accum = args.global_batch // args.micro_batch
    times, cpu0 = [], 0.0
    for step in range(args.steps):
        if step == args.warmup:
            cpu0 = time.process_time()
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
    return times[args.warmup :], (time.process_time() - cpu0) / (args.steps - args.warmup)


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
    ap.add_argument("--family", default="dense", help="comma list of model families: dense, olmo3, hybrid")
    args = ap.parse_args()

    families = args.family.split(",")
    for family in families:
        family_model(family, args.preset, args.seq_len)  # an unknown family stops here, before any run
    tokens_per_step = args.global_batch * args.seq_len
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = make_data(work / "data", PRESETS[args.preset].vocab_size, n_tokens=max(200_000, 4 * tokens_per_step * args.steps))
        for family in families:
            mcfg = dataclasses.replace(PRESETS[args.preset], **family_model(family, args.preset, args.seq_len))
            info = describe(mcfg, args.seq_len)
            ours_t, ours_cpu = ours(args, data, work, family)
            plain_t, plain_cpu = plain(args, data, family)
            o, p = statistics.median(ours_t), statistics.median(plain_t)
            print(
                f"model {args.preset}, family {family}: {info['total'] / 1e6:.2f}M params, "
                f"{info['flops_per_token'] / 1e6:.1f} MFLOP/token; batch {args.global_batch} x {args.seq_len} tokens, "
                f"micro-batch {args.micro_batch}, {args.steps} steps ({args.warmup} warmup), {args.threads} threads"
            )
            print(f"{'':<28}{'step time (s)':>14}{'tokens/s':>12}{'CPU-s/step':>12}{'tokens/CPU-s':>14}")
            for name, wall, cpu in ((f"ours ({args.nproc} rank, FSDP2+DCP)", o, ours_cpu), ("plain PyTorch loop", p, plain_cpu)):
                print(f"{name:<28}{wall:>14.4f}{tokens_per_step / wall:>12.0f}{cpu:>12.4f}{tokens_per_step / cpu:>14.0f}")
            print(f"ratio ours/plain ({family}): tokens/s {p / o:.3f}, tokens/CPU-s {plain_cpu / ours_cpu:.3f}\n", flush=True)
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
