"""The OLMo 2 decoder: its modules, presets, weight init, parameter and FLOP counts.

Architecture (OLMo 2, arXiv:2501.00656): no biases anywhere; RMSNorm (eps 1e-6) applied to the
*output* of each sub-layer before it is added to the residual ("reordered norm"); RMSNorm on
the full query and key projections (QK-norm); SwiGLU MLP; rotary embeddings (theta 500k);
untied input and output embeddings; vocabulary padded to a multiple of 128 for fast matmuls;
truncated-normal init (std 0.02, cut at 3 sigma). Module names follow Hugging Face's Olmo2
(``q_proj``, ``gate_proj``...) so the export is a rename, not a re-layout.
"""

from __future__ import annotations

import math
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from train.config import ModelConfig


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def padded_vocab(cfg: ModelConfig) -> int:
    return _round_up(cfg.vocab_size, cfg.vocab_multiple)


def mlp_hidden(cfg: ModelConfig) -> int:
    if cfg.mlp_hidden is not None:
        return cfg.mlp_hidden
    return _round_up(math.ceil(8 * cfg.d_model / 3), cfg.mlp_multiple)


class RMSNorm(nn.Module):
    """RMSNorm computed in fp32 and scaled before the cast back, exactly as HF's Olmo2RMSNorm."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * x).to(dtype)


def rope_cos_sin(seq_len: int, head_dim: int, theta: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    # Recomputed per forward (cheap) rather than kept in a buffer: buffers built on the meta
    # device would need re-initialising, and this keeps checkpoints free of derived state.
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float, device=device) / head_dim))
    pos = torch.arange(seq_len, device=device, dtype=torch.float)
    freqs = pos[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)  # HF "rotate_half" layout (not interleaved)
    return emb.cos(), emb.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (batch, heads, seq, head_dim); rotation in fp32 then back to the compute dtype
    xf = x.float()
    return (xf * cos + _rotate_half(xf) * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.n_kv_heads = cfg.n_kv_heads or cfg.n_heads
        self.head_dim = cfg.d_model // cfg.n_heads
        d, kv = cfg.d_model, self.n_kv_heads * self.head_dim
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kv, bias=False)
        self.v_proj = nn.Linear(d, kv, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        # QK-norm over the whole projection (not per head), as OLMo 2 does
        self.q_norm = RMSNorm(d, cfg.norm_eps)
        self.k_norm = RMSNorm(kv, cfg.norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x)).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_norm(self.k_proj(x)).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.n_kv_heads != self.n_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h = mlp_hidden(cfg)
        self.gate_proj = nn.Linear(cfg.d_model, h, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, h, bias=False)
        self.down_proj = nn.Linear(h, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """One layer: h = h + norm(attn(h)); h = h + norm(mlp(h))  (OLMo 2's post-sublayer norm)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn = Attention(cfg)
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.activation_checkpointing = False

    def _forward(self, x, cos, sin):
        x = x + self.attn_norm(self.attn(x, cos, sin))
        return x + self.mlp_norm(self.mlp(x))

    def forward(self, x, cos, sin):
        if self.activation_checkpointing and self.training and torch.is_grad_enabled():
            # Done here rather than with a wrapper module so parameter names (and therefore
            # checkpoint keys) stay the same with and without activation checkpointing.
            return checkpoint(self._forward, x, cos, sin, use_reentrant=False)
        return self._forward(x, cos, sin)


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.vocab = padded_vocab(cfg)
        self.embed = nn.Embedding(self.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, self.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (batch, seq) -> logits (batch, seq, padded vocab)."""
        cos, sin = rope_cos_sin(tokens.shape[1], self.cfg.d_model // self.cfg.n_heads, self.cfg.rope_theta, tokens.device)
        h = self.embed(tokens)
        for block in self.blocks:
            h = block(h, cos, sin)
        return self.lm_head(self.norm(h))


@torch.no_grad()
def init_weights(model: Transformer, seed: int) -> None:
    """Initialise every parameter so the values depend only on (seed, parameter name).

    Each full tensor is drawn from its own generator (seeded by ``seed`` and a CRC of the
    name) on the parameter's device, then each rank keeps the slice it owns. So a model
    sharded over 1, 2 or 64 ranks starts from the same weights, and a model built on the
    meta device and materialised with ``to_empty`` is fully initialised.
    """
    std = model.cfg.init_std
    for name, p in model.named_parameters():
        full_shape = p.shape  # a DTensor reports its global shape
        device = p.device
        if name.endswith("norm.weight"):
            full = torch.ones(full_shape, device=device, dtype=torch.float32)
        else:
            g = torch.Generator(device=device)
            g.manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63))
            full = torch.empty(full_shape, device=device, dtype=torch.float32)
            nn.init.trunc_normal_(full, mean=0.0, std=std, a=-3 * std, b=3 * std, generator=g)
        _copy_full_into(p, full)


def _copy_full_into(p: torch.Tensor, full: torch.Tensor) -> None:
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(p, DTensor):
        # src_data_rank=None: every rank already holds the same full tensor, so each just
        # slices out its shard locally (no scatter).
        local = distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None).to_local()
        p.to_local().copy_(local.to(p.dtype))
    else:
        p.copy_(full.to(p.dtype))


def param_count(cfg: ModelConfig) -> dict[str, int]:
    """Parameter counts from the config alone (no model is built)."""
    d, L, v, h = cfg.d_model, cfg.n_layers, padded_vocab(cfg), mlp_hidden(cfg)
    kv = (cfg.n_kv_heads or cfg.n_heads) * (d // cfg.n_heads)
    attn = d * d * 2 + d * kv * 2  # q, o, k, v
    mlp = 3 * d * h
    norms = 2 * d + d + kv  # two sub-layer norms, q_norm, k_norm
    per_layer = attn + mlp + norms
    embed = v * d
    total = embed + L * per_layer + d + v * d  # + final norm + lm_head
    return {"total": total, "embedding": embed, "non_embedding": total - embed, "per_layer": per_layer}


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token (forward + backward), PaLM appendix B convention.

    6 * (parameters in matmuls: every weight except the embedding lookup and the norms)
    plus attention scores and values: 12 * layers * d_model * seq_len (counted for the full
    square, as PaLM and most MFU reports do, so numbers are comparable).
    """
    d, L = cfg.d_model, cfg.n_layers
    counts = param_count(cfg)
    norm_params = L * (3 * d + (cfg.n_kv_heads or cfg.n_heads) * (d // cfg.n_heads)) + d
    matmul_params = counts["total"] - counts["embedding"] - norm_params
    return 6.0 * matmul_params + 12.0 * L * d * seq_len


def describe(cfg: ModelConfig, seq_len: int) -> dict[str, float]:
    """Parameter count and FLOPs per token in one dict (used by logs and bench)."""
    return {**param_count(cfg), "flops_per_token": flops_per_token(cfg, seq_len)}
