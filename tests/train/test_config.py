"""Trainer configs: YAML -> dataclasses, validated at load with errors that name the key."""

from __future__ import annotations

import subprocess
import sys

import pytest

from train.ledger import read_ledger

pytest.importorskip("torch")
pytestmark = pytest.mark.train

from tests.support.repo import REPO_ROOT  # noqa: E402
from train.config import ConfigError, from_dict, load_config  # noqa: E402

CONFIGS = ["tiny.yaml", "tiny-stage2.yaml", "olmo2-1b-stage1.yaml", "olmo2-1b-stage2.yaml", "olmo2-7b-stage1.yaml", "olmo2-7b-stage2.yaml"]


def test_unknown_key_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("model:\n  d_modle: 64\n")
    with pytest.raises(ConfigError, match=r"model\.d_modle: unknown key"):
        load_config(p)


def test_unknown_section_and_bad_types_are_named():
    with pytest.raises(ConfigError, match=r"^trian: unknown key"):
        from_dict({"trian": {}})
    with pytest.raises(ConfigError, match=r"train\.max_steps: expected an integer"):
        from_dict({"train": {"max_steps": "ten"}})
    with pytest.raises(ConfigError, match=r"optim\.lr: expected a number"):
        from_dict({"optim": {"lr": "fast"}})
    with pytest.raises(ConfigError, match=r"model\.preset: unknown preset"):
        from_dict({"model": {"preset": "olmo9"}})


def test_yaml_exponent_without_dot_is_a_number_and_presets_fill_in():
    cfg = from_dict({"optim": {"lr": "4e-4"}, "model": {"preset": "olmo2-7b", "n_layers": 2}})
    assert cfg.optim.lr == 4e-4
    assert (cfg.model.d_model, cfg.model.n_layers, cfg.model.mlp_hidden) == (4096, 2, 11008)


def test_overrides_are_validated_too():
    cfg = from_dict({}, ["data.seed=7", "checkpoint.init_from=/x/step10"])
    assert cfg.data.seed == 7 and cfg.checkpoint.init_from == "/x/step10"
    with pytest.raises(ConfigError, match=r"data\.sed: unknown key"):
        from_dict({}, ["data.sed=7"])


@pytest.mark.parametrize("name", CONFIGS)
def test_example_configs_load(name):

    cfg = load_config(REPO_ROOT / "train" / "configs" / name)
    assert cfg.train.global_batch_size > 0


def test_cli_reports_config_error_without_traceback(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("checkpoint:\n  keep_lst: 2\n")
    r = subprocess.run([sys.executable, "-m", "train", "--config", str(p)], capture_output=True, text=True)
    assert r.returncode == 2
    assert "checkpoint.keep_lst: unknown key" in r.stderr and "Traceback" not in r.stderr


def test_enumerations_are_literal_types_checked_at_load():
    import typing

    from train.config import PRESETS, DataConfig, ModelConfig, ScheduleConfig, TrainConfig

    hints = {cls: typing.get_type_hints(cls) for cls in (ModelConfig, DataConfig, TrainConfig, ScheduleConfig)}
    assert typing.get_args(hints[DataConfig]["token_dtype"]) == ("auto", "uint16", "uint32")
    assert typing.get_args(hints[TrainConfig]["precision"]) == ("auto", "fp32", "bf16")
    assert typing.get_args(hints[ScheduleConfig]["kind"]) == ("cosine", "linear_decay", "constant")
    preset = typing.get_args(hints[ModelConfig]["preset"])[0]  # PresetName | None
    assert set(typing.get_args(preset)) == set(PRESETS)  # the Literal lists exactly the presets
    for raw, message in [
        ({"train": {"precision": "fp16"}}, r"^train\.precision: expected one of auto, fp32, bf16, got 'fp16'$"),
        ({"train": {"precision": True}}, r"^train\.precision: expected one of auto, fp32, bf16, got True$"),
        ({"schedule": {"kind": "cos"}}, r"^schedule\.kind: expected one of cosine, linear_decay, constant, got 'cos'$"),
        ({"data": {"token_dtype": "int16"}}, r"^data\.token_dtype: expected one of auto, uint16, uint32"),
        ({"model": {"preset": 7}}, r"^model\.preset: unknown preset 7 \(known: tiny, small, olmo2-1b"),
    ]:
        with pytest.raises(ConfigError, match=message):
            from_dict(raw)
    assert from_dict({"train": {"precision": "bf16"}, "schedule": {"kind": "constant"}}).train.precision == "bf16"


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"log": {"interval": 0}}, r"^log\.interval: must be at least 1, got 0$"),
        ({"train": {"max_steps": 0}}, r"^train\.max_steps: must be at least 1"),
        ({"optim": {"lr": -1}}, r"^optim\.lr: must be at least 0"),
        ({"checkpoint": {"keep_last": 0}}, r"^checkpoint\.keep_last: must be at least 1"),
        (
            {"model": {"vocab_size": 100278}, "data": {"token_dtype": "uint16"}},
            r"^data\.token_dtype: uint16 cannot hold the token ids of model\.vocab_size 100278",
        ),
        ({"data": {"eos_id": 512}}, r"^data\.eos_id: 512 is not below model\.vocab_size 512"),
        (
            {"train": {"global_batch_size": 6, "micro_batch_size": 4}},
            r"^train\.global_batch_size: 6 is not a multiple of train\.micro_batch_size 4",
        ),
        ({"optim": {"betas": [0.9, 1.5]}}, r"^optim\.betas: expected two numbers in \[0, 1\)"),
        ({"schedule": {"min_lr_ratio": 2}}, r"^schedule\.min_lr_ratio: must be at most 1"),
    ],
)
def test_ranges_and_contradictions_are_named(raw, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(raw)


def test_checks_that_need_the_launch():
    from train.config import check_for_training

    cfg = from_dict({"data": {"paths": ["x"]}, "train": {"global_batch_size": 8, "micro_batch_size": 2}})
    check_for_training(cfg, 4)
    with pytest.raises(
        ConfigError,
        match=r"^train\.global_batch_size: 8 must be a multiple of ranks \(3\) x "
        r"train\.micro_batch_size \(2\)",
    ):
        check_for_training(cfg, 3)
    with pytest.raises(ConfigError, match=r"^data\.paths: empty"):
        check_for_training(from_dict({}), 1)


def _cli(config, *args, env=None):
    import os

    repo = str(REPO_ROOT)
    full_env = {**os.environ, "PYTHONPATH": repo, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "train", "--config", str(config), *args], capture_output=True, text=True, env=full_env, cwd=repo, timeout=120
    )


