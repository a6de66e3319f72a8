"""Export to Hugging Face transformers' Olmo2: AutoModelForCausalLM loads it, logits match."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")
pytestmark = pytest.mark.train

from tests.support.train_launcher import stage1  # noqa: E402
from train.config import ModelConfig  # noqa: E402
from train.model import Transformer, init_weights  # noqa: E402


def _hf_logits(path, tokens):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    assert type(hf).__name__ == "Olmo2ForCausalLM"
    with torch.no_grad():
        return hf(tokens).logits


@pytest.mark.slow
def test_exported_trained_checkpoint_gives_the_same_logits(tmp_path_factory, tmp_path):
    from train.checkpoint import load_model_weights
    from train.export_hf import export_checkpoint

    s1 = stage1(tmp_path_factory)
    ckpt = s1.save_dir / "step6"
    out = export_checkpoint(ckpt, tmp_path / "hf", eos_id=0)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "olmo2" and config["vocab_size"] == 512 and config["rms_norm_eps"] == 1e-6
    assert config["tie_word_embeddings"] is False and (out / "model.safetensors").exists()
    ours = Transformer(ModelConfig(**json.loads((ckpt / "trainer_state.json").read_text())["config"]["model"]))
    load_model_weights(ckpt, ours)
    ours.eval()
    tokens = torch.randint(0, 512, (2, 48), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = ours(tokens)
    assert torch.allclose(_hf_logits(out, tokens), expected, atol=1e-5, rtol=0)


def test_export_with_grouped_kv_heads_and_odd_vocab(tmp_path):
    from train.export_hf import export

    cfg = ModelConfig(vocab_size=300, d_model=96, n_layers=3, n_heads=6, n_kv_heads=2, rope_theta=10000.0, max_seq_len=64)
    model = Transformer(cfg)
    init_weights(model, 11)
    with torch.no_grad():  # norms away from 1 so a mis-mapped norm cannot hide
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    model.eval()
    tokens = torch.randint(0, 300, (3, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(tokens)
    hf = _hf_logits(export(model, tmp_path / "hf"), tokens)
    assert hf.shape == (3, 40, 384)
    assert torch.allclose(hf, expected, atol=1e-5, rtol=0)
