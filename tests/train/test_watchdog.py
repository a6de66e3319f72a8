"""Hangs: the step watchdog (``train/watchdog.py``) and the process groups' timeouts
(``train.dist.setup(timeout=...)``, ``set_collective_timeout``).

Each watchdog case runs in a process of its own (the watchdog ends its process with
``os._exit``): a small script made here, whose main thread beats and then blocks in C (a sleep, a
lock, a gloo collective whose peer the test SIGSTOPs). The timing bounds are generous: they only
tell "fired after about the limit" from "fired at once" or "never fired"."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.support.repo import REPO_ROOT  # noqa: E402
from train.errors import EXIT_HANG  # noqa: E402
from train.watchdog import StepWatchdog  # noqa: E402

LINE = re.compile(r"watchdog: rank (\d+) on (\S+): no step finished in (\d+) s \(last step ([^)]*)\); stacks in (.*)")
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}

# The child: a watchdog, a few beats, then the main thread blocks in ``stuck_here`` in C.
CHILD = """
import ctypes, json, socket, sys, threading, time
from pathlib import Path
from train.watchdog import StepWatchdog

a = json.loads(sys.argv[1])
def on_fire(message):
    Path(a["marker"]).write_text(message)
wd = StepWatchdog(a["timeout_first"], a["timeout"], 3, socket.gethostname(), Path(a["dump_dir"]), on_fire, start_step=a.get("start_step"))
if a.get("first_step_s"):
    time.sleep(a["first_step_s"])  # a slow first step: more than timeout, less than timeout_first
for step in range(1, a["beats"] + 1):
    time.sleep(a.get("beat_every", 0.2))
    wd.beat(step)
if a.get("pause_s"):
    with wd.paused():
        time.sleep(a["pause_s"])
    wd.beat(a["beats"] + 1)
if a.get("close"):
    wd.close()
print(json.dumps({"last_beat": time.time()}), flush=True)

def stuck_here():
    if a["block"] == "sleep":
        time.sleep(a["block_s"])
    elif a["block"] == "libc":
        ctypes.CDLL(None).sleep(int(a["block_s"]))  # ctypes releases the GIL around the call
    elif a["block"] == "lock":
        lock = threading.Lock(); lock.acquire(); lock.acquire(timeout=a["block_s"])

