"""Run a mix spec with every shard task (``MIX_SLOW_PHASE=shard``) or sample task (``sample``)
slowed by ``MIX_SLOW_SECONDS``, so a test can kill the run inside that phase. The slowing wraps
the stage's task from outside; the stage has no test hooks.

    python -m tests.mixers.slow_mix SPEC_JSON
"""

from __future__ import annotations

import os
import sys
import time

import orjson

from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from mixers.config import MixConfig
from mixers.stage import MixStage


class SlowMixStage(MixStage):
    def _shard(self, task, quarantine, ctx):  # type: ignore[no-untyped-def]
        if os.environ.get("MIX_SLOW_PHASE") == "shard":
            time.sleep(float(os.environ.get("MIX_SLOW_SECONDS", "0.3")))
        return super()._shard(task, quarantine, ctx)

    def _sample(self, task, quarantine, ctx):  # type: ignore[no-untyped-def]
        if os.environ.get("MIX_SLOW_PHASE") == "sample":
            time.sleep(float(os.environ.get("MIX_SLOW_SECONDS", "0.3")))
        return super()._sample(task, quarantine, ctx)


if __name__ == "__main__":
    run_stage(SlowMixStage(load_config(MixConfig, None, orjson.loads(sys.argv[1]))))
