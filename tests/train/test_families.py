"""Model families (model.block_pattern): OLMo 2, Olmo 3 (sliding-window + full attention), Olmo
Hybrid (Gated DeltaNet + full attention): the blocks built, exact sliding-window attention, and
describe()'s parameter and FLOP counts against the built module and torch's FLOP counter.
Each family trained, resumed, resharded, souped and exported: tests/train/test_resume.py."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.config import PRESETS, ModelConfig, from_dict  # noqa: E402
from train.errors import ConfigError  # noqa: E402
from train.model import (  # noqa: E402
    AttentionBlock,
    GatedDeltaNetBlock,
    Transformer,
    block_kinds,
    describe,
    flop_counter,
    init_weights,
    local_attention,
    param_count,
)

FAMILIES = ["tiny", "tiny-olmo3", "tiny-hybrid"]


def test_default_pattern_keeps_olmo2_parameter_names():
    names = [n for n, _ in Transformer(PRESETS["tiny"]).named_parameters()]
    layer0 = [n[len("blocks.0.") :] for n in names if n.startswith("blocks.0.")]
    assert layer0 == [
        "attn.q_proj.weight",
        "attn.k_proj.weight",
        "attn.v_proj.weight",
        "attn.o_proj.weight",
        "attn.q_norm.weight",
        "attn.k_norm.weight",
        "attn_norm.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
        "mlp_norm.weight",
    ]
    assert names[0] == "embed.weight" and names[-2:] == ["norm.weight", "lm_head.weight"]
    assert ModelConfig().block_pattern == ["full_attention"]


def test_patterns_repeat_over_the_layers():
    hybrid = Transformer(PRESETS["tiny-hybrid"])
    assert [type(b) for b in hybrid.blocks] == [GatedDeltaNetBlock] * 3 + [AttentionBlock]
    assert hybrid.blocks[3].attn.rope is False and hybrid.blocks[3].attn.window is None
    olmo3 = Transformer(PRESETS["tiny-olmo3"])
    assert [b.attn.window for b in olmo3.blocks] == [32, 32, 32, None]
    assert all(b.attn.rope for b in olmo3.blocks)
    cfg = ModelConfig(n_layers=5, block_pattern=["gated_deltanet", "sliding_attention"])
    assert block_kinds(cfg) == ["gated_deltanet", "sliding_attention"] * 2 + ["gated_deltanet"]
    h7 = PRESETS["olmo-hybrid-7b"]
    assert (h7.d_model, h7.n_layers, h7.n_heads, h7.gdn_head_k_dim, h7.gdn_head_v_dim, mlp(h7)) == (3840, 32, 30, 96, 192, 11008)
    assert block_kinds(h7)[:4] == ["gated_deltanet"] * 3 + ["full_attention"] and not h7.full_attention_rope


def mlp(cfg):
    from train.model import mlp_hidden

    return mlp_hidden(cfg)


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"model.block_pattern\[1\]: expected one of"):
        from_dict({"model": {"block_pattern": ["full_attention", "mamba"]}})
    with pytest.raises(ConfigError, match="model.block_pattern: empty"):
        from_dict({"model": {"block_pattern": []}})
    with pytest.raises(ConfigError, match="model.sliding_window: must be at least 1"):
        from_dict({"model": {"sliding_window": 0}})
    # an odd head size is fine where no layer uses RoPE
    from_dict({"model": {"d_model": 60, "n_heads": 4, "block_pattern": ["gated_deltanet", "full_attention"], "full_attention_rope": False}})
    with pytest.raises(ConfigError, match="head size must be even"):
        from_dict({"model": {"d_model": 60, "n_heads": 4, "block_pattern": ["gated_deltanet", "full_attention"]}})
    assert (
        from_dict({"model": {"preset": "tiny-hybrid"}, "data": {"seq_len": 128}}).model.block_pattern
        == PRESETS["tiny-hybrid"].block_pattern
    )


def _naive_window_attention(q, k, v, window):
    s = q.shape[2]
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    allowed = (j <= i) & (i - j < window)
    heads = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(heads, 1), v.repeat_interleave(heads, 1)
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v


@pytest.mark.parametrize("seq", [1, 5, 16, 17, 40, 64])
@pytest.mark.parametrize("window", [1, 4, 16])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_sliding_window_attention_equals_masked_softmax(seq, window, kv_heads):
    g = torch.Generator().manual_seed(seq * 100 + window)
    q = torch.randn(2, 4, seq, 8, dtype=torch.float64, generator=g)
    k = torch.randn(2, kv_heads, seq, 8, dtype=torch.float64, generator=g)
    v = torch.randn(2, kv_heads, seq, 8, dtype=torch.float64, generator=g)
    got = local_attention(q, k, v, window, enable_gqa=kv_heads != 4)
    assert torch.allclose(got, _naive_window_attention(q, k, v, window), atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_is_causal_and_sliding_layers_see_only_their_window(name):
    cfg = PRESETS[name]
    m = Transformer(cfg).eval()
    init_weights(m, 0)
    x = torch.randint(0, 512, (1, 80), generator=torch.Generator().manual_seed(1))
    y = x.clone()
    y[0, 30] = (y[0, 30] + 1) % 512
    with torch.no_grad():
        lx, ly = m(x), m(y)
    assert torch.equal(lx[:, :30], ly[:, :30]) and not torch.allclose(lx[:, 30:], ly[:, 30:])
    # one sliding-window layer: a token changes the outputs of itself and the window - 1 after it
    one = Transformer(dataclasses.replace(cfg, n_layers=1, block_pattern=["sliding_attention"], sliding_window=8)).eval()
    init_weights(one, 0)
    with torch.no_grad():
        changed = (one(x) - one(y)).abs().amax(-1)[0] > 0
    assert changed.nonzero().flatten().tolist() == list(range(30, 38))


@pytest.mark.parametrize("name", FAMILIES)
def test_activation_checkpointing_gives_same_gradients(name):
    a, b = Transformer(PRESETS[name]), Transformer(PRESETS[name])
    init_weights(a, 3), init_weights(b, 3)
    for blk in b.blocks:
        blk.activation_checkpointing = True
    x = torch.randint(0, 512, (2, 40))
    a(x).square().mean().backward()
    b(x).square().mean().backward()
    for (n, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(pa.grad, pb.grad, atol=1e-7), n


@pytest.mark.parametrize("name", FAMILIES + ["olmo2-1b", "olmo3-7b", "olmo-hybrid-7b"])
def test_param_count_equals_the_built_module(name):
    cfg = PRESETS[name]
    with torch.device("meta"):  # the 7B models are built without storage
        m = Transformer(cfg)
    assert param_count(cfg)["total"] == sum(p.numel() for p in m.parameters())


def _small(name: str) -> ModelConfig:
    # GDN chunks of 16 and a window of 16, so the lengths below cover one, several and partial
    # chunks and blocks; grouped KV heads in the attention layers
    return dataclasses.replace(PRESETS[name], sliding_window=16, gdn_chunk_size=16, n_kv_heads=2, vocab_size=300)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("seq", [16, 40])
def test_flops_per_token_equal_torch_flop_counter(name, seq):
    cfg = _small(name)
    m = Transformer(cfg)
    init_weights(m, 0)
    x = torch.randint(0, 300, (2, seq))
    with flop_counter(display=False) as counter:
        m(x).square().mean().backward()
    assert counter.get_total_flops() == pytest.approx(describe(cfg, seq)["flops_per_token"] * 2 * seq, rel=1e-12)


def test_window_and_gdn_cost_per_token_does_not_grow_with_length():
    from train.model import attention_flops, gdn_flops

    cfg = PRESETS["olmo-hybrid-7b"]
    assert attention_flops(cfg, 4096, 4096) == 12 * 3840 * 4096  # within the window: causal
    assert attention_flops(cfg, 8192, 4096) == 12 * 3840 * 4096 * 3 / 2  # blocks: 4096 + 2 * 4096 keys
    assert attention_flops(cfg, 65536, 4096) == pytest.approx(24 * 3840 * 4096, rel=0.04)
    assert attention_flops(cfg, 65536, None) == 16 * attention_flops(cfg, 4096, None)
    assert gdn_flops(cfg, 65536) == pytest.approx(gdn_flops(cfg, 8192), rel=1e-2)
