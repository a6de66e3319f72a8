"""The OLMo decoders (OLMo 2, Olmo 3, Olmo Hybrid): their modules, weight init, parameter and
FLOP counts.

Architecture (OLMo 2, arXiv:2501.00656): no biases anywhere; RMSNorm (eps 1e-6) applied to the
*output* of each sub-layer before it is added to the residual ("reordered norm"); RMSNorm on
the full query and key projections (QK-norm); SwiGLU MLP; rotary embeddings (theta 500k);
untied input and output embeddings; vocabulary padded to a multiple of 128 for fast matmuls;
truncated-normal init (std 0.02, cut at 3 sigma). Module names follow Hugging Face's Olmo2
(``q_proj``, ``gate_proj``...) so the export is a rename, not a re-layout.

Families (``model.block_pattern``, repeated over the layers): OLMo 2 is full attention
everywhere (the default; its parameter names are unchanged); Olmo 3 alternates three
sliding-window layers with one full-attention layer; Olmo Hybrid three Gated DeltaNet layers
(``train.gdn``, pre-norm: h + gdn(norm(h)), h + mlp(norm(h)), as released) with one
full-attention layer, that one without positional encoding in the released model. A
sliding-window layer whose sequence fits in its window is plain causal attention; a longer one
is computed block-locally (``local_attention``): blocks of ``window`` queries attend to their
block and the one before through SDPA with an exact band mask, so its cost grows linearly.
"""

from __future__ import annotations

import math
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from train.config import BlockKind, ModelConfig
from train.gdn import GatedDeltaNet, flop_formulas, gdn_init


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


def local_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, enable_gqa: bool) -> torch.Tensor:
    """Causal attention where query i sees keys i - window + 1 .. i (q, k, v: (batch, heads,
    seq, head_dim)). The sequence is cut into blocks of ``window`` queries (padded at the end):
    the first block is plain causal attention; every later block attends to the keys of the
    previous block and its own through one (window, 2 * window) band mask, shared by all
    blocks, which holds every key a query may see. Exact, and at most 2 * window keys per query
    at any length."""
    b, h, s, d = q.shape
    if s <= window:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=enable_gqa)
    w, pad = window, (-s) % window
    n = (s + pad) // w

    def blocks(x: torch.Tensor) -> torch.Tensor:  # (b, h, s, d) -> (b, n, h, w, d)
        return F.pad(x, (0, 0, 0, pad)).view(x.shape[0], x.shape[1], n, w, d).transpose(1, 2)

    qb, kb, vb = blocks(q), blocks(k), blocks(v)
    first = F.scaled_dot_product_attention(qb[:, 0], kb[:, 0], vb[:, 0], is_causal=True, enable_gqa=enable_gqa)
    hk = kb.shape[2]
    kk = torch.cat([kb[:, :-1], kb[:, 1:]], dim=3).reshape(b * (n - 1), hk, 2 * w, d)  # previous block, own block
    vv = torch.cat([vb[:, :-1], vb[:, 1:]], dim=3).reshape(b * (n - 1), hk, 2 * w, d)
    a = torch.arange(w, device=q.device)[:, None]  # query offset in its block
    c = torch.arange(2 * w, device=q.device)[None, :]  # key offset from the previous block's start
    band = (c > a) & (c <= a + w)  # 0 <= query position - key position < window
    rest = F.scaled_dot_product_attention(qb[:, 1:].reshape(b * (n - 1), h, w, d), kk, vv, attn_mask=band, enable_gqa=enable_gqa)
    out = torch.cat([first.unsqueeze(1), rest.view(b, n - 1, h, w, d)], dim=1)
    return out.transpose(1, 2).reshape(b, h, n * w, d)[:, :, :s]


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, window: int | None = None, rope: bool = True):
        super().__init__()
        self.window, self.rope = window, rope
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
        if self.rope:
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        gqa = self.n_kv_heads != self.n_heads
        if self.window is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        else:
            out = local_attention(q, k, v, self.window, gqa)
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
    """One layer (the unit FSDP shards and activation checkpointing wraps): an attention block
    or a Gated DeltaNet block."""

    activation_checkpointing = False

    def _forward(self, x, cos, sin):
        raise NotImplementedError

    def forward(self, x, cos, sin):
        if self.activation_checkpointing and self.training and torch.is_grad_enabled():
            # Done here rather than with a wrapper module so parameter names (and therefore
            # checkpoint keys) stay the same with and without activation checkpointing.
            return checkpoint(self._forward, x, cos, sin, use_reentrant=False)
        return self._forward(x, cos, sin)


