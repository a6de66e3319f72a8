"""Run configuration: plain dataclasses, loaded from YAML and validated at load time.

Every section is a dataclass with defaults; a YAML file only names what it changes.
Enumerations are ``typing.Literal`` types, checked like the other types when the file
loads. An unknown key, a wrong type, a value outside its choices or range, or values that
contradict each other raise one ``ConfigError`` that names the key
(``model.d_modle: unknown key``); ``python -m train`` prints it as one line
(``config error: ...``, exit status 2) instead of a traceback deep in the trainer. The few
checks that need the launch (ranks, an existing ``save_dir``, a checkpoint) are made by the
trainer before the first step and raise the same error. ``--set section.key=value``
overrides are applied to the YAML before validation, so they are checked the same way.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from train.errors import ConfigError

# The enumerations of the config (checked at load: a value outside them is a ConfigError).
PresetName = Literal[
    "tiny", "small", "olmo2-1b", "olmo2-7b", "olmo2-13b", "tiny-olmo3", "olmo3-7b", "tiny-hybrid", "olmo-hybrid-7b"
]  # the keys of PRESETS (below ModelConfig)
# full_attention: causal softmax attention over the whole sequence; sliding_attention: each
# token sees itself and the model.sliding_window - 1 tokens before it; gated_deltanet: Gated
# DeltaNet (train.gdn), a linear recurrence, in a pre-norm block
BlockKind = Literal["full_attention", "sliding_attention", "gated_deltanet"]
TokenDtype = Literal["auto", "uint16", "uint32"]  # auto: uint16 iff vocab_size <= 65536 (train.shards)
Precision = Literal["auto", "fp32", "bf16"]  # auto: bf16 on GPUs that have it, else fp32
ScheduleKind = Literal["cosine", "linear_decay", "constant"]
DataParallel = Literal["fsdp", "hsdp"]  # hsdp: shard within a group (a node), replicate across groups


@dataclass
class ModelConfig:
    """Shape of the OLMo-2-style decoder (see ``train.model``)."""

    preset: PresetName | None = None  # defaults for the other keys (a key given here wins)
    vocab_size: int = 512  # tokenizer vocabulary; the embedding is padded to vocab_multiple
    vocab_multiple: int = 128
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int | None = None  # None: same as n_heads (OLMo 2 uses full MHA)
    mlp_hidden: int | None = None  # None: 8/3 * d_model rounded up to mlp_multiple
    mlp_multiple: int = 256
    rope_theta: float = 500000.0
    norm_eps: float = 1e-6
    init_std: float = 0.02
    max_seq_len: int = 4096
    # the kinds of the layers, repeated: layer i is block_pattern[i % len(block_pattern)]
    block_pattern: list[BlockKind] = field(default_factory=lambda: ["full_attention"])
    sliding_window: int = 4096  # sliding_attention: tokens seen, the token itself included
    full_attention_rope: bool = True  # RoPE in full_attention blocks (false: no positions)
    sliding_attention_rope: bool = True  # RoPE in sliding_attention blocks
    gdn_n_heads: int | None = None  # None: n_heads
    gdn_head_k_dim: int | None = None  # None: 0.75 * d_model / gdn heads (transformers' default)
    gdn_head_v_dim: int | None = None  # None: 2 * gdn_head_k_dim
    gdn_conv_size: int = 4  # width of the causal depthwise convolution on q, k, v
    gdn_allow_neg_eigval: bool = True  # beta in [0, 2] instead of [0, 1]
    gdn_chunk_size: int = 64  # chunk length of the PyTorch (non-fla) form


_OLMO3: list[BlockKind] = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
_HYBRID: list[BlockKind] = ["gated_deltanet", "gated_deltanet", "gated_deltanet", "full_attention"]

# Shapes of the released OLMo 2 models (dolma2 tokenizer: 100,278 entries, padded to 100,352).
PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(vocab_size=512, d_model=64, n_layers=2, n_heads=4, max_seq_len=256),
    "small": ModelConfig(vocab_size=512, d_model=256, n_layers=4, n_heads=4, max_seq_len=1024),
    "olmo2-1b": ModelConfig(vocab_size=100278, d_model=2048, n_layers=16, n_heads=16, mlp_hidden=8192),
    "olmo2-7b": ModelConfig(vocab_size=100278, d_model=4096, n_layers=32, n_heads=32, mlp_hidden=11008),
    "olmo2-13b": ModelConfig(vocab_size=100278, d_model=5120, n_layers=40, n_heads=40, mlp_hidden=13824),
    # Olmo 3: three sliding-window (4096) layers then one full-attention layer, RoPE in both
    # (transformers' Olmo3Config defaults; allenai/Olmo-3-1025-7B)
    "tiny-olmo3": ModelConfig(vocab_size=512, d_model=64, n_layers=4, n_heads=4, max_seq_len=256, sliding_window=32, block_pattern=_OLMO3),
    "olmo3-7b": ModelConfig(
        vocab_size=100278, d_model=4096, n_layers=32, n_heads=32, mlp_hidden=11008, max_seq_len=8192, block_pattern=_OLMO3
    ),
    # Olmo Hybrid: three Gated DeltaNet layers then one full-attention layer without positional
    # encoding (allenai/Olmo-Hybrid-7B: 30 GDN heads, key dim 96, value dim 192)
    "tiny-hybrid": ModelConfig(
        vocab_size=512, d_model=64, n_layers=4, n_heads=4, max_seq_len=256, block_pattern=_HYBRID, full_attention_rope=False
    ),
    "olmo-hybrid-7b": ModelConfig(
        vocab_size=100278,
        d_model=3840,
        n_layers=32,
        n_heads=30,
        mlp_hidden=11008,
        max_seq_len=8192,
        block_pattern=_HYBRID,
        full_attention_rope=False,
        gdn_head_k_dim=96,
        gdn_head_v_dim=192,
    ),
}


@dataclass
class DataConfig:
    """Where the token shards are and how instances are cut from them."""

    paths: list[str] = field(default_factory=list)  # .npy files or folders (searched recursively)
    val_paths: list[str] = field(default_factory=list)  # held-out shards for evaluation
    seq_len: int = 4096  # tokens per training instance
    token_dtype: TokenDtype = "auto"
    seed: int = 0  # seeds the global instance order (with the epoch)
    eos_id: int | None = None  # if set, every shard must end with it (cheap format check)
    allow_fingerprint_mismatch: bool = False  # resume even if the data changed
    val_max_instances: int = 1024


@dataclass
class TrainConfig:
    global_batch_size: int = 8  # instances per optimizer step, over all ranks
    micro_batch_size: int = 2  # instances per forward pass on one rank
    max_steps: int = 100  # length of the run (and of the schedule by default)
    stop_at_step: int | None = None  # stop early (the schedule still spans max_steps)
    precision: Precision = "auto"
    activation_checkpointing: bool = False
    compile: bool = False
    z_loss: float = 1e-5
    clip_grad_norm: float = 1.0  # 0 disables clipping
    init_seed: int = 0  # seeds the weights (same weights on any number of ranks)
    # fsdp: every parameter sharded over all ranks. hsdp: hybrid sharding, a 2-D mesh
    # (replicate, shard): sharded within groups of shard_group_size ranks, replicated across
    # the groups (gradients reduce-scattered in a group, then all-reduced between groups)
    data_parallel: DataParallel = "fsdp"
    shard_group_size: int | None = None  # hsdp only; None: the ranks of one node (LOCAL_WORLD_SIZE)


@dataclass
class OptimConfig:
    lr: float = 4e-4
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1e-8
    weight_decay: float = 0.1
    decay_embeddings: bool = False  # OLMo 2: no weight decay on embeddings
    decay_norms: bool = True  # OLMo 2 decays norm weights


@dataclass
class ScheduleConfig:
    kind: ScheduleKind = "cosine"  # cosine (stage 1), linear_decay (stage 2), constant
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1  # cosine floor as a fraction of the peak
    start_lr: float | None = None  # linear_decay: None = the lr stored in init_from's checkpoint
    total_steps: int | None = None  # None: train.max_steps


@dataclass
class CheckpointConfig:
    save_dir: str = "runs/default"
    interval: int = 1000  # steps between checkpoints (0: only at the end)
    keep_last: int = 3  # newest non-permanent checkpoints kept
    permanent_interval: int = 0  # steps that are multiples of this are never deleted
    async_save: bool = True
    resume: bool = True  # resume from the newest complete checkpoint in save_dir
    # with resume: false, a save_dir that already holds checkpoints is refused (a new run
    # there would mix its checkpoints with the old ones and prune its own); overwrite: true
    # deletes the old step folders and metrics file first
    overwrite: bool = False
    init_from: str | None = None  # stage 2: a checkpoint folder to start from (new data/schedule)
    load_optimizer: bool = True  # with init_from: also take the optimizer state


@dataclass
class EvalConfig:
    interval: int = 0  # steps between evaluations (0: only at the end)
    at_end: bool = True


@dataclass
class LogConfig:
    interval: int = 1
    metrics_file: str = "metrics.jsonl"  # relative to checkpoint.save_dir
    peak_flops_per_device: float | None = None  # for MFU; None: known GPUs only


@dataclass
class ResilienceConfig:
    """What a run does about failures it cannot prevent: hangs, slow ranks, lost time
    (``train.watchdog``, ``train.stragglers``, ``train.ledger``; docs/train.md "Failures and
    recovery")."""

    # the process group's start and every collective until the first step is done (model
    # build, restore, the first step's compilation), then collective_timeout (as torchtitan)
    init_timeout: float = 600.0
    collective_timeout: float = 300.0
    # no step finished for this long (the first step: init_timeout): every thread's stack is
    # dumped and the rank exits with EXIT_HANG, which recovery restarts (0: no watchdog)
    step_timeout: float = 600.0
    # a rank whose mean step time over the last straggler_window steps is at least this many
    # times the fastest rank's is named, with its host, in the log (0: no straggler check)
    straggler_factor: float = 1.5
    straggler_window: int = 10
    # seconds between heartbeats in <save_dir>/goodput.jsonl (0: one per step)
    heartbeat_interval: float = 1.0


@dataclass
class PreflightConfig:
    """``python -m train.preflight`` and the same checks at start (``train.preflight``)."""

    enabled: bool = True  # run the checks at start (the command runs them regardless)
    min_write_mb_s: float = 20.0  # save_dir's write speed below this fails the check
    checkpoints_room: int = 2  # save_dir must have room for this many checkpoints
    matmul_size: int = 512  # the deterministic matmul's square size
    # a rank whose matmul takes this many times the median rank's is cordoned (the all-reduce
    # takes the same time on every rank: it is judged by its result only)
    slow_factor: float = 2.0
    allreduce_mb: float = 4.0  # size of the all-reduce of known values
    max_gpu_temperature_c: float = 85.0  # CUDA only
    max_foreign_gpu_memory_gb: float = 1.0  # CUDA only: memory held by other processes


@dataclass
class Config:
    run_name: str = "run"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    resilience: ResilienceConfig = field(default_factory=ResilienceConfig)
    preflight: PreflightConfig = field(default_factory=PreflightConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------
# loading


def _coerce(value: Any, tp: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if isinstance(value, bool) or value not in choices:
            raise ConfigError(f"{key}: expected one of {', '.join(map(str, choices))}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (item_tp,) = typing.get_args(tp)
        return [_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        # YAML 1.1 reads "1e-5" (no dot) as a string; accept it as the number it means.
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    return value


def _build(cls: type, data: Any, prefix: str) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            raise ConfigError(f"{prefix}{key}: unknown key (known: {', '.join(sorted(names))})")
    kwargs = {}
    for key, value in data.items():
        tp = hints[key]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a section
            kwargs[key] = _build(tp, value, f"{prefix}{key}.")
        else:
            kwargs[key] = _coerce(value, tp, f"{prefix}{key}")
    return cls(**kwargs)


def _apply_preset(raw_model: dict) -> dict:
    name = raw_model.get("preset")
    if name is None:
        return raw_model
    known = typing.get_args(PresetName)
    if isinstance(name, bool) or name not in known:
        raise ConfigError(f"model.preset: unknown preset {name!r} (known: {', '.join(known)})")
    return {**dataclasses.asdict(PRESETS[name]), **raw_model}


def set_override(raw: dict, assignment: str) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to the raw config mapping."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected key=value")
    key, text = assignment.split("=", 1)
    parts = key.strip().split(".")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: {part} is not a section")
    node[parts[-1]] = yaml.safe_load(text)


def from_dict(raw: dict, overrides: list[str] | None = None) -> Config:
    raw = copy.deepcopy(raw or {})  # overrides go into nested sections: never the caller's
    for assignment in overrides or []:
        set_override(raw, assignment)
    if isinstance(raw.get("model"), dict):
        raw["model"] = _apply_preset(dict(raw["model"]))
    cfg = _build(Config, raw, "")
    validate(cfg)
    return cfg


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config: {e.strerror}") from None
    return from_dict(raw or {}, overrides)


def _at_least(key: str, value: int | float | None, low: int | float) -> None:
    if value is not None and value < low:
        raise ConfigError(f"{key}: must be at least {low}, got {value}")


def validate(cfg: Config) -> None:
    """Ranges and cross-field checks that a type cannot express (types and choices are
    checked while building)."""
    m, d, t, s = cfg.model, cfg.data, cfg.train, cfg.schedule
    for key, value, low in [
        ("model.vocab_size", m.vocab_size, 1),
        ("model.vocab_multiple", m.vocab_multiple, 1),
        ("model.d_model", m.d_model, 1),
        ("model.n_layers", m.n_layers, 1),
        ("model.n_heads", m.n_heads, 1),
        ("model.n_kv_heads", m.n_kv_heads, 1),
        ("model.mlp_hidden", m.mlp_hidden, 1),
        ("model.mlp_multiple", m.mlp_multiple, 1),
        ("model.max_seq_len", m.max_seq_len, 2),
        ("model.sliding_window", m.sliding_window, 1),
        ("model.gdn_n_heads", m.gdn_n_heads, 1),
        ("model.gdn_head_k_dim", m.gdn_head_k_dim, 1),
        ("model.gdn_head_v_dim", m.gdn_head_v_dim, 1),
        ("model.gdn_conv_size", m.gdn_conv_size, 1),
        ("model.gdn_chunk_size", m.gdn_chunk_size, 1),
        ("data.seq_len", d.seq_len, 2),
        ("data.eos_id", d.eos_id, 0),
        ("data.val_max_instances", d.val_max_instances, 0),
        ("train.global_batch_size", t.global_batch_size, 1),
        ("train.micro_batch_size", t.micro_batch_size, 1),
        ("train.max_steps", t.max_steps, 1),
        ("train.stop_at_step", t.stop_at_step, 1),
        ("train.z_loss", t.z_loss, 0),
        ("train.clip_grad_norm", t.clip_grad_norm, 0),
        ("train.shard_group_size", t.shard_group_size, 1),
        ("optim.lr", cfg.optim.lr, 0),
        ("optim.eps", cfg.optim.eps, 0),
        ("optim.weight_decay", cfg.optim.weight_decay, 0),
        ("schedule.warmup_steps", s.warmup_steps, 0),
        ("schedule.min_lr_ratio", s.min_lr_ratio, 0),
        ("schedule.start_lr", s.start_lr, 0),
        ("schedule.total_steps", s.total_steps, 1),
        ("checkpoint.interval", cfg.checkpoint.interval, 0),
        ("checkpoint.keep_last", cfg.checkpoint.keep_last, 1),
        ("checkpoint.permanent_interval", cfg.checkpoint.permanent_interval, 0),
        ("eval.interval", cfg.eval.interval, 0),
        ("log.interval", cfg.log.interval, 1),
        ("resilience.init_timeout", cfg.resilience.init_timeout, 1),
        ("resilience.collective_timeout", cfg.resilience.collective_timeout, 1),
        ("resilience.step_timeout", cfg.resilience.step_timeout, 0),
        ("resilience.straggler_factor", cfg.resilience.straggler_factor, 0),
        ("resilience.straggler_window", cfg.resilience.straggler_window, 1),
        ("resilience.heartbeat_interval", cfg.resilience.heartbeat_interval, 0),
        ("preflight.min_write_mb_s", cfg.preflight.min_write_mb_s, 0),
        ("preflight.checkpoints_room", cfg.preflight.checkpoints_room, 0),
        ("preflight.matmul_size", cfg.preflight.matmul_size, 16),
        ("preflight.slow_factor", cfg.preflight.slow_factor, 1),
        ("preflight.allreduce_mb", cfg.preflight.allreduce_mb, 0),
    ]:
        _at_least(key, value, low)
    if m.d_model % m.n_heads:
        raise ConfigError(f"model.n_heads: {m.n_heads} does not divide d_model {m.d_model}")
    if m.n_kv_heads is not None and m.n_heads % m.n_kv_heads:
        raise ConfigError(f"model.n_kv_heads: {m.n_kv_heads} does not divide n_heads {m.n_heads}")
    _validate_blocks(m)
    if d.token_dtype == "uint16" and m.vocab_size > 2**16:
        raise ConfigError(f"data.token_dtype: uint16 cannot hold the token ids of model.vocab_size {m.vocab_size} (use auto or uint32)")
    if d.eos_id is not None and d.eos_id >= m.vocab_size:
        raise ConfigError(f"data.eos_id: {d.eos_id} is not below model.vocab_size {m.vocab_size}")
    if d.seq_len > m.max_seq_len:
        raise ConfigError(f"data.seq_len: {d.seq_len} exceeds model.max_seq_len {m.max_seq_len}")
    if t.global_batch_size % t.micro_batch_size:
        raise ConfigError(
            f"train.global_batch_size: {t.global_batch_size} is not a multiple of train.micro_batch_size {t.micro_batch_size}"
        )
    if t.shard_group_size is not None and t.data_parallel != "hsdp":
        raise ConfigError(
            f"train.shard_group_size: only used with train.data_parallel: hsdp (it is {t.data_parallel}); remove it or set hsdp"
        )
    if s.min_lr_ratio > 1:
        raise ConfigError(f"schedule.min_lr_ratio: must be at most 1, got {s.min_lr_ratio}")
    if len(cfg.optim.betas) != 2 or not all(0 <= b < 1 for b in cfg.optim.betas):
        raise ConfigError(f"optim.betas: expected two numbers in [0, 1), got {cfg.optim.betas}")


def _validate_blocks(m: ModelConfig) -> None:
    if not m.block_pattern:
        raise ConfigError("model.block_pattern: empty; list at least one block kind")
    kinds = set(m.block_pattern)
    uses_rope = ("full_attention" in kinds and m.full_attention_rope) or ("sliding_attention" in kinds and m.sliding_attention_rope)
    if uses_rope and (m.d_model // m.n_heads) % 2:
        raise ConfigError("model.n_heads: head size must be even for RoPE")
    if "gated_deltanet" in kinds and m.gdn_head_k_dim is None:
        heads = m.gdn_n_heads or m.n_heads
        if int(0.75 * m.d_model / heads) < 1:
            raise ConfigError(f"model.gdn_head_k_dim: 0.75 * d_model / {heads} heads is below 1; set it")


def check_for_training(cfg: Config, world: int) -> None:
    """The checks only a training run needs (``validate`` also passes configs used to build
    a model or evaluate): data to train on, and a global batch that splits into whole
    micro-batches on each of ``world`` ranks."""
    t = cfg.train
    if not cfg.data.paths:
        raise ConfigError("data.paths: empty; list the token shards (.npy files or folders) to train on")
    if t.global_batch_size % (world * t.micro_batch_size):
        raise ConfigError(
            f"train.global_batch_size: {t.global_batch_size} must be a multiple of ranks ({world}) "
            f"x train.micro_batch_size ({t.micro_batch_size})"
        )
    if t.data_parallel == "hsdp" and t.shard_group_size is not None and world % t.shard_group_size:
        raise ConfigError(f"train.shard_group_size: {t.shard_group_size} does not divide the {world} ranks of this run")


def dump_config(cfg: Config) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
