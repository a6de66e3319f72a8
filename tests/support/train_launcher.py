"""Shared trainer test helpers: one real 2-rank stage-1 run per test session, an in-process
one-rank trainer, and a launcher that puts test hooks *around* the unchanged trainer.

Several test files need a finished stage-1 run (resume, reshard, stage 2, soup, export).
It is launched once (torchrun, 2 gloo ranks) and cached here, so the whole trainer suite
pays for it once.

The hooks (a SIGTERM at a chosen step, a hard kill, checkpoint writes held back until the
training loop has moved on) are not in ``train/``: the trainer has no test switch.
``python -m tests.support.train_launcher [hooks] --config ...`` patches them in from outside (wrappers
around ``Trainer.train_step`` and ``Trainer._log``, a storage writer class on
``Checkpointer``) and then runs ``python -m train``'s own ``main``; ``launch_with_hooks``
starts it under torchrun like ``train.testing.launch``. No hook depends on how fast the
machine is: a held write waits for an event (the trainer finishing a step), not a duration.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

_cache: dict[str, SimpleNamespace] = {}

# stage1's background write of the step-3 checkpoint is held until step HOLD_UNTIL_STEP is done
HOLD_UNTIL_STEP = 4
# a held write gives up waiting after this long (only if the save blocked the loop: a failure)
HOLD_TIMEOUT_S = 120.0


def launch_with_hooks(
    config, nproc: int = 2, sigterm_at: str | None = None, hold_writes_until: int | None = None, kill_after: int | None = None, **kw
):
    """``train.testing.launch`` through this module's hooks.

    ``sigterm_at``: rank 0 sends itself SIGTERM during step N (``"N"`` or ``"N:before"``:
    before step N's all-reduce, so every rank must stop after step N) or ``"N:after"`` (just
    after step N's all-reduce, before the loop reads its result: the window in which a rank
    used to stop alone; every rank must stop together after step N+1).
    ``hold_writes_until``: each rank's checkpoint writer waits until that rank has finished
    step N before it writes (so a background save is still in flight while the loop trains).
    ``kill_after``: every rank SIGKILLs itself right after logging step N (a hard kill: no
    handler runs, nothing is saved).
    """
    from train.testing import launch

    args = []
    if sigterm_at is not None:
        args += ["--sigterm-at", sigterm_at]
    if hold_writes_until is not None:
        args += ["--hold-writes-until", str(hold_writes_until)]
    if kill_after is not None:
        args += ["--kill-after", str(kill_after)]
    return launch(config, nproc=nproc, module="tests.support.train_launcher", module_args=args, **kw)


def stage1(tmp_path_factory) -> SimpleNamespace:
    """6 steps on 2 ranks, async checkpoints at steps 3 and 6 (the write of step 3 held until
    step ``HOLD_UNTIL_STEP`` is done), evaluation every 3 steps and at the end."""
    if "stage1" not in _cache:
        from train.testing import make_shards, tiny_config, write_config

        root = tmp_path_factory.mktemp("train_stage1")
        data = make_shards(root / "data")
        raw = tiny_config(root / "A", data, eval={"interval": 3})
        cfg = write_config(root / "a.yaml", raw)
        result = launch_with_hooks(cfg, nproc=2, hold_writes_until=HOLD_UNTIL_STEP)
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


_steps_done = threading.Condition()
_last_step = [0]


def _install_step_tracker() -> None:
    """Publish each finished step to the hooks that wait for one (a held checkpoint write)."""
    from train.trainer import Trainer

    inner = Trainer.train_step

    def train_step(self):
        out = inner(self)
        with _steps_done:
            _last_step[0] = self.step
            _steps_done.notify_all()
        return out

    Trainer.train_step = train_step


def _install_write_hold(step: int) -> None:
    from train.checkpoint import Checkpointer

    base = Checkpointer.storage_writer

    class HeldWriter(base):
        def write_data(self, plan, planner):
            with _steps_done:
                ok = _steps_done.wait_for(lambda: _last_step[0] >= step, timeout=HOLD_TIMEOUT_S)
            name = Path(str(self.path)).name
            _say(f"test hook: write of {name} held until step {step} was done: {'yes' if ok else 'NO (timed out)'}")
            return super().write_data(plan, planner)

    Checkpointer.storage_writer = HeldWriter
    _install_step_tracker()
    _say(f"test hook: checkpoint writes held until step {step} is done")


def _install_kill(step: int) -> None:
    from train.trainer import Trainer

    inner = Trainer._log

    def _log(self, m):
        inner(self, m)
        if m.get("step") == step and "loss" in m:
            _say(f"test hook: SIGKILL after logging step {step}")
            os.kill(os.getpid(), signal.SIGKILL)

    Trainer._log = _log


def _say(msg: str) -> None:
    if os.environ.get("RANK", "0") == "0":
        print(msg, flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.support.train_launcher", description="python -m train with test hooks; other arguments go to it"
    )
    ap.add_argument("--sigterm-at", metavar="N[:before|:after]")
    ap.add_argument("--hold-writes-until", type=int, metavar="STEP")
    ap.add_argument("--kill-after", type=int, metavar="STEP")
    hooks, rest = ap.parse_known_args(argv)
    if hooks.sigterm_at:
        _install_sigterm(hooks.sigterm_at)
    if hooks.hold_writes_until is not None:
        _install_write_hold(hooks.hold_writes_until)
    if hooks.kill_after is not None:
        _install_kill(hooks.kill_after)
    from train.__main__ import main as train_main

    return train_main(rest)


if __name__ == "__main__":
    from train.errors import exit_process

    exit_process(main(sys.argv[1:]))