stuck_here()
"""


def run_child(tmp_path: Path, **args) -> tuple[subprocess.CompletedProcess, float, dict]:
    """Runs the child; returns it, the seconds from its last beat to its end, and its args."""
    a = {"timeout_first": 10, "timeout": 2, "beats": 3, "block": "sleep", "block_s": 60, **args}
    a.setdefault("dump_dir", str(tmp_path / "dumps"))
    a.setdefault("marker", str(tmp_path / "fired.txt"))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    p = subprocess.run([sys.executable, str(script), json.dumps(a)], capture_output=True, text=True, env=ENV, timeout=90)
    end = time.time()
    last = json.loads(p.stdout.splitlines()[0])["last_beat"] if p.stdout.strip() else end
    return p, end - last, a


def the_line(stderr: str) -> re.Match:
    lines = [m for m in map(LINE.fullmatch, stderr.splitlines()) if m]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("block", ["sleep", "libc", "lock"])
def test_fires_when_the_main_thread_blocks(tmp_path, block):
    """Blocked in C after step 3: exit 77 after about ``timeout`` s, one line naming rank, host,
    the wait and the last step, the stacks (the main thread's blocking frame among them) on
    stderr and in the file the line names, and ``on_fire`` called with the line."""
    p, after_last_beat, a = run_child(tmp_path, block=block)
    assert p.returncode == EXIT_HANG, p.stderr[-3000:]
    m = the_line(p.stderr)
    assert m[1] == "3" and m[4] == "3" and int(m[3]) >= 2
    assert 2 <= after_last_beat < 2 + 8, after_last_beat  # fired after the limit, well before the block ends
    stacks = Path(m[5])
    assert stacks.parent == Path(a["dump_dir"]) and re.fullmatch(r"hang-rank3-\d+\.txt", stacks.name)
    text = stacks.read_text()
    assert "no step finished" in text and "in stuck_here" in text and "Thread 0x" in text
    assert "in stuck_here" in p.stderr  # also on stderr (the file's filesystem may be the hang)
    assert Path(a["marker"]).read_text() == m[0]


@pytest.mark.slow
def test_quiet_while_steps_finish(tmp_path):
    """Beats every 0.3 s for 3 s with a 1.5 s limit, then a 3 s pause (``paused()``), then a beat
    and ``close()`` before blocking for 3 s: it never fires."""
    p, _, a = run_child(tmp_path, timeout=1.5, beats=10, beat_every=0.3, pause_s=3, close=True, block_s=3)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "watchdog" not in p.stderr and not Path(a["dump_dir"]).exists() and not Path(a["marker"]).exists()


def test_first_step_has_the_start_up_limit(tmp_path):
    """A first step of 2.5 s under ``timeout_first`` 6 and ``timeout`` 1 is not a hang; the
    limit after it is ``timeout``."""
    p, after_last_beat, _ = run_child(tmp_path, timeout_first=6, timeout=1, first_step_s=2.5, beats=1)
    assert p.returncode == EXIT_HANG, p.stderr[-3000:]
    assert the_line(p.stderr)[4] == "1"
    assert 1 <= after_last_beat < 1 + 8


def test_no_first_step(tmp_path):
    """A first step that never ends: fired after ``timeout_first``, naming the step it started from."""
    p, _, _ = run_child(tmp_path, timeout_first=1, timeout=30, beats=0, start_step=7)
    assert p.returncode == EXIT_HANG, p.stderr[-3000:]
    assert the_line(p.stderr)[4] == "7"


def test_stacks_file_not_writable(tmp_path):
    """A dump folder that cannot be made (here a file is in its way; in real life a full or
    read-only ``save_dir``) does not stop the exit: the stacks are on stderr and the line says so."""
    (tmp_path / "blocker").write_text("")
    p, _, _ = run_child(tmp_path, timeout=1, dump_dir=str(tmp_path / "blocker" / "dumps"))
    assert p.returncode == EXIT_HANG, p.stderr[-3000:]
    assert the_line(p.stderr)[5].startswith("stderr (") and "in stuck_here" in p.stderr


def test_off():
    """``timeout`` 0 (``resilience.step_timeout: 0``): no thread at all."""
    wd = StepWatchdog(5, 0, 0, "h", None)
    assert not wd.active
    wd.beat(1)
    wd.close()
    on = StepWatchdog(5, 5, 0, "h", None)
    assert on.active
    on.close()
    assert not on.active


# -- 2 gloo ranks ------------------------------------------------------------------------------

RANKS = """
import json, os, socket, sys, time
from pathlib import Path
import torch, torch.distributed as dist
from train import dist as tdist
from train.errors import exit_process
from train.watchdog import StepWatchdog

a = json.loads(sys.argv[1])
out = Path(a["out"])

def collective_step(t):
    dist.all_reduce(t)

def hang(d):
    # the process group's own timeout is long (init_timeout): the watchdog must end the wait
    wd = StepWatchdog(30, a["step_timeout"], d.rank, socket.gethostname(), out / "dumps")
    for step in range(1, 600):
        collective_step(torch.ones(1))
        wd.beat(step)
        if step == 3:
            (out / f"pid{d.rank}").write_text(str(os.getpid()))
        time.sleep(0.1)

def timeouts(d):
    extra = dist.new_group(backend="gloo")  # as the checkpointer's; its own default timeout is 30 min
    for g in (None, extra):
        dist.all_reduce(torch.ones(1), group=g)
    if a["tighten"]:
        tdist.set_collective_timeout(a["tighten"])  # finds the extra group by itself
    result = {}
    if d.rank == 1:  # never joins; waits for rank 0 to be done
        for _ in range(900):
            if (out / "done").exists():
                return
            time.sleep(0.1)
        return
    for name, g in (("default", None), ("extra", extra)):
        if name == "extra" and not a["tighten"]:
            continue
        t0 = time.monotonic()
        try:
            dist.all_reduce(torch.ones(1), group=g)
            result[name] = {"error": None}
        except RuntimeError as e:
            result[name] = {"error": str(e), "seconds": time.monotonic() - t0, "timeout": tdist.is_collective_timeout(e)}
    (out / "result.json").write_text(json.dumps(result))
    (out / "done").write_text("")

d = tdist.setup(timeout=a["init_timeout"])
hang(d) if a["mode"] == "hang" else timeouts(d)
tdist.teardown()
exit_process(0)  # as python -m train does: interpreter teardown can race gloo's threads
"""


def torchrun(tmp_path: Path, **args) -> subprocess.Popen:
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "ranks.py"
    script.write_text(RANKS)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)]
    return subprocess.Popen(
        [*cmd, json.dumps({"out": str(out), **args})], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(path: Path, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.time() + timeout
    while not (path.exists() and path.stat().st_size):  # written, not only created
        if proc.poll() is not None:
            raise AssertionError(f"ended before {path.name} appeared: {proc.stderr.read()[-3000:] if proc.stderr else ''}")
        if time.time() > deadline:
            raise AssertionError(f"{path.name} did not appear in {timeout:.0f} s")
        time.sleep(0.05)


@pytest.mark.train
@pytest.mark.slow
def test_fires_in_a_collective_whose_peer_is_stopped(tmp_path):
    """Rank 1 is SIGSTOPped; rank 0 blocks in the next gloo all-reduce (the GIL released in
    C++) and its watchdog fires after ``step_timeout`` (3 s; the group's own timeout is 60 s):
    exit 77, and the stack file shows the main thread in ``collective_step``."""
    proc = torchrun(tmp_path, mode="hang", init_timeout=60, step_timeout=3)
    out = tmp_path / "out"
    pids: list[int] = []
    try:
        wait_for(out / "pid1", proc, 120)
        wait_for(out / "pid0", proc, 30)
        pids = [int((out / f"pid{r}").read_text()) for r in (0, 1)]
        os.kill(pids[1], signal.SIGSTOP)
        stopped = time.time()
        deadline = stopped + 30
        while not list((out / "dumps").glob("hang-rank0-*.txt")) and time.time() < deadline:
            time.sleep(0.1)
        detected = time.time() - stopped
        (dump,) = (out / "dumps").glob("hang-rank0-*.txt")
        time.sleep(0.5)  # the file is complete before the line is printed and the rank exits
        os.kill(pids[1], signal.SIGKILL)  # a stopped process takes only SIGKILL (as the launcher must)
        _, stderr = proc.communicate(timeout=120)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert detected < 3 + 8, detected
    text = dump.read_text()
    assert "in collective_step" in text and "all_reduce" in text, text
    m = the_line(stderr)
    assert m[1] == "0" and Path(m[5]) == dump
    assert re.search(r"exitcode\s*:\s*77", stderr), stderr[-3000:]  # torchrun's summary of rank 0


@pytest.mark.train
@pytest.mark.slow
@pytest.mark.parametrize("tighten", [pytest.param(2, id="tightened"), pytest.param(0, id="init-timeout")])
def test_collective_timeouts(tmp_path, tighten):
    """``setup(timeout=...)`` sets the start-up timeout (3 s here: a collective rank 1 never
    joins fails on rank 0 after about 3 s, not gloo's default 30 min). With an init timeout of
    60 s, ``set_collective_timeout(2)`` makes the default group and an extra gloo group (as the
    checkpointer's, found by itself) fail after about 2 s, with gloo's "Timed out" error, which
    ``is_collective_timeout`` recognises."""
    init = 3 if not tighten else 60
    proc = torchrun(tmp_path, mode="timeouts", init_timeout=init, tighten=tighten)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    expect = tighten or init
    assert set(result) == ({"default", "extra"} if tighten else {"default"})
    for r in result.values():
        assert r["error"] and "Timed out waiting" in r["error"] and r["timeout"], r
        assert expect - 0.5 <= r["seconds"] < expect + 10, r  # about the new limit, far below the old one (60 s)


ONE_RANK = """
import json, torch, torch.distributed as dist
from train import dist as tdist
def timeouts(*groups):
    return [g._get_backend(torch.device("cpu")).options._timeout.total_seconds() for g in groups]
tdist.setup(timeout=7)  # the one-process path (an in-memory store)
world = dist.distributed_c10d._get_default_group()
a, b = dist.new_group(backend="gloo"), dist.new_group(backend="gloo")
out = {"start": timeouts(world, a, b)}
tdist.set_collective_timeout(2, [a, None, a])
out["listed"] = timeouts(world, a, b)
tdist.set_collective_timeout(1)
out["all"] = timeouts(world, a, b)
print(json.dumps(out))
"""


@pytest.mark.train
def test_which_groups_are_tightened():
    """One process: ``setup(timeout=7)`` on the in-memory-store path; new groups start with
    torch's 30 min; a list tightens the default group and the listed ones only, None every group."""
    p = subprocess.run([sys.executable, "-c", ONE_RANK], capture_output=True, text=True, env=ENV, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.splitlines()[-1]) == {"start": [7, 1800, 1800], "listed": [2, 2, 1800], "all": [1, 1, 1]}
