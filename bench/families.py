"""Benchmark: the three model families side by side, at (nearly) equal parameters.

    .venv/bin/python bench/families.py [--seq-lens 512,2048,8192] [--tokens 8192] [--steps 3]
                                       [--d-model 128] [--heads 2] [--layers 4] [--window 512]
    .venv/bin/python bench/families.py --demo [--demo-steps 100]

Speed: for each sequence length, one training step (forward, backward, AdamW) of the dense
model (full attention in every layer), Olmo 3 (3 sliding-window layers of ``--window`` then 1
full) and Olmo Hybrid (3 Gated DeltaNet layers then 1 full attention without RoPE), on
``--tokens`` tokens per step (batch = tokens / length), each in a fresh process: tokens per
second of wall time and of the process's CPU time (medians over ``--steps`` after one warm-up
step; the CPU figure is the steadier one on a shared machine), the model FLOPs per token
``describe()`` reports, and the process's peak memory above what it held before the first
step (peak RSS on CPU, ``torch.cuda.max_memory_allocated`` on a GPU). The last table gives each
family's time per token against the dense model's at every length: where the hybrid overtakes.
Equal parameters: the GDN layers' key dim is ``--gdn-k-dim`` (default d_model / (2 heads),
value dim twice that), so a GDN layer's five projections hold 4 d_model^2 weights, as an
attention layer's four do (transformers' default, 0.75 d_model / heads, gives the hybrid about
9% more parameters at d_model 128); each row prints its parameter count.

``--demo``: the demo's stage 1 on the sample corpus (``demo-output/tokens``, written by
``dolma-pipe tokenize -c examples/tokenize.yaml``, under ``--workdir``) for each family with the same tokens and
steps (tiny.yaml with 4 layers, tiny-olmo3.yaml, tiny-hybrid.yaml), then each one's
validation loss and its difference from the dense model's. Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FAMILIES = {
    "dense": ["full_attention"],
    "olmo3": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    "hybrid": ["gated_deltanet", "gated_deltanet", "gated_deltanet", "full_attention"],
}


def model_config(args, family: str, seq_len: int):
    from train.config import ModelConfig

    return ModelConfig(
        vocab_size=512,
        d_model=args.d_model,
        n_heads=args.heads,
        n_layers=args.layers,
        max_seq_len=max(seq_len, 2),
        block_pattern=list(FAMILIES[family]),  # type: ignore[arg-type]
        sliding_window=args.window,
        full_attention_rope=family != "hybrid",
        gdn_head_k_dim=args.gdn_k_dim or args.d_model // (2 * args.heads),
    )


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def one(args) -> dict:
    """One family at one length, in this process (a child of ``main``)."""
    import torch

    from train.loss import lm_loss
    from train.model import Transformer, describe, init_weights

    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = model_config(args, args.family, args.seq_len)
    model = Transformer(cfg).to(device)
    init_weights(model, 0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = max(1, args.tokens // args.seq_len)
    tokens = torch.randint(0, 512, (batch, args.seq_len), generator=torch.Generator().manual_seed(0)).to(device)
    base = torch.cuda.memory_allocated() / 2**30 if device.type == "cuda" else _peak_rss_gb()
    times, cpu = [], []
    for _ in range(args.steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        ce, _ = lm_loss(model(tokens), tokens, cfg.vocab_size, 1e-4)
        ce.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else _peak_rss_gb()
    info = describe(cfg, args.seq_len)
    step = statistics.median(times[1:])
    return {
        "family": args.family,
        "seq_len": args.seq_len,
        "params": info["total"],
        "flops_per_token": info["flops_per_token"],
        "tokens_per_s": batch * args.seq_len / step,
        "tokens_per_cpu_s": batch * args.seq_len / statistics.median(cpu[1:]),
        "peak_mem_gb": peak - base,
        "device": str(device),
    }


def speed(args) -> int:
    rows = []
    for seq in [int(s) for s in args.seq_lens.split(",")]:
        for family in FAMILIES:
            cmd = [sys.executable, __file__, "--one", "--family", family, "--seq-len", str(seq)]
            for key in ("tokens", "steps", "d_model", "heads", "layers", "window", "gdn_k_dim", "threads"):
                cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"{family:7s} seq {seq:5d}: {row['params'] / 1e6:.3f}M params, {row['flops_per_token'] / 1e6:8.2f} MFLOP/token, "
                f"{row['tokens_per_s']:9.0f} tokens/s, {row['tokens_per_cpu_s']:9.0f} tokens/CPU-s, "
                f"peak +{row['peak_mem_gb']:.3f} GB ({row['device']})",
                flush=True,
            )
    print("\ntime per token against the dense model's, wall (CPU) (below 1: faster than dense)")
    for seq in sorted({r["seq_len"] for r in rows}):
        at = {r["family"]: r for r in rows if r["seq_len"] == seq}
        ratios = ", ".join(
            f"{f} {at['dense']['tokens_per_s'] / at[f]['tokens_per_s']:.2f}x ({at['dense']['tokens_per_cpu_s'] / at[f]['tokens_per_cpu_s']:.2f}x)"
            for f in FAMILIES
            if f != "dense"
        )
        print(f"seq {seq:5d}: {ratios}")
    return 0


def demo(args) -> int:
    """Each family trained on the demo corpus with the same tokens; validation losses."""
    runs = {
        "dense": ("train/configs/tiny.yaml", ["model.n_layers=4"]),
        "olmo3": ("train/configs/tiny-olmo3.yaml", []),
        "hybrid": ("train/configs/tiny-hybrid.yaml", []),
    }
    losses = {}
    for family, (config, sets) in runs.items():
        save_dir = Path(args.workdir).resolve() / "demo-output" / "runs" / f"families-{family}"
        sets = [*sets, f"checkpoint.save_dir={save_dir}", f"train.max_steps={args.demo_steps}", "checkpoint.overwrite=true"]
        sets += ["checkpoint.resume=false"]
        cmd = [sys.executable, "-m", "train", "--config", str(ROOT / config)] + [x for s in sets for x in ("--set", s)]
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(cmd, check=True, cwd=args.workdir, capture_output=True, text=True, env=env)
        records = [json.loads(line) for line in (save_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
        losses[family] = [r["eval/loss"] for r in records if "eval/loss" in r][-1]
        print(f"{family:7s}: eval/loss {losses[family]:.4f} after {args.demo_steps} steps ({time.perf_counter() - t0:.0f} s)", flush=True)
    for family in ("olmo3", "hybrid"):
        print(f"{family} against dense: {100 * (losses[family] / losses['dense'] - 1):+.2f}% validation loss")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq-lens", default="512,2048,8192")
    ap.add_argument("--tokens", type=int, default=8192, help="tokens per step (batch = tokens / length)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--gdn-k-dim", type=int, default=0, help="GDN key dim per head (0: d_model / (2 heads), equal parameters)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--demo", action="store_true", help="validation losses on the demo corpus instead")
    ap.add_argument("--demo-steps", type=int, default=100)
    ap.add_argument("--workdir", default=str(ROOT), help="--demo: the folder holding demo-output/tokens")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--family", choices=list(FAMILIES), help=argparse.SUPPRESS)
    ap.add_argument("--seq-len", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return 0
    return demo(args) if args.demo else speed(args)


if __name__ == "__main__":
    sys.exit(main())
