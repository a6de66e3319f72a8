"""A slow device, patched in from outside: ``python -m tests.support.slow_rank --rank R --factor F
--config ...`` runs ``python -m train``'s own ``main`` with rank R's transformer blocks taking F
times as long in their forward passes (each sleeps F - 1 times its own compute after it), as a
throttled GPU or a busy host would. The trainer has no switch for this.

A SIGSTOP/SIGCONT duty cycle from outside (``train.faults.Job.slow``) slows a rank too, but on a
loaded machine the scheduler partly makes up for the stopped time; a sleep inside the forward is
exact.
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
        t0 = time.perf_counter()
        out = inner(self, *args, **kwargs)
        if self.training:
            time.sleep((factor - 1) * (time.perf_counter() - t0))
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
    from train.__main__ import _exit

    _exit(main(sys.argv[1:]))
