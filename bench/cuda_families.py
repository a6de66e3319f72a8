"""Benchmark for a lent GPU (issue 30): Gated DeltaNet against flash-linear-attention, and the
1B-class hybrid against the 1B dense model in the trainer. Under 8 minutes on one H100.

    python bench/cuda_families.py [--seq-len 4096] [--global-batch 16] [--micro-batch 4]
                                  [--steps 20] [--warmup 5] [--skip-kernels] [--skip-train]
    python bench/cuda_families.py --smoke      # CPU, tiny sizes, no fla: checks the script

1. Kernels (bf16): for each shape in ``KERNEL_SHAPES`` (the last one the released 7B's heads:
   key dim 96, value dim 192), the recurrence as ``train.gdn.GatedDeltaNet`` runs it on CUDA
   with and without the ``fla`` extra: flash-linear-attention's ``chunk_gated_delta_rule``
   (q and k L2-normalised in the kernel) against ours (``l2norm`` then
   ``train.gdn.chunk_gated_delta_rule``, computed in float32 from the same bf16 inputs), with
   an initial state, forward (output and final state) and backward (the gradients of q, k, v,
   g, beta and the initial state). Compared as fla's own tests compare its kernels
   (tests/ops/test_gated_delta.py: ``assert_close``, the RMS of the difference over the RMS of
   the reference): output and final state within 0.005, dq, dk, dv and dh0 within 0.008,
   dbeta and dg within 0.02. Also each one's forward + backward time.
2. Trainer (bf16, FSDP2 on one rank, ``python -m train`` as bench/cuda_trainer.py runs it): the
   OLMo 2 1B preset (``olmo2-1b``) and the same shape as Olmo Hybrid (3 GDN layers then 1
   full-attention layer without RoPE, 16 GDN heads of key dim 96 and value dim 192: the
   released 7B's per-head sizes, transformers' default 0.75 d_model / heads) on random-token
   shards: median tokens/s and MFU from the trainer's metrics.jsonl (MFU from describe()'s
   exact FLOPs per token), peak memory, and which GDN path ran (fla or PyTorch).

``--smoke``: the same code at tiny sizes on the CPU in float32 (ours against our token-by-token
``recurrent_gated_delta_rule`` instead of fla, the tiny and tiny-hybrid presets in the trainer;
no MFU without a GPU peak), a check that the script runs, not a measurement. Not part of CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainer import make_data  # bench/trainer.py's random-token shards

from train.config import PRESETS
from train.model import describe
from train.testing import launch, read_metrics, write_config

# (batch, seq, heads, key dim, value dim, gate logit normaliser)
KERNEL_SHAPES = [(2, 300, 4, 64, 64, 1.0), (2, 1024, 8, 128, 128, 0.1), (1, 4096, 30, 96, 192, 1.0)]
SMOKE_SHAPES = [(1, 40, 2, 8, 16, 1.0), (2, 70, 2, 12, 24, 0.1)]
# fla's tests/ops/test_gated_delta.py (test_chunk): RMS error ratio per tensor
TOLERANCES = {"o": 0.005, "ht": 0.005, "dq": 0.008, "dk": 0.008, "dv": 0.008, "dh0": 0.008, "dbeta": 0.02, "dg": 0.02}
HYBRID = ["gated_deltanet", "gated_deltanet", "gated_deltanet", "full_attention"]


def err_ratio(ref, got) -> float:
    """fla's ``get_err_ratio``: RMS of the difference over the RMS of the reference."""
    ref, got = ref.float(), got.float()
    base = ref.square().mean().sqrt().item()
    return (ref - got).square().mean().sqrt().item() / max(base, 1e-30)


