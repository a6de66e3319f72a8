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
    """6 steps on 2 ranks, async checkpoints at steps 3 and 6 (the step-3 write delayed)."""
    if "stage1" not in _cache:
        from train.testing import launch, make_shards, tiny_config, write_config

        root = tmp_path_factory.mktemp("train_stage1")
        data = make_shards(root / "data")
        raw = tiny_config(root / "A", data)
        cfg = write_config(root / "a.yaml", raw)
        result = launch(cfg, nproc=2, env={"DOLMA_TRAIN_TEST_WRITE_DELAY": WRITE_DELAY_S})
        assert result.returncode == 0, result.stdout + result.stderr
        _cache["stage1"] = SimpleNamespace(root=root, data=data, raw=raw, config=cfg,
                                           save_dir=Path(raw["checkpoint"]["save_dir"]), result=result)
    return _cache["stage1"]
