"""Export to Hugging Face transformers (Olmo2, Olmo3, OlmoHybrid): AutoModelForCausalLM loads
it, logits match. A trained run's checkpoints, exported as they are and souped, for each
family: tests/train/test_resume.py."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")
pytestmark = pytest.mark.train

from train.config import ModelConfig  # noqa: E402
from train.model import Transformer, init_weights  # noqa: E402


def _hf_logits(path, tokens):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    assert type(hf).__name__ == "Olmo2ForCausalLM"
    with torch.no_grad():
        return hf(tokens).logits


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


def _family_model(name):
    from train.config import PRESETS

    model = Transformer(PRESETS[name])
    init_weights(model, 7)
    with torch.no_grad():  # norms away from 1 so a mis-mapped norm cannot hide
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return model.eval()


@pytest.mark.slow
@pytest.mark.parametrize(("name", "hf_class"), [("tiny-olmo3", "Olmo3ForCausalLM"), ("tiny-hybrid", "OlmoHybridForCausalLM")])
def test_families_export_loads_as_is_same_logits_and_greedy_decoding(tmp_path, name, hf_class):
    from transformers import AutoModelForCausalLM

    from train.export_hf import export

    model = _family_model(name)
    out = export(model, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    hf = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    assert type(hf).__name__ == hf_class and config["architectures"] == [hf_class]
    # every tensor of ours is in the checkpoint and loaded: same parameter count, no new init
    assert sum(p.numel() for p in hf.parameters()) == sum(p.numel() for p in model.parameters())
    if name == "tiny-olmo3":
        assert config["sliding_window"] == 32 and config["layer_types"] == ["sliding_attention"] * 3 + ["full_attention"]
    else:
        assert config["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
        assert config["rope_parameters"]["rope_theta"] is None and hf.model.rotary_emb is None  # no positions
        assert (config["linear_key_head_dim"], config["linear_value_head_dim"]) == (12, 24)
    # 150 tokens: past the window (32) and over two GDN chunks (64)
    tokens = torch.randint(0, 512, (2, 150), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, got = model(tokens), hf(tokens).logits
    assert (got - expected).abs().max().item() < 1e-5
    # transformers' cached decoding (sliding-window KV cache / GDN conv + recurrent state)
    # picks, at every step, the argmax of our model over the whole sequence
    prompt = tokens[:1, :10]
    generated = hf.generate(prompt, max_new_tokens=32, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert generated.shape == (1, 42)
    with torch.no_grad():
        ours = model(generated)[0, 9:-1].argmax(-1)
    assert torch.equal(ours, generated[0, 10:])


def test_export_refuses_what_transformers_cannot_represent(tmp_path):
    import dataclasses

    from train.config import PRESETS
    from train.export_hf import ExportError, export

    for cfg, key in [
        (
            dataclasses.replace(PRESETS["tiny"], block_pattern=["gated_deltanet", "sliding_attention", "full_attention"]),
            "model.block_pattern",
        ),
        (dataclasses.replace(PRESETS["tiny"], block_pattern=["gated_deltanet"]), "model.block_pattern"),
        (dataclasses.replace(PRESETS["tiny-olmo3"], sliding_attention_rope=False), "model.sliding_attention_rope"),
        (dataclasses.replace(PRESETS["tiny"], full_attention_rope=False), "model.full_attention_rope"),
    ]:
        with pytest.raises(ExportError, match=key):
            export(Transformer(cfg), tmp_path / "hf")
        assert not (tmp_path / "hf" / "model.safetensors").exists()
