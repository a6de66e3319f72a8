"""One attempt of a training run, as recovery sees it: what it records in the goodput ledger
(``train.ledger``), the step watchdog that ends it when it hangs (``train.watchdog``), the
straggler check across its ranks (``train.stragglers``), and the launch check that makes
torchrun's restarts work.

An attempt is one start of the trainer's processes: the first, a torchrun restart after a rank
died, or the launcher's next attempt. The trainer calls this object at each milestone (process
group ready, pre-flight, restored, each step, each checkpoint, exit); nothing here changes what
a step computes.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from train.config import Config
from train.errors import ConfigError
from train.ledger import Ledger, new_attempt_id, process_start_time
from train.stragglers import ComputeClock, StragglerMonitor
from train.stragglers import describe as describe_straggler
from train.watchdog import StepWatchdog


def check_restartable_launch(env: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """torchrun ``--max-restarts N`` with its default shared rendezvous store does not restart:
    the restarted ranks read the previous attempt's addresses from the store the agent lends
    them (pytorch/pytorch#135712; on gloo "connectFullMesh failed ... Connection refused", then a
    hang). Refused before the process group starts, with the fix."""
    restarts = int(env.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0)
    if restarts > 0 and env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        raise ConfigError(
            f"torchrun --max-restarts {restarts}: its restarts reuse a rendezvous store that still holds the previous "
            "attempt's addresses (pytorch/pytorch#135712): export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 before torchrun "
            "(python -m train.launch and train/launch/slurm.sbatch do)"
        )


class Attempt:
    """This attempt's ledger records (written by rank 0), watchdog and step accounting."""

    def __init__(self, cfg: Config, rank: int, world: int, nodes: int):
        self.cfg = cfg
        self.rank = rank
        self.host = socket.gethostname()
        r = cfg.resilience
        save_dir = Path(cfg.checkpoint.save_dir)
        self.ledger = Ledger(save_dir, enabled=rank == 0, attempt=new_attempt_id(self.host), heartbeat_interval=r.heartbeat_interval)
        self.train_s = 0.0  # this attempt's seconds of finished steps so far (saves, evaluations not included)
        self._mark: float | None = None  # the end of the last step's accounting
        self._excluded = 0.0  # seconds since then that were no step (blocking saves, evaluations)
        self.first_step: int | None = None
        self.ledger.write(
            "start",
            process_start=process_start_time(),
            world_size=world,
            nodes=nodes,
            restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0),
            job=os.environ.get("SLURM_JOB_ID") or os.environ.get("TORCHELASTIC_RUN_ID"),
            launch_attempt=int(os.environ["DOLMA_PIPE_LAUNCH_ATTEMPT"]) if os.environ.get("DOLMA_PIPE_LAUNCH_ATTEMPT") else None,
        )
        self.watchdog = StepWatchdog(
            r.init_timeout if r.step_timeout else 0.0,
            r.step_timeout,
            rank,
            self.host,
            save_dir / "hangs",
            on_fire=self._on_hang,
        )
        self._step = 0
        self.stragglers = StragglerMonitor(r.straggler_window, r.straggler_factor, rank, world, self.host)
        self.clock: ComputeClock | None = None

    def time_compute(self, blocks, device) -> None:
        """Time this rank's own work per step (its blocks' forwards, without FSDP's waits), for
        the straggler check."""
        self.clock = ComputeClock(blocks, device)

    # -- milestones ------------------------------------------------------------------------

    def restored(self, step: int, source: str) -> None:
        self._step = step
        self.ledger.write("restored", step=step, source=source)

    def loop_started(self) -> None:
        """The step loop begins: each step's seconds are counted from here."""
        self._mark = time.perf_counter()

    def exclude(self, seconds: float) -> None:
        """Seconds inside the loop that were no step (an evaluation)."""
        self._excluded += seconds

    def step_done(self, step: int) -> bool:
        """A finished step; True for this attempt's first. Its seconds are the loop's since the
        last step (the step, and the logging and bookkeeping of the one before), less blocking
        saves and evaluations."""
        now = time.perf_counter()
        if self._mark is None:
            self._mark = now
        self._step = step
        self.train_s += max(0.0, now - self._mark - self._excluded)
        self._mark, self._excluded = now, 0.0
        self.watchdog.beat(step)
        first = self.first_step is None
        if first:
            self.first_step = step
            self.ledger.write("first_step", step=step)
        self.ledger.heartbeat(step, self.train_s)
        if self.clock is not None:
            # a collective every straggler_window steps, at the same steps on every rank
            for s in self.stragglers.record(self.clock.take(), step):
                if self.rank == 0:
                    print(describe_straggler(s, self.stragglers.window), flush=True)
                self.straggler(s.step, s.rank, s.host, s.score)
        return first

    def checkpoint(self, step: int, blocked_s: float, is_async: bool) -> None:
        # the blocked seconds are not step time: ETTR counts them lost (the report's checkpoint
        # stall), as Young/Daly's T_save
        self._excluded += blocked_s
        self.ledger.write("checkpoint", step=step, train_s=self.train_s, blocked_s=blocked_s, **{"async": is_async})
        self.ledger.heartbeat(step, self.train_s, force=True)

    def checkpoint_done(self, step: int, seconds: float) -> None:
        self.ledger.write("checkpoint_done", step=step, seconds=seconds)

    def straggler(self, step: int, rank: int, host: str, score: float) -> None:
        self.ledger.write("straggler", step=step, rank=rank, host=host, score=score)

    def exit(self, reason: str, status: int, message: str | None = None) -> None:
        self.ledger.heartbeat(self._step, self.train_s, force=True)
        fields = {"message": message} if message else {}
        self.ledger.write("exit", step=self._step, reason=reason, status=status, **fields)

    def close(self) -> None:
        self.watchdog.close()
        if self.clock is not None:
            self.clock.close()

    def _on_hang(self, message: str) -> None:
        from train.errors import EXIT_HANG

        self.ledger.write("exit", step=self._step, reason="hang", status=EXIT_HANG, message=message)


def timed(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` and its seconds."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0
