"""The optimizer side of a step: AdamW parameter groups, clipping (the loss is ``train.loss``).

OLMo 2 settings: AdamW (0.9, 0.95, eps 1e-8), weight decay 0.1 on everything except the
embedding (norm weights *are* decayed by default, as in OLMo 2), global gradient-norm clipping
at 1.0.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from train.config import OptimConfig


def build_optimizer(model: nn.Module, cfg: OptimConfig, lr: float) -> torch.optim.AdamW:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        is_embed = name.startswith("embed.")
        is_norm = name.endswith("norm.weight")
        if (is_embed and not cfg.decay_embeddings) or (is_norm and not cfg.decay_norms):
            no_decay.append(p)
        else:
            decay.append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    # foreach (not fused): works on CPU and with FSDP2's DTensor parameters alike
    beta1, beta2 = cfg.betas  # two numbers (checked when the config loads)
    return torch.optim.AdamW(groups, lr=lr, betas=(beta1, beta2), eps=cfg.eps, foreach=True)


def group_weight_decays(cfg: OptimConfig, n_groups: int) -> list[float]:
    """The weight decay ``build_optimizer`` gives each group: decayed first, then (if any)
    the group without decay."""
    return [cfg.weight_decay, 0.0][:n_groups]


def apply_optim_config(optimizer: torch.optim.Optimizer, cfg: OptimConfig) -> list[str]:
    """Set weight decay, betas and eps of every group to the config's values.

    Loading an optimizer state dict (resume, ``init_from``) overwrites the groups' settings
    with those stored in the checkpoint; this puts the configured ones back (the lr is set
    by the schedule every step). Returns one line per value that changed, for the log.
    """
    changed = []
    wds = group_weight_decays(cfg, len(optimizer.param_groups))
    for i, (g, wd) in enumerate(zip(optimizer.param_groups, wds)):
        want = {"weight_decay": float(wd), "betas": tuple(float(b) for b in cfg.betas), "eps": float(cfg.eps)}
        for k, v in want.items():
            old = tuple(g[k]) if k == "betas" else g[k]
            if old != v:
                changed.append(f"param group {i} {k}: {old} (checkpoint) -> {v} (config)")
            g[k] = v
    return changed


@torch.no_grad()
def clip_grad_norm(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Global gradient norm over all ranks (and clip to ``max_norm`` if > 0).

    With FSDP2 the gradients are DTensor shards; ``get_total_norm`` returns a DTensor
    partial-sum, and ``full_tensor()`` performs the all-reduce that makes it global.
    """
    from torch.distributed.tensor import DTensor

    grads = [p.grad for p in params if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads, norm_type=2.0, foreach=True)
    if isinstance(total, DTensor):
        total = total.full_tensor()
    if max_norm > 0:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total, foreach=True)
    return total
