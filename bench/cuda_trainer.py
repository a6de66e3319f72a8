"""Benchmark: the trainer's CUDA path on one GPU: the OLMo 2 1B preset in bf16 under FSDP2.

    python bench/cuda_trainer.py [--preset olmo2-1b] [--seq-len 4096] [--global-batch 16]
                                 [--micro-batch 4] [--steps 30] [--warmup 5] [--save-at 15]
                                 [--compile]

Runs the real trainer (``python -m train``: FSDP2 on one rank, bf16 parameters with fp32
reductions, DCP checkpoints saved asynchronously) on random-token shards and prints, from its
own ``metrics.jsonl``: median tokens/s and MFU after ``--warmup`` steps (MFU as the trainer
logs it: the model's training FLOPs per token against the GPU's dense bf16 peak), peak memory,
and the step that runs while the asynchronous save is in flight against the median step (what
the save's background copy costs the step loop; its blocking start is outside the step timer).
Needs a CUDA GPU (run by hand, e.g. through a lent machine; never in CI).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainer import make_data  # bench/trainer.py's random-token shards (the model masks no document)

from train.config import PRESETS
from train.testing import launch, read_metrics, write_config


def run(args, data: str, work: Path, compile_: bool) -> dict:
    save_dir = work / ("run-compiled" if compile_ else "run")
    cfg = {
        "run_name": "cuda-bench",
        "model": {"preset": args.preset},
        "data": {"paths": [data], "seq_len": args.seq_len},
        "train": {
            "global_batch_size": args.global_batch,
            "micro_batch_size": args.micro_batch,
            "max_steps": args.steps,
            "precision": "auto",
            "compile": compile_,
        },
        "optim": {"lr": 4.0e-4},
        "schedule": {"kind": "cosine", "warmup_steps": 2},
        "checkpoint": {"save_dir": str(save_dir), "interval": args.save_at, "resume": False, "async_save": True},
        "eval": {"at_end": False},
    }
    t0 = time.perf_counter()
    r = launch(write_config(work / f"bench-{compile_}.yaml", cfg), nproc=1, timeout=1200)
    wall = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"trainer failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    rows = [m for m in read_metrics(save_dir) if "step_time" in m]
    # A 1B model's checkpoints are about 15 GB each: the next run needs the disk.
    shutil.rmtree(save_dir)
    steady = [m for m in rows[args.warmup :] if m["step"] not in (args.save_at, args.save_at + 1)]
    median_step = statistics.median(m["step_time"] for m in steady)
    at_save = next((m for m in rows if m["step"] == args.save_at + 1 and m.get("ckpt_inflight")), None)
    return {
        "compile": compile_,
        "wall_s": wall,
        "tokens_per_s": statistics.median(m["tokens_per_s"] for m in steady),
        "mfu": statistics.median(m["mfu"] for m in steady if m.get("mfu") is not None) if steady[0].get("mfu") is not None else None,
        "step_s": median_step,
        "mem_gb": max(m.get("mem_gb") or 0 for m in rows),
        "save_step_s": at_save["step_time"] if at_save else None,
        "rows": len(rows),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="olmo2-1b")
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--save-at", type=int, default=15, help="the step whose asynchronous checkpoint is measured")
    ap.add_argument("--compile", action="store_true", help="also run with torch.compile")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("bench/cuda_trainer.py needs a CUDA GPU")
    print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip(), f"torch {torch.__version__}")
    mcfg = PRESETS[args.preset]
    tokens_per_step = args.global_batch * args.seq_len
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = make_data(work / "data", mcfg.vocab_size, n_tokens=2 * tokens_per_step * args.steps)
        results = [run(args, data, work, False)] + ([run(args, data, work, True)] if args.compile else [])
    print(f"{args.preset}, batch {args.global_batch} x {args.seq_len} tokens, micro-batch {args.micro_batch}, {args.steps} steps")
    print(f"{'':<12}{'tokens/s':>10}{'MFU':>8}{'step (s)':>10}{'step in save':>14}{'extra':>8}{'peak GB':>9}{'wall (s)':>10}")
    for r in results:
        stall = (r["save_step_s"] - r["step_s"]) if r["save_step_s"] is not None else float("nan")
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "-"
        name = "compiled" if r["compile"] else "eager"
        print(
            f"{name:<12}{r['tokens_per_s']:>10.0f}{mfu:>8}{r['step_s']:>10.3f}{r['save_step_s'] or float('nan'):>14.3f}"
            f"{stall:>8.3f}{r['mem_gb']:>9.1f}{r['wall_s']:>10.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
