"""A slow device, patched in from outside: ``python -m tests.support.slow_rank --rank R --factor F
--config ...`` runs ``python -m train``'s own ``main`` with rank R's transformer blocks taking F
times as long in their forward passes (each spins F - 1 times its own CPU time after it), as a
throttled GPU or a slower host would. The trainer has no switch for this.

A SIGSTOP/SIGCONT duty cycle from outside (``train.faults.Job.slow``) slows a rank too, but on a
loaded machine the scheduler partly makes up for the stopped time, and on CPU the straggler check
counts CPU time, which a stopped process does not spend; extra work inside the forward is exact.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _install(rank: int, factor: float) -> None:
    if int(os.environ.get("RANK", "0") or 0) != rank:
        return
    from train.model import Block

    inner = Block.forward

    def forward(self, *args, **kwargs):
        t0 = time.thread_time()
        out = inner(self, *args, **kwargs)
        if self.training:
            # more work, not a sleep: the straggler check counts the forwards' CPU time on CPU
            until = time.thread_time() + (factor - 1) * (time.thread_time() - t0)
            while time.thread_time() < until:
                pass
        return out

    Block.forward = forward  # type: ignore[method-assign]
    print(f"test hook: rank {rank}'s blocks {factor:g}x slower", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.support.slow_rank")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--factor", type=float, default=2.0)
    a, rest = ap.parse_known_args(argv)
    _install(a.rank, a.factor)
    from train.__main__ import main as train_main

    return train_main(rest)


if __name__ == "__main__":
    from train.errors import exit_process

    exit_process(main(sys.argv[1:]))
