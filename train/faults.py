"""Fault injection from outside a running training job, for the fault harness (``bench/faults.py``)
and the recovery tests: real faults on real processes, never a switch inside the trainer.

``Job`` starts ``python -m train.launch`` (in the current directory) in a session of its own and follows it through the goodput
ledger (``heartbeat_interval: 0`` gives one heartbeat per step). It finds the ranks of the current
attempt by walking ``/proc`` from the launcher (a rank's ``RANK`` is in its environment), and
injects: ``kill`` (SIGKILL a rank: a crash, the OOM killer), ``stop`` (SIGSTOP a rank: a hang),
``slow`` (a rank stopped and continued on a duty cycle: a throttled device), each recorded with its
time so the harness can check what the goodput report says. ``close`` kills whatever the job left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from train.ledger import LEDGER, read_ledger


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (torchrun starts its ranks in sessions of their own)."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children(p)
    return seen


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def _same_process(pid: int, started: str) -> bool:
    """``pid`` is alive and is the process seen before (not a new one given the same pid)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z" and stat[19] == started


@dataclass
class Fault:
    kind: str  # kill | stop | slow
    rank: int
    time: float
    step: int  # the last step the ledger showed when it was injected
    pid: int


@dataclass
class Job:
    """A ``python -m train.launch`` run and the faults injected into it."""

    config: Path
    save_dir: Path
    nproc: int = 2
    launch_args: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    log: Path | None = None
    faults: list[Fault] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    _slowing: list[threading.Event] = field(default_factory=list)
    # every process of the job seen so far (pid -> its start time), so that what outlives the
    # launcher can be found and killed without touching a process that reused a pid
    _seen: dict[int, str] = field(default_factory=dict)
    _done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Job:
        cmd = [sys.executable, "-m", "train.launch", "--config", str(self.config), f"--nproc-per-node={self.nproc}", *self.launch_args]
        cmd += [a for s in self.sets for a in ("--set", s)]
        repo = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
        out = open(self.log, "w") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        threading.Thread(target=self._track, daemon=True).start()
        return self

    def _track(self) -> None:
        while not self._done.is_set() and self.proc is not None and self.proc.poll() is None:
            for pid in tree(self.proc.pid)[1:]:
                stat = _stat(pid)
                if stat is not None:
                    self._seen.setdefault(pid, stat[19])
            time.sleep(0.05)

    # -- following the run ---------------------------------------------------------------

    def records(self) -> list[dict]:
        path = self.save_dir / LEDGER
        return read_ledger(path) if path.exists() else []

    def current(self) -> list[dict]:
        """The records of the attempt running now: the newest one that started after the last
        injected fault (until the restarted attempt is up, none: an attempt that was hit is
        never taken for the next one)."""
        records = self.records()
        since = self.faults[-1].time if self.faults else 0.0
        starts = [r.get("attempt") for r in records if r.get("event") == "start" and r.get("time", 0) > since]
        return [r for r in records if r.get("attempt") == starts[-1]] if starts else []

    def step(self) -> int:
        """The newest step the current attempt has finished (-1: none yet)."""
        steps = [r["step"] for r in self.current() if r.get("event") in ("heartbeat", "first_step") and isinstance(r.get("step"), int)]
        return steps[-1] if steps else -1

    def wait_for(self, ready, timeout: float = 300, what: str = "a condition") -> None:
        deadline = time.time() + timeout
        while not ready():
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the job ended (status {self.proc.returncode}) before {what}")
            if time.time() > deadline:
                raise TimeoutError(f"no {what} in {timeout:.0f} s")
            time.sleep(0.01)

    def wait_step(self, step: int, timeout: float = 300) -> None:
        self.wait_for(lambda: self.step() >= step, timeout, f"step {step}")

    def wait_async_save(self, timeout: float = 300) -> int:
        """Wait until an asynchronous save of the current attempt is in flight (its ``checkpoint``
        record written, its ``checkpoint_done`` not yet); its step."""
        found: list[int] = []

        def in_flight() -> bool:
            open_saves: dict[tuple[str, int], bool] = {}
            # the current attempt's saves only: a killed attempt's save never completes
            for r in self.current():
                if r.get("event") == "checkpoint" and r.get("async"):
                    open_saves[(r.get("attempt", ""), r["step"])] = True
                elif r.get("event") == "checkpoint_done":
                    open_saves.pop((r.get("attempt", ""), r["step"]), None)
            if open_saves:
                found.append(max(s for _, s in open_saves))
                return True
            return False

        self.wait_for(in_flight, timeout, "asynchronous save in flight")
        return found[-1]

    def ranks(self) -> dict[int, int]:
        """Rank -> pid of the live ranks of the current attempt."""
        if self.proc is None:
            return {}
        out = {}
        for pid in tree(self.proc.pid):
            env = _environ(pid)
            if "RANK" in env and "TORCHELASTIC_RUN_ID" in env and _alive(pid):
                out[int(env["RANK"])] = pid
        return out

    def rank_pid(self, rank: int, timeout: float = 120) -> int:
        self.wait_for(lambda: rank in self.ranks(), timeout, f"rank {rank}")
        return self.ranks()[rank]

    # -- faults --------------------------------------------------------------------------

    def _signal(self, kind: str, rank: int, sig: int) -> Fault:
        pid = self.rank_pid(rank)
        step = self.step()
        os.kill(pid, sig)
        fault = Fault(kind, rank, time.time(), step, pid)
        self.faults.append(fault)
        return fault

    def kill(self, rank: int) -> Fault:
        return self._signal("kill", rank, signal.SIGKILL)

    def stop(self, rank: int) -> Fault:
        return self._signal("stop", rank, signal.SIGSTOP)

    def slow(self, rank: int, factor: float, period: float = 0.02) -> Fault:
        """Make ``rank`` run ``factor`` times slower: stopped ``1 - 1/factor`` of every ``period``
        seconds (until the job ends)."""
        pid = self.rank_pid(rank)
        fault = Fault("slow", rank, time.time(), self.step(), pid)
        self.faults.append(fault)
        done = threading.Event()
        self._slowing.append(done)
        run_s, stop_s = period / factor, period * (1 - 1 / factor)

        def duty() -> None:
            while not done.is_set() and _alive(pid):
                try:
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(stop_s)
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(run_s)
                except ProcessLookupError:
                    return

        threading.Thread(target=duty, daemon=True).start()
        return fault

    # -- the end ---------------------------------------------------------------------------

    def wait(self, timeout: float = 600) -> int:
        if self.proc is None:
            raise RuntimeError("the job was not started")
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise

    def leftovers(self) -> list[int]:
        """Processes of this job still alive (after ``wait``: none, or something leaked)."""
        return [pid for pid, started in list(self._seen.items()) if _same_process(pid, started)]

    def close(self) -> None:
        for done in self._slowing:
            done.set()
        self._done.set()
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in self.leftovers():
            for sig in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
