"""Recovery without a human: ``python -m train.launch`` on 2 gloo ranks with real faults injected
from outside (``train.faults``: SIGKILL, SIGSTOP), against the same run uninterrupted.

A killed rank (at a random step, or while an asynchronous save is in flight) restarts the job
from the newest complete checkpoint (torchrun ``--max-restarts``); a SIGSTOPped rank is caught by
the other rank's step watchdog (stacks dumped, exit status 77), killed by torchrun, and the job
restarts the same way. The run ends with model and optimizer state ``torch.equal`` to the run
without failures and every step's loss identical, nothing left running, and the goodput ledger
counts exactly the injected failures and the steps they cost. The run without failures has a
rank whose blocks run 2x slower: it is named, with its host (and its results are the same).
One faulted run holds every fault: each run costs torch's start-up several times on 2 cores.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.train, pytest.mark.slow]

from train.faults import Job  # noqa: E402
from train.goodput import summarize  # noqa: E402
from train.ledger import read_ledger  # noqa: E402
from train.testing import make_shards, tiny_config, train_losses, write_config  # noqa: E402

STEPS, INTERVAL = 12, 2
# the launcher's torchrun checks its ranks often and waits little for a stopped one to go
LAUNCH = ["--backoff", "0", "--monitor-interval", "0.1", "--shutdown-timeout", "3"]


def _raw(save_dir: Path, data: dict, **resilience) -> dict:
    return tiny_config(
        save_dir,
        data,
        train={"max_steps": STEPS},
        checkpoint={"interval": INTERVAL, "keep_last": 2},
        resilience={"heartbeat_interval": 0, **resilience},
        eval={"at_end": False},
        # the faulted run counts its failures exactly: a save_dir that a loaded machine makes
        # write below the speed floor for a moment would add one (a pre-flight retry)
        preflight={"min_write_mb_s": 0},
    )


def _final_state(save_dir: Path, scratch: Path) -> dict:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = scratch / f"{save_dir.name}-final.pt"
    dcp_to_torch_save(save_dir / f"step{STEPS}", out)
    return torch.load(out, weights_only=False)


def _assert_equal_states(a, b, where: str = "") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_equal_states(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The run without failures, through the same launcher, with rank 1's blocks 2x slower in
    their forwards (``tests/support/slow_rank``: extra work patched in from outside): slower,
    not different, so its losses and final state are the reference the faulted run must meet."""
    root = tmp_path_factory.mktemp("recovery")
    data = make_shards(root / "data")
    cfg = write_config(root / "ref.yaml", _raw(root / "ref", data, straggler_window=5))
    slow = ["--module", "tests.support.slow_rank --rank 1 --factor 2"]
    job = Job(cfg, root / "ref", launch_args=[*LAUNCH, *slow], log=root / "ref.log").start()
    try:
        assert job.wait(240) == 0, (root / "ref.log").read_text()[-3000:]
    finally:
        job.close()
    state = _final_state(root / "ref", root)
    yield {
        "root": root,
        "data": data,
        "losses": train_losses(root / "ref"),
        "state": state,
        "log": (root / "ref.log").read_text(),
        "records": read_ledger(root / "ref" / "goodput.jsonl"),
    }
    shutil.rmtree(root, ignore_errors=True)


def _attempts(records: list[dict]) -> list[str]:
    out: list[str] = []
    for r in records:
        if r["event"] == "start" and r["attempt"] not in out:
            out.append(r["attempt"])
    return out


def _attempts_described(records: list[dict]) -> str:
    """Each attempt's events and how it ended: what an assertion on the ledger says on failure."""
    lines = []
    for attempt in _attempts(records):
        mine = [r for r in records if r.get("attempt") == attempt]
        exits = [f"{r.get('reason')} {r.get('status')} {r.get('message', '')[:200]}" for r in mine if r["event"] == "exit"]
        lines.append(f"{attempt}: {' '.join(r['event'] for r in mine if r['event'] != 'heartbeat')} | exit: {exits}")
    return "\n".join(lines)


def test_a_slow_rank_is_named_with_its_host(reference):
    """The reference's rank 1 is named by the first straggler windows, in the log and in the
    ledger; rank 0 never; the run is not stopped for it."""
    named = [r for r in reference["records"] if r["event"] == "straggler"]
    assert named and {r["rank"] for r in named} == {1}, reference["log"][-3000:]
    assert named[0]["step"] <= 10 and named[0]["score"] >= 1.5
    assert f"straggler: rank 1 on {named[0]['host']}: " in reference["log"]
    assert sorted(reference["losses"]) == list(range(1, STEPS + 1))


def test_kills_and_a_hang_recover_to_the_same_model(reference, tmp_path):
    """SIGKILL rank 1 at a random step, SIGKILL rank 0 while an asynchronous save is in flight,
    then SIGSTOP rank 1: rank 0's watchdog fires within its timeout + 5 s (stacks dumped, exit
    77), torchrun kills the stopped rank, and the run recovers. It ends with every step's loss and
    the final model and optimizer state equal to the reference's; no process is left; the cut-off
    save was redone; the ledger counts exactly the 3 failures and the steps each one cost."""
    rng = random.Random(29)
    timeout = 4.0
    save_dir = tmp_path / "run"
    cfg = write_config(tmp_path / "run.yaml", _raw(save_dir, reference["data"], step_timeout=timeout))
    job = Job(cfg, save_dir, launch_args=LAUNCH, log=tmp_path / "run.log").start()
    try:
        job.wait_step(rng.randint(2, 3))
        job.kill(1)
        saving = job.wait_async_save()
        job.kill(0)  # while the save of step `saving` is being written
        job.wait_step(rng.randint(saving + 2, saving + 3))
        stop = job.stop(1)
        status = job.wait(300)
        log = (tmp_path / "run.log").read_text()
        assert status == 0, log[-4000:]
        assert job.leftovers() == []  # the stopped rank was killed, nothing else left behind
    finally:
        job.close()
    # every step's loss and the final model and optimizer state are the uninterrupted run's
    assert train_losses(save_dir) == reference["losses"]
    _assert_equal_states(_final_state(save_dir, tmp_path), reference["state"])
    records = read_ledger(save_dir / "goodput.jsonl")
    # no checkpoint that was cut off looks complete: the one being saved at the kill was redone
    restored = [r["step"] for r in records if r["event"] == "restored"]
    assert len(restored) == 4 and restored[0] == 0
    assert restored[2] < saving
    # the hang: detected by rank 0's watchdog within its timeout + 5 s, its stacks on file
    (hang,) = [r for r in records if r["event"] == "exit" and r["reason"] == "hang"]
    assert hang["status"] == 77 and f"watchdog: rank 0 on {hang['host']}: no step finished in" in hang["message"]
    assert hang["time"] - stop.time <= timeout + 5
    (dump,) = (save_dir / "hangs").glob("hang-rank0-*.txt")
    assert "fit" in dump.read_text()  # the main thread's stack: blocked in the step loop
    assert "watchdog: rank 0" in log
    # the ledger counts exactly the injected failures and the steps each one cost
    summary = summarize(records)
    assert summary["failures"] == 3, _attempts_described(records)
    reached = [max(r["step"] for r in records if r.get("attempt") == a and "step" in r) for a in _attempts(records)[:-1]]
    per_failure = [f["steps_lost"] for f in summary["failure_list"]]
    assert per_failure == [s - r for s, r in zip(reached, restored[1:], strict=True)]
    assert summary["steps_lost"] == sum(per_failure)
    assert all(lost <= INTERVAL + 1 for lost in per_failure)  # at most one interval (+ the step in flight)
