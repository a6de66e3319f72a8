"""The OLMo 2 decoder: architecture details, presets, init, parameter and FLOP counts."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.config import PRESETS, ModelConfig  # noqa: E402
from train.model import Transformer, describe, flops_per_token, init_weights, mlp_hidden, padded_vocab, param_count  # noqa: E402


def tiny(**kw) -> ModelConfig:
    return ModelConfig(**{"vocab_size": 300, "d_model": 64, "n_layers": 2, "n_heads": 4, "max_seq_len": 64, **kw})


def test_shapes_padding_and_no_biases():
    cfg = tiny()
    m = Transformer(cfg)
    assert padded_vocab(cfg) == 384 and m.embed.weight.shape == (384, 64)
    assert mlp_hidden(cfg) == 256  # 8/3 * 64 = 171 -> rounded up to 256
    assert mlp_hidden(tiny(d_model=768, n_heads=12)) == 2048  # exactly 8/3 * 768
    assert mlp_hidden(tiny(d_model=1000, n_heads=10)) == 2816  # 2667 -> next multiple of 256
    assert all("bias" not in n for n, _ in m.named_parameters())
    assert m.embed.weight.data_ptr() != m.lm_head.weight.data_ptr()  # untied
    assert m(torch.randint(0, 300, (2, 16))).shape == (2, 16, 384)


def test_param_count_matches_module_and_olmo2_sizes():
    for cfg in [tiny(), tiny(n_kv_heads=2, mlp_hidden=100), PRESETS["tiny"]]:
        assert param_count(cfg)["total"] == sum(p.numel() for p in Transformer(cfg).parameters())
    # released OLMo 2 sizes (HF model cards): 1B = 1.485B, 7B = 7.30B, 13B = 13.72B
    assert param_count(PRESETS["olmo2-1b"])["total"] == 1_484_916_736
    assert round(param_count(PRESETS["olmo2-7b"])["total"] / 1e9, 2) == 7.30
    assert round(param_count(PRESETS["olmo2-13b"])["total"] / 1e9, 2) == 13.72


def test_flops_per_token_formula():
    # by hand for tiny(): d 64, 2 layers, vocab padded to 384, MLP hidden 256, seq 32
    #   per layer q,k,v,o 4*64*64 = 16384 + gate,up,down 3*64*256 = 49152 -> 65536
    #   matmul weights: 2 * 65536 + lm_head 384*64 = 155648 (embedding lookup and norms excluded)
    #   6 * 155648 = 933888, attention 12 * 2 layers * 64 * 32 = 49152
    assert flops_per_token(tiny(), 32) == 983_040
    assert flops_per_token(tiny(), 64) == 983_040 + 49_152
    # OLMo 2 1B (1.485B parameters, embedding 100352 x 2048): the usual 6N + 12*L*d*seq with
    # N the non-embedding parameters of the published size, at seq 4096 = 9.29 GFLOP/token
    published = 6 * (1.485e9 - 100_352 * 2048) + 12 * 16 * 2048 * 4096
    assert flops_per_token(PRESETS["olmo2-1b"], 4096) == pytest.approx(published, rel=0.005)
    assert describe(PRESETS["olmo2-1b"], 4096)["flops_per_token"] == pytest.approx(9.29e9, rel=0.005)


def test_init_truncated_normal_and_depends_only_on_seed():
    cfg = tiny(d_model=128, n_heads=4)
    a, b, c = Transformer(cfg), Transformer(cfg), Transformer(cfg)
    init_weights(a, 0), init_weights(b, 0), init_weights(c, 1)
    w = a.blocks[0].mlp.gate_proj.weight
    assert abs(w.std().item() - 0.02 * 0.9866) < 0.0005  # std of N(0, .02) cut at 3 sigma
    assert w.abs().max().item() <= 0.06 + 1e-7
    assert torch.equal(a.blocks[1].attn_norm.weight, torch.ones(128))
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.embed.weight, c.embed.weight)
    # weights of different tensors are independent draws, not the same stream
    assert not torch.equal(a.blocks[0].attn.q_proj.weight, a.blocks[1].attn.q_proj.weight)


def test_norm_is_on_sublayer_output_and_model_is_causal():
    torch.manual_seed(0)
    cfg = tiny()
    m = Transformer(cfg)
    init_weights(m, 0)
    x = torch.randint(0, 300, (1, 12))
    y = x.clone()
    y[0, 8] = (y[0, 8] + 1) % 300
    with torch.no_grad():
        lx, ly = m(x), m(y)
    assert torch.equal(lx[:, :8], ly[:, :8]) and not torch.allclose(lx[:, 8:], ly[:, 8:])
    # post-sublayer norm: scaling the attention norm weight scales exactly the attention branch
    blk = m.blocks[0]
    h = torch.randn(1, 5, 64)
    from train.model import rope_cos_sin

    cos, sin = rope_cos_sin(5, 16, cfg.rope_theta, "cpu")
    with torch.no_grad():
        base = blk.attn_norm(blk.attn(h, cos, sin))
        blk.attn_norm.weight.mul_(0)
        out = blk(h, cos, sin)
    assert torch.allclose(out, h + blk.mlp_norm(blk.mlp(h)), atol=1e-6) and base.abs().sum() > 0


def test_activation_checkpointing_gives_same_gradients():
    cfg = tiny()
    a, b = Transformer(cfg), Transformer(cfg)
    init_weights(a, 3), init_weights(b, 3)
    for blk in b.blocks:
        blk.activation_checkpointing = True
    x = torch.randint(0, 300, (2, 16))
    a(x).square().mean().backward()
    b(x).square().mean().backward()
    for (n, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(pa.grad, pb.grad, atol=1e-7), n
