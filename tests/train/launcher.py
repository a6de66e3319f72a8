"""Shared trainer test helpers: one real 2-rank stage-1 run per test session, an in-process
one-rank trainer, and a launcher that puts test hooks *around* the unchanged trainer.

Several test files need a finished stage-1 run (resume, reshard, stage 2, soup, export).
It is launched once (torchrun, 2 gloo ranks) and cached here, so the whole trainer suite
pays for it once.

The hooks (a SIGTERM at a chosen step, slow checkpoint writes) are not in ``train/``: the
trainer has no test switch. ``python -m tests.train.launcher [hooks] --config ...`` patches
them in from outside (a wrapper around ``Trainer.train_step``, a slower storage writer class
on ``Checkpointer``) and then runs ``python -m train``'s own ``main``; ``launch_with_hooks``
starts it under torchrun like ``train.testing.launch``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

_cache: dict[str, SimpleNamespace] = {}

# A background checkpoint write that takes this long is still running for the next steps.
WRITE_DELAY_S = 1.0


def launch_with_hooks(config, nproc: int = 2, sigterm_at: str | None = None, write_delay: float | None = None, **kw):
    """``train.testing.launch`` through this module's hooks.

    ``sigterm_at``: rank 0 sends itself SIGTERM during step N (``"N"`` or ``"N:before"``:
    before step N's all-reduce, so every rank must stop after step N) or ``"N:after"`` (just
    after step N's all-reduce, before the loop reads its result: the window in which a rank
    used to stop alone; every rank must stop together after step N+1).
    ``write_delay``: each rank's checkpoint writer sleeps this long before writing.
    """
    from train.testing import launch

    args = []
    if sigterm_at is not None:
        args += ["--sigterm-at", sigterm_at]
    if write_delay is not None:
        args += ["--write-delay", str(write_delay)]
    return launch(config, nproc=nproc, module="tests.train.launcher", module_args=args, **kw)


def stage1(tmp_path_factory) -> SimpleNamespace:
    """6 steps on 2 ranks, async checkpoints at steps 3 and 6 (the writes delayed by
    ``WRITE_DELAY_S``), evaluation every 3 steps and at the end."""
    if "stage1" not in _cache:
        from train.testing import make_shards, tiny_config, write_config

        root = tmp_path_factory.mktemp("train_stage1")
        data = make_shards(root / "data")
        raw = tiny_config(root / "A", data, eval={"interval": 3})
        cfg = write_config(root / "a.yaml", raw)
        result = launch_with_hooks(cfg, nproc=2, write_delay=WRITE_DELAY_S)
        assert result.returncode == 0, result.stdout + result.stderr
        _cache["stage1"] = SimpleNamespace(
            root=root, data=data, raw=raw, config=cfg, save_dir=Path(raw["checkpoint"]["save_dir"]), result=result
        )
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


# -- the launcher with hooks (runs in each rank's process) ----------------------------------


def _install_sigterm(spec: str) -> None:
    from train.trainer import Trainer

    step_text, _, phase = spec.partition(":")
    step, phase = int(step_text), phase or "before"
    if phase not in ("before", "after"):
        raise SystemExit(f"--sigterm-at: phase must be before|after, got {phase!r}")
    inner = Trainer.train_step

    def train_step(self):
        if phase == "before" and self.rank == 0 and self.step + 1 == step:
            os.kill(os.getpid(), signal.SIGTERM)  # lands before this step's all-reduce
        out = inner(self)
        if phase == "after" and self.rank == 0 and self.step == step:
            os.kill(os.getpid(), signal.SIGTERM)  # after the all-reduce, before the loop reads it
        return out

    Trainer.train_step = train_step
    _say(f"test hook: SIGTERM to rank 0 at step {step} ({phase} its all-reduce)")


def _install_write_delay(seconds: float) -> None:
    from train.checkpoint import Checkpointer

    base = Checkpointer.storage_writer

    class SlowWriter(base):
        def write_data(self, plan, planner):
            time.sleep(seconds)
            return super().write_data(plan, planner)

    Checkpointer.storage_writer = SlowWriter
    _say(f"test hook: checkpoint writes delayed by {seconds} s")


def _say(msg: str) -> None:
    if os.environ.get("RANK", "0") == "0":
        print(msg, flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.train.launcher", description="python -m train with test hooks; other arguments go to it"
    )
    ap.add_argument("--sigterm-at", metavar="N[:before|:after]")
    ap.add_argument("--write-delay", type=float, metavar="SECONDS")
    hooks, rest = ap.parse_known_args(argv)
    if hooks.sigterm_at:
        _install_sigterm(hooks.sigterm_at)
    if hooks.write_delay:
        _install_write_delay(hooks.write_delay)
    from train.__main__ import main as train_main

    return train_main(rest)


if __name__ == "__main__":
    from train.__main__ import _exit

    _exit(main(sys.argv[1:]))
