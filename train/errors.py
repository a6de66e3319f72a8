"""The trainer's errors: one base, :class:`TrainError`, for every mistake a user can make with
``train/`` (a config, a checkpoint, the data, a soup), each kind with the one-line label and the
exit status its command lines give it. ``python -m train``, ``train.evaluate``, ``train.soup`` and
``train.export_hf`` catch the base and print one line (:func:`report`), never a traceback.
"""

from __future__ import annotations

import os
import sys

# Exit statuses that tell recovery (torchrun's restarts, ``train.launch``, a SLURM loop) what to
# do next; the user-mistake statuses 1-3 below mean "do not retry" too.
EXIT_RETRY = 75  # a transient failure (EX_TEMPFAIL): start again from the newest checkpoint
EXIT_CORDON = 76  # this node is unhealthy (pre-flight): start again without it
EXIT_HANG = 77  # the step watchdog fired (stacks dumped): start again
EXIT_FATAL = 78  # starting again cannot help (EX_CONFIG): stop
RETRYABLE = {EXIT_RETRY, EXIT_CORDON, EXIT_HANG}


def exit_process(code: int) -> None:
    """End a rank's process with ``code`` once its work is written and its process group
    destroyed, skipping interpreter teardown: gloo's C++ worker threads can race the static
    destructors there and abort the process ("terminate called without an active exception",
    SIGABRT) after a run that succeeded. Output is flushed first; a daemon thread still waiting
    (a filesystem check left hanging) does not hold the exit."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class TrainError(ValueError):
    """A user's mistake; the message says what and where."""

    label = "error"
    exit_status = 1
    # A mistake every rank makes the same way (it comes from the config) is said by rank 0 only.
    same_on_every_rank = False


class ConfigError(TrainError):
    """A bad configuration; the message names the offending key."""

    label = "config error"
    exit_status = 2
    same_on_every_rank = True


class CheckpointError(TrainError):
    """A checkpoint that cannot be loaded into this run as configured."""

    label = "checkpoint error"
    exit_status = 2


class DataError(TrainError):
    """Bad or missing shards (a ``train.shards.ShardError`` is re-raised as this), or a dataset
    that does not match a checkpoint."""

    label = "data error"
    exit_status = 3


class SoupError(TrainError):
    """Ingredients or arguments that do not make a soup (the message says which)."""

    label = "soup error"
    exit_status = 2


def report(error: TrainError, rank: int = 0) -> int:
    """Says ``error`` in one line on stderr (once, from rank 0, when every rank has the same) and
    returns the command's exit status."""
    if rank == 0 or not error.same_on_every_rank:
        print(f"{error.label}: {error}", file=sys.stderr)
    return error.exit_status
