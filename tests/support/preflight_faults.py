"""Faults for the pre-flight checks, patched in from outside: ``train/`` has no test switch.

``python -m tests.support.preflight_faults [faults] --config ...`` wraps ``train.preflight``'s
``_matmul`` / ``_all_reduce`` in each rank's process and then runs ``python -m train.preflight``'s
own ``main`` (``--entry train``: ``python -m train``'s, for a trainer that runs the checks at
start). ``launch_faults`` starts it under torchrun through ``train.testing.launch``.

- ``--wrong-matmul R``: rank R's products come back with one element off by one.
- ``--slow-matmul R[:F]``: rank R's products take F times as long (an integer, default 3): each
  is computed F times, as a processor F times slower would spend F times the cycles (the check
  measures CPU time on CPU, so a sleep would not show).
- ``--wrong-allreduce R``: rank R's all-reduce result has one element off by one.
- ``--read-only DIR``: each rank starts again (``exec``, the same pid) in a mount namespace of its
  own where DIR is bind-mounted read-only over itself: ``chmod`` does not stop root, a
  read-only mount does (needs ``unshare --mount``: root).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path


def launch_faults(
    config,
    nproc: int = 2,
    wrong_matmul: int | None = None,
    slow_matmul: str | None = None,
    wrong_allreduce: int | None = None,
    read_only: str | Path | None = None,
    json_out: bool = False,
    sets: list[str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    """The pre-flight command through this module's faults, under torchrun (``nproc`` > 1);
    the arguments are the options above."""
    from train.testing import launch

    args: list[str] = []
    if wrong_matmul is not None:
        args += ["--wrong-matmul", str(wrong_matmul)]
    if slow_matmul is not None:
        args += ["--slow-matmul", slow_matmul]
    if wrong_allreduce is not None:
        args += ["--wrong-allreduce", str(wrong_allreduce)]
    if read_only is not None:
        args += ["--read-only", str(read_only)]
    if json_out:
        args.append("--json")
    return launch(config, nproc=nproc, module="tests.support.preflight_faults", module_args=args, sets=sets, timeout=timeout)


# -- the faults (in each rank's process) --------------------------------------------------------


_IN_NAMESPACE = "PREFLIGHT_FAULTS_READ_ONLY_NS"


def _reexec_read_only(folder: str, argv: list[str]) -> None:
    """Start this rank again (the same pid: torchrun keeps tracking it) in a mount namespace of
    its own where ``folder`` is bind-mounted read-only over itself."""
    os.environ[_IN_NAMESPACE] = "1"
    d = shlex.quote(folder)
    script = f'mount --bind {d} {d} && mount -o remount,bind,ro {d} && exec "$@"'
    cmd = [sys.executable, "-m", "tests.support.preflight_faults", *argv]
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *cmd])


def _this_rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def _install_wrong_matmul(rank: int) -> None:
    from train import preflight

    inner = preflight._matmul

    def _matmul(a, b):
        c = inner(a, b)
        if _this_rank() == rank:
            c = c.clone()
            c[0, 1] += 1
        return c

    preflight._matmul = _matmul
    _say(f"test fault: rank {rank}'s matmul returns one element off by one")


def _install_slow_matmul(spec: str) -> None:
    from train import preflight

    rank_text, _, factor_text = spec.partition(":")
    rank, factor = int(rank_text), int(factor_text or 3)
    inner = preflight._matmul

    def _matmul(a, b):
        c = inner(a, b)
        if _this_rank() == rank:
            for _ in range(factor - 1):  # a processor F times slower: F times the work for one product
                c = inner(a, b)
        return c

    preflight._matmul = _matmul
    _say(f"test fault: rank {rank}'s matmul takes {factor}x as long")


def _install_wrong_allreduce(rank: int) -> None:
    from train import preflight

    inner = preflight._all_reduce

    def _all_reduce(t):
        inner(t)
        if _this_rank() == rank:
            t[0] += 1

    preflight._all_reduce = _all_reduce
    _say(f"test fault: rank {rank}'s all-reduce result has one element off by one")


def _say(msg: str) -> None:
    if _this_rank() == 0:
        print(msg, file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.support.preflight_faults", description="python -m train.preflight with faults; other arguments go to it"
    )
    ap.add_argument("--wrong-matmul", type=int, metavar="RANK")
    ap.add_argument("--slow-matmul", metavar="RANK[:FACTOR]")
    ap.add_argument("--wrong-allreduce", type=int, metavar="RANK")
    ap.add_argument("--read-only", metavar="DIR", help="DIR read-only (a bind mount in a namespace of its own; root)")
    ap.add_argument("--entry", choices=("preflight", "train"), default="preflight")
    faults, rest = ap.parse_known_args(argv)
    if faults.read_only and os.environ.get(_IN_NAMESPACE) != "1":
        _reexec_read_only(faults.read_only, argv)
    if faults.wrong_matmul is not None:
        _install_wrong_matmul(faults.wrong_matmul)
    if faults.slow_matmul is not None:
        _install_slow_matmul(faults.slow_matmul)
    if faults.wrong_allreduce is not None:
        _install_wrong_allreduce(faults.wrong_allreduce)
    if faults.entry == "train":
        from train.__main__ import main as train_main

        return train_main(rest)
    from train.preflight import main as preflight_main

    return preflight_main(rest)


if __name__ == "__main__":
    from train.errors import exit_process

    exit_process(main(sys.argv[1:]))
