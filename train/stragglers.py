"""Stragglers: name the rank (and its host) whose own work per step is much slower than the
fastest rank's.

What is timed matters more than how. Every collective waits for the slowest rank, so a slow rank
makes every rank's step slow by the same amount: under FSDP a step holds dozens of collectives
(an all-gather before each block's forward and backward, the reduce-scatters, the gradient
norm's and the loss's all-reduces), and any interval between two of them that spans one lasts
as long on the fast ranks as on the slow one. Measured on 2 gloo ranks (the ``small`` preset),
rank 1 stopped 20 ms of every 40 (SIGSTOP/SIGCONT) on a quiet machine: wall step time rank 1 /
rank 0 = 1.00, step start to just before the loss all-reduce = 1.03, forward compute of the
blocks as ``ComputeClock`` takes it = 1.93; with a 30 ms sleep in each of rank 1's block
forwards: 1.00, 0.99 and 4.62. So the step time compared here is ``ComputeClock``'s: the
seconds this rank spends *inside* its blocks' forward passes in one step, which starts after
FSDP's pre-forward hook has waited for the block's all-gather and ends before the next block
waits for its own. The backward and the optimizer step are not timed: on the same rank they run
on the same hardware as the forward and scale with it; their collectives cannot be taken out.

Every ``window`` steps the ranks all-gather the mean of their last ``window`` step times without
the slowest one (``window_time``: one slow step, a first step's compilation, a garbage
collection, is not a straggler; a mean and not a median, because a rank slowed in bursts, as
by a CPU it shares or a throttled device, is slow on some steps by a lot, not on every step by
a little), and each rank's score is its time over the fastest rank's. A score of at least
``factor`` names the rank. ``window_time`` / ``scores`` / ``find_stragglers`` are the pure part.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Straggler:
    rank: int
    host: str
    score: float  # this rank's step time / the fastest rank's
    step: int  # the last step of the window it was measured over
    seconds: float = 0.0  # this rank's step time over the window (``window_time``)
    fastest_rank: int = 0
    fastest_seconds: float = 0.0


def window_time(times: Sequence[float]) -> float:
    """A rank's step time over a window: the mean without the slowest step (when there are 3 or more)."""
    kept = sorted(times)[:-1] if len(times) >= 3 else list(times)
    return statistics.fmean(kept) if kept else 0.0


def scores(times: Sequence[float]) -> list[float]:
    """Each rank's time over the fastest rank's (1.0 for the fastest). A time that is not
    positive was not measured: it scores 0 and is never the fastest."""
    measured = [t for t in times if t > 0]
    if not measured:
        return [0.0 for _ in times]
    fastest = min(measured)
    return [t / fastest if t > 0 else 0.0 for t in times]


def find_stragglers(times: Sequence[float], hosts: Sequence[str], factor: float, step: int) -> list[Straggler]:
    """The ranks whose time is at least ``factor`` times the fastest rank's, slowest first."""
    if factor <= 0 or len(times) < 2:
        return []
    s = scores(times)
    fastest = min(range(len(times)), key=lambda r: times[r] if times[r] > 0 else float("inf"))
    out = [Straggler(r, hosts[r], s[r], step, times[r], fastest, times[fastest]) for r in range(len(times)) if s[r] >= factor]
    return sorted(out, key=lambda x: -x.score)


def describe(s: Straggler, window: int) -> str:
    """The log line naming a straggler."""
    first = max(1, s.step - window + 1)
    return (
        f"straggler: rank {s.rank} on {s.host}: {s.score:.2f}x the fastest rank's compute time per step "
        f"({s.seconds:.3f} s vs {s.fastest_seconds:.3f} s on rank {s.fastest_rank}; steps {first}-{s.step})"
    )


