"""The tokenize stage with slow write tasks, for kill-and-resume tests (no hook inside the stage itself).

``python -m tests.support.slow_tokenize CONFIG_JSON`` runs it; ``TOKENIZE_WRITE_DELAY``
(seconds) makes each write task sleep first, so a test can kill the run between two of them.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import orjson

from dolma_pipe.config import load_config
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.runner import run_stage
from dolma_pipe.stage import Phase, RunContext, Task, TaskOutput
from dolma_pipe.stages.tokenize import TokenizeConfig, TokenizeStage


class SlowTokenizeStage(TokenizeStage):
    """The tokenize stage with its write phase's run wrapped (a class importable by name, so it
    pickles to workers)."""

    def phases(self) -> list[Phase]:
        return [replace(p, run=self._slow_write) if p.name == "write" else p for p in super().phases()]

    def _slow_write(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        time.sleep(float(os.environ.get("TOKENIZE_WRITE_DELAY", "0")))
        write = next(p for p in super().phases() if p.name == "write")
        return write.run(task, quarantine, ctx)


if __name__ == "__main__":
    run_stage(SlowTokenizeStage(load_config(TokenizeConfig, None, orjson.loads(sys.argv[1]))))
