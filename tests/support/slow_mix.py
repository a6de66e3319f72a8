"""Run a mix spec with every shard task (``MIX_SLOW_PHASE=shard``) or sample task (``sample``)
slowed by ``MIX_SLOW_SECONDS``, so a test can kill the run inside that phase. The slowing wraps
the stage's task from outside; the stage has no test hooks.

    python -m tests.support.slow_mix SPEC_JSON
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import orjson

from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from mixers.config import MixConfig
from mixers.stage import MixStage


class SlowMixStage(MixStage):
    """The mix stage with the tasks of phase ``$MIX_SLOW_PHASE`` slowed (a class importable by
    name, so it pickles to workers)."""

    def phases(self):  # type: ignore[no-untyped-def]
        return [replace(p, run=self._slow) if p.name == os.environ.get("MIX_SLOW_PHASE") else p for p in super().phases()]

    def _slow(self, task, quarantine, ctx):  # type: ignore[no-untyped-def]
        time.sleep(float(os.environ.get("MIX_SLOW_SECONDS", "0.3")))
        original = next(p for p in super().phases() if p.name == os.environ["MIX_SLOW_PHASE"])
        return original.run(task, quarantine, ctx)


if __name__ == "__main__":
    run_stage(SlowMixStage(load_config(MixConfig, None, orjson.loads(sys.argv[1]))))
