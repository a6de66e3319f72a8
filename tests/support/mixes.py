"""The mix stage in tests: a run in this process, and what a seed's run wrote for a source."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

from dolma_pipe.config import load_config
from dolma_pipe.runner import RunSummary, run_stage
from mixers.config import MixConfig
from mixers.stage import MixStage


def run(config: dict, executor: Any = None) -> RunSummary:
    """``config`` run by the mix stage, its progress output kept quiet."""
    return run_stage(MixStage(load_config(MixConfig, None, config)), executor=executor, stream=io.StringIO())


def seed_docs(out: Path, seed: int, source: str) -> list[dict]:
    """The documents of ``source`` the run of ``seed`` wrote under ``out``, in shard order."""
    rows = []
    for p in sorted((out / f"seed-{seed}" / "documents").glob(f"{source}-*.jsonl.gz")):
        with gzip.open(p, "rt") as fh:
            rows += [json.loads(line) for line in fh]
    return rows