def _inputs(shape, device, dtype, seed: int):
    import torch
    import torch.nn.functional as F

    b, t, h, dk, dv, norm = shape
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, h, dk, generator=g)
    k = torch.randn(b, t, h, dk, generator=g)
    v = torch.randn(b, t, h, dv, generator=g)
    beta = torch.rand(b, t, h, generator=g).sigmoid() * 2  # negative eigenvalues allowed, as the model
    gate = F.logsigmoid(torch.rand(b, t, h, generator=g)) / norm
    h0 = torch.randn(b, h, dk, dv, generator=g)
    out = [x.to(device, dtype) for x in (q, k, v, beta)] + [gate.to(device), h0.to(device)]
    return [x.requires_grad_() for x in out]


def _run(fn, inputs, seed: int):
    """Forward and backward of ``fn`` on fresh leaves; (output, final state, grads, seconds)."""
    import torch

    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    q, k, v, beta, gate, h0 = leaves
    sync = torch.cuda.synchronize if q.is_cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    o, ht = fn(q, k, v, gate, beta, h0)
    g = torch.Generator(device=q.device).manual_seed(seed)
    do = torch.randn(o.shape, generator=g, device=q.device).to(o.dtype)
    dht = torch.randn(ht.shape, generator=g, device=q.device).to(ht.dtype)
    ((o.float() * do.float()).sum() + (ht.float() * dht.float()).sum()).backward()
    sync()
    seconds = time.perf_counter() - t0
    grads = dict(zip(["dq", "dk", "dv", "dbeta", "dg", "dh0"], [x.grad for x in leaves]))
    return o.detach(), ht.detach(), grads, seconds


def kernels(smoke: bool) -> bool:
    import torch

    from train.gdn import chunk_gated_delta_rule, l2norm, recurrent_gated_delta_rule

    def ours(q, k, v, gate, beta, h0):
        return chunk_gated_delta_rule(l2norm(q.float()), l2norm(k.float()), v, gate, beta, initial_state=h0)

    if smoke:
        device, dtype, shapes, name = torch.device("cpu"), torch.float32, SMOKE_SHAPES, "recurrent (ours)"

        def other(q, k, v, gate, beta, h0):
            return recurrent_gated_delta_rule(l2norm(q.float()), l2norm(k.float()), v, gate, beta, initial_state=h0)
    else:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk

        device, dtype, shapes, name = torch.device("cuda"), torch.bfloat16, KERNEL_SHAPES, "fla"

        def other(q, k, v, gate, beta, h0):
            return fla_chunk(q, k, v, g=gate, beta=beta, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)

    ok = True
    print(f"GDN: ours (chunked, PyTorch) against {name}, {dtype}; RMS error ratio (tolerance)")
    for i, shape in enumerate(shapes):
        inputs = _inputs(shape, device, dtype, seed=i)
        _run(other, inputs, seed=i)  # warm-up: Triton compiles and autotunes on the first call
        _run(ours, inputs, seed=i)
        o1, h1, g1, t_ours = _run(ours, inputs, seed=i)
        o2, h2, g2, t_other = _run(other, inputs, seed=i)
        ratios = {"o": err_ratio(o1, o2), "ht": err_ratio(h1, h2), **{k: err_ratio(g1[k], g2[k]) for k in g1}}
        bad = [k for k, r in ratios.items() if not r < TOLERANCES[k]]
        ok &= not bad
        b, t, h, dk, dv, norm = shape
        cells = ", ".join(f"{k} {r:.1e}" for k, r in ratios.items())
        print(
            f"  B{b} T{t} H{h} K{dk} V{dv} gate/{norm:g}: {cells}  "
            f"{'ok' if not bad else 'OVER: ' + ','.join(bad)}; fwd+bwd ours {t_ours * 1e3:.1f} ms, {name} {t_other * 1e3:.1f} ms"
        )
    return ok


