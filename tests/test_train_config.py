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
