"""``python -m train`` whose ranks pause after a step until released, for signalling a node while
no step is in flight (the SIGTERM test of ``tests/train/test_multinode.py``).

``python -m tests.support.train_pausing --pause-after N --hook-dir DIR --config ...`` is the rank
entry point: every rank pauses after step N until DIR/release exists (writing DIR/paused-<rank>
first), and writes DIR/sigterm-<rank> when its SIGTERM handler runs, so that the test signals a
node while no step is in flight and releases the ranks once that node's ranks have the signal (no
timing involved). The trainer itself is unchanged, as in ``tests.support.train_launcher``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# A paused rank gives up after this long: a bound only a hang reaches (the test's NODE_TIMEOUT).
RELEASE_TIMEOUT_S = 150


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.support.train_pausing")
    ap.add_argument("--pause-after", type=int, required=True)
    ap.add_argument("--hook-dir", type=Path, required=True)
    hooks, rest = ap.parse_known_args(argv)
    from train.__main__ import main
    from train.trainer import Trainer

    step_inner, sigterm_inner = Trainer.train_step, Trainer._on_sigterm

    def train_step(self):
        out = step_inner(self)
        if self.step == hooks.pause_after:
            (hooks.hook_dir / f"paused-{self.rank}").touch()
            deadline = time.monotonic() + RELEASE_TIMEOUT_S
            while not (hooks.hook_dir / "release").exists():
                if time.monotonic() > deadline:
                    raise SystemExit("test hook: never released")
                time.sleep(0.01)
        return out

    def on_sigterm(self, signum, frame):
        sigterm_inner(self, signum, frame)
        (hooks.hook_dir / f"sigterm-{self.rank}").touch()

    Trainer.train_step = train_step  # type: ignore[method-assign]
    Trainer._on_sigterm = on_sigterm  # type: ignore[method-assign]
    return main(rest)


if __name__ == "__main__":
    from train.errors import exit_process

    exit_process(main(sys.argv[1:]))
