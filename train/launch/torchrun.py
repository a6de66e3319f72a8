"""torchrun (``torch.distributed.run``) with its restart path's grace made ours to set:
``python -m train.launch.torchrun --restart-grace SECONDS <torchrun's arguments>``.

When a rank fails, torchrun stops the others before it restarts them: SIGTERM, then SIGKILL
after a grace. torch 2.x gives that stop a fixed 30 s whatever ``--shutdown-timeout`` says
(the flag only reaches the agent's shutdown on a signal and at the end: pytorch/pytorch#192815,
open, mends one of the two stops that ignore it).
A hung rank never exits on SIGTERM: it is stuck in a collective, or stopped, and the trainer's
SIGTERM handler only asks for a stop at the next step. So every recovery from a hang, and from
a dead peer whose collective (NCCL) does not error, waited the whole 30 s doing nothing.

The stops after a failure get ``--restart-grace`` (default 5 s): enough for a healthy rank to
leave a collective that failed. They never cut a final checkpoint short: a preempted rank
exits 0 after its save, and only a failed rank starts them. torchrun's own shutdown on a signal
(SLURM's SIGTERM before preemption) keeps ``--shutdown-timeout``, long enough for that save.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

RESTART_GRACE_S = 5.0


def _bounded_default(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(self, death_sig, timeout)`` whose ``timeout``, when the caller leaves it out,
    is the restart grace instead of torch's 30 s."""

    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) < 2 and "timeout" not in kwargs:
            kwargs["timeout"] = _grace[0]
        return fn(self, *args, **kwargs)

    call.bounded = True  # type: ignore[attr-defined]
    return call


_grace = [RESTART_GRACE_S]


def shorten_restart_grace(grace: float) -> None:
    """Give ranks that torchrun stops because one failed at most ``grace`` seconds between
    SIGTERM and SIGKILL. Both of its stops leave the timeout at its default: the process
    context's when its poll finds a failed rank (``PContext.close()``), then the agent's before
    it restarts them (``_stop_workers`` calls ``_shutdown()``). The stops that name a timeout,
    the agent's on a signal and at the end of the run, keep it."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.elastic.multiprocessing.api import PContext

    _grace[0] = grace
    for owner, name in ((PContext, "close"), (LocalElasticAgent, "_shutdown")):
        fn = getattr(owner, name)
        if not getattr(fn, "bounded", False):
            setattr(owner, name, _bounded_default(fn))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    ap.add_argument("--restart-grace", type=float, default=RESTART_GRACE_S)
    ours, rest = ap.parse_known_args(sys.argv[1:] if argv is None else argv)
    if ours.restart_grace < 0:
        raise SystemExit(f"--restart-grace: {ours.restart_grace:g} is negative")
    shorten_restart_grace(ours.restart_grace)
    from torch.distributed.run import main as torchrun

    torchrun(rest)


if __name__ == "__main__":
    main()
