"""Gated DeltaNet (train.gdn): the chunked form equals the recurrence, gradients are right, and
the layer equals transformers' OlmoHybridGatedDeltaNet on the same weights."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.gdn import GatedDeltaNet, chunk_gated_delta_rule, l2norm, recurrent_gated_delta_rule  # noqa: E402


def _inputs(b, s, h, dk, dv, dtype=torch.float64, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype)

    q, k = l2norm(r(b, s, h, dk)), l2norm(r(b, s, h, dk))
    v = r(b, s, h, dv)
    # decays from exp(-0.01) to exp(-3): long and short memories in one batch
    gate = -torch.rand(b, s, h, generator=g, dtype=dtype) * 3 - 0.01
    beta = torch.rand(b, s, h, generator=g, dtype=dtype) * 2  # negative eigenvalues allowed
    out = [q, k, v, gate, beta]
    return [x.requires_grad_(requires_grad) for x in out]


@pytest.mark.parametrize("seq", [1, 63, 64, 65, 300])
@pytest.mark.parametrize("chunk", [16, 64])
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrence_in_float64(seq, chunk, with_state):
    q, k, v, g, beta = _inputs(2, seq, 3, 8, 16, seed=seq)
    state = torch.randn(2, 3, 8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) if with_state else None
    o_ref, s_ref = recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state)
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=state, chunk_size=chunk)
    assert o.dtype == s.dtype == torch.float64 and o.shape == v.shape and s.shape == (2, 3, 8, 16)
    assert (o - o_ref).abs().max().item() < 1e-10
    assert (s - s_ref).abs().max().item() < 1e-10
    assert o_ref.abs().max() > 0.1 and s_ref.abs().max() > 0.1  # not vacuous


def test_the_state_carries_the_sequence_over():
    # running 300 tokens at once equals 130 tokens, then 170 from the state the first left
    q, k, v, g, beta = _inputs(1, 300, 2, 8, 8)
    whole, s_whole = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=64)
    first, s1 = chunk_gated_delta_rule(*(x[:, :130] for x in (q, k, v, g, beta)), chunk_size=64)
    second, s2 = chunk_gated_delta_rule(*(x[:, 130:] for x in (q, k, v, g, beta)), initial_state=s1, chunk_size=64)
    assert torch.allclose(torch.cat([first, second], 1), whole, atol=1e-12, rtol=0)
    assert torch.allclose(s2, s_whole, atol=1e-12, rtol=0)


@pytest.mark.parametrize("chunk", [4, 16])
def test_gradcheck_chunked_and_recurrent(chunk):
    q, k, v, g, beta = _inputs(1, 11, 2, 4, 3, requires_grad=True)
    state = torch.randn(1, 2, 4, 3, dtype=torch.float64, requires_grad=True)

    def chunked(*xs):
        return chunk_gated_delta_rule(*xs[:5], initial_state=xs[5], chunk_size=chunk)

    assert torch.autograd.gradcheck(chunked, (q, k, v, g, beta, state), fast_mode=True)
    assert torch.autograd.gradcheck(
        lambda *xs: recurrent_gated_delta_rule(*xs[:5], initial_state=xs[5]), (q, k, v, g, beta, state), fast_mode=True
    )


def test_layer_gradcheck():
    layer = GatedDeltaNet(d_model=8, n_heads=2, head_k_dim=3, head_v_dim=4, chunk_size=4).double()
    torch.nn.init.normal_(layer.A_log, 0, 0.5)
    x = torch.randn(1, 7, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(layer, (x,), fast_mode=True)


def _hf_layer(d, heads, layers=4):
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "OlmoHybridConfig"):
        pytest.skip("transformers without olmo_hybrid")
    from transformers.models.olmo_hybrid.modeling_olmo_hybrid import OlmoHybridGatedDeltaNet

    cfg = transformers.OlmoHybridConfig(
        hidden_size=d,
        num_attention_heads=heads,
        num_hidden_layers=layers,
        intermediate_size=4 * d,
        vocab_size=512,
        pad_token_id=None,
        eos_token_id=None,
    )
    return OlmoHybridGatedDeltaNet(cfg, 0).eval(), cfg


@pytest.mark.slow  # imports transformers
@pytest.mark.parametrize("seq", [1, 70, 200])
def test_layer_equals_transformers_olmo_hybrid(seq):
    from train.model import init_weights

    hf, cfg = _hf_layer(64, 4)
    ours = GatedDeltaNet(64, 4, cfg.linear_key_head_dim, cfg.linear_value_head_dim)
    assert sorted(n for n, _ in ours.named_parameters()) == sorted(n for n, _ in hf.named_parameters())

    class Holder(torch.nn.Module):  # our init (per-name generators) on the layer alone
        def __init__(self):
            super().__init__()
            self.gdn = ours
            self.cfg = type("C", (), {"init_std": 0.02})()

    init_weights(Holder(), 5)  # type: ignore[arg-type]
    with torch.no_grad():
        ours.o_norm.weight.uniform_(0.5, 1.5)  # away from 1 so a skipped weight shows
        hf.load_state_dict(ours.state_dict())
    x = torch.randn(2, seq, 64, generator=torch.Generator().manual_seed(seq))
    with torch.no_grad():
        want, got = hf(x), ours(x)
    assert want.abs().max() > 1e-3
    assert (got - want).abs().max().item() < 1e-6


def test_init_follows_olmo_core():
    from train.config import PRESETS
    from train.model import Transformer, init_weights

    m = Transformer(PRESETS["tiny-hybrid"])
    init_weights(m, 0)
    gdn = m.blocks[0].gdn
    a = gdn.A_log.exp()
    assert ((a > 0) & (a <= 16)).all()
    dt = torch.nn.functional.softplus(gdn.dt_bias)
    assert ((dt >= 1e-4 - 1e-9) & (dt <= 0.1 + 1e-6)).all()
    assert gdn.conv1d.weight.abs().max() <= 0.5 and torch.equal(gdn.o_norm.weight, torch.ones(gdn.head_v_dim))
    assert not torch.equal(m.blocks[0].gdn.A_log, m.blocks[1].gdn.A_log)