class AttentionBlock(Block):
    """h = h + norm(attn(h)); h = h + norm(mlp(h))  (OLMo 2's post-sublayer norm; Olmo 3 and
    Olmo Hybrid's attention layers too). ``kind`` full_attention or sliding_attention."""

    def __init__(self, cfg: ModelConfig, kind: BlockKind = "full_attention"):
        super().__init__()
        sliding = kind == "sliding_attention"
        rope = cfg.sliding_attention_rope if sliding else cfg.full_attention_rope
        self.attn = Attention(cfg, window=cfg.sliding_window if sliding else None, rope=rope)
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)

    def _forward(self, x, cos, sin):
        x = x + self.attn_norm(self.attn(x, cos, sin))
        return x + self.mlp_norm(self.mlp(x))


def gdn_dims(cfg: ModelConfig) -> tuple[int, int, int]:
    """(heads, key dim, value dim) of the Gated DeltaNet layers (transformers' defaults)."""
    heads = cfg.gdn_n_heads or cfg.n_heads
    k = cfg.gdn_head_k_dim or int(0.75 * cfg.d_model / heads)
    return heads, k, cfg.gdn_head_v_dim or 2 * k


class GatedDeltaNetBlock(Block):
    """h = h + gdn(norm(h)); h = h + mlp(norm(h))  (pre-norm, as Olmo Hybrid's released GDN
    layers)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        heads, k, v = gdn_dims(cfg)
        self.gdn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.gdn = GatedDeltaNet(cfg.d_model, heads, k, v, cfg.gdn_conv_size, cfg.gdn_allow_neg_eigval, cfg.gdn_chunk_size)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def _forward(self, x, cos, sin):
        x = x + self.gdn(self.gdn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


def block_kinds(cfg: ModelConfig) -> list[BlockKind]:
    """The kind of each layer: ``block_pattern`` repeated over ``n_layers``."""
    return [cfg.block_pattern[i % len(cfg.block_pattern)] for i in range(cfg.n_layers)]


def make_block(cfg: ModelConfig, kind: BlockKind) -> Block:
    return GatedDeltaNetBlock(cfg) if kind == "gated_deltanet" else AttentionBlock(cfg, kind)


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.vocab = padded_vocab(cfg)
        self.embed = nn.Embedding(self.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(make_block(cfg, kind) for kind in block_kinds(cfg))
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
            if not gdn_init(name, full, g):
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


def _block_params(cfg: ModelConfig, kind: BlockKind) -> tuple[int, int]:
    """(all parameters, parameters in matmuls or the convolution) of one block of ``kind``."""
    d, h = cfg.d_model, mlp_hidden(cfg)
    mlp = 3 * d * h
    if kind == "gated_deltanet":
        heads, dk, dv = gdn_dims(cfg)
        proj = 2 * d * heads * dk + 3 * d * heads * dv + 2 * d * heads  # q k, v g o, a b
        conv = (2 * heads * dk + heads * dv) * cfg.gdn_conv_size
        other = 2 * heads + dv + 2 * d  # A_log, dt_bias, o_norm, the two block norms
        return proj + conv + mlp + other, proj + conv + mlp
    kv = (cfg.n_kv_heads or cfg.n_heads) * (d // cfg.n_heads)
    matmul = d * d * 2 + d * kv * 2 + mlp  # q, o, k, v, MLP
    return matmul + 2 * d + d + kv, matmul  # + two sub-layer norms, q_norm, k_norm


def param_count(cfg: ModelConfig) -> dict[str, int]:
    """Parameter counts from the config alone (no model is built). ``per_layer`` is the mean
    over the layers (the layers of a mixed pattern differ)."""
    d, L, v = cfg.d_model, cfg.n_layers, padded_vocab(cfg)
    blocks = sum(_block_params(cfg, kind)[0] for kind in block_kinds(cfg))
    embed = v * d
    total = embed + blocks + d + v * d  # + final norm + lm_head
    return {"total": total, "embedding": embed, "non_embedding": total - embed, "per_layer": blocks // L}


def attention_flops(cfg: ModelConfig, seq_len: int, window: int | None) -> float:
    """Training FLOPs per token of one attention layer's scores and values (q.k and p.v,
    forward + backward = 3 x the forward's 4 * d_model per key): every key of the causal
    square, as PaLM and most MFU reports count it; a sliding window shorter than the sequence
    (``local_attention``) computes ceil(seq/window) blocks of window queries: the first against
    its own window keys, every later one against 2 * window keys."""
    d = cfg.d_model
    if window is None or seq_len <= window:
        return 12.0 * d * seq_len
    n = -(-seq_len // window)
    return 12.0 * d * (2 * n - 1) * window * window / seq_len


def gdn_flops(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token of one GDN layer's chunked recurrence
    (``train.gdn.chunk_gated_delta_rule``), every matmul and triangular solve it runs
    forward and backward, counted as ``torch.utils.flop_counter`` does (with
    ``train.gdn.solve_triangular_flops``): the sequence padded to n chunks of C; the first
    chunk's two products with the zero initial state need no gradient for it, and the last
    chunk's state update (the final state, unused in training) none at all."""
    heads, k, v = gdn_dims(cfg)
    c = cfg.gdn_chunk_size
    n = -(-seq_len // c)
    solve = c * (c - 1)  # per right-hand column
    forward = 4 * c * c * k + solve * (k + v) + 6 * c * k * v + 2 * c * c * v
    # bmm backward: both operands' gradients (2x); a solve's: a solve + a matmul
    backward = 8 * c * c * k + solve * (k + v) + 2 * c * c * (k + v) + 12 * c * k * v + 4 * c * c * v
    return heads * (n * (forward + backward) - 8 * c * k * v) / seq_len


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token (forward + backward), PaLM appendix B convention.

    6 * (parameters in matmuls: every weight except the embedding lookup and the norms; the
    GDN convolution counts like a matmul) plus each layer's token mixing: attention scores and
    values (``attention_flops``) or the GDN recurrence (``gdn_flops``). For OLMo 2 this is
    ``6 N + 12 * layers * d_model * seq_len``. Equal to ``torch.utils.flop_counter`` on a
    forward and backward pass of the model (tests/train/test_families.py).
    """
    counts = param_count(cfg)
    matmul = counts["embedding"]  # the lm_head, the size of the embedding
    mixing = 0.0
    for kind in block_kinds(cfg):
        matmul += _block_params(cfg, kind)[1]
        if kind == "gated_deltanet":
            mixing += gdn_flops(cfg, seq_len)
        else:
            mixing += attention_flops(cfg, seq_len, cfg.sliding_window if kind == "sliding_attention" else None)
    return 6.0 * matmul + mixing


def _sdpa_backward_model_flops(grad_shape, q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return 2 * sdpa_flop_count(q_shape, k_shape, v_shape)


def flop_counter(**kwargs):
    """``torch.utils.flop_counter.FlopCounterMode`` counting *model* FLOPs, the ones MFU
    divides: the triangular solves of the GDN layers (an op it has no formula for) are
    counted (``train.gdn.solve_triangular_flops``), and an attention kernel's backward counts
    its four products (2x the forward), not the scores it recomputes (a fifth)."""
    from torch.utils.flop_counter import FlopCounterMode

    aten = torch.ops.aten
    backward_ops = [
        aten._scaled_dot_product_efficient_attention_backward,
        aten._scaled_dot_product_flash_attention_backward,
        aten._scaled_dot_product_flash_attention_for_cpu_backward,
        aten._scaled_dot_product_cudnn_attention_backward,
    ]
    mapping = {**flop_formulas(), **dict.fromkeys(backward_ops, _sdpa_backward_model_flops)}
    return FlopCounterMode(custom_mapping=mapping, **kwargs)


def describe(cfg: ModelConfig, seq_len: int) -> dict[str, float]:
    """Parameter count and FLOPs per token in one dict (used by logs and bench)."""
    return {**param_count(cfg), "flops_per_token": flops_per_token(cfg, seq_len)}
