"""Gated DeltaNet (Yang, Kautz, Hatamizadeh, arXiv:2412.06464) in plain PyTorch: the layer of
Olmo Hybrid's linear-attention blocks and the two forms of its recurrence.

The recurrence, per head, with a state ``S`` of shape (key dim, value dim)::

    S_t = exp(g_t) * S_{t-1}                              # decay gate (g_t <= 0)
    S_t = S_t + k_t (beta_t * (v_t - k_t^T S_t))^T        # delta rule: correct the value k_t maps to
    o_t = S_t^T (scale * q_t)

``recurrent_gated_delta_rule`` runs it token by token (the reference); ``chunk_gated_delta_rule``
is the training form (WY/UT representation, as flash-linear-attention and transformers'
``olmo_hybrid`` compute it): within a chunk of C tokens the updates are folded into two
triangular solves and a few matmuls, and only one state update per chunk is sequential. Both
keep the dtype they are given (float64 stays float64, half precision is computed in float32),
take an initial state and return the final one.

``GatedDeltaNet`` is the layer, with transformers' ``OlmoHybridGatedDeltaNet`` parameter names
(``q_proj``, ``k_proj``, ``v_proj``, ``a_proj``, ``b_proj``, ``g_proj``, ``o_proj``, ``conv1d``,
``A_log``, ``dt_bias``, ``o_norm``) so the export is a rename: a causal depthwise convolution
(width 4) with SiLU on q, k and v; L2-normalised q and k; the decay ``g = -exp(A_log) *
softplus(a + dt_bias)``; ``beta = sigmoid(b)``, times 2 when negative eigenvalues are allowed;
a gated RMSNorm (eps 1e-5, flash-linear-attention's) before the output projection. On CUDA the
recurrence runs in flash-linear-attention's Triton kernel when that package is installed (the
``fla`` extra), in ``chunk_gated_delta_rule`` otherwise.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """flash-linear-attention's (and transformers') L2 normalisation of q and k."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def recurrent_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrence one token at a time. q, k (batch, seq, heads, dk); v (batch, seq, heads,
    dv); g, beta (batch, seq, heads); state (batch, heads, dk, dv). Returns (output like v,
    final state in the compute dtype)."""
    b, s, h, dk = k.shape
    dv = v.shape[-1]
    dt = _compute_dtype(q.dtype)
    scale = dk**-0.5 if scale is None else scale
    q, k, v, g, beta = (x.transpose(1, 2).to(dt) for x in (q, k, v, g, beta))
    state = torch.zeros(b, h, dk, dv, dtype=dt, device=q.device) if initial_state is None else initial_state.to(dt)
    outs = []
    for t in range(s):
        state = state * g[:, :, t].exp()[..., None, None]
        k_t = k[:, :, t]
        delta = (v[:, :, t] - (k_t.unsqueeze(-1) * state).sum(-2)) * beta[:, :, t, None]
        state = state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)
        outs.append(((q[:, :, t] * scale).unsqueeze(-1) * state).sum(-2))
    out = torch.stack(outs, 2) if outs else v.new_zeros(b, h, 0, dv)
    return out.transpose(1, 2).to(v.dtype), state


def chunk_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same recurrence in chunks of ``chunk_size`` tokens (same arguments and results as
    ``recurrent_gated_delta_rule``). The sequence is padded to whole chunks with k = 0, g = 0,
    beta = 0, which leave the state unchanged."""
    b, s, h, dk = k.shape
    dv = v.shape[-1]
    c = chunk_size
    dt = _compute_dtype(q.dtype)
    scale = dk**-0.5 if scale is None else scale
    q, k, v, g, beta = (x.transpose(1, 2).to(dt) for x in (q, k, v, g, beta))
    pad = (-s) % c
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    n = (s + pad) // c
    q, k, v = (x.reshape(b, h, n, c, x.shape[-1]) for x in (q, k, v))
    g, beta = (x.reshape(b, h, n, c) for x in (g, beta))
    q = q * scale
    gc = g.cumsum(-1)  # log of the decay from the chunk's start to each position
    upper = torch.ones(c, c, dtype=torch.bool, device=q.device).triu(1)
    # decay[i, j] = exp(gc_i - gc_j) for j <= i (the decay between positions j and i)
    decay = (gc.unsqueeze(-1) - gc.unsqueeze(-2)).masked_fill(upper, float("-inf")).exp()
    k_beta, v_beta = k * beta.unsqueeze(-1), v * beta.unsqueeze(-1)
    # UT transform: (I + strictly-lower(beta_i k_i.k_j decay_ij)) u = beta v, likewise w; the
    # solve reads only the strictly lower triangle (unitriangular)
    system = (k_beta @ k.transpose(-1, -2)) * decay
    u = torch.linalg.solve_triangular(system, v_beta, upper=False, unitriangular=True)
    w = torch.linalg.solve_triangular(system, k_beta * gc.exp().unsqueeze(-1), upper=False, unitriangular=True)
    attn = (q @ k.transpose(-1, -2)) * decay  # intra-chunk, the diagonal included
    q_decayed = q * gc.exp().unsqueeze(-1)
    k_decayed = k * (gc[..., -1:] - gc).exp().unsqueeze(-1)
    chunk_decay = gc[..., -1].exp()[..., None, None]
    state = torch.zeros(b, h, dk, dv, dtype=dt, device=q.device) if initial_state is None else initial_state.to(dt)
    outs = []
    for i in range(n):
        v_new = u[:, :, i] - w[:, :, i] @ state  # what the old state does not already predict
        outs.append(q_decayed[:, :, i] @ state + attn[:, :, i] @ v_new)
        state = state * chunk_decay[:, :, i] + k_decayed[:, :, i].transpose(-1, -2) @ v_new
    out = torch.stack(outs, 2).reshape(b, h, n * c, dv)[:, :, :s]
    return out.transpose(1, 2).to(v.dtype), state


