"""Training metrics: each step's record (throughput, memory, MFU) and the metrics file.

``<save_dir>/<log.metrics_file>`` holds one JSON object per line: a training record per logged
step (``loss``, ``z_loss``, ``grad_norm``, ``step``, ``tokens``, ``lr``, ``step_time``,
``tokens_per_s``, ``ckpt_inflight``, ``mem_gb``, ``mfu``) and an evaluation record per
evaluation (``step``, ``eval/loss``, ``eval/ppl``). Rank 0 writes it and prints the same record
as one line. On resume the file is reconciled with the checkpoint: the steps past it go (they
are trained and logged again), so a step is recorded once.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path

import torch
import torch.distributed as dist

from train.config import Config

# Dense bf16 peak FLOP/s per device, for the MFU estimate.
PEAK_FLOPS = {"H100": 989.5e12, "H200": 989.5e12, "A100": 312e12, "B200": 2250e12}


def peak_flops(cfg: Config, device: torch.device) -> float | None:
    """The configured ``log.peak_flops_per_device``, else the known peak of this GPU, else None."""
    if cfg.log.peak_flops_per_device:
        return cfg.log.peak_flops_per_device
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return next((v for k, v in PEAK_FLOPS.items() if k in name), None)
    return None


def memory_gb(device: torch.device) -> float:
    """Peak memory of this rank: the GPU's allocations, or the process's resident set on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


class StepMeter:
    """Turns a step's losses and duration into its training record."""

    def __init__(self, cfg: Config, flops_per_token: float, world: int, device: torch.device):
        self.tokens_per_step = cfg.train.global_batch_size * cfg.data.seq_len
        self.flops_per_token = flops_per_token
        self.peak_flops = peak_flops(cfg, device)
        self.world = world
        self.device = device

    def record(self, losses: dict, *, step: int, tokens: int, lr: float, step_time: float, ckpt_inflight: bool) -> dict:
        tps = self.tokens_per_step / step_time
        return {
            **losses,
            "step": step,
            "tokens": tokens,
            "lr": lr,
            "step_time": step_time,
            "tokens_per_s": tps,
            "ckpt_inflight": ckpt_inflight,
            "mem_gb": memory_gb(self.device),
            "mfu": (tps * self.flops_per_token / (self.peak_flops * self.world)) if self.peak_flops else None,
        }


class MetricsFile:
    """The run's metrics file, written by rank 0 (other ranks hold one that does nothing)."""

    def __init__(self, path: Path, rank: int):
        self.path = path
        self.rank = rank

    def write(self, record: dict) -> None:
        """Print ``record`` as one line and append it to the file (rank 0 only)."""
        if self.rank != 0:
            return
        parts = []
        for k, v in record.items():
            if isinstance(v, float):
                parts.append(f"{k} {v:.4g}")
            elif v is not None and not isinstance(v, bool):
                parts.append(f"{k} {v}")
        print(" | ".join(parts), flush=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def reconcile(self, step: int) -> set[int]:
        """Make the file hold what this run will not log again, once per step.

        A run killed after its last checkpoint logged steps it will now train again, and may
        have left a line cut off mid-write; an older file may hold a step twice. Rank 0 keeps,
        for each step up to ``step`` (the one this run starts from), its last training record
        and its last evaluation record, and rewrites the file (atomically) if anything goes.
        Returns the steps that already have an evaluation, the same set on every rank
        (broadcast), so that no rank evaluates (collectives) where another does not.
        """
        evaluated: list[list[int] | None] = [None]
        if self.rank == 0:
            evaluated[0] = sorted(self._rewrite(step))
        dist.broadcast_object_list(evaluated, src=0)
        return set(evaluated[0] or [])

    def _rewrite(self, step: int) -> set[int]:
        path = self.path
        if not path.exists():
            return set()
        lines = path.read_text().splitlines()
        kept: dict[tuple[int, int], dict] = {}  # (step, 0 train / 1 eval) -> the last record
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # cut off by the kill
            rec_step = rec.get("step") if isinstance(rec, dict) else None
            if not isinstance(rec_step, int) or rec_step > step:
                continue
            kept[(rec_step, int(any(k.startswith("eval/") for k in rec)))] = rec
        out = [json.dumps(kept[k]) for k in sorted(kept)]
        if out != lines:
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text("".join(line + "\n" for line in out))
            tmp.replace(path)
            print(f"{path}: {len(lines) - len(out)} record(s) dropped (past step {step}, repeated or cut off by a kill)", flush=True)
        return {s for s, is_eval in kept if is_eval}