@pytest.mark.slow
def test_cli_config_errors_are_one_line_before_training(tmp_path):
    """Mistakes found when the file loads, and ones only a launch can see (ranks, an existing
    save_dir), are all one ``config error`` line with exit status 2: no traceback, no SystemExit
    from inside the trainer."""
    import json

    from train.testing import make_shards, tiny_config, write_config

    data = make_shards(tmp_path / "data", n_train_shards=1)
    cfg = write_config(tmp_path / "c.yaml", tiny_config(tmp_path / "run", data))
    cases = [
        (["--set", "train.precision=fp16"], None, "train.precision: expected one of auto, fp32, bf16, got 'fp16'"),
        (["--set", "data.paths=[]"], None, "data.paths: empty"),
        # WORLD_SIZE as torchrun sets it: 8 instances do not split into micro-batches of 2 on 3 ranks
        ([], {"WORLD_SIZE": "3", "RANK": "0"}, "train.global_batch_size: 8 must be a multiple of ranks (3)"),
    ]
    for args, env, message in cases:
        r = _cli(cfg, *args, env=env)
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith(f"config error: {message}"), r.stderr
    assert not (tmp_path / "run").exists()  # nothing was started
    # found by the trainer while it is built: a fresh run into a save_dir that holds a checkpoint
    step = tmp_path / "run" / "step3"
    step.mkdir(parents=True)
    (step / "trainer_state.json").write_text(json.dumps({"step": 3}))
    (step / ".metadata").write_bytes(b"x")
    r = _cli(cfg, "--set", "checkpoint.resume=false")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().startswith("config error: checkpoint.resume: false, but ") and "Traceback" not in r.stderr
    assert [line for line in r.stderr.splitlines() if line.strip()] == [r.stderr.strip()], r.stderr
    # no step, no metrics: only the goodput ledger's record of the attempt and why it ended
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["goodput.jsonl", "step3"]
    (end,) = [r for r in read_ledger(tmp_path / "run" / "goodput.jsonl") if r["event"] == "exit"]
    assert end["status"] == 2 and end["reason"] == "error" and "checkpoint.resume: false" in end["message"]


def test_slurm_template_gives_ranks_time_to_save():
    """torchrun SIGKILLs the ranks --shutdown-timeout s after forwarding SIGTERM (default 30):
    the template must raise it to just under SLURM's --signal=TERM@<lead> and be a flag this
    torch's torchrun accepts."""
    import re
    import shlex

    pytest.importorskip("torch")
    from torch.distributed.run import get_args_parser

    text = (REPO_ROOT / "train" / "launch" / "slurm.sbatch").read_text()
    lead = int(re.search(r"#SBATCH --signal=TERM@(\d+)", text).group(1))
    timeout = int(re.search(r"SHUTDOWN_TIMEOUT=\$\{SHUTDOWN_TIMEOUT:-(\d+)\}", text).group(1))
    assert 60 <= timeout < lead
    assert '--shutdown-timeout "$SHUTDOWN_TIMEOUT"' in text
    assert "export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK" in text and "mkdir -p logs" in text
    # the template's launcher command parses, and the torchrun command it runs parses with this torch
    from train.launch.launcher import Launch, parser, torchrun_command

    cmd = text[text.index("exec python -m train.launch --slurm") :].replace("\\\n", " ").split("\n")[0]
    cmd = cmd.replace('"$SHUTDOWN_TIMEOUT"', str(timeout)).replace('"$@"', "")
    argv = [a if not a.startswith("$") else "1" for a in shlex.split(cmd)[4:]]
    args = parser().parse_args(argv)
    assert args.slurm and args.shutdown_timeout == timeout
    run = torchrun_command(Launch("c.yaml", shutdown_timeout=args.shutdown_timeout, slurm=True), ["n0", "n1"], 1)
    at = run.index("train.launch.torchrun")
    assert run[at + 1] == "--restart-grace=5"  # ours, taken off before torchrun parses the rest
    torchrun = run[at + 2 : run.index("-m", at)]
    args = get_args_parser().parse_args([*torchrun, "train"])
    assert args.shutdown_timeout == timeout
