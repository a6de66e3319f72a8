"""Trainer configs: YAML -> dataclasses, validated at load with errors that name the key."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.config import ConfigError, from_dict, load_config  # noqa: E402

CONFIGS = ["tiny.yaml", "olmo2-1b-stage1.yaml", "olmo2-1b-stage2.yaml", "olmo2-7b-stage1.yaml", "olmo2-7b-stage2.yaml"]


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
    from pathlib import Path

    cfg = load_config(Path(__file__).parent.parent / "train" / "configs" / name)
    assert cfg.train.global_batch_size > 0


def test_cli_reports_config_error_without_traceback(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("checkpoint:\n  keep_lst: 2\n")
    r = subprocess.run([sys.executable, "-m", "train", "--config", str(p)], capture_output=True, text=True)
    assert r.returncode == 2
    assert "checkpoint.keep_lst: unknown key" in r.stderr and "Traceback" not in r.stderr


def test_slurm_template_gives_ranks_time_to_save():
    """torchrun SIGKILLs the ranks --shutdown-timeout s after forwarding SIGTERM (default 30):
    the template must raise it to just under SLURM's --signal=TERM@<lead> and be a flag this
    torch's torchrun accepts."""
    import re
    import shlex
    from pathlib import Path

    pytest.importorskip("torch")
    from torch.distributed.run import get_args_parser

    text = (Path(__file__).resolve().parent.parent / "train" / "launch" / "slurm.sbatch").read_text()
    lead = int(re.search(r"#SBATCH --signal=TERM@(\d+)", text).group(1))
    timeout = int(re.search(r"SHUTDOWN_TIMEOUT=\$\{SHUTDOWN_TIMEOUT:-(\d+)\}", text).group(1))
    assert 60 <= timeout < lead
    assert '--shutdown-timeout "$SHUTDOWN_TIMEOUT"' in text
    assert "export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK" in text and "mkdir -p logs" in text
    # the torchrun command line of the template parses with this torch
    cmd = text[text.index("srun --kill-on-bad-exit=1 torchrun"):].replace("\\\n", " ").split("\n")[0]
    cmd = cmd.replace('"$SHUTDOWN_TIMEOUT"', str(timeout)).replace('"$@"', "")
    argv = shlex.split(cmd)[3:]
    args = get_args_parser().parse_args([a if not a.startswith("$") else "1" for a in argv])
    assert args.shutdown_timeout == timeout
