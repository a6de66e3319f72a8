"""Shared, expensive trainer fixtures: one real 2-rank stage-1 run per test session.

Several test files need a finished stage-1 run (resume, reshard, stage 2, soup, export).
It is launched once (torchrun, 2 gloo ranks) and cached here, so the whole trainer suite
pays for it once.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

_cache: dict[str, SimpleNamespace] = {}

# A background checkpoint write that takes this long is still running for the next steps.
WRITE_DELAY_S = "1.0"


def stage1(tmp_path_factory) -> SimpleNamespace:
    """6 steps on 2 ranks, async checkpoints at steps 3 and 6 (the step-3 write delayed),
    evaluation every 3 steps and at the end."""
    if "stage1" not in _cache:
        from train.testing import launch, make_shards, tiny_config, write_config

        root = tmp_path_factory.mktemp("train_stage1")
        data = make_shards(root / "data")
        raw = tiny_config(root / "A", data, eval={"interval": 3})
        cfg = write_config(root / "a.yaml", raw)
        result = launch(cfg, nproc=2, env={"DOLMA_TRAIN_TEST_WRITE_DELAY": WRITE_DELAY_S})
        assert result.returncode == 0, result.stdout + result.stderr
        _cache["stage1"] = SimpleNamespace(root=root, data=data, raw=raw, config=cfg,
                                           save_dir=Path(raw["checkpoint"]["save_dir"]), result=result)
    return _cache["stage1"]


def one_rank_trainer(monkeypatch, raw: dict, overrides: list[str] | None = None):
    """A ``Trainer`` in this process (a one-rank gloo group). The env vars of the group are set
    through ``monkeypatch`` (undone after the test, so later torchrun launches do not inherit
    them); if the constructor fails, the group is torn down before the error propagates."""
    from train import dist as tdist
    from train.config import from_dict
    from train.trainer import Trainer

    env = dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(tdist.free_port()))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        return Trainer(from_dict(raw, overrides))
    except BaseException:
        tdist.teardown()
        raise
