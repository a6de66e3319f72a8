"""Export a checkpoint as a Hugging Face ``transformers`` model (config + safetensors):
``Olmo2ForCausalLM`` (full attention everywhere), ``Olmo3ForCausalLM`` (sliding-window and full
attention, RoPE in both) or ``OlmoHybridForCausalLM`` (Gated DeltaNet and full attention, RoPE
in the attention layers or none; transformers 5).

``python -m train.export_hf CHECKPOINT OUT_DIR [--dtype bfloat16] [--eos-id N] [--pad-id N]``

Our module names were chosen to mirror HF's, so the export is a key rename. The embedding
and lm_head keep their padded rows (HF's ``vocab_size`` is the padded size, as in the
released OLMo models). ``AutoModelForCausalLM.from_pretrained(OUT_DIR)`` then gives the
same logits as our model, and ``generate()`` works with transformers' cache. A block pattern
no transformers class represents (sliding-window and GDN layers together, attention without
RoPE outside the hybrid, GDN layers only) is refused with an ``ExportError`` naming the key.
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
from train.errors import ConfigError, TrainError, report
from train.evaluate import model_config_from_state
from train.model import Transformer, block_kinds, gdn_dims, mlp_hidden, padded_vocab

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
# a GDN block is pre-norm (Llama-style names in transformers' OlmoHybrid)
_GDN_RENAMES = {"gdn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm"}
_HF_KINDS = {"full_attention": "full_attention", "sliding_attention": "sliding_attention", "gated_deltanet": "linear_attention"}


def hf_key(name: str, gdn_layers: frozenset[int] = frozenset()) -> str:
    if name == "embed.weight":
        return "model.embed_tokens.weight"
    if name == "norm.weight":
        return "model.norm.weight"
    if name == "lm_head.weight":
        return "lm_head.weight"
    _, layer, rest = name.split(".", 2)  # blocks.<i>.<rest>
    if int(layer) in gdn_layers and rest.startswith("gdn."):
        return f"model.layers.{layer}.linear_attn.{rest[4:]}"  # A_log, dt_bias: no sub-module
    module, param = rest.rsplit(".", 1)
    if int(layer) in gdn_layers:
        return f"model.layers.{layer}.{_GDN_RENAMES.get(module, module)}.{param}"
    return f"model.layers.{layer}.{_BLOCK_RENAMES[module]}.{param}"


class ExportError(ConfigError):
    """A model that no transformers class represents."""


def hf_family(cfg: ModelConfig) -> str:
    """``olmo2``, ``olmo3`` or ``olmo_hybrid``: the transformers model type of ``cfg``."""
    kinds = set(block_kinds(cfg))
    if "gated_deltanet" in kinds:
        if "sliding_attention" in kinds:
            raise ExportError("model.block_pattern: transformers has no model with both sliding_attention and gated_deltanet layers")
        if "full_attention" not in kinds:
            raise ExportError("model.block_pattern: transformers' OlmoHybrid needs at least one full_attention layer")
        return "olmo_hybrid"
    ropes = {"full_attention": cfg.full_attention_rope, "sliding_attention": cfg.sliding_attention_rope}
    for kind in sorted(kinds):
        if not ropes[kind]:
            raise ExportError(f"model.{kind}_rope: false; transformers' Olmo2/Olmo3 apply RoPE in every attention layer")
    return "olmo3" if "sliding_attention" in kinds else "olmo2"


def _hybrid_fields(cfg: ModelConfig) -> dict[str, Any]:
    heads, k, v = gdn_dims(cfg)
    # no positional encoding (the released model): rope_theta null, which transformers keeps
    # (a null rope_parameters it would fill with its default theta) and reads as NoPE
    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta if cfg.full_attention_rope else None}
    return {
        "rope_parameters": rope,
        "linear_num_key_heads": heads,
        "linear_num_value_heads": heads,
        "linear_key_head_dim": k,
        "linear_value_head_dim": v,
        "linear_conv_kernel_dim": cfg.gdn_conv_size,
        "linear_allow_neg_eigval": cfg.gdn_allow_neg_eigval,
    }


def hf_config(cfg: ModelConfig, eos_id: int | None = None, pad_id: int | None = None):
    import transformers

    family = hf_family(cfg)
    v5 = int(transformers.__version__.split(".")[0]) >= 5
    if family != "olmo2" and not v5:
        raise ExportError(f"model.block_pattern: exporting {family} needs transformers 5 (found {transformers.__version__})")
    # transformers 5 takes the RoPE base in rope_parameters; 4.x as rope_theta
    rope: dict[str, Any]  # the family's own fields
    default_rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if family == "olmo_hybrid":
        rope = _hybrid_fields(cfg)
    elif family == "olmo3":
        rope = {"rope_parameters": {"full_attention": dict(default_rope), "sliding_attention": dict(default_rope)}}
        rope.update(sliding_window=cfg.sliding_window, layer_types=[_HF_KINDS[k] for k in block_kinds(cfg)])
    elif v5:
        rope = {"rope_parameters": default_rope}
    else:
        rope = {"rope_theta": cfg.rope_theta}
    if family == "olmo_hybrid":
        rope["layer_types"] = [_HF_KINDS[k] for k in block_kinds(cfg)]
    name = {"olmo2": "Olmo2", "olmo3": "Olmo3", "olmo_hybrid": "OlmoHybrid"}[family]
    return getattr(transformers, f"{name}Config")(
        architectures=[f"{name}ForCausalLM"],
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
    gdn = frozenset(i for i, kind in enumerate(block_kinds(model.cfg)) if kind == "gated_deltanet")
    return {hf_key(k, gdn): v.detach().contiguous() for k, v in model.state_dict().items()}


def export(
    model: Transformer, out: str | Path, dtype: torch.dtype = torch.float32, eos_id: int | None = None, pad_id: int | None = None
) -> Path:
    from safetensors.torch import save_file

    config = hf_config(model.cfg, eos_id, pad_id)  # refuses what transformers cannot load first
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
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
