"""Export a checkpoint as a Hugging Face ``transformers`` Olmo2 model (config + safetensors).

``python -m train.export_hf CHECKPOINT OUT_DIR [--dtype bfloat16] [--eos-id N] [--pad-id N]``

Our module names were chosen to mirror HF's, so the export is a key rename. The embedding
and lm_head keep their padded rows (HF's ``vocab_size`` is the padded size, as in the
released OLMo 2 models). ``AutoModelForCausalLM.from_pretrained(OUT_DIR)`` then gives the
same logits as our model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

from train.checkpoint import load_model_weights, read_state
from train.config import ModelConfig
from train.errors import TrainError, report
from train.evaluate import model_config_from_state
from train.model import Transformer, mlp_hidden, padded_vocab

_BLOCK_RENAMES = {
    "attn.q_proj": "self_attn.q_proj",
    "attn.k_proj": "self_attn.k_proj",
    "attn.v_proj": "self_attn.v_proj",
    "attn.o_proj": "self_attn.o_proj",
    "attn.q_norm": "self_attn.q_norm",
    "attn.k_norm": "self_attn.k_norm",
    "attn_norm": "post_attention_layernorm",
    "mlp_norm": "post_feedforward_layernorm",
    "mlp.gate_proj": "mlp.gate_proj",
    "mlp.up_proj": "mlp.up_proj",
    "mlp.down_proj": "mlp.down_proj",
}


def hf_key(name: str) -> str:
    if name == "embed.weight":
        return "model.embed_tokens.weight"
    if name == "norm.weight":
        return "model.norm.weight"
    if name == "lm_head.weight":
        return "lm_head.weight"
    _, layer, rest = name.split(".", 2)  # blocks.<i>.<rest>
    module, param = rest.rsplit(".", 1)
    return f"model.layers.{layer}.{_BLOCK_RENAMES[module]}.{param}"


def hf_config(cfg: ModelConfig, eos_id: int | None = None, pad_id: int | None = None):
    import transformers
    from transformers import Olmo2Config

    # transformers 5 takes the RoPE base in rope_parameters; 4.x as rope_theta
    rope: dict[str, Any]
    if int(transformers.__version__.split(".")[0]) >= 5:
        rope = {"rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta}}
    else:
        rope = {"rope_theta": cfg.rope_theta}
    return Olmo2Config(
        vocab_size=padded_vocab(cfg),
        hidden_size=cfg.d_model,
        intermediate_size=mlp_hidden(cfg),
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads or cfg.n_heads,
        max_position_embeddings=cfg.max_seq_len,
        rms_norm_eps=cfg.norm_eps,
        tie_word_embeddings=False,
        attention_bias=False,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
        **rope,
    )


def to_hf_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    return {hf_key(k): v.detach().contiguous() for k, v in model.state_dict().items()}


def export(
    model: Transformer, out: str | Path, dtype: torch.dtype = torch.float32, eos_id: int | None = None, pad_id: int | None = None
) -> Path:
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = hf_config(model.cfg, eos_id, pad_id)
    import transformers

    if int(transformers.__version__.split(".")[0]) >= 5:
        config.dtype = dtype  # recorded in config.json
    else:
        config.torch_dtype = dtype
    config.save_pretrained(out)
    sd = {k: v.to(dtype) for k, v in to_hf_state_dict(model).items()}
    save_file(sd, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def export_checkpoint(
    path: str | Path, out: str | Path, dtype: torch.dtype = torch.float32, eos_id: int | None = None, pad_id: int | None = None
) -> Path:
    state = read_state(path)
    model = Transformer(model_config_from_state(state))
    load_model_weights(path, model)
    out = export(model, out, dtype, eos_id, pad_id)
    (Path(out) / "dolma_pipe_export.json").write_text(json.dumps({"checkpoint": str(path), "step": state.get("step")}))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m train.export_hf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--eos-id", type=int, default=None)
    ap.add_argument("--pad-id", type=int, default=None)
    args = ap.parse_args(argv)
    try:
        out = export_checkpoint(args.checkpoint, args.out, getattr(torch, args.dtype), args.eos_id, args.pad_id)
    except TrainError as e:
        return report(e)
    print(f"exported {args.checkpoint} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
