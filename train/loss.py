"""The training loss: next-token cross entropy with z-loss, and its reduction across ranks.

``lm_loss`` is one micro-batch's loss (fp32, padded vocabulary rows left out); OLMo 2 puts a
z-loss of 1e-5 on the log of the softmax normaliser to keep output logits from drifting. ``StepLoss``
sums a step's micro-batches and ends the step with one all-reduce, which also carries the
"some rank was asked to stop" flag, so every rank logs the same loss and takes the same stop
decision from the same number.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F


def lm_loss(logits: torch.Tensor, tokens: torch.Tensor, vocab_size: int, z_loss: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token cross entropy and z-loss, both means over predicted positions.

    ``logits`` come from the whole instance; position t predicts token t+1, so the last
    position has no target. The padded vocabulary rows are sliced off so padding never takes
    probability mass. Computed in fp32 whatever the compute dtype.
    """
    logits = logits[:, :-1, :vocab_size].float()
    targets = tokens[:, 1:]
    flat = logits.reshape(-1, logits.shape[-1])
    ce = F.cross_entropy(flat, targets.reshape(-1))
    if z_loss:
        z = z_loss * torch.logsumexp(flat, dim=-1).pow(2).mean()
    else:
        z = torch.zeros((), device=logits.device)
    return ce, z


class StepLoss:
    """One step's loss over its ``grad_accum`` micro-batches on this rank, then over all ranks."""

    def __init__(self, grad_accum: int, device: torch.device):
        self.grad_accum = grad_accum
        self.device = device
        self.ce_sum = torch.zeros((), device=device)
        self.z_sum = torch.zeros((), device=device)

    def add(self, ce: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Count one micro-batch's losses; returns what its backward starts from (every
        micro-batch has the same number of tokens, so a plain mean over them is exact)."""
        self.ce_sum += ce.detach()
        self.z_sum += z.detach()
        return (ce + z) / self.grad_accum

    def all_reduce(self, stop_wish: bool) -> tuple[float, float, bool]:
        """The mean cross entropy and z-loss over every rank, and whether any rank wished to
        stop: one all-reduce for all three."""
        world = dist.get_world_size()
        red = torch.stack([self.ce_sum / self.grad_accum, self.z_sum / self.grad_accum, torch.tensor(float(stop_wish), device=self.device)])
        dist.all_reduce(red)
        return (red[0] / world).item(), (red[1] / world).item(), bool(red[2].item() > 0)
