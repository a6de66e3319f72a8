"""Schedules (warmup+cosine, linear decay to zero), AdamW groups, z-loss, clipping."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.config import ModelConfig, OptimConfig  # noqa: E402
from train.loss import lm_loss  # noqa: E402
from train.model import Transformer  # noqa: E402
from train.optim import build_optimizer, clip_grad_norm  # noqa: E402
from train.schedule import Schedule  # noqa: E402


def test_warmup_then_cosine_to_floor():
    s = Schedule("cosine", peak_lr=1e-3, total_steps=110, warmup_steps=10, min_lr_ratio=0.1)
    assert s.lr_at(1) == pytest.approx(1e-4) and s.lr_at(10) == pytest.approx(1e-3)
    assert s.lr_at(60) == pytest.approx(1e-4 + 0.9e-3 * 0.5)  # half way through the cosine
    assert s.lr_at(110) == pytest.approx(1e-4) and s.lr_at(500) == pytest.approx(1e-4)
    lrs = [s.lr_at(i) for i in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


def test_linear_decay_from_start_lr_to_zero_after_the_last_step():
    """Zero is reached one step after total_steps, so the last step still trains:
    3e-4 * (1 - s/5) for s = 1..4; held at zero past the end."""
    s = Schedule("linear_decay", peak_lr=3e-4, total_steps=4)
    assert [s.lr_at(i) for i in range(1, 7)] == pytest.approx([2.4e-4, 1.8e-4, 1.2e-4, 0.6e-4, 0.0, 0.0])
    # with warmup: 2 steps up to the peak, then 4 - 2 = 2 decay steps: 3e-4 * (1 - k/3)
    w = Schedule("linear_decay", peak_lr=3e-4, total_steps=4, warmup_steps=2)
    assert [w.lr_at(i) for i in range(1, 6)] == pytest.approx([1.5e-4, 3e-4, 2e-4, 1e-4, 0.0])


def test_no_weight_decay_on_embeddings_only():
    m = Transformer(ModelConfig(vocab_size=100, d_model=32, n_layers=1, n_heads=2))
    opt = build_optimizer(m, OptimConfig(), lr=1e-3)
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    assert opt.param_groups[0]["weight_decay"] == 0.1 and opt.param_groups[1]["weight_decay"] == 0.0
    assert opt.param_groups[1]["params"] == [m.embed.weight]
    assert id(m.lm_head.weight) in decayed and id(m.blocks[0].attn_norm.weight) in decayed
    assert opt.defaults["betas"] == (0.9, 0.95) and opt.defaults["eps"] == 1e-8


def test_loss_shift_padding_and_z_loss():
    """Expected values worked out by hand, not by the formula under test.

    vocab_size 2, padded to 4 (columns 2 and 3 get 50.0: if the padding were not sliced off
    it would take nearly all the probability). Tokens [1, 0, 1]: position 0 predicts token 0,
    position 1 predicts token 1, position 2 predicts nothing (its logits are ignored).
      position 0: logits [ln 3, 0] -> p(0) = 3/4 -> CE = ln(4/3);  logsumexp = ln 4 = 2 ln 2
      position 1: logits [0, 0]    -> p(1) = 1/2 -> CE = ln 2;      logsumexp = ln 2
    CE (mean) = (ln(4/3) + ln 2) / 2 = ln(8/3) / 2 = 0.49041462650586...
    z-loss = 1e-5 * ((2 ln 2)^2 + (ln 2)^2) / 2 = 1e-5 * 2.5 (ln 2)^2 = 1.20113253479550e-05
    """
    ln3 = 1.0986122886681098
    logits = torch.tensor([[[ln3, 0.0, 50.0, 50.0], [0.0, 0.0, 50.0, 50.0], [100.0, -100.0, 50.0, 50.0]]])
    tokens = torch.tensor([[1, 0, 1]])
    ce, z = lm_loss(logits, tokens, vocab_size=2, z_loss=1e-5)
    assert ce.item() == pytest.approx(0.49041462650586, rel=1e-6)
    assert z.item() == pytest.approx(1.20113253479550e-05, rel=1e-6)
    # a second instance, tokens [0, 1, 0], same logits: position 0 now predicts token 1
    # (p = 1/4, CE = ln 4), position 1 token 0 (CE = ln 2); the means run over all four
    # positions: CE = (ln(4/3) + ln 2 + ln 4 + ln 2) / 4 = ln(64/3) / 4 = (4.15888308 - 1.09861229) / 4 = 0.76506770;
    # the logsumexps are the same as before, so the z-loss is too
    ce2, z2 = lm_loss(torch.cat([logits, logits]), torch.tensor([[1, 0, 1], [0, 1, 0]]), vocab_size=2, z_loss=1e-5)
    assert ce2.item() == pytest.approx(0.76506769867, rel=1e-6)
    assert z2.item() == pytest.approx(1.20113253479550e-05, rel=1e-6)
    _, z0 = lm_loss(logits, tokens, vocab_size=2, z_loss=0.0)
    assert z0.item() == 0.0


def test_clip_grad_norm_clips_to_max():
    ps = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(4))]
    ps[0].grad, ps[1].grad = torch.full((3,), 3.0), torch.full((4,), 4.0)
    total = clip_grad_norm(ps, 1.0)
    assert total.item() == pytest.approx(math.sqrt(27 + 64))
    assert math.sqrt(sum(p.grad.square().sum().item() for p in ps)) == pytest.approx(1.0, rel=1e-5)