def solve_triangular_flops(a_shape: Any, b_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """FLOPs of ``aten.linalg_solve_triangular`` (A (..., C, C) unitriangular or not, B (...,
    C, N)): one multiply and one add per strictly-triangular entry and right-hand column, as
    forward substitution does. ``torch.utils.flop_counter`` has no formula for this op; the
    tests and ``train.model.flops_per_token`` use this one (``FLOP_FORMULAS``)."""
    c, cols = b_shape[-2], b_shape[-1]
    batch = math.prod(torch.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])))
    return batch * c * (c - 1) * cols


def conv_backward_flops(grad_out_shape: Any, x_shape: Any, w_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """FLOPs of ``aten.convolution_backward`` for a (grouped) forward convolution: the input's
    and the weight's gradients each cost what the forward did. (``torch.utils.flop_counter``'s
    own formula counts the weight gradient of a grouped convolution as if it were dense: 193x
    the forward for the GDN's depthwise convolution of 192 channels.)"""
    from torch.utils.flop_counter import conv_flop_count

    output_mask = args[7]  # bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask
    forward = conv_flop_count(list(x_shape), list(w_shape), list(grad_out_shape), transposed=False)
    return forward * (int(output_mask[0]) + int(output_mask[1]))


def flop_formulas() -> dict[Any, Any]:
    """Extra ``FlopCounterMode(custom_mapping=...)`` entries for the ops this module runs that
    ``torch.utils.flop_counter`` does not count (the triangular solve) or miscounts (the
    depthwise convolution's backward)."""
    return {
        torch.ops.aten.linalg_solve_triangular: solve_triangular_flops,
        torch.ops.aten.convolution_backward: conv_backward_flops,
    }


def _fla_chunk() -> Any:
    """flash-linear-attention's chunked kernel, or None where the ``fla`` extra is not
    installed. Imported by name: the package is optional and must stay absent from the test
    environment (transformers' olmo_hybrid would run its own GDN through it, on CPU too), so the
    packaging test's walk of the product's imports (it needs every import installed) skips it."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("fla") is None:
        return None
    return importlib.import_module("fla.ops.gated_delta_rule").chunk_gated_delta_rule


class GatedRMSNorm(nn.Module):
    """RMSNorm of the output, then times silu(gate), as transformers' OlmoHybridRMSNormGated
    (normalised in float32, scaled by the weight in the input dtype)."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype, dt = x.dtype, _compute_dtype(x.dtype)  # float32 at least (float64 stays)
        xf = x.to(dt)
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        out = self.weight * xf.to(dtype)
        return (out * F.silu(gate.to(dt))).to(dtype)


class GatedDeltaNet(nn.Module):
    """The token mixer of a GDN block: (batch, seq, d_model) -> (batch, seq, d_model)."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_k_dim: int,
        head_v_dim: int,
        conv_size: int = 4,
        allow_neg_eigval: bool = True,
        chunk_size: int = 64,
    ):
        super().__init__()
        self.n_heads, self.head_k_dim, self.head_v_dim = n_heads, head_k_dim, head_v_dim
        self.key_dim, self.value_dim = n_heads * head_k_dim, n_heads * head_v_dim
        self.conv_size, self.allow_neg_eigval, self.chunk_size = conv_size, allow_neg_eigval, chunk_size
        self.q_proj = nn.Linear(d_model, self.key_dim, bias=False)
        self.k_proj = nn.Linear(d_model, self.key_dim, bias=False)
        self.v_proj = nn.Linear(d_model, self.value_dim, bias=False)
        self.a_proj = nn.Linear(d_model, n_heads, bias=False)
        self.b_proj = nn.Linear(d_model, n_heads, bias=False)
        self.g_proj = nn.Linear(d_model, self.value_dim, bias=False)
        self.o_proj = nn.Linear(self.value_dim, d_model, bias=False)
        self.conv_dim = 2 * self.key_dim + self.value_dim
        # depthwise, no bias; transformers' layout (conv_dim, 1, width)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, conv_size, groups=self.conv_dim, bias=False)
        self.A_log = nn.Parameter(torch.zeros(n_heads))
        self.dt_bias = nn.Parameter(torch.zeros(n_heads))
        self.o_norm = GatedRMSNorm(head_v_dim, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], -1).transpose(1, 2)
        # causal: pad conv_size - 1 on the left only, so the output has exactly s positions
        qkv = F.silu(F.conv1d(F.pad(qkv, (self.conv_size - 1, 0)), self.conv1d.weight, groups=self.conv_dim))
        q, k, v = torch.split(qkv.transpose(1, 2), [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.reshape(b, s, self.n_heads, self.head_k_dim)
        k = k.reshape(b, s, self.n_heads, self.head_k_dim)
        v = v.reshape(b, s, self.n_heads, self.head_v_dim)
        beta = self.b_proj(x).sigmoid()
        if self.allow_neg_eigval:
            beta = beta * 2.0  # eigenvalues of (I - beta k k^T) in [-1, 1]
        dt = _compute_dtype(x.dtype)
        g = -self.A_log.to(dt).exp() * F.softplus(self.a_proj(x).to(dt) + self.dt_bias)
        fla_chunk = _fla_chunk() if x.is_cuda else None
        if fla_chunk is not None:
            out, _ = fla_chunk(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
        else:
            q, k = l2norm(q.to(dt)), l2norm(k.to(dt))
            out, _ = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=self.chunk_size)
        gate = self.g_proj(x)
        out = self.o_norm(out.reshape(b, s, self.n_heads, self.head_v_dim), gate.reshape(b, s, self.n_heads, self.head_v_dim))
        return self.o_proj(out.reshape(b, s, self.value_dim))


@torch.no_grad()
def gdn_init(name: str, full: torch.Tensor, generator: torch.Generator) -> bool:
    """Initialise the GDN parameters that are not plain weights, as OLMo-core and transformers
    do: ``A_log = log(uniform(0, 16))``; ``dt_bias`` the inverse softplus of a ``dt`` drawn
    log-uniform in [0.001, 0.1] (floored at 1e-4); ``conv1d`` PyTorch's default for a
    depthwise convolution (uniform within 1/sqrt(width)). Returns whether ``name`` was one."""
    if name.endswith("A_log"):
        full.uniform_(0.0, 16.0, generator=generator).clamp_(min=1e-4).log_()
    elif name.endswith("dt_bias"):
        dt = torch.rand(full.shape, generator=generator, device=full.device, dtype=full.dtype)
        dt = (dt * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).exp().clamp(min=1e-4)
        full.copy_(dt + torch.log(-torch.expm1(-dt)))
    elif name.endswith("conv1d.weight"):
        bound = 1.0 / math.sqrt(full.shape[-1])
        full.uniform_(-bound, bound, generator=generator)
    else:
        return False
    return True