def train_run(args, data: str, work: Path, name: str, model: dict, smoke: bool) -> dict:
    save_dir = work / f"run-{name}"
    cfg = {
        "run_name": f"cuda-families-{name}",
        "model": model,
        "data": {"paths": [data], "seq_len": args.seq_len},
        "train": {
            "global_batch_size": args.global_batch,
            "micro_batch_size": args.micro_batch,
            "max_steps": args.steps,
            "precision": "fp32" if smoke else "auto",
        },
        "optim": {"lr": 4.0e-4},
        "schedule": {"kind": "cosine", "warmup_steps": 2},
        "checkpoint": {"save_dir": str(save_dir), "interval": 0, "resume": False},
        "eval": {"at_end": False},
    }
    t0 = time.perf_counter()
    r = launch(write_config(work / f"{name}.yaml", cfg), nproc=1, timeout=600)
    wall = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"trainer failed ({name}, {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    steady = [m for m in read_metrics(save_dir) if "step_time" in m][args.warmup :]
    mfu = [m["mfu"] for m in steady if m.get("mfu") is not None]
    return {
        "name": name,
        "tokens_per_s": statistics.median(m["tokens_per_s"] for m in steady),
        "mfu": statistics.median(mfu) if mfu else None,
        "mem_gb": max((m.get("mem_gb") or 0) for m in steady),
        "wall_s": wall,
    }


def train(args, smoke: bool) -> None:
    base = "tiny" if smoke else "olmo2-1b"
    cfg = PRESETS[base]
    hybrid = {"block_pattern": HYBRID, "full_attention_rope": False}
    if not smoke:
        hybrid.update(gdn_head_k_dim=96, gdn_head_v_dim=192)
    models = {"dense": {"preset": base}, "hybrid": {"preset": base, **hybrid}}
    if smoke:
        models = {name: {**m, "n_layers": 4} for name, m in models.items()}
    fla = importlib.util.find_spec("fla") is not None and not smoke
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = make_data(work / "data", cfg.vocab_size, n_tokens=max(200_000, 2 * args.global_batch * args.seq_len * args.steps))
        rows = [train_run(args, data, work, name, model, smoke) for name, model in models.items()]
    print(
        f"\ntrainer, {base} shape, batch {args.global_batch} x {args.seq_len} tokens, micro-batch {args.micro_batch}, "
        f"{args.steps} steps ({args.warmup} warm-up), {'fp32 on CPU' if smoke else 'bf16, FSDP2 on 1 GPU'}; "
        f"hybrid GDN path: {'fla' if fla else 'PyTorch chunked'}"
    )
    print(f"{'':<8}{'params':>10}{'GFLOP/token':>13}{'tokens/s':>10}{'MFU':>8}{'peak GB':>9}{'wall (s)':>10}")
    for row, model in zip(rows, models.values()):
        mcfg = dataclasses.replace(PRESETS[model["preset"]], **{k: v for k, v in model.items() if k != "preset"})
        info = describe(mcfg, args.seq_len)
        mfu = f"{row['mfu']:.1%}" if row["mfu"] is not None else "-"
        print(
            f"{row['name']:<8}{info['total'] / 1e6:>9.1f}M{info['flops_per_token'] / 1e9:>13.3f}{row['tokens_per_s']:>10.0f}"
            f"{mfu:>8}{row['mem_gb']:>9.1f}{row['wall_s']:>10.0f}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--skip-kernels", action="store_true")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny sizes, no fla: checks that the script runs")
    args = ap.parse_args()
    import torch

    if args.smoke:
        args.seq_len, args.global_batch, args.micro_batch, args.steps, args.warmup = 64, 4, 2, 4, 1
    else:
        if not torch.cuda.is_available():
            sys.exit("bench/cuda_families.py needs a CUDA GPU (or --smoke)")
        if not args.skip_kernels and importlib.util.find_spec("fla") is None:
            sys.exit("the kernel comparison needs flash-linear-attention: pip install -e '.[fla]' (or --skip-kernels)")
        print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip(), f"torch {torch.__version__}")
    t0 = time.perf_counter()
    ok = True
    if not args.skip_kernels:
        ok = kernels(args.smoke)
    if not args.skip_train:
        train(args, args.smoke)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