class StragglerMonitor:
    """Collects this rank's step times and, every ``window`` records, compares them across ranks.

    ``record`` must be called once per step on every rank (it runs a collective at the same steps
    on all of them: every ``window``-th call since the monitor was made, i.e. since this attempt
    started). ``factor == 0`` or one rank: no comparison, no collective. After a comparison,
    ``times`` holds every rank's ``window_time`` and ``scores`` every rank's score (for the metrics);
    ``hosts`` every rank's host. ``group``: the process group to gather over (None: the default)."""

    def __init__(self, window: int, factor: float, rank: int, world: int, host: str, group: dist.ProcessGroup | None = None):
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window, self.factor = window, factor
        self.rank, self.world, self.host = rank, world, host
        self.group = group
        self.enabled = factor > 0 and world > 1
        self._window_times: list[float] = []
        self._calls = 0
        self.times: list[float] = []
        self.scores: list[float] = []
        self.hosts: list[str] = []

    def record(self, step_time: float, step: int | None = None) -> list[Straggler]:
        """This rank's ``step_time`` (``ComputeClock.take()``) for ``step`` (default: the number
        of calls so far). Returns the stragglers found at the end of a window, else []."""
        self._calls += 1
        step = self._calls if step is None else step
        if not self.enabled:
            return []
        self._window_times.append(step_time)
        if len(self._window_times) < self.window:
            return []
        mine = window_time(self._window_times)
        self._window_times = []
        gathered: list = [None] * self.world
        dist.all_gather_object(gathered, (mine, self.host), group=self.group)
        self.times = [float(t) for t, _ in gathered]
        self.hosts = [str(h) for _, h in gathered]
        self.scores = scores(self.times)
        return find_stragglers(self.times, self.hosts, self.factor, step)


class ComputeClock:
    """Seconds this rank spends inside the forward passes of ``modules`` (the model's blocks), per
    step, without the time FSDP waits for their parameters' all-gathers.

    Made once the model is sharded: it adds a forward pre-hook and a forward hook to each module,
    and FSDP2's own pre-forward hook (which waits for the all-gather) always runs before the
    pre-hooks added later. Only training forwards count (``module.training`` and gradients on):
    an evaluation between steps is not a step; activation checkpointing's recomputation calls the
    block's inner function, not the module, so it is not counted twice. On CPU the hooks read
    ``time.thread_time`` (the CPU time of the thread that runs the forwards: other processes on a
    shared machine and this process's background threads, such as an async save, do not count;
    seen: a wall clock named a healthy rank 23 times in 1,500 steps at load 5 on 2 cores); on CUDA they record events on the current stream, read by ``take``
    once the step's last ``.item()`` has waited for the stream (no extra synchronisation)."""

    def __init__(self, modules: Iterable[nn.Module], device: torch.device):
        self.cuda = device.type == "cuda"
        self._seconds = 0.0
        self._open: dict[int, float | torch.cuda.Event] = {}
        self._spans: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._pool: list[torch.cuda.Event] = []  # events reused from step to step
        self._used = 0
        self._handles = []
        for m in modules:
            self._handles.append(m.register_forward_pre_hook(self._start))
            self._handles.append(m.register_forward_hook(self._stop))

    def _event(self) -> torch.cuda.Event:
        if self._used == len(self._pool):
            self._pool.append(torch.cuda.Event(enable_timing=True))
        self._used += 1
        return self._pool[self._used - 1]

    # hooks run eagerly around compiled blocks (``train.compile``), never traced into them
    @torch.compiler.disable
    def _start(self, module: nn.Module, args: object) -> None:
        if not (module.training and torch.is_grad_enabled()):
            return
        if self.cuda:
            ev = self._event()
            ev.record()
            self._open[id(module)] = ev
        else:
            self._open[id(module)] = time.thread_time()

    @torch.compiler.disable
    def _stop(self, module: nn.Module, args: object, output: object) -> None:
        start = self._open.pop(id(module), None)
        if start is None:
            return
        if isinstance(start, float):
            self._seconds += time.thread_time() - start
        else:
            end = self._event()
            end.record()
            self._spans.append((start, end))

    def take(self) -> float:
        """The seconds counted since the last ``take`` (call it once per step, after the step)."""
        seconds = self._seconds
        if self._spans:
            self._spans[-1][1].synchronize()  # done already if the step ended with an .item()
            seconds += sum(a.elapsed_time(b) for a, b in self._spans) / 1000.0
        self._seconds, self._spans, self._used = 0.0, [], 0
        self._open.clear()
        return seconds

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
